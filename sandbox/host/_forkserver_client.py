"""The host side of the fork-server control channel (see ``_forkserver``).

``ForkServerClient.start`` spawns the server (``anyio.open_process``, empty environment,
the control socket passed as an inherited fd) and waits for ``hello``; ``fork`` asks for a
worker and returns its pid and the host end of its bridge socket; a reader task routes
``exited`` reports to per-pid ``ExitBox`` es, which are created when ``forked`` is read so
that no report can arrive for a pid nobody is watching.
"""

from __future__ import annotations

import array
import contextlib
import functools
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from ..worker._boundary import BoundarySpec
from ..worker._forkserver import Exited, Forked, ForkFailed, ForkRequest, Hello, ServerConfig
from ..worker._frames import FrameBuffer, encode_frame
from . import _memory
from ._prefault import PrefaultLearner

__all__ = ["ExitBox", "ForkServerClient", "ForkServerError", "worker_interpreter"]

WORKDIR_PREFIX = "codemode-worker-"


def workdir_parent() -> str | None:
    """Where a fork server's root directory is made: the first system temporary
    directory (``/tmp``, a sticky one, where nobody else can rename or replace it),
    whatever ``TMPDIR`` the host runs with, as when the server (started with an empty
    environment) made it itself; None lets ``tempfile`` choose when there is none."""
    for candidate in ("/tmp", "/var/tmp", "/usr/tmp"):
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None


_log = logging.getLogger("sandbox")

_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 10.0

# The server starts with ``-I -S``: no site module, so no ``.pth`` processing (an editable
# install's finder pulls in pathlib and importlib.util: ~13 ms of every cold start on two
# cores). What site would have put on ``sys.path`` is passed instead, narrowed to what the
# worker side imports: the directories of its third-party modules (``P`` arguments) and,
# for ``codemode`` and ``codemode.sandbox``, where each package's directory sits (``M``
# arguments, found by a two-name meta-path finder, so an editable layout works too).
# ``ssl`` is made unimportable: asyncio imports it when it can (~5 ms: ``_ssl`` and
# OpenSSL) and does without it when it cannot, and nothing in a worker has a network.
# ``codemode`` and ``codemode.sandbox`` load their public names lazily, so this pulls in
# the worker side only (no anyio, no engine); ``tests/sandbox/test_worker_imports.py``
# checks it.
_PRELUDE = """\
import sys
from importlib.machinery import PathFinder
_at = {}
for _arg in sys.argv[2:]:
    if _arg[0] == "P":
        sys.path.append(_arg[1:])
    else:
        _name, _, _dir = _arg[1:].partition("=")
        _at[_name] = _dir
class _Packages:
    @staticmethod
    def find_spec(name, path=None, target=None):
        where = _at.get(name)
        return None if where is None else PathFinder.find_spec(name, [where])
sys.meta_path.insert(0, _Packages)
sys.modules["ssl"] = None
"""
_SERVER_MAIN = "from codemode.sandbox.worker._forkserver import main\nmain(sys.argv[1])\n"


def worker_interpreter(code: str, argument: str = "") -> list[str]:
    """The command that runs ``code`` the way the fork server starts: ``-I -S``, the
    worker side's ``sys.path``, no ``ssl``; ``argument`` is its ``sys.argv[1]``. (The
    bench times ``import asyncio, msgspec`` this way as the floor of a cold start.)"""
    return [
        sys.executable, "-I", "-S", "-B", "-X", "utf8", "-c", _PRELUDE + code,
        argument, *_boot_arguments(),
    ]  # fmt: skip


# Third-party modules the worker side imports (the TypeScript guest's are optional).
_WORKER_DEPENDENCIES = (
    "msgspec", "RestrictedPython", "quickjs", "_quickjs", "tree_sitter", "tree_sitter_typescript",
)  # fmt: skip


@functools.cache
def _boot_arguments() -> tuple[str, ...]:
    """The ``P``/``M`` arguments of ``_PRELUDE`` for this installation (computed once)."""
    import codemode
    import codemode.sandbox

    paths: list[str] = []
    for name in _WORKER_DEPENDENCIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None:
            continue
        if spec.submodule_search_locations:  # a package: its parent directory
            where = os.path.dirname(next(iter(spec.submodule_search_locations)))
        else:
            where = os.path.dirname(spec.origin)
        if where not in paths:
            paths.append(where)
    packages = [
        f"M{module.__name__}={os.path.dirname(next(iter(module.__path__)))}"
        for module in (codemode, codemode.sandbox)
    ]
    return (*(f"P{path}" for path in paths), *packages)


# Bridge socket buffers. The default (~208 KiB) cut a 1 MB argument or result into five
# writes, each a round of wake-ups between host and worker. The kernel caps the request
# at ``net.core.wmem_max``/``rmem_max`` and charges only the bytes actually queued.
_BRIDGE_BUFFER = 4 << 20


def _widen(*socks: socket.socket) -> None:
    for sock in socks:
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, _BRIDGE_BUFFER)
            except OSError:  # pragma: no cover - a kernel refusing is only slower
                pass


class ForkServerError(RuntimeError):
    """The fork server failed to start, died, or refused a fork."""


class ExitBox:
    """Where the exit report of one worker lands."""

    __slots__ = ("_event", "maxrss_kb", "status")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self.status: int | None = None
        self.maxrss_kb = 0

    @property
    def exited(self) -> bool:
        """True once the worker has been reaped."""
        return self.status is not None

    def set(self, status: int, maxrss_kb: int) -> None:
        """Record the report (first one wins)."""
        if self.status is None:
            self.status = status
            self.maxrss_kb = maxrss_kb
            self._event.set()

    async def wait(self, seconds: float) -> int | None:
        """The raw wait status, or ``None`` if no report arrived within ``seconds``."""
        with anyio.move_on_after(seconds):
            await self._event.wait()
        return self.status


class _Pending:
    __slots__ = ("event", "message", "pid")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.pid: int | None = None
        self.message = ""


class ForkServerClient:
    """One fork-server process and its control socket."""

    def __init__(
        self,
        *,
        guests: dict[str, str],
        boundary: BoundarySpec,
        preload: list[str],
        warm_options: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self._guests = dict(guests)
        self._boundary = boundary
        self._preload = list(preload)
        self._warm_options = dict(warm_options or {})
        self._sock: socket.socket | None = None
        self._process: anyio.abc.Process | None = None
        # The server's root (an empty directory it chroots into): made here, so that a
        # server killed before it could remove it leaves nothing behind (``aclose``).
        self._workdir: str | None = None
        self._buffer = FrameBuffer(1 << 20)
        self._decoder = msgspec.json.Decoder(Hello | Forked | ForkFailed | Exited)
        self._lock = anyio.Lock()
        self._seq = 0
        self._pending: dict[int, _Pending] = {}
        self.exits: dict[int, ExitBox] = {}
        self.alive = False
        self.pid = 0
        self.notes: list[str] = []
        self.on_dead: Callable[[], None] | None = None
        # What its workers fault in while idle, as the pool learns it (``_prefault``).
        self.learner: PrefaultLearner | None = None

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Spawn the server, wait for ``hello`` and start the reader in ``task_group``."""
        host, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        host.setblocking(False)
        self._sock = host
        try:
            self._workdir = tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=workdir_parent())
        except BaseException:
            host.close()
            server.close()
            self._sock = None
            raise
        config = ServerConfig(
            workdir=self._workdir,
            ctrl_fd=server.fileno(),
            guests=self._guests,
            boundary=self._boundary,
            preload=self._preload,
            warm_options=self._warm_options,
        )
        command = worker_interpreter(_SERVER_MAIN, msgspec.json.encode(config).decode())
        try:
            try:
                self._process = await anyio.open_process(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=None,
                    env={},
                    pass_fds=[server.fileno()],
                    # A terminal's Ctrl-C goes to its whole foreground process group;
                    # the server must not get it (it would die with a traceback
                    # mid-teardown). The host stops it by closing the control socket;
                    # its parent-death signal covers a host that dies without doing so.
                    start_new_session=True,
                )
            finally:
                server.close()
            with anyio.move_on_after(_START_TIMEOUT):
                while True:
                    frames = await self._read()
                    if frames is None:
                        break
                    hello = next((f for f in frames if isinstance(f, Hello)), None)
                    if hello is not None:
                        self.pid, self.notes, self.alive = hello.pid, hello.notes, True
                        break
        except BaseException:
            # Cancelled or failed while the server boots (Ctrl-C right after start, a
            # pool closing under a refill, a spawn that failed): the control socket is
            # closed and the server stopped now, whatever step was reached (a cancelled
            # spawn once left the socket to the garbage collector). Killed, not waited
            # for: it reads the socket only once it is up (up to ~150 ms of imports and
            # warm-up, which an agent that answered at once waited for on exit), and it
            # has forked no worker yet; its root directory is removed here.
            await self.aclose(kill=True)
            raise
        if not self.alive:
            await self.aclose(kill=True)
            raise ForkServerError("sandbox fork server failed to start")
        task_group.start_soon(self._reader)

    async def fork(
        self, max_frame_bytes: int, prefault: list[tuple[int, int]] | None = None
    ) -> tuple[int, socket.socket]:
        """Fork a worker; return its pid and the host end of its bridge socket.

        ``prefault``: page ranges this worker and every later one fault in while idle
        (``host/_prefault``); None keeps what the server was last sent."""
        if not self.alive or self._sock is None:
            raise ForkServerError("sandbox fork server is not running")
        host, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        _widen(host, worker)
        self._seq += 1
        seq = self._seq
        pending = self._pending[seq] = _Pending()
        try:
            frame = ForkRequest(seq=seq, max_frame_bytes=max_frame_bytes, prefault=prefault)
            await self._send(encode_frame(frame), worker.fileno())
            worker.close()
            await pending.event.wait()
        except BaseException:
            host.close()
            raise
        finally:
            worker.close()
            self._pending.pop(seq, None)
        if pending.pid is None:
            host.close()
            raise ForkServerError(pending.message or "sandbox fork server died")
        host.setblocking(False)
        return pending.pid, host

    async def _send(self, data: bytes | bytearray, fd: int) -> None:
        assert self._sock is not None
        sock = self._sock
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        async with self._lock:
            view = memoryview(data)
            first = True
            while view:
                try:
                    if first:
                        sent = sock.sendmsg([view], rights)
                        first = False
                    else:
                        sent = sock.send(view)
                except BlockingIOError:
                    await anyio.wait_writable(sock)
                    continue
                except OSError as exc:
                    raise ForkServerError(f"sandbox fork server unreachable: {exc}") from exc
                view = view[sent:]

    async def _read(self) -> list[Hello | Forked | ForkFailed | Exited] | None:
        while True:
            sock = self._sock
            if sock is None:
                return None
            try:
                data = _memory.recv(sock)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(sock)
                except anyio.ClosedResourceError:
                    return None
                continue
            except OSError:
                data = b""
            if not data:
                return None
            frames = []
            for payload in self._buffer.feed(data):
                try:
                    frames.append(self._decoder.decode(payload))
                except (msgspec.DecodeError, msgspec.ValidationError):
                    _log.warning("sandbox: dropped a malformed fork-server frame")
            return frames

    async def _reader(self) -> None:
        try:
            while True:
                frames = await self._read()
                if frames is None:
                    return
                for frame in frames:
                    self._route(frame)
        finally:
            self._mark_dead()

    def _route(self, frame: Hello | Forked | ForkFailed | Exited) -> None:
        if isinstance(frame, Forked):
            self.exits[frame.pid] = ExitBox()
            pending = self._pending.get(frame.seq)
            if pending is not None:
                pending.pid = frame.pid
                pending.event.set()
        elif isinstance(frame, ForkFailed):
            pending = self._pending.get(frame.seq)
            if pending is not None:
                pending.message = frame.message
                pending.event.set()
        elif isinstance(frame, Exited):
            box = self.exits.pop(frame.pid, None)
            if box is not None:
                box.set(frame.status, frame.maxrss_kb)

    def _mark_dead(self) -> None:
        if not self.alive:
            return
        self.alive = False
        for pending in self._pending.values():
            pending.message = "sandbox fork server died"
            pending.event.set()
        # Workers die with the server (parent-death signal); nobody will report them.
        for box in self.exits.values():
            box.set(-1, 0)
        self.exits.clear()
        if self.on_dead is not None:
            self.on_dead()

    async def aclose(self, *, kill: bool = False) -> None:
        """Close the control socket and wait for the server (it kills its workers), or
        with ``kill`` (a server not yet up) kill it at once; then remove its root
        directory if the server (or its PID namespace's init) has not."""
        self._mark_dead()
        if self._sock is not None:
            sock, self._sock = self._sock, None
            anyio.notify_closing(sock)
            sock.close()
        process, self._process = self._process, None
        if process is not None:
            with anyio.CancelScope(shield=True):
                if kill:
                    process.kill()
                with anyio.move_on_after(_STOP_TIMEOUT):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                await process.aclose()
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            # Empty, and only ever a mount point inside the server's own namespaces:
            # here a plain directory (already gone when the server removed it).
            with contextlib.suppress(OSError):
                os.rmdir(workdir)
