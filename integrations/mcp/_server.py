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

``serve_stdio()`` speaks MCP on stdin/stdout (the SDK points fd 1 at stderr while it
serves, so nothing else reaches the wire); ``serve_http(host, port)`` serves streamable
HTTP at ``http://host:port/mcp``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import anyio

from codemode.engine import (
    AbortController,
    Scope,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.engine.json import thaw
from codemode.sdk_gen import render_sdk

from ._catalog import DISCOVERY_TOOL_NAMES, compact_index, discovery_tools

__all__ = ["DEFAULT_SDK_BUDGET", "CodeModeServer", "call_result"]

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

    ``agent`` is the scope every call runs as (its view, guards and session);
    ``sdk_budget`` the most characters of SDK ``run_code``'s description carries before
    it switches to the compact index (then ``search_tools``/``describe_tool`` are
    registered on the agent, or the runtime). ``name`` is the MCP server name.
    """

    def __init__(
        self,
        runtime: ToolRuntime,
        *,
        agent: Scope | None = None,
        name: str = "codemode",
        sdk_budget: int = DEFAULT_SDK_BUDGET,
        instructions: str | None = None,
    ) -> None:
        if runtime.mode_for(agent) == "native":
            raise ValueError('CodeModeServer needs a runtime or scope in "code" or "both" mode')
        if sdk_budget < 0:
            raise ValueError("sdk_budget must be >= 0")
        self.runtime = runtime
        self.agent = agent
        self.name = name
        self.sdk_budget = sdk_budget
        self.instructions = instructions
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

    def sdk_text(self) -> str:
        """What ``run_code``'s description carries after its flavour text."""
        if not self.compact:
            return str(self.runtime.system_prompt_sections(self.agent)["tools:sdk"])
        tools = self.runtime.sdk_tools(self.agent)
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

    def run_code_description(self) -> str:
        """``run_code``'s MCP description: flavour text, then ``sdk_text()``."""
        definition = self.runtime.get("run_code", self.agent)
        assert definition is not None
        # Over MCP the declarations follow in this very description, not in a system
        # prompt the host assembles.
        flavour = definition.description.replace(
            "per the declarations in the system prompt", "per the declarations below"
        )
        return f"{flavour}\n\n{self.sdk_text()}"

    def list_tools(self) -> list[Any]:
        """The MCP tool list (``mcp.types.Tool``) for the agent's mode."""
        import mcp.types as types

        out = []
        for schema in self.runtime.schemas(self.agent):
            description = schema.description
            if schema.name == "run_code":
                description = self.run_code_description()
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
                types.Tool(name=schema.name, description=description, input_schema=parameters)
            )
        return out

    # ------------------------------------------------------------- calling

    async def call(self, name: str, arguments: Any) -> Any:
        """Run one ``tools/call`` through the pipeline; the ``CallToolResult``.

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
            agent=self.agent,
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

    # ------------------------------------------------------------- serving

    def lowlevel_server(self) -> Any:
        """The SDK's low-level ``Server`` with this server's handlers."""
        import mcp.types as types
        from mcp.server import Server

        async def on_list_tools(_ctx: Any, _params: Any) -> Any:
            return types.ListToolsResult(tools=self.list_tools())

        async def on_call_tool(_ctx: Any, params: Any) -> Any:
            return await self.call(params.name, params.arguments)

        return Server(
            self.name,
            instructions=self.instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )

    async def serve_stdio(self, *, stdin: Any = None, stdout: Any = None) -> None:
        """Serve MCP over this process's stdin/stdout until stdin closes.

        ``stdin``/``stdout`` (``anyio`` async text files) replace the process's own, for
        a host that moved the wire to private descriptors before starting anything.
        """
        from mcp.server.stdio import stdio_server

        server = self.lowlevel_server()
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def serve_http(
        self, host: str, port: int, *, on_ready: Callable[[int], None] | None = None
    ) -> None:
        """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled.

        ``port`` 0 picks a free port; ``on_ready(port)`` is called once it listens.
        """
        import uvicorn

        app = self.lowlevel_server().streamable_http_app(host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)

        async def announce() -> None:
            # uvicorn exposes only a flag for "listening", no event to wait on.
            while not server.started:  # noqa: ASYNC110
                await anyio.sleep(0.02)
            if on_ready is not None:
                sockets = [s for srv in server.servers for s in srv.sockets]
                on_ready(sockets[0].getsockname()[1] if sockets else port)

        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await server.serve()
            tg.cancel_scope.cancel()
