"""Real MCP servers (the official SDK's MCPServer and low-level Server) for the tests,
plus small helpers to run programs through a runtime with imported tools."""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from codemode.engine import AbortController, ToolExecutionInput, ToolExecutionResult, ToolRuntime
from codemode.integrations.mcp import ImportedTools, Upstream, connect_upstreams
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

HERE = Path(__file__).parent
UPSTREAM_SCRIPT = HERE / "upstream_server.py"

_ids = itertools.count(1)


class Recorder:
    """What the upstream servers saw: sleep intervals and cancellations, by their clock."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self.cancelled = anyio.Event()
        self.hang_started = anyio.Event()
        self.calls: list[tuple[str, Any]] = []


class Note(BaseModel):
    id: int
    title: str


def notes_server(rec: Recorder) -> MCPServer:
    """An MCPServer with a non-identifier name, a wrapper result, errors and slow tools."""
    server = MCPServer("notes")

    @server.tool(
        name="get-note",
        description="Fetch one note by id.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def get_note(id: Annotated[int, Field(ge=1, description="The note id.")]) -> Note:
        rec.calls.append(("get-note", id))
        return Note(id=id, title=f"note {id}")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ToolError(f"upstream refused: {reason}")

    @server.tool(
        description="Sleep ms milliseconds (read-only).",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def nap(ms: int = 100) -> list[float]:
        start = time.monotonic()
        await anyio.sleep(ms / 1000)
        end = time.monotonic()
        rec.intervals.append((start, end))
        return [start, end]

    @server.tool(description="Sleep ms milliseconds (may change things).")
    async def work(ms: int = 50) -> list[float]:
        start = time.monotonic()
        await anyio.sleep(ms / 1000)
        end = time.monotonic()
        rec.intervals.append((start, end))
        return [start, end]

    @server.tool(description="Sleep until cancelled.")
    async def hang() -> str:
        rec.hang_started.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            rec.cancelled.set()
            raise
        return "woke"

    return server


def text_server() -> Server[Any]:
    """A low-level Server whose tool answers text only (no structured content), under a
    name another server also uses (``add``)."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="add",
                    description="Concatenate two strings.",
                    input_schema={
                        "type": "object",
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                        "required": ["a", "b"],
                    },
                ),
                types.Tool(
                    name="shout.loud",
                    description="Upper-case a text, in two text blocks.",
                    input_schema={
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                    },
                ),
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "add":
            out = [types.TextContent(type="text", text=args["a"] + args["b"])]
        else:
            loud = str(args["text"]).upper()
            out = [
                types.TextContent(type="text", text=loud),
                types.TextContent(type="text", text=loud + "!"),
            ]
        return types.CallToolResult(content=out)

    return Server("text", on_list_tools=list_tools, on_call_tool=call_tool)


def stdio_upstream(flavour: str, *, name: str | None = None, env: dict[str, str] | None = None):
    return Upstream.stdio([sys.executable, str(UPSTREAM_SCRIPT), flavour], name=name, env=env)


@contextlib.asynccontextmanager
async def code_runtime(language: str) -> AsyncIterator[Any]:
    limits = Limits(pool_size=1, max_wall_ms=30_000)
    runtime = (
        TypeScriptRuntime(limits=limits)
        if language == "typescript"
        else PythonRuntime(limits=limits)
    )
    async with runtime as started:
        yield started


@contextlib.asynccontextmanager
async def runtime_with(
    upstreams: Sequence[Upstream],
    language: str | None = None,
    *,
    mode: str = "code",
    **options: Any,
) -> AsyncIterator[tuple[ToolRuntime, ImportedTools]]:
    async with contextlib.AsyncExitStack() as stack:
        sandbox = None
        if language is not None:
            sandbox = await stack.enter_async_context(code_runtime(language))
        max_parallel = options.pop("max_parallel_sub_calls", 10)
        rt = ToolRuntime(
            mode=mode if sandbox is not None else "native",
            code_runtime=sandbox,
            max_parallel_sub_calls=max_parallel,
        )
        imported = await stack.enter_async_context(connect_upstreams(upstreams, **options))
        imported.register(rt)
        yield rt, imported


async def call(
    rt: ToolRuntime, name: str, arguments: Any, *, signal: Any = None
) -> ToolExecutionResult:
    return await rt.execute(
        ToolExecutionInput(
            call_id=f"t-{next(_ids)}",
            name=name,
            arguments=arguments,
            signal=signal or AbortController().signal,
        )
    )


async def run_code(
    rt: ToolRuntime, code: str, *, signal: Any = None, agent: Any = None
) -> ToolExecutionResult:
    return await rt.execute(
        ToolExecutionInput(
            call_id=f"t-{next(_ids)}",
            name="run_code",
            arguments={"code": code, "description": "Test program"},
            signal=signal or AbortController().signal,
            agent=agent,
        )
    )


def max_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals open at one instant (from the upstream's own timestamps)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def result_text(result: Any) -> str:
    return "\n".join(str(b.get("text", "")) for b in result.content if b.get("type") == "text")


@contextlib.asynccontextmanager
async def http_served(server: MCPServer) -> AsyncIterator[str]:
    """Serve ``server`` over streamable HTTP on a free loopback port; yield its URL."""
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        with anyio.fail_after(20):
            while not web.started:  # noqa: ASYNC110 - uvicorn has only the flag
                await anyio.sleep(0.02)
        port = web.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            web.should_exit = True
