"""A small MCP server for the tests, run as an stdio subprocess: ``python upstream_server.py
notes|tasks``. Each flavour has its own tools plus ``slow``, which both list (a collision).

``slow`` sleeps and returns the wall-clock interval it slept (recorded here, in the
upstream), so a test can tell whether calls overlapped from the upstream's own clock.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

flavour = sys.argv[1] if len(sys.argv) > 1 else "notes"
server = MCPServer(f"test-{flavour}")


class Interval(BaseModel):
    tag: str
    start: float
    end: float


class Note(BaseModel):
    id: int
    title: str
    tags: list[str] = []


@server.tool(description="Sleep for ms milliseconds; returns when the sleep started and ended.")
async def slow(tag: str, ms: Annotated[int, Field(ge=0, le=10_000)] = 100) -> Interval:
    start = time.time()
    await anyio.sleep(ms / 1000)
    return Interval(tag=f"{flavour}:{tag}", start=start, end=time.time())


@server.tool(description="Print the value of an environment variable (or null).")
def env(name: str) -> str | None:
    return os.environ.get(name)


if flavour == "notes":

    @server.tool(
        name="get-note",
        description="Fetch one note by id.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def get_note(id: Annotated[int, Field(ge=1, description="The note id.")]) -> Note:
        return Note(id=id, title=f"note {id}", tags=["t"])

    @server.tool(description="Always fails with a message.")
    def fail(reason: str) -> str:
        raise ToolError(f"upstream refused: {reason}")

    @server.tool(description="Sleep for a long time, recording cancellation to a file.")
    async def hang(marker: str) -> str:
        await anyio.Path(marker).write_text("started")
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await anyio.Path(marker).write_text("cancelled")
            raise
        return "woke"

else:

    @server.tool(
        description="Count the words of a text.", annotations=ToolAnnotations(read_only_hint=True)
    )
    def count_words(text: str) -> int:
        return len(text.split())

    @server.tool(description="Takes anything but null: a schema codemode cannot represent.")
    def odd(value: Annotated[Any, WithJsonSchema({"not": {"type": "null"}})]) -> str:
        return "never imported"


if __name__ == "__main__":
    server.run()
