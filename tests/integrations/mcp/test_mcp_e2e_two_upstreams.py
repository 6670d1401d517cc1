"""Held-out style end to end: the installed ``codemode serve-mcp`` console script fronting
two upstream stdio MCP servers (``e2e_notes_upstream.py`` on the SDK's ``MCPServer``,
``e2e_clock_upstream.py`` on its low-level ``Server``), driven by the official MCP client
over stdio (a Python and a TypeScript program) and over streamable HTTP on loopback.

Each run lists the tools, fans 20 × 100 ms upstream calls out over both upstreams and
checks from the upstreams' own timestamps that they overlapped, turns a failing call into
an ``is_error`` result (never a JSON-RPC error) and cancels a run from the client.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_support import max_overlap

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HERE = Path(__file__).parent
# The console script pip installed next to this interpreter, as a host would start it.
CODEMODE = Path(sys.executable).parent / "codemode"
UPSTREAM_ARGS = [
    "--upstream",
    shlex.join([sys.executable, str(HERE / "e2e_notes_upstream.py")]),
    "--upstream",
    shlex.join([sys.executable, str(HERE / "e2e_clock_upstream.py")]),
]
CALLS, CALL_MS = 20, 100

FAN_OUT = {
    # Half the calls on each upstream, all started together.
    "python": (
        "import asyncio\n"
        f"notes = [tools['get-note']({{'id': i, 'ms': {CALL_MS}}}) for i in range({CALLS // 2})]\n"
        f"ticks = [tools.tick({{'n': i, 'ms': {CALL_MS}}}) for i in range({CALLS // 2})]\n"
        "rs = await asyncio.gather(*notes, *ticks)\n"
        "return [[r['upstream'], r['start'], r['end']] for r in rs]"
    ),
    "typescript": (
        f"const notes = Array.from({{length: {CALLS // 2}}}, (_, i) =>"
        f' tools["get-note"]({{id: i, ms: {CALL_MS}}}));\n'
        f"const ticks = Array.from({{length: {CALLS // 2}}}, (_, i) =>"
        f" tools.tick({{n: i, ms: {CALL_MS}}}));\n"
        "const rs = await Promise.all([...notes, ...ticks]);\n"
        "return rs.map(r => [r.upstream, r.start, r.end]);"
    ),
}
FAIL = {
    "python": "return await tools.fail({'reason': 'no such note'})",
    "typescript": 'return await tools.fail({reason: "no such note"});',
}
CAUGHT = {
    "python": (
        "try:\n"
        "    await tools.fail({'reason': 'x'})\n"
        "except ToolCallError as e:\n"
        "    return ['caught', e.toolName]"
    ),
    "typescript": (
        'try { await tools.fail({reason: "x"}); } catch (e) { return ["caught", e.toolName]; }'
    ),
}
HANG = {
    "python": "await tools.hang({{'marker': {marker!r}}})\nreturn 'not cancelled'",
    "typescript": 'await tools.hang({{marker: "{marker}"}});\nreturn "not cancelled";',
}
SYNTAX = {"python": "return (", "typescript": "return (;"}


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


@contextlib.asynccontextmanager
async def over_stdio(workspace: Path, language: str) -> AsyncIterator[Any]:
    params = StdioServerParameters(
        command=str(CODEMODE),
        args=["serve-mcp", *UPSTREAM_ARGS, "--lang", language, "--workspace", str(workspace)],
        env=dict(os.environ),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_process(workspace: Path, language: str) -> Iterator[str]:
    port = free_port()
    log = workspace / "serve-mcp.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                str(CODEMODE),
                "serve-mcp",
                *UPSTREAM_ARGS,
                "--lang",
                language,
                "--workspace",
                str(workspace),
                "--http",
                f"127.0.0.1:{port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        # serve-mcp prints the address once both upstreams and the sandbox are up.
        for _ in range(1200):
            if f"listening on {url}" in log.read_text():
                break
            assert proc.poll() is None, log.read_text()
            time.sleep(0.05)
        else:
            pytest.fail(f"serve-mcp did not listen on {url}:\n{log.read_text()}")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def exercise(client: Any, workspace: Path, language: str) -> None:
    async def run(code: str) -> Any:
        # No ``description``: over MCP it is optional (a host may send only the program).
        return await client.call_tool("run_code", {"code": code})

    # Listing: run_code only, its description declaring both upstreams' tools.
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["run_code"]
    (run_code,) = tools
    assert run_code.input_schema["required"] == ["code"]
    assert '"get-note"' in run_code.description
    for name in ("tick", "fail", "hang"):
        assert re.search(rf"\b{name}\b", run_code.description), name

    # Fan-out: 20 × 100 ms calls over both upstreams, timed by the upstreams' clocks.
    fanned = await run(FAN_OUT[language])
    assert not fanned.is_error, text_of(fanned)
    rows = fanned.structured_content["result"]
    assert sorted(r[0] for r in rows) == ["clock"] * 10 + ["notes"] * 10
    intervals = [(float(r[1]), float(r[2])) for r in rows]
    assert all(end - start >= CALL_MS / 1000 * 0.9 for start, end in intervals)
    assert max_overlap(intervals) > 1
    # Overlap on both upstreams at once: some note and some tick were in flight together.
    notes = [iv for r, iv in zip(rows, intervals, strict=True) if r[0] == "notes"]
    ticks = [iv for r, iv in zip(rows, intervals, strict=True) if r[0] == "clock"]
    assert any(n0 < t1 and t0 < n1 for n0, n1 in notes for t0, t1 in ticks)
    # Sequential calls would span at least 20 × 100 ms; the upstreams saw far less.
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    assert span < CALLS * CALL_MS / 1000 / 2, span

    # Failures are is_error results carrying the upstream's text, not protocol errors.
    failed = await run(FAIL[language])
    assert failed.is_error and "notes upstream refused: no such note" in text_of(failed)
    caught = await run(CAUGHT[language])
    assert not caught.is_error and caught.structured_content["result"] == ["caught", "fail"]
    syntax = await run(SYNTAX[language])
    assert syntax.is_error and "syntax" in text_of(syntax).lower()
    direct = await client.call_tool("tick", {"n": 1})
    assert direct.is_error and "run_code" in text_of(direct)

    # Cancellation: the client abandons a run stuck in an upstream call; the upstream
    # sees its call cancelled and the server goes on serving.
    marker = workspace / f"hang-{language}"
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, HANG[language].format(marker=str(marker)))
        with anyio.fail_after(30):
            # Written by the upstream process: polled, no event crosses processes.
            while not marker.exists() or marker.read_text() != "started":  # noqa: ASYNC110
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    with anyio.fail_after(30):
        while marker.read_text() != "cancelled":  # noqa: ASYNC110
            await anyio.sleep(0.05)
    after = await run("return 40 + 2")
    assert not after.is_error and text_of(after) == "42"


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_serve_mcp_over_stdio(tmp_path: Path, language: str) -> None:
    async with over_stdio(tmp_path, language) as client:
        await exercise(client, tmp_path, language)


async def test_serve_mcp_over_streamable_http(tmp_path: Path) -> None:
    with http_process(tmp_path, "python") as url:
        async with Client(url, read_timeout_seconds=60) as client:
            await exercise(client, tmp_path, "python")


async def test_default_max_parallel_lets_twenty_calls_overlap(tmp_path: Path) -> None:
    # One-second calls leave ample time to start all 20 before the first ends: with the
    # default cap (32) every one is in flight at once, by the upstreams' clocks.
    code = (
        "import asyncio\n"
        "rs = await asyncio.gather(*[tools.tick({'n': i, 'ms': 1000}) for i in range(10)],"
        " *[tools['get-note']({'id': i, 'ms': 1000}) for i in range(10)])\n"
        "return [[r['start'], r['end']] for r in rs]"
    )
    async with over_stdio(tmp_path, "python") as client:
        result = await client.call_tool("run_code", {"code": code})
        assert not result.is_error, text_of(result)
        intervals = [(float(s), float(e)) for s, e in result.structured_content["result"]]
        assert max_overlap(intervals) == 20
