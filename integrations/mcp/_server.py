"""The code-mode MCP server: ``run_code`` (and, in ``both`` mode, every tool) over MCP.

``CodeModeServer(runtime, agent=...)`` turns a ``ToolRuntime`` in a code mode into an MCP
server (the SDK's low-level ``Server``):

- ``tools/list`` lists ``run_code``, whose description is its fixed flavour text plus the
  generated SDK of every tool the agent scope sees (``tools:sdk``) or, when that SDK is
  longer than ``sdk_budget`` characters, the declarations of ``search_tools`` /
  ``describe_tool`` and a compact index of the catalog (``_catalog``). In ``both`` mode
  every other tool is listed too, with its normalised schema.
- ``tools/call`` runs the call through ``runtime.execute`` (the whole guarded pipeline;
  a program's sub-calls go through it again; ``run_code``'s ``description`` is optional
  over MCP, ``DEFAULT_RUN_DESCRIPTION`` standing in for it). Every failure, a failed program, an
  unknown tool or invalid arguments included, is an ``is_error`` result carrying the
  failure's text, never a JSON-RPC error.
- A client cancelling a call (``notifications/cancelled``, or an HTTP client going
  away) aborts the run through an ``AbortController`` signal: the program stops, its
  in-flight upstream calls are cancelled, and the engine drains the run before the
  handler returns.

- One scope per MCP session: every connection (an HTTP session, the stdio channel) runs
  as its own child scope of ``agent`` (``session_scope`` builds it: by default a plain
  child scope with a bounded in-memory session log), so jobs, terminals, todos and plan
  mode of one client are never another's; the scope's teardown runs when the MCP
  session ends (DELETE, idle expiry, disconnect of stdio, server shutdown).
- ``max_runs_per_session`` bounds the ``run_code`` calls one session has in flight: one
  more is an ``is_error`` result naming the limit, and a log line.

``serve_stdio()`` speaks MCP on stdin/stdout (the SDK points fd 1 at stderr while it
serves, so nothing else reaches the wire); ``serve_http(host, port, options=...)`` serves
streamable HTTP at ``http://host:port/mcp`` with the limits, host checks, bearer
authentication and TLS of ``HttpOptions`` (``_http``).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from typing import TYPE_CHECKING, Any

import anyio

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    Scope,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.engine.json import thaw
from codemode.sdk_gen import render_sdk

from ._catalog import DISCOVERY_TOOL_NAMES, compact_index, discovery_tools

if TYPE_CHECKING:
    from ._http import HttpOptions

__all__ = [
    "DEFAULT_SDK_BUDGET",
    "CodeModeServer",
    "RecentEventsLog",
    "SessionScopeFactory",
    "call_result",
]

#: ``session_scope(key)``: an async context manager yielding the scope one MCP session
#: runs as; leaving it is that session's teardown. ``key`` is the MCP session id (HTTP)
#: or a fresh id (stdio, in-memory), unique among the server's live sessions.
SessionScopeFactory = Callable[[str], contextlib.AbstractAsyncContextManager[Scope]]

# Where a session's state lives on its SDK ``Connection`` (per-connection scratch state).
_STATE_KEY = "codemode.session"
_LOCK_KEY = "codemode.session-lock"

DEFAULT_SDK_BUDGET = 40_000

# How long a cancelled run may take to wind down after its signal aborted before its
# task is cancelled outright (the sandbox kills a worker at once; this bounds a tool
# body that ignores its signal).
_ABORT_GRACE_S = 5.0

# ``run_code``'s ``description`` argument (a title for the host's UI and the session log)
# is required by the engine's schema, but an MCP host's own code, or a client that only
# knows "send the program as ``code``", may leave it out: over MCP it is optional and
# this stands in for it.
DEFAULT_RUN_DESCRIPTION = "Run a program sent over MCP"

# The flavour text's sentence naming ``run_code``'s arguments, which the generated SDK
# section repeats in its first paragraph (both languages).
_ARGUMENTS_SENTENCE = re.compile(r"Takes two required arguments: .*? what the program does\. ")


def _package_version() -> str:
    try:
        return metadata.version("codemode")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class RecentEventsLog:
    """A session log keeping only the most recent ``max_events`` events (in memory).

    An MCP session can live for hours and run thousands of programs; the engine appends
    every run's events to its scope's log, and the tools that need a session (``todo_write``,
    job ownership) need only the recent ones. Sequence numbers keep counting across the
    trimming.
    """

    def __init__(self, *, max_events: int = 1000) -> None:
        if max_events < 1:
            raise ValueError("max_events must be >= 1")
        self.max_events = max_events
        self._log = MemorySessionLog()
        self._dropped = 0

    def __repr__(self) -> str:
        return f"<RecentEventsLog kept={len(self._log.events)} dropped={self._dropped}>"

    async def append(self, event: dict[str, Any]) -> int:
        """Validate and store ``event``; its sequence number (counting dropped ones)."""
        index = self._log.append_now(event)
        seq = index + self._dropped
        if index >= self.max_events:
            # Read only to rotate: the memory log keeps unread events as bytes.
            kept = self._log.events
            # Rotate into a fresh log with the newer half: amortised O(1) per append.
            keep = kept[len(kept) - self.max_events // 2 :]
            fresh = MemorySessionLog()
            for old in keep:
                fresh.append_now(old)
            self._dropped += len(kept) - len(keep)
            self._log.close()
            self._log = fresh
        return seq

    @property
    def events(self) -> list[dict[str, Any]]:
        """The kept events, oldest first."""
        return self._log.events

    def close(self) -> None:
        """Refuse further appends."""
        self._log.close()


class _Session:
    """One MCP session: its scope, the task that owns the scope's context, its in-flight
    ``run_code`` count."""

    __slots__ = ("closed", "closing", "key", "owner", "running", "scope")

    def __init__(self, key: str) -> None:
        self.key = key
        self.scope: Scope | None = None
        self.running = 0
        # Set to end the session; ``closed`` once its teardown has run.
        self.closing = anyio.Event()
        self.closed = anyio.Event()
        self.owner = anyio.CancelScope(shield=True)


# How often a running HTTP call checks whether its client is still connected.
_DISCONNECT_POLL_S = 0.25

# How long the teardown of every session may take when the server closes, before the
# remaining ones are cancelled.
_SHUTDOWN_TEARDOWN_S = 30.0


def _connection_of(ctx: Any) -> Any:
    """The SDK ``Connection`` a request arrived on.

    The low-level handler context carries it only on its ``ServerSession`` (mcp 2.3); it
    holds the per-connection ``state`` and the ``exit_stack`` the SDK unwinds when the
    session ends, which is what scopes one engine scope per MCP session.
    """
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    if connection is None or not hasattr(connection, "exit_stack"):
        # Never fall back to a shared scope: that would silently join two clients.
        raise RuntimeError("this MCP SDK does not expose the request's connection")
    return connection


def call_result(result: ToolExecutionResult) -> Any:
    """An engine result as an MCP ``CallToolResult`` (failures are ``is_error``)."""
    import mcp.types as types

    content: list[Any] = []
    for block in result.content:
        if isinstance(block, dict) and block.get("type") == "text":
            content.append(types.TextContent(type="text", text=str(block.get("text", ""))))
        elif isinstance(block, dict) and block.get("type") == "image":
            attachment = block.get("attachment") or {}
            content.append(
                types.TextContent(
                    type="text",
                    text=f"[image attachment {attachment.get('attachmentId', '')} "
                    f"({attachment.get('mediaType', 'image')}) not forwarded over MCP]",
                )
            )
    if result.is_error:
        if not content:
            content.append(types.TextContent(type="text", text=result.error.message))
        return types.CallToolResult(content=content, is_error=True)
    value = thaw(result.value)
    structured = value if isinstance(value, dict) else None
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


class CodeModeServer:
    """An MCP server in front of ``runtime`` (which must have a code runtime).

    ``agent`` is the parent of every session's scope (its view, guards and restrictions
    apply to all of them); ``session_scope`` builds the scope of one MCP session (default:
    a child scope of ``agent`` with a ``RecentEventsLog``). ``sdk_budget`` is the most
    characters of SDK ``run_code``'s description carries before it switches to the
    compact index (then ``search_tools``/``describe_tool`` are registered on the agent, or
    the runtime). ``name``/``version`` are the MCP ``serverInfo`` (version: the installed
    package's). ``max_runs_per_session`` bounds one session's concurrent ``run_code``
    calls, ``max_runs`` the whole server's (``None``: unbounded; a stateless 2026-07-28
    client has a connection per request, so only ``max_runs`` bounds it). ``log(line)`` receives one line per session opened or
    closed and per refusal (default: nothing).
    """

    def __init__(
        self,
        runtime: ToolRuntime,
        *,
        agent: Scope | None = None,
        name: str = "codemode",
        version: str | None = None,
        sdk_budget: int = DEFAULT_SDK_BUDGET,
        instructions: str | None = None,
        session_scope: SessionScopeFactory | None = None,
        max_runs_per_session: int | None = None,
        max_runs: int | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if runtime.mode_for(agent) == "native":
            raise ValueError('CodeModeServer needs a runtime or scope in "code" or "both" mode')
        if sdk_budget < 0:
            raise ValueError("sdk_budget must be >= 0")
        if max_runs_per_session is not None and max_runs_per_session < 1:
            raise ValueError("max_runs_per_session must be >= 1 (or None)")
        if max_runs is not None and max_runs < 1:
            raise ValueError("max_runs must be >= 1 (or None)")
        self.runtime = runtime
        self.agent = agent
        self.name = name
        self.version = version if version is not None else _package_version()
        self.sdk_budget = sdk_budget
        self.instructions = instructions
        self.session_scope = session_scope or self._default_session_scope
        self.max_runs_per_session = max_runs_per_session
        self.max_runs = max_runs
        self._running = 0
        self._log = log or (lambda _line: None)
        #: Live sessions by key (what ``sessions()`` reports; teardown removes them).
        self._sessions: dict[str, _Session] = {}
        # While serving, each session's scope is owned by a task of this group (not
        # bounded by the SDK's 5 s budget for connection cleanup): killing a session's
        # jobs and removing its workspace must finish even when the server shuts down.
        self._owners: anyio.abc.TaskGroup | None = None
        self._inline_closers: dict[str, tuple[contextlib.AsyncExitStack, Any]] = {}
        self.full_sdk = runtime.system_prompt_sections(agent)["tools:sdk"]
        self.compact = len(self.full_sdk) > sdk_budget
        self._dispose_discovery: Callable[[], None] | None = None
        if self.compact:
            target: Any = agent if agent is not None else runtime
            disposers = [target.register(d) for d in discovery_tools(runtime)]

            def dispose() -> None:
                for d in disposers:
                    d()

            self._dispose_discovery = dispose

    def close(self) -> None:
        """Unregister the discovery tools this server added (if any)."""
        if self._dispose_discovery is not None:
            self._dispose_discovery()
            self._dispose_discovery = None

    # ------------------------------------------------------------- sessions

    @contextlib.asynccontextmanager
    async def _default_session_scope(self, key: str) -> AsyncIterator[Scope]:
        log = RecentEventsLog()
        try:
            yield self.runtime.scope(f"mcp-{key[:12]}", parent=self.agent, session=log)
        finally:
            log.close()

    def sessions(self) -> dict[str, Scope]:
        """The live MCP sessions' scopes, by session key."""
        return {key: s.scope for key, s in self._sessions.items() if s.scope is not None}

    async def _session(self, ctx: Any) -> _Session:
        """The session of the connection ``ctx`` arrived on, opened on its first request."""
        connection = _connection_of(ctx)
        found: _Session | None = connection.state.get(_STATE_KEY)
        if found is not None:
            return found
        # setdefault does not await: every request of this connection gets the same lock.
        lock: anyio.Lock = connection.state.setdefault(_LOCK_KEY, anyio.Lock())
        async with lock:
            found = connection.state.get(_STATE_KEY)
            if found is not None:
                return found
            session = _Session(connection.session_id or uuid.uuid4().hex)
            # Opened shielded: the scope's construction (a workspace, managers) must not
            # be torn halfway by the request's cancellation.
            with anyio.CancelScope(shield=True):
                await self._open(session)
            self._sessions[session.key] = session
            connection.state[_STATE_KEY] = session
            connection.exit_stack.push_async_callback(self._end_session, session)
            self._log(f"session {session.key[:12]} opened ({len(self._sessions)} open)")
            return session

    async def _open(self, session: _Session) -> None:
        async def own(*, task_status: anyio.abc.TaskStatus[Scope]) -> None:
            # A task of its own enters and leaves the scope's context: the context may
            # hold task groups (job managers, terminals), which must be left by the task
            # that entered them, and the session ends long after the request that
            # opened it. Shielded: the server's cancellation ends sessions through
            # ``closing``, in order (``aclose_sessions``), not by tearing them.
            started = False
            try:
                with session.owner:
                    async with self.session_scope(session.key) as scope:
                        started = True
                        task_status.started(scope)
                        await session.closing.wait()
            except Exception as exc:
                if not started:
                    raise
                self._log(f"session {session.key[:12]}: teardown failed: {exc!r}")
            finally:
                session.closed.set()

        if self._owners is None:
            # Not serving (the low-level server driven directly): the request's task owns
            # the scope's context, so only a factory without task groups works here.
            stack = contextlib.AsyncExitStack()
            session.scope = await stack.enter_async_context(self.session_scope(session.key))

            async def close_inline() -> None:
                await session.closing.wait()
                await stack.aclose()
                session.closed.set()

            self._inline_closers[session.key] = (stack, close_inline)
            return
        session.scope = await self._owners.start(own)

    async def _end_session(self, session: _Session) -> None:
        await self._teardown(session)

    async def _teardown(self, session: _Session) -> None:
        with anyio.CancelScope(shield=True):
            if self._sessions.get(session.key) is not session:
                return
            session.closing.set()
            inline = self._inline_closers.pop(session.key, None)
            try:
                if inline is not None:
                    await inline[1]()
                else:
                    await session.closed.wait()
            finally:
                self._sessions.pop(session.key, None)
                self._log(f"session {session.key[:12]} closed ({len(self._sessions)} open)")

    async def aclose_sessions(self) -> None:
        """End every live session (their scopes' teardowns), for a host closing down."""
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_SHUTDOWN_TEARDOWN_S):
                async with anyio.create_task_group() as tg:
                    for session in list(self._sessions.values()):
                        tg.start_soon(self._teardown, session)
            for session in list(self._sessions.values()):
                # Past the budget: cancel what is left of the teardowns.
                session.owner.cancel()

    # ------------------------------------------------------------- listing

    def _facts(self) -> dict[str, Any]:
        # The same facts ``system_prompt_sections`` states: the code runtime's own,
        # overlaid with the host's.
        facts_of = getattr(self.runtime.code_runtime, "sdk_facts", None)
        try:
            facts: dict[str, Any] = dict(facts_of()) if callable(facts_of) else {}
        except Exception:
            facts = {}
        facts.update(self.runtime.sdk_facts)
        return facts

    def sdk_text(self, scope: Scope | None = None) -> str:
        """What ``run_code``'s description carries after its flavour text (for ``scope``,
        by default ``agent``)."""
        scope = scope or self.agent
        if not self.compact:
            return str(self.runtime.system_prompt_sections(scope)["tools:sdk"])
        tools = self.runtime.sdk_tools(scope)
        discovery = [t for t in tools if t.name in DISCOVERY_TOOL_NAMES]
        catalog = [t for t in tools if t.name not in DISCOVERY_TOOL_NAMES]
        language = str(self.runtime.code_runtime.language)
        head = render_sdk(discovery, language, self._facts())
        call = 'await tools.search_tools("create issue")'
        return (
            f"{head}\n\n"
            f"## The tool catalog ({len(catalog)} tools)\n\n"
            "The catalog is too large to declare here in full. Every tool below is callable "
            'as `tools.<name>(args)` (or `tools["name"](args)`). Before calling one, get '
            f"its declarations inside the program: `{call}` returns the best matches with "
            'their declarations, `await tools.describe_tool("name")` one tool\'s.\n\n'
            f"{compact_index(catalog)}"
        )

    def run_code_description(self, scope: Scope | None = None) -> str:
        """``run_code``'s MCP description: flavour text, then ``sdk_text()``."""
        scope = scope or self.agent
        definition = self.runtime.get("run_code", scope)
        assert definition is not None
        # Over MCP the declarations follow in this very description, not in a system
        # prompt the host assembles.
        flavour = definition.description.replace(
            "per the declarations in the system prompt", "per the declarations below"
        )
        # The SDK section below opens by stating the two arguments again: say it once.
        flavour = _ARGUMENTS_SENTENCE.sub("", flavour, count=1)
        return f"{flavour}\n\n{self.sdk_text(scope)}"

    def list_tools(self, scope: Scope | None = None) -> list[Any]:
        """The MCP tool list (``mcp.types.Tool``) ``scope`` (default ``agent``) sees."""
        import mcp.types as types

        scope = scope or self.agent
        out = []
        for schema in self.runtime.schemas(scope):
            description = schema.description
            output_schema = None
            if schema.name == "run_code":
                description = self.run_code_description(scope)
                definition = self.runtime.get("run_code", scope)
                if definition is not None:
                    # The structured content of a successful run: ``{logs, result?}``.
                    output_schema = thaw(definition.output.schema)
            parameters = thaw(schema.parameters)
            if schema.name == "run_code" and isinstance(parameters, dict):
                required = [r for r in parameters.get("required", []) if r != "description"]
                parameters = {**parameters, "required": required}
            if not isinstance(parameters, dict) or parameters.get("type") != "object":
                # MCP requires an object input schema; a tool taking a string or an
                # object (the discovery tools) is listed with its object form.
                branches = parameters.get("oneOf", []) if isinstance(parameters, dict) else []
                objects = [b for b in branches if isinstance(b, dict) and b.get("type") == "object"]
                parameters = objects[0] if objects else {"type": "object"}
            out.append(
                types.Tool(
                    name=schema.name,
                    description=description,
                    input_schema=parameters,
                    output_schema=output_schema,
                )
            )
        return out

    # ------------------------------------------------------------- calling

    async def call(self, name: str, arguments: Any, *, scope: Scope | None = None) -> Any:
        """Run one ``tools/call`` as ``scope`` (default ``agent``); the ``CallToolResult``.

        Cancelling the calling task aborts the run's signal first, then waits (up to a
        grace period) for the pipeline to wind the run down, then re-raises.
        """
        controller = AbortController()
        if arguments is None:
            arguments = {}
        if name == "run_code" and isinstance(arguments, dict):
            given = arguments.get("description")
            if given is None or (isinstance(given, str) and not given.strip()):
                arguments = {**arguments, "description": DEFAULT_RUN_DESCRIPTION}
        input_ = ToolExecutionInput(
            call_id=f"mcp-{uuid.uuid4().hex[:12]}",
            name=name,
            arguments=arguments,
            signal=controller.signal,
            agent=scope or self.agent,
        )
        box: list[ToolExecutionResult] = []
        done = anyio.Event()
        work_scope = anyio.CancelScope(shield=True)

        async def work() -> None:
            # Shielded: the handler's cancellation must reach the run as an abort (so the
            # engine winds it down in order), not as a cancel in the middle of a commit.
            with work_scope:
                try:
                    box.append(await self.runtime.execute(input_))
                finally:
                    done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(work)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                controller.abort("cancelled by the MCP client")
                with anyio.move_on_after(_ABORT_GRACE_S, shield=True):
                    await done.wait()
                work_scope.cancel()
                raise
        return call_result(box[0])

    async def _watched(self, ctx: Any, session: _Session, name: str, arguments: Any) -> Any:
        """``call`` as ``session``'s scope, cancelled when the HTTP client goes away.

        Over streamable HTTP the SDK keeps serving a request whose client disconnected (the
        answer just has nowhere to go); the request's own ``is_disconnected`` is polled
        instead, and a client that left has its run aborted like a cancellation.
        """
        is_disconnected = getattr(getattr(ctx, "request", None), "is_disconnected", None)
        if not callable(is_disconnected):
            return await self.call(name, arguments, scope=session.scope)
        box: list[Any] = []

        async with anyio.create_task_group() as tg:

            async def work() -> None:
                box.append(await self.call(name, arguments, scope=session.scope))
                tg.cancel_scope.cancel()

            async def watch() -> None:
                while True:
                    await anyio.sleep(_DISCONNECT_POLL_S)
                    if await is_disconnected():
                        self._log(
                            f"session {session.key[:12]}: the client went away during "
                            f"{name}; cancelled it"
                        )
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(work)
            tg.start_soon(watch)
        if box:
            return box[0]
        import mcp.types as types

        return types.CallToolResult(
            content=[types.TextContent(type="text", text="cancelled: the client disconnected")],
            is_error=True,
        )

    def _refusal(self, session: _Session) -> str | None:
        """Why one more ``run_code`` of ``session`` may not start now (logged), or None."""
        limit = self.max_runs_per_session
        if limit is not None and session.running >= limit:
            self._log(
                f"session {session.key[:12]}: refused a run_code call "
                f"({session.running} already running, limit {limit})"
            )
            return (
                f"this MCP session already runs {session.running} "
                f"program{'s' if session.running != 1 else ''} at once (the server's limit "
                f"is {limit} per session); wait for one to finish, or open another session"
            )
        if self.max_runs is not None and self._running >= self.max_runs:
            self._log(
                f"session {session.key[:12]}: refused a run_code call "
                f"({self._running} running on the server, limit {self.max_runs})"
            )
            return (
                f"the server already runs {self._running} "
                f"program{'s' if self._running != 1 else ''} at once (its limit is "
                f"{self.max_runs}); try again when one has finished"
            )
        return None

    # ------------------------------------------------------------- serving

    def lowlevel_server(self) -> Any:
        """The SDK's low-level ``Server`` with this server's handlers."""
        import mcp.types as types
        from mcp.server import Server

        async def on_list_tools(ctx: Any, _params: Any) -> Any:
            session = await self._session(ctx)
            return types.ListToolsResult(tools=self.list_tools(session.scope))

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            session = await self._session(ctx)
            if params.name != "run_code":
                return await self._watched(ctx, session, params.name, params.arguments)
            refusal = self._refusal(session)
            if refusal is not None:
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=refusal)], is_error=True
                )
            session.running += 1
            self._running += 1
            try:
                return await self._watched(ctx, session, params.name, params.arguments)
            finally:
                session.running -= 1
                self._running -= 1

        return Server(
            self.name,
            version=self.version,
            instructions=self.instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )

    @contextlib.asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        """Session scopes are owned by this block's task group; leaving it ends every
        session."""
        async with anyio.create_task_group() as tg:
            self._owners = tg
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await self.aclose_sessions()
                self._owners = None

    async def serve_stdio(self, *, stdin: Any = None, stdout: Any = None) -> None:
        """Serve MCP over this process's stdin/stdout until stdin closes.

        ``stdin``/``stdout`` (``anyio`` async text files) replace the process's own, for
        a host that moved the wire to private descriptors before starting anything.
        """
        from mcp.server.stdio import stdio_server

        server = self.lowlevel_server()
        async with (
            self._serving(),
            stdio_server(stdin, stdout) as (read_stream, write_stream),
        ):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def serve_http(
        self,
        host: str,
        port: int,
        *,
        options: HttpOptions | None = None,
        on_ready: Callable[[int], None] | None = None,
    ) -> None:
        """Serve streamable HTTP at ``http(s)://host:port/mcp`` until cancelled.

        ``options`` (``HttpOptions``) sets the server's limits, host/origin checks, bearer
        authentication and TLS. ``port`` 0 picks a free port; ``on_ready(port)`` is called
        once it listens. Cancelling stops accepting, gives open requests
        ``options.shutdown_grace_s`` to finish, then ends every session.
        """
        from ._http import HttpOptions, serve_app

        options = options or HttpOptions()
        async with self._serving():
            await serve_app(self, host, port, options, log=self._log, on_ready=on_ready)
