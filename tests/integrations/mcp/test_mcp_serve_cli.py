"""End to end: ``codemode serve-mcp`` as a subprocess fronting two upstream stdio servers
(tests/integrations/mcp/upstream_server.py), driven by the official MCP client over stdio
(Python and TypeScript programs) and over streamable HTTP on loopback."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_support import UPSTREAM_SCRIPT, max_overlap

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

UPSTREAMS = [
    "-u",
    f"{sys.executable} {UPSTREAM_SCRIPT} notes",
    "-u",
    f"{sys.executable} {UPSTREAM_SCRIPT} tasks",
]


def serve_args(*extra: str) -> list[str]:
    return ["-m", "codemode.cli", "serve-mcp", *UPSTREAMS, *extra]


@contextlib.asynccontextmanager
async def stdio_client(tmp_path: Path, *extra: str, mode: str = "auto") -> AsyncIterator[Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_args("--workspace", str(tmp_path), *extra),
        env=dict(os.environ),
    )
    async with Client(params, mode=mode, read_timeout_seconds=40) as client:
        yield client


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


async def run(client: Any, code: str) -> Any:
    return await client.call_tool("run_code", {"code": code, "description": "Test program"})


FAN_OUT = {
    "python": (
        "import asyncio\n"
        "rs = await asyncio.gather(*[tools.notes__slow({'tag': str(i), 'ms': 100}) for i in range(20)])\n"
        "return [[r['start'], r['end']] for r in rs]"
    ),
    "typescript": (
        "const rs = await Promise.all(Array.from({length: 20}, (_, i) =>"
        " tools.notes__slow({tag: String(i), ms: 100})));\n"
        "return rs.map(r => [r.start, r.end]);"
    ),
}


def assert_overlapped(result: Any) -> None:
    assert not result.is_error, text_of(result)
    intervals = [tuple(pair) for pair in result.structured_content["result"]]
    assert len(intervals) == 20
    # The upstream's own clock: calls were in flight at the same time.
    assert max_overlap(intervals) > 1


@pytest.mark.parametrize("language", ["python", "typescript"])
async def test_stdio_end_to_end(tmp_path: Path, language: str) -> None:
    async with stdio_client(tmp_path, "--lang", language) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["run_code"]
        description = tools[0].description
        # Both upstreams list "slow" and "env": mangled; the rest keep their names.
        for name in ("notes__slow", "tasks__slow", "get-note", "count_words", "fail"):
            assert name in description
        assert_overlapped(await run(client, FAN_OUT[language]))
        if language == "python":
            code = (
                "n = await tools['get-note']({'id': 5})\n"
                "w = await tools.count_words({'text': 'one two three'})\n"
                "return [n['title'], w]"
            )
        else:
            code = (
                'const n = await tools["get-note"]({id: 5});\n'
                'const w = await tools.count_words({text: "one two three"});\n'
                "return [n.title, w];"
            )
        both = await run(client, code)
        assert not both.is_error, text_of(both)
        assert both.structured_content["result"] == ["note 5", 3]
        failed = await run(
            client,
            "return await tools.fail({reason: 'why'})"
            if language == "typescript"
            else "return await tools.fail({'reason': 'why'})",
        )
        assert failed.is_error and "upstream refused: why" in text_of(failed)
        bad = await run(client, "this is not a program (")
        assert bad.is_error and "syntax" in text_of(bad)


async def test_stdio_cancellation_reaches_the_upstream(tmp_path: Path) -> None:
    marker = tmp_path / "hang-marker"
    async with stdio_client(tmp_path) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, client, f"return await tools.hang({{'marker': {str(marker)!r}}})")
            with anyio.fail_after(30):
                # The marker is written by the upstream process: polled, no event crosses.
                while not marker.exists() or marker.read_text() != "started":  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.fail_after(30):
            while marker.read_text() != "cancelled":  # noqa: ASYNC110
                await anyio.sleep(0.05)
        after = await run(client, "return 40 + 2")
        assert not after.is_error and text_of(after) == "42"


async def test_parallel_read_only_and_tool_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "timeout-hang"
    async with stdio_client(
        tmp_path, "--parallel", "read-only", "--tool-timeout-ms", "300"
    ) as client:
        timed_out = await run(client, f"return await tools.hang({{'marker': {str(marker)!r}}})")
        assert timed_out.is_error and "timed out after 300ms" in text_of(timed_out)
        code = (
            "import asyncio\n"
            "rs = await asyncio.gather(*[tools.notes__slow({'tag': str(i), 'ms': 30}) for i in range(4)])\n"
            "return [[r['start'], r['end']] for r in rs]"
        )
        result = await run(client, code)
        assert not result.is_error, text_of(result)
        assert max_overlap([tuple(p) for p in result.structured_content["result"]]) == 1


async def test_both_mode_and_builtin_tools(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    async with stdio_client(tmp_path, "--mode", "both", "--builtin-tools") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"run_code", "get-note", "notes__slow", "read", "bash"} <= names
        note = await client.call_tool("get-note", {"id": 9})
        assert not note.is_error and note.structured_content == {
            "id": 9,
            "title": "note 9",
            "tags": ["t"],
        }
        # serve-mcp's default cap (32) is above the engine's 10: 12 one-second calls all
        # overlap (by the upstream's clock).
        wide = await run(
            client,
            "import asyncio\n"
            "rs = await asyncio.gather(*[tools.tasks__slow({'tag': str(i), 'ms': 1000})"
            " for i in range(12)])\n"
            "return [[r['start'], r['end']] for r in rs]",
        )
        assert not wide.is_error, text_of(wide)
        assert max_overlap([tuple(p) for p in wide.structured_content["result"]]) == 12
        read = await run(client, "r = await tools.read({'file_path': 'hello.txt'})\nprint(r)")
        assert not read.is_error and "hi there" in text_of(read)


@contextlib.contextmanager
def http_server(tmp_path: Path, *extra: str) -> Iterator[str]:
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                *serve_args("--http", "127.0.0.1:0", "--workspace", str(tmp_path), *extra),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        url = None
        for _ in range(600):  # up to 30 s for the sandbox and both upstreams to start
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", log.read_text())
            if found:
                url = found.group(1)
                break
            if proc.poll() is not None:
                break
            import time

            time.sleep(0.05)
        assert url is not None, log.read_text()
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # Nothing but the protocol may reach stdout, and over HTTP there is none.
        assert proc.stdout is not None
        assert proc.stdout.read() == b""
        proc.stdout.close()


async def test_streamable_http_end_to_end(tmp_path: Path) -> None:
    with http_server(tmp_path, "--lang", "typescript") as url:
        async with Client(url, read_timeout_seconds=40) as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["run_code"]
            assert_overlapped(await run(client, FAN_OUT["typescript"]))
            failed = await run(client, "return await tools.nope({});")
            assert failed.is_error and "nope" in text_of(failed)
            # Cancelling over HTTP reaches the upstream too.
            marker = tmp_path / "http-hang"
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, client, f"return await tools.hang({{marker: {str(marker)!r}}});")
                with anyio.fail_after(30):
                    while not marker.exists() or marker.read_text() != "started":  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            with anyio.fail_after(30):
                while marker.read_text() != "cancelled":  # noqa: ASYNC110
                    await anyio.sleep(0.05)


def test_usage_errors_exit_2_without_touching_stdout(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, *serve_args("--lang", "cobol")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown language 'cobol'" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "codemode.cli", "serve-mcp", "-u", "x", "--http", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--http expects HOST:PORT" in proc.stderr


def test_an_upstream_that_will_not_start_exits_1_naming_it() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode.cli",
            "serve-mcp",
            "-u",
            f"broken={sys.executable} -c 'import sys; sys.exit(3)'",
            "--http",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert 'cannot connect to upstream "broken"' in proc.stderr


def test_stdout_carries_only_json_rpc(tmp_path: Path) -> None:
    import json

    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "run_code",
                "arguments": {
                    "code": "print('to the logs, not stdout')\nreturn await tools.count_words("
                    "{'text': 'a b'})",
                    "description": "Print and count",
                },
            },
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, *serve_args("--workspace", str(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: list[dict[str, Any]] = []
    for request in requests:
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        if "id" in request:
            # Each line on stdout must be one JSON-RPC message; read until this reply.
            while True:
                line = proc.stdout.readline()
                assert line, proc.stderr.read() if proc.stderr else ""
                message = json.loads(line)
                assert message["jsonrpc"] == "2.0"
                replies.append(message)
                if message.get("id") == request["id"]:
                    break
    proc.stdin.close()
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert rest == ""  # nothing after the last reply either
    proc.stdout.close()
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert "codemode serve-mcp: 8 tools from 2 upstreams" in err
    # The tool whose schema cannot be represented is left out, by name, and the rest serve.
    assert 'skipped: MCP tool "odd": cannot import its schema: keyword "not"' in err
    proc.stderr.close()
    by_id = {m["id"]: m for m in replies if "id" in m}
    assert [t["name"] for t in by_id[2]["result"]["tools"]] == ["run_code"]
    call = by_id[3]["result"]
    assert call["isError"] is False
    assert call["content"][0]["text"] == "to the logs, not stdout\n2"
