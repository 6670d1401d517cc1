"""Importing real MCP servers' tools into a ToolRuntime: listing, results, errors,
parallel safety, collisions, non-identifier names, cancellation, an stdio subprocess."""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp_support import (
    Recorder,
    call,
    http_served,
    max_overlap,
    notes_server,
    result_text,
    run_code,
    runtime_with,
    stdio_upstream,
    text_server,
)

from codemode.engine import AbortController, ToolExecutionInput
from codemode.integrations.mcp import (
    McpImportError,
    McpSchemaError,
    Upstream,
    connect_upstreams,
    mangle,
    split_mangled,
)

pytestmark = pytest.mark.anyio


async def test_listing_builds_raw_definitions_with_normalised_schemas() -> None:
    rec = Recorder()
    async with runtime_with([Upstream.memory(notes_server(rec))]) as (rt, imported):
        names = [t.name for t in imported.tools]
        assert names == ["get-note", "add", "fail", "nap", "work", "hang"]
        note = rt.get("get-note")
        assert note is not None
        assert note.description == "Fetch one note by id."
        assert note.parameters["properties"]["id"] == {
            "title": "Id",
            "type": "integer",
            "description": "The note id. (minimum: 1)",
        }
        # The output schema is kept; MCPServer's {"result": x} wrapper is unwrapped.
        assert note.output.schema["properties"]["title"]["type"] == "string"
        add = rt.get("add")
        assert add is not None and add.output.schema == {"title": "Result", "type": "integer"}
        # The native (upstream) form is kept for both-mode listings and measurements.
        assert imported.tools[0].native.input_schema["properties"]["id"]["minimum"] == 1
        assert {t.upstream for t in imported.tools} == {"notes"}


async def test_results_structured_unwrapped_and_text() -> None:
    rec = Recorder()
    upstreams = [Upstream.memory(notes_server(rec)), Upstream.memory(text_server())]
    async with runtime_with(upstreams) as (rt, _):
        note = await call(rt, "get-note", {"id": 4})
        assert not note.is_error and note.value == {"id": 4, "title": "note 4"}
        # "add" is on both upstreams: both are mangled.
        total = await call(rt, "notes__add", {"a": 2, "b": 3})
        assert not total.is_error and total.value == 5  # unwrapped from {"result": 5}
        joined = await call(rt, "text__add", {"a": "x", "b": "y"})
        assert not joined.is_error and joined.value == "xy"
        loud = await call(rt, "shout.loud", {"text": "hi"})
        assert not loud.is_error and loud.value == "HI\nHI!"  # text blocks joined


async def test_is_error_is_a_failure_with_the_servers_text() -> None:
    async with runtime_with([Upstream.memory(notes_server(Recorder()))]) as (rt, _):
        result = await call(rt, "fail", {"reason": "nope"})
        assert result.is_error
        assert "upstream refused: nope" in result.error.message
        assert result.error.info is not None and result.error.info.code == "MCP_TOOL_ERROR"


async def test_read_only_hint_maps_to_parallel_safe() -> None:
    def mode(rt, name):
        return rt.execution_mode(
            ToolExecutionInput(
                call_id="x", name=name, arguments={}, signal=AbortController().signal
            )
        )

    upstream = [Upstream.memory(notes_server(Recorder()))]
    async with runtime_with(upstream) as (rt, _):
        assert mode(rt, "get-note") == "parallel"
        assert mode(rt, "nap") == "parallel"
        assert mode(rt, "work") == "exclusive"
    async with runtime_with(upstream, parallel="all") as (rt, _):
        assert mode(rt, "work") == "parallel"
    async with runtime_with(upstream, parallel="none") as (rt, _):
        assert mode(rt, "get-note") == "exclusive"


def test_mangling_is_reversible() -> None:
    assert mangle("notes", "get-note") == "notes__get-note"
    assert split_mangled("notes__get-note") == ("notes", "get-note")
    assert split_mangled("tools__a__b") == ("tools", "a__b")
    assert split_mangled("plain") is None


async def test_collisions_mangle_every_holder_whatever_the_order() -> None:
    a, b = Upstream.memory(notes_server(Recorder())), Upstream.memory(text_server())
    async with connect_upstreams([a, b]) as first:
        one = sorted(t.name for t in first.tools)
    async with connect_upstreams([b, a]) as second:
        two = sorted(t.name for t in second.tools)
    assert one == two
    assert "notes__add" in one and "text__add" in one and "add" not in one
    assert "get-note" in one  # not colliding: kept as it is


async def test_collision_errors_when_asked_or_unresolvable() -> None:
    a, b = Upstream.memory(notes_server(Recorder())), Upstream.memory(text_server())
    with pytest.raises(McpImportError, match=r'tool "add" is listed by upstreams .notes., .text.'):
        async with connect_upstreams([a, b], on_collision="error"):
            pass
    same = Upstream.memory(text_server(), name="notes")
    with pytest.raises(McpImportError, match='two upstreams are both named "notes"'):
        async with connect_upstreams([a, same]):
            pass


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_non_identifier_names_reach_programs_by_subscript(language: str) -> None:
    upstreams = [Upstream.memory(notes_server(Recorder())), Upstream.memory(text_server())]
    async with runtime_with(upstreams, language) as (rt, _):
        sdk = rt.system_prompt_sections()["tools:sdk"]
        assert "get-note" in sdk and "shout.loud" in sdk
        if language == "python":
            code = (
                'n = await tools["get-note"]({"id": 7})\n'
                's = await tools["shout.loud"]({"text": "a"})\n'
                'return [n["title"], s, await tools.notes__add({"a": 1, "b": 1})]'
            )
        else:
            code = (
                'const n = await tools["get-note"]({id: 7});\n'
                'const s = await tools["shout.loud"]({text: "a"});\n'
                "return [n.title, s, await tools.notes__add({a: 1, b: 1})];"
            )
        result = await run_code(rt, code)
        assert not result.is_error, result_text(result)
        assert result.value["result"] == ["note 7", "A\nA!", 2]


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_fan_out_over_read_only_tools_overlaps(language: str) -> None:
    rec = Recorder()
    async with runtime_with([Upstream.memory(notes_server(rec))], language) as (rt, _):
        if language == "python":
            code = (
                "import asyncio\n"
                "r = await asyncio.gather(*[tools.nap({'ms': 100}) for _ in range(20)])\n"
                "return len(r)"
            )
        else:
            code = (
                "const r = await Promise.all(Array.from({length: 20}, () => tools.nap({ms: 100})));"
                "\nreturn r.length;"
            )
        result = await run_code(rt, code)
        assert not result.is_error, result_text(result)
        assert result.value["result"] == 20
    assert len(rec.intervals) == 20
    # The default cap is 10 sub-calls at once: the upstream saw them overlap up to it.
    assert max_overlap(rec.intervals) == 10


async def test_fan_out_over_an_exclusive_tool_runs_one_at_a_time() -> None:
    rec = Recorder()
    async with runtime_with([Upstream.memory(notes_server(rec))], "python") as (rt, _):
        code = "import asyncio\nawait asyncio.gather(*[tools.work({'ms': 20}) for _ in range(5)])\n"
        result = await run_code(rt, code)
        assert not result.is_error, result_text(result)
    assert len(rec.intervals) == 5 and max_overlap(rec.intervals) == 1


async def test_failures_inside_programs_raise_tool_call_error() -> None:
    async with runtime_with([Upstream.memory(notes_server(Recorder()))], "python") as (rt, _):
        code = (
            "try:\n"
            "    await tools.fail({'reason': 'x'})\n"
            "except ToolCallError as e:\n"
            "    return [e.toolName, e.code, str(e)]\n"
        )
        result = await run_code(rt, code)
        assert not result.is_error, result_text(result)
        name, code_, message = result.value["result"]
        assert (name, code_) == ("fail", "MCP_TOOL_ERROR") and "upstream refused: x" in message


async def test_aborting_a_call_cancels_the_upstream_request() -> None:
    rec = Recorder()
    async with runtime_with([Upstream.memory(notes_server(rec))], "python") as (rt, _):
        controller = AbortController()
        results = []

        async def go() -> None:
            results.append(
                await run_code(rt, "return await tools.hang({})", signal=controller.signal)
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await rec.hang_started.wait()
            controller.abort("stop")
        with anyio.fail_after(10):
            await rec.cancelled.wait()
    (result,) = results
    assert result.is_error


async def test_stdio_subprocess_upstream_with_an_explicit_environment() -> None:
    env = {"PATH": "/usr/bin:/bin", "CODEMODE_MCP_PROBE": "seen-upstream"}
    upstream = stdio_upstream("tasks", env=env)
    assert upstream.target.env == env  # exactly what was given
    with pytest.raises(McpSchemaError, match=r'MCP tool "odd".*keyword "not"'):
        async with connect_upstreams([upstream]):
            pass
    async with runtime_with([upstream], on_unsupported="skip") as (rt, imported):
        assert imported.tools[0].upstream == "tasks"
        assert {t.name for t in imported.tools} == {"slow", "env", "count_words"}
        # "odd" has a schema with "not": skipped by name.
        assert [e.tool for e in imported.skipped] == ["odd"]
        probe = await call(rt, "env", {"name": "CODEMODE_MCP_PROBE"})
        assert not probe.is_error and probe.value == "seen-upstream"
        words = await call(rt, "count_words", {"text": "a b c"})
        assert not words.is_error and words.value == 3


async def test_an_upstream_that_cannot_start_is_named() -> None:
    bad = Upstream.stdio([sys.executable, "-c", "import sys; sys.exit(3)"], name="broken")
    with pytest.raises(McpImportError, match='cannot connect to upstream "broken"'):
        async with connect_upstreams([bad]):
            pass


async def test_timeout_ms_bounds_each_upstream_call_and_cancels_it() -> None:
    from codemode.engine.policies import TimeoutPolicy

    rec = Recorder()
    async with runtime_with([Upstream.memory(notes_server(rec))], timeout_ms=200) as (rt, _):
        TimeoutPolicy().install(rt)
        assert rt.get("hang").timeout_ms == 200
        result = await call(rt, "hang", {})
        assert result.is_error and result.error.info.code == "TOOL_TIMEOUT"
        with anyio.fail_after(10):
            await rec.cancelled.wait()


async def test_names_the_host_holds_are_mangled_too() -> None:
    import mcp.types as types
    from mcp.server import Server

    async def list_tools(_ctx, _params):
        schema = {"type": "object", "properties": {}}
        return types.ListToolsResult(
            tools=[
                types.Tool(name="run_code", description="Reserved name.", input_schema=schema),
                types.Tool(name="read", description="Like a built-in.", input_schema=schema),
                types.Tool(name="other", description="Free name.", input_schema=schema),
            ]
        )

    async def call_tool(_ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    server = Server("edgy", on_list_tools=list_tools, on_call_tool=call_tool)
    async with runtime_with([Upstream.memory(server)], reserved=["read"]) as (rt, imported):
        assert [t.name for t in imported.tools] == ["edgy__run_code", "edgy__read", "other"]
        result = await call(rt, "edgy__run_code", {})
        assert not result.is_error and result.value == "run_code"  # the original name
    with pytest.raises(McpImportError, match="already taken by the host"):
        async with connect_upstreams([Upstream.memory(server)], on_collision="error"):
            pass


async def test_streamable_http_upstream() -> None:
    rec = Recorder()
    async with http_served(notes_server(rec)) as url:
        upstream = Upstream.http(url)
        port = url.rsplit(":", 1)[1].split("/")[0]
        assert upstream.name == f"127_0_0_1_{port}_mcp"  # usable as a mangling prefix
        async with runtime_with([upstream], "typescript") as (rt, imported):
            assert "get-note" in [t.name for t in imported.tools]
            code = (
                'const r = await Promise.all([1, 2, 3].map(id => tools["get-note"]({id})));'
                "\nreturn r.map(n => n.title);"
            )
            result = await run_code(rt, code)
            assert not result.is_error, result_text(result)
            assert result.value["result"] == ["note 1", "note 2", "note 3"]
    assert sorted(rec.calls) == [("get-note", 1), ("get-note", 2), ("get-note", 3)]
