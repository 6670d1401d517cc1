"""The second upstream stdio MCP server of the two-upstream end-to-end test, on the
official SDK's low-level ``Server`` (hand-written schemas, structured and text content):
``tick`` (read-only) sleeps ms milliseconds and returns when, by its own clock."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TICK = types.Tool(
    name="tick",
    description="Sleep ms milliseconds; returns when the sleep started and ended.",
    input_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}, "ms": {"type": "integer", "default": 100}},
        "required": ["n"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "upstream": {"type": "string"},
            "start": {"type": "number"},
            "end": {"type": "number"},
        },
        "required": ["n", "upstream", "start", "end"],
    },
    annotations=types.ToolAnnotations(read_only_hint=True),
)


async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TICK])


async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name != "tick":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"no tool {params.name}")],
            is_error=True,
        )
    args = params.arguments or {}
    start = time.time()
    await anyio.sleep(int(args.get("ms", 100)) / 1000)
    out = {"n": args["n"], "upstream": "clock", "start": start, "end": time.time()}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(out))], structured_content=out
    )


async def main() -> None:
    server = Server("e2e-clock", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
