"""CodeModeServer driven by the official MCP client in memory: listing (code and both
modes), programs, errors as is_error results, client cancellation, large catalogs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_support import Recorder, max_overlap, notes_server, runtime_with, text_server

from codemode.integrations.mcp import CodeModeServer, Upstream

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def served(
    language: str,
    rec: Recorder,
    *,
    mode: str = "code",
    sdk_budget: int = 40_000,
    client_mode: str = "legacy",
) -> AsyncIterator[tuple[Any, CodeModeServer]]:
    upstreams = [Upstream.memory(notes_server(rec)), Upstream.memory(text_server())]
    async with runtime_with(upstreams, language, mode=mode) as (rt, _):
        agent = rt.scope("mcp")
        server = CodeModeServer(rt, agent=agent, sdk_budget=sdk_budget)
        async with Client(server.lowlevel_server(), mode=client_mode) as client:
            yield client, server


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


async def run(client: Any, code: str) -> Any:
    return await client.call_tool("run_code", {"code": code, "description": "Test program"})


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_code_mode_lists_run_code_carrying_the_whole_sdk(language: str) -> None:
    async with served(language, Recorder()) as (client, server):
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["run_code"]
        (run_code,) = tools
        # Over MCP the program's title is optional (the engine's schema requires it).
        assert run_code.input_schema["required"] == ["code"]
        assert "description" in run_code.input_schema["properties"]
        description = run_code.description
        assert description.startswith(f"Execute a {language.title().replace('script', 'Script')}")
        assert server.full_sdk in description and not server.compact
        for name in ("get-note", "notes__add", "text__add", "shout.loud", "nap", "hang"):
            assert name in description
        assert "search_tools" not in description
        assert "per the declarations below" in description
        assert "system prompt" not in description


async def test_both_mode_lists_every_tool_and_calls_them_natively() -> None:
    async with served("python", Recorder(), mode="both") as (client, _):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) >= {"run_code", "get-note", "notes__add", "text__add", "shout.loud"}
        assert tools["get-note"].input_schema["properties"]["id"]["type"] == "integer"
        result = await client.call_tool("get-note", {"id": 3})
        assert not result.is_error
        assert result.structured_content == {"id": 3, "title": "note 3"}


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_a_program_fans_out_over_upstream_tools(language: str) -> None:
    rec = Recorder()
    async with served(language, rec) as (client, _):
        if language == "python":
            code = (
                "import asyncio\n"
                "naps = await asyncio.gather(*[tools.nap({'ms': 100}) for _ in range(20)])\n"
                "note = await tools['get-note']({'id': 1})\n"
                "print('naps', len(naps))\n"
                "return note['title']"
            )
        else:
            code = (
                "const naps = await Promise.all(Array.from({length: 20}, () => tools.nap({ms: 100})));\n"
                'const note = await tools["get-note"]({id: 1});\n'
                'console.log("naps", naps.length);\n'
                "return note.title;"
            )
        result = await run(client, code)
        assert not result.is_error, text_of(result)
        assert text_of(result) == "naps 20\nnote 1"
        assert result.structured_content == {"logs": ["naps 20"], "result": "note 1"}
    assert len(rec.intervals) == 20 and max_overlap(rec.intervals) > 1


async def test_failures_are_is_error_results_not_protocol_errors() -> None:
    async with served("python", Recorder()) as (client, _):
        syntax = await run(client, "return (")
        assert syntax.is_error and "syntax" in text_of(syntax)
        upstream = await run(client, "return await tools.fail({'reason': 'r'})")
        assert upstream.is_error and "upstream refused: r" in text_of(upstream)
        missing = await run(client, "return await tools.nope({})")
        assert missing.is_error and "nope" in text_of(missing)
        # In code mode only run_code is callable directly.
        direct = await client.call_tool("get-note", {"id": 1})
        assert direct.is_error and "get-note" in text_of(direct)
        unknown = await client.call_tool("no_such_tool", {})
        assert unknown.is_error and "no_such_tool" in text_of(unknown)
        bad_args = await client.call_tool("run_code", {"code": 5})
        assert bad_args.is_error and "invalid arguments" in text_of(bad_args)


async def test_run_code_without_a_description_runs_under_a_stand_in_title() -> None:
    async with served("python", Recorder()) as (client, _):
        plain = await client.call_tool("run_code", {"code": "return 6 * 7"})
        assert not plain.is_error and text_of(plain) == "42"
        blank = await client.call_tool("run_code", {"code": "return 1", "description": " "})
        assert not blank.is_error and text_of(blank) == "1"
        # Only a missing title is filled in: a wrong type is still invalid arguments.
        typed = await client.call_tool("run_code", {"code": "return 1", "description": 3})
        assert typed.is_error and "invalid arguments" in text_of(typed)


@pytest.mark.parametrize("client_mode", ["legacy", "auto"])
async def test_client_cancellation_aborts_the_run_and_the_upstream_call(client_mode: str) -> None:
    # legacy: JSON-RPC notifications/cancelled; auto (in memory): the direct dispatcher.
    rec = Recorder()
    async with served("python", rec, client_mode=client_mode) as (client, _):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, client, "return await tools.hang({})")
            await rec.hang_started.wait()
            tg.cancel_scope.cancel()  # the client abandons the call: notifications/cancelled
        with anyio.fail_after(10):
            await rec.cancelled.wait()
        # The server is still serving.
        after = await run(client, "return 1 + 1")
        assert not after.is_error and text_of(after) == "2"


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_large_catalog_carries_an_index_and_discovery_works(language: str) -> None:
    async with served(language, Recorder(), sdk_budget=500) as (client, server):
        assert server.compact
        (tool,) = (await client.list_tools()).tools
        description = tool.description
        assert len(description) < len(server.full_sdk) + 2_000
        assert "- get-note: Fetch one note by id." in description
        assert "- shout.loud: Upper-case a text, in two text blocks." in description
        # Declared in full: only the discovery tools.
        assert "search_tools" in description and "describe_tool" in description
        assert "GetNoteArgs" not in description and '"get-note": {' not in description
        if language == "python":
            code = (
                "found = await tools.search_tools('note')\n"
                "desc = await tools.describe_tool('get-note')\n"
                "limited = await tools.search_tools({'query': 'sleep milliseconds', 'limit': 1})\n"
                "try:\n"
                "    await tools.describe_tool('get-nite')\n"
                "except ToolCallError as e:\n"
                "    miss = str(e)\n"
                "n = await tools['get-note']({'id': 2})\n"
                "return {'names': [m['name'] for m in found['matches']], 'decl': desc['declarations'],"
                " 'limited': [m['name'] for m in limited['matches']], 'miss': miss, 'n': n['id']}"
            )
        else:
            code = (
                'const found = await tools.search_tools("note");\n'
                'const desc = await tools.describe_tool("get-note");\n'
                'const limited = await tools.search_tools({query: "sleep milliseconds", limit: 1});\n'
                "let miss = '';\n"
                'try { await tools.describe_tool("get-nite"); } catch (e) { miss = String(e.message); }\n'
                'const n = await tools["get-note"]({id: 2});\n'
                "return {names: found.matches.map(m => m.name), decl: desc.declarations,"
                " limited: limited.matches.map(m => m.name), miss, n: n.id};"
            )
        result = await run(client, code)
        assert not result.is_error, text_of(result)
        value = result.structured_content["result"]
        assert value["names"][0] == "get-note"
        fence = "```python" if language == "python" else "```ts"
        assert value["decl"].startswith(fence)
        if language == "python":
            assert "class GetNoteArgs(TypedDict)" in value["decl"]
        else:
            assert '"get-note": {' in value["decl"]
        assert "The note id. (minimum: 1)" in value["decl"]
        assert value["limited"] == ["nap"]  # ties break by name
        assert "did you mean 'get-note'" in value["miss"]
        assert value["n"] == 2


async def test_concurrent_programs_from_one_client_all_complete() -> None:
    rec = Recorder()
    async with served("python", rec) as (client, _):
        results: dict[int, Any] = {}

        async def one(i: int) -> None:
            code = f"await tools.nap({{'ms': 50}})\nreturn {i} * 10"
            results[i] = await run(client, code)

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
        assert {i: text_of(r) for i, r in results.items()} == {0: "0", 1: "10", 2: "20", 3: "30"}
        assert not any(r.is_error for r in results.values())
