"""Language-server processes: started lazily per (workspace, server), reused, shut down.

``LspManager`` is an async context manager owning a task group; each ``LanguageServer``
runs two tasks in it (the JSON-RPC reader and a stderr drain that keeps only a short tail,
so a chatty server never blocks on a full pipe). A server is started on the first call that
needs it, initialized once (``initialize``/``initialized`` with the workspace as
``rootUri`` and only workspace folder), and reused by every later call; concurrent first
calls wait on one start. A server that exits is noticed by its reader: requests in flight
fail with a clear ``LSP_SERVER_ERROR`` and the next call starts a fresh one.

Every server is the leader of its own session (process group). Teardown asks politely
(``shutdown`` request, ``exit`` notification), waits briefly, then kills the group;
``kill_all_servers`` (registered with ``atexit``) kills whatever is left when the
interpreter exits without a teardown.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc

from .._errors import LspError

if TYPE_CHECKING:
    from ._jsonrpc import JsonRpcConnection

# The JSON-RPC connection (``._jsonrpc``) is imported where a server is started and where
# one is talked to: an ``LspManager`` whose session never calls ``lsp`` never loads it.

__all__ = ["LanguageServer", "LspManager", "LspServerSpec", "kill_all_servers"]

_STDERR_TAIL_BYTES = 4096
# Documents kept open per server; the least recently used is closed beyond it, so a long
# session that touches thousands of files does not grow the server (or us) without bound.
_MAX_OPEN_DOCUMENTS = 128
# Some servers (tsserver behind typescript-language-server) answer a file's first queries
# from syntax alone while its project still loads: an imported name then "resolves" to its
# own import. After a file's first didOpen the client waits, up to this long, for the
# server to show it has analysed the file: diagnostics published for it, and no work-done
# progress (such as "Initializing JS/TS language features") still running.
DEFAULT_OPEN_SETTLE_S = 10.0
_KILL_GRACE_S = 1.0

# pid -> process, for the atexit sweep (a plain dict: entries are removed at teardown).
_live: dict[int, anyio.abc.Process] = {}


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def kill_all_servers() -> None:
    """SIGKILL every live language server's process group (synchronous, idempotent)."""
    for pid in list(_live):
        _kill_group(pid, signal.SIGKILL)
        _live.pop(pid, None)


atexit.register(kill_all_servers)


@dataclass(frozen=True, kw_only=True)
class LspServerSpec:
    """One language server: which files it handles and how to start it.

    ``extensions`` are file-name suffixes with the dot (``".py"``), matched
    case-insensitively; ``language_id`` is the LSP ``languageId`` sent with ``didOpen``
    (or a mapping from extension to id when one server handles several languages);
    ``command`` is the argv of a server speaking LSP on stdin/stdout.
    """

    name: str
    extensions: tuple[str, ...]
    language_id: str | Mapping[str, str]
    command: tuple[str, ...]
    initialization_options: Mapping[str, Any] | None = None

    def handles(self, path: str) -> bool:
        """Whether a file at ``path`` is this server's."""
        lower = path.lower()
        return any(lower.endswith(ext.lower()) for ext in self.extensions)

    def language_of(self, path: str) -> str:
        """The ``languageId`` for ``path``."""
        if isinstance(self.language_id, str):
            return self.language_id
        lower = path.lower()
        for ext, language in self.language_id.items():
            if lower.endswith(ext.lower()):
                return language
        return next(iter(self.language_id.values()))


def _client_capabilities() -> dict[str, Any]:
    return {
        "general": {"positionEncodings": ["utf-32", "utf-16"]},
        "textDocument": {
            "synchronization": {"didSave": False, "dynamicRegistration": False},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "definition": {"linkSupport": True},
            "implementation": {"linkSupport": True},
            "references": {},
        },
        "workspace": {"configuration": True, "workspaceFolders": True},
        "window": {"workDoneProgress": True},
    }


@dataclass(eq=False)
class _Document:
    version: int
    text: str


@dataclass(eq=False)
class LanguageServer:
    """One running server process and its connection (made by ``LspManager``)."""

    spec: LspServerSpec
    root: str
    process: anyio.abc.Process
    connection: JsonRpcConnection
    capabilities: dict[str, Any] = field(default_factory=dict)
    stderr_tail: deque[bytes] = field(default_factory=deque)
    open_settle_s: float = DEFAULT_OPEN_SETTLE_S
    _documents: OrderedDict[str, _Document] = field(default_factory=OrderedDict)
    _sync_lock: anyio.Lock = field(default_factory=anyio.Lock)
    _diagnosed: dict[str, anyio.Event] = field(default_factory=dict)
    _progress: set[Any] = field(default_factory=set)
    _progress_idle: anyio.Event = field(default_factory=anyio.Event)
    # Whether the server publishes diagnostics at all: unknown until one arrives or a first
    # settle times out without any (then later opens wait for progress only).
    _publishes: bool | None = None

    def notified(self, method: str, params: Any) -> None:
        """A notification from the server: tracks diagnostics and work-done progress."""
        if not isinstance(params, dict):
            return
        if method == "textDocument/publishDiagnostics":
            self._publishes = True
            uri = params.get("uri")
            event = self._diagnosed.get(uri) if isinstance(uri, str) else None
            if event is not None:
                event.set()
        elif method == "$/progress":
            value = params.get("value")
            token = params.get("token")
            if not isinstance(value, dict) or not isinstance(token, (str, int)):
                return
            if value.get("kind") == "begin":
                self._progress.add(token)
                if self._progress_idle.is_set():
                    self._progress_idle = anyio.Event()
            elif value.get("kind") == "end":
                self._progress.discard(token)
                if not self._progress:
                    self._progress_idle.set()

    async def _settle_open(self, uri: str, diagnosed: anyio.Event) -> None:
        # Bounded: a server that never publishes diagnostics costs this once, on its first
        # file; after that only running progress is waited for.
        with anyio.move_on_after(self.open_settle_s) as scope:
            if self._publishes is not False:
                await diagnosed.wait()
            while self._progress:
                await self._progress_idle.wait()
        if scope.cancelled_caught and self._publishes is None:
            self._publishes = False
        self._diagnosed.pop(uri, None)

    @property
    def pid(self) -> int:
        """The server's process id (also its process group id)."""
        return self.process.pid

    @property
    def position_encoding(self) -> str:
        """The column encoding the server negotiated (``utf-16`` unless it said otherwise)."""
        encoding = self.capabilities.get("positionEncoding")
        return encoding if encoding in ("utf-8", "utf-16", "utf-32") else "utf-16"

    def document_text(self, uri: str) -> str | None:
        """The text the server was last given for ``uri``, if it is open."""
        doc = self._documents.get(uri)
        return doc.text if doc is not None else None

    @property
    def alive(self) -> bool:
        """Whether the server still answers (its process runs and its output is open)."""
        return self.process.returncode is None and not self.connection.closed.is_set()

    def failure(self, action: str) -> LspError:
        """The error for a call the server's exit or broken stream interrupted."""
        code = self.process.returncode
        how = f"exited with code {code}" if code is not None else "stopped answering"
        tail = b"".join(self.stderr_tail).decode("utf-8", "replace").strip().splitlines()
        last = f" (stderr: {tail[-1][:300]})" if tail else ""
        return LspError(
            f'language server "{self.spec.name}" {how} during {action}{last}; '
            "it will be restarted on the next call",
            "LSP_SERVER_ERROR",
        )

    async def request(self, method: str, params: Any) -> Any:
        """``method`` on the server; its failures as ``LspError``."""
        from ._jsonrpc import ConnectionLost, ResponseError

        try:
            return await self.connection.request(method, params)
        except ConnectionLost:
            await self._settle()
            raise self.failure(method) from None
        except ResponseError as exc:
            raise LspError(
                f'language server "{self.spec.name}" failed {method}: {exc.message}',
                "LSP_SERVER_ERROR",
            ) from None

    async def _settle(self) -> None:
        # The stream ended; give the exit status a moment to arrive so the message has it.
        with anyio.move_on_after(0.5):
            await self.process.wait()

    async def sync(self, uri: str, path: str, text: str) -> None:
        """Make the server see ``text`` as the contents of ``uri``: ``didOpen`` the first
        time, ``didChange`` (full text) when it differs from what the server has."""
        from ._jsonrpc import ConnectionLost

        # Serialized: two concurrent calls on one file must not both open it or race versions.
        async with self._sync_lock:
            try:
                doc = self._documents.get(uri)
                if doc is None:
                    diagnosed = self._diagnosed.setdefault(uri, anyio.Event())
                    await self.connection.notify(
                        "textDocument/didOpen",
                        {
                            "textDocument": {
                                "uri": uri,
                                "languageId": self.spec.language_of(path),
                                "version": 1,
                                "text": text,
                            }
                        },
                    )
                    self._documents[uri] = _Document(1, text)
                    while len(self._documents) > _MAX_OPEN_DOCUMENTS:
                        old, _ = self._documents.popitem(last=False)
                        await self.connection.notify(
                            "textDocument/didClose", {"textDocument": {"uri": old}}
                        )
                    await self._settle_open(uri, diagnosed)
                    return
                self._documents.move_to_end(uri)
                if doc.text != text:
                    doc.version += 1
                    doc.text = text
                    await self.connection.notify(
                        "textDocument/didChange",
                        {
                            "textDocument": {"uri": uri, "version": doc.version},
                            "contentChanges": [{"text": text}],
                        },
                    )
            except ConnectionLost:
                await self._settle()
                raise self.failure("textDocument synchronization") from None

    async def stop(self, grace_s: float = 1.0) -> None:
        """``shutdown`` + ``exit`` when it still answers (waiting up to ``grace_s`` for it
        to leave), then kill the process group."""
        from ._jsonrpc import ConnectionLost, ResponseError

        with anyio.CancelScope(shield=True):
            if self.alive:
                with anyio.move_on_after(grace_s):
                    try:
                        await self.connection.request("shutdown")
                        await self.connection.notify("exit")
                    except (ConnectionLost, ResponseError):
                        pass
                    # End of input too: some servers only leave their read loop on EOF.
                    if self.process.stdin is not None:
                        with contextlib.suppress(Exception):
                            await self.process.stdin.aclose()
                    await self.process.wait()
            if self.process.returncode is None:
                _kill_group(self.pid, signal.SIGTERM)
                with anyio.move_on_after(_KILL_GRACE_S):
                    await self.process.wait()
            # Whatever the server left in its group (helpers it spawned) goes too.
            _kill_group(self.pid, signal.SIGKILL)
            if self.process.returncode is None:
                await self.process.wait()
            _live.pop(self.pid, None)
            with contextlib.suppress(Exception):
                await self.process.aclose()


async def _handle_server_request(method: str, params: Any) -> Any:
    # What servers commonly ask of a client; none needs more than an empty answer here.
    if method == "workspace/configuration":
        items = params.get("items", []) if isinstance(params, dict) else []
        return [None for _ in items]
    if method in (
        "window/workDoneProgress/create",
        "client/registerCapability",
        "client/unregisterCapability",
        "window/showMessageRequest",
    ):
        return None
    if method == "workspace/workspaceFolders":
        return None
    if method == "workspace/applyEdit":
        # A read-only client never lets a server change files.
        return {"applied": False, "failureReason": "the lsp tool is read-only"}
    from ._jsonrpc import ResponseError

    raise ResponseError(-32601, f"unhandled method {method}")


class LspManager:
    """Owns the language servers of a host for the lifetime of an ``async with`` block.

    ``servers`` are the specs to offer (default ``default_servers()``); the first whose
    ``handles`` accepts a file serves it. ``request_timeout_s`` bounds each request and
    ``startup_timeout_s`` a server's start and ``initialize``; ``shutdown_grace_s`` is how
    long a server may take to exit after ``shutdown``/``exit`` before its process group is
    killed; ``open_settle_s`` bounds the wait, after a file's first ``didOpen``, for the
    server to have analysed it (its diagnostics published, its work-done progress ended)
    before the file's first query; ``env`` replaces the servers' environment (default: the
    host's).
    """

    def __init__(
        self,
        servers: Sequence[LspServerSpec] | None = None,
        *,
        request_timeout_s: float = 30.0,
        startup_timeout_s: float = 30.0,
        shutdown_grace_s: float = 1.0,
        open_settle_s: float = DEFAULT_OPEN_SETTLE_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if servers is None:
            from ._providers import default_servers

            servers = default_servers()
        self.servers: tuple[LspServerSpec, ...] = tuple(servers)
        self.request_timeout_s = request_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_grace_s = shutdown_grace_s
        self.open_settle_s = open_settle_s
        self._env = dict(env) if env is not None else None
        self._running: dict[tuple[str, str], LanguageServer] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._closed = False

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group = self._group
        await self.aclose()
        if group is None:
            return None
        return await group.__aexit__(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Stop every server (idempotent); the task group ends with the ``async with``."""
        self._closed = True
        servers = list(self._running.values())
        self._running.clear()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in servers:
                    tg.start_soon(server.stop, self.shutdown_grace_s)
        if self._group is not None:
            self._group.cancel_scope.cancel()

    def provider_for(self, path: str) -> LspServerSpec | None:
        """The spec that handles ``path``, if any."""
        return next((spec for spec in self.servers if spec.handles(path)), None)

    def running(self) -> list[LanguageServer]:
        """The servers started and not yet stopped."""
        return list(self._running.values())

    async def server(self, root: str, spec: LspServerSpec) -> LanguageServer:
        """The running, initialized server ``spec`` for workspace ``root`` (started now if
        it is not running, or no longer alive)."""
        if self._closed or self._group is None:
            raise LspError("the LSP manager is not running", "LSP_UNAVAILABLE")
        key = (root, spec.name)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            current = self._running.get(key)
            if current is not None and current.alive:
                return current
            if current is not None:
                del self._running[key]
                await current.stop(self.shutdown_grace_s)
            started = await self._start(root, spec)
            self._running[key] = started
            return started

    async def _start(self, root: str, spec: LspServerSpec) -> LanguageServer:
        from ._jsonrpc import ConnectionLost, JsonRpcConnection

        assert self._group is not None
        try:
            process = await anyio.open_process(
                list(spec.command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=root,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            raise LspError(
                f'cannot start language server "{spec.name}" ({spec.command[0]}): '
                f"{exc.strerror or exc}",
                "LSP_SERVER_ERROR",
            ) from None
        _live[process.pid] = process
        assert process.stdin is not None and process.stdout is not None
        made: list[LanguageServer] = []

        def on_notification(method: str, params: Any) -> None:
            # The connection exists before its server object; nothing arrives before
            # ``initialize`` is sent, after ``made`` is filled.
            for server in made:
                server.notified(method, params)

        connection = JsonRpcConnection(
            process.stdin,
            process.stdout,
            on_request=_handle_server_request,
            on_notification=on_notification,
        )
        server = LanguageServer(
            spec=spec,
            root=root,
            process=process,
            connection=connection,
            open_settle_s=self.open_settle_s,
        )
        made.append(server)
        self._group.start_soon(connection.run)
        if process.stderr is not None:
            self._group.start_soon(_drain, process.stderr, server.stderr_tail)
        root_uri = Path(root).as_uri()
        params = {
            "processId": os.getpid(),
            "clientInfo": {"name": "codemode"},
            "rootUri": root_uri,
            "rootPath": root,
            "workspaceFolders": [{"uri": root_uri, "name": os.path.basename(root) or root}],
            "capabilities": _client_capabilities(),
        }
        if spec.initialization_options is not None:
            params["initializationOptions"] = dict(spec.initialization_options)
        try:
            with anyio.fail_after(self.startup_timeout_s):
                result = await server.request("initialize", params)
                await connection.notify("initialized", {})
        except TimeoutError:
            await server.stop(self.shutdown_grace_s)
            raise LspError(
                f'language server "{spec.name}" did not initialize within '
                f"{self.startup_timeout_s:g} s",
                "LSP_TIMEOUT",
            ) from None
        except ConnectionLost:
            await server.stop(self.shutdown_grace_s)
            raise server.failure("initialize") from None
        except BaseException:
            await server.stop(self.shutdown_grace_s)
            raise
        if isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
            server.capabilities = result["capabilities"]
        return server


async def _drain(stream: anyio.abc.ByteReceiveStream, tail: deque[bytes]) -> None:
    kept = 0
    try:
        async for chunk in stream:
            tail.append(chunk)
            kept += len(chunk)
            while kept > _STDERR_TAIL_BYTES and len(tail) > 1:
                kept -= len(tail.popleft())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
