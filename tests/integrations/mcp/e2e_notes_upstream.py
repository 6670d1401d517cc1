"""An upstream stdio MCP server for the two-upstream end-to-end test (the official SDK's
``MCPServer``): ``get-note`` (a name that is not an identifier, read-only, sleeps 100 ms
and says when by its own clock), ``fail`` (always an ``is_error`` result) and ``hang``
(sleeps until cancelled, recording both moments in a marker file)."""

from __future__ import annotations

import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("e2e-notes")


class Stamped(BaseModel):
    id: int
    title: str
    upstream: str
    start: float
    end: float


@server.tool(
    name="get-note",
    description="Fetch one note by id (takes ms milliseconds).",
    annotations=ToolAnnotations(read_only_hint=True),
)
async def get_note(id: int, ms: int = 100) -> Stamped:
    start = time.time()
    await anyio.sleep(ms / 1000)
    return Stamped(id=id, title=f"note {id}", upstream="notes", start=start, end=time.time())


@server.tool(description="Always fails.", annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str) -> str:
    raise ToolError(f"notes upstream refused: {reason}")


@server.tool(description="Sleep until cancelled, recording it in the marker file.")
async def hang(marker: str) -> str:
    await anyio.Path(marker).write_text("started")
    try:
        await anyio.sleep(120)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.Path(marker).write_text("cancelled")
        raise
    return "woke"


if __name__ == "__main__":
    server.run()
