"""``serve-mcp --http``: the server's own limits (sessions, body size, idle expiry, programs
per session), a client that disconnects mid-run, and one scope per MCP session: two
concurrent clients see neither each other's jobs, terminals nor files, and a session's
workspace and processes go when it ends. Real server processes, real clients."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from serve_support import INIT, JSON_HEADERS, NOTES, client, http_serve, run, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def open_session(url: str) -> str:
    answer = httpx2.post(url, json=INIT, headers=JSON_HEADERS, timeout=30)
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    assert httpx2.post(url, json=initialized, headers=headers, timeout=30).status_code == 202
    return session


def session_post(url: str, session: str, body: Any) -> httpx2.Response:
    headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    return httpx2.post(url, json=body, headers=headers, timeout=60)


async def test_session_limit_body_limit_and_idle_expiry(tmp_path: Path) -> None:
    with http_serve(
        tmp_path,
        "-u",
        NOTES,
        "--max-sessions",
        "2",
        "--max-body-mb",
        "0.01",
        "--session-idle-s",
        "1.5",
    ) as served:
        first, _second = open_session(served.url), open_session(served.url)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert session_post(served.url, first, listing).status_code == 200
        third = httpx2.post(served.url, json=INIT, headers=JSON_HEADERS, timeout=30)
        assert third.status_code == 503
        assert third.json()["error"]["message"] == "Too many open sessions"
        served.wait_for_log(
            r"refused POST /mcp from 127\.0\.0\.1: 503 too many open sessions "
            r"\(limit 2\)"
        )
        # A body over the limit: a JSON-RPC error naming both sizes, before any parsing.
        big = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "run_code", "arguments": {"code": "x" * 20_000}},
        }
        refused = session_post(served.url, first, big)
        assert refused.status_code == 413
        message = refused.json()["error"]["message"]
        assert (
            message.startswith("request body too large:")
            and "(the limit is 10485 bytes)" in message
        )
        served.wait_for_log(
            r"refused POST /mcp from 127\.0\.0\.1: 413 body of \d+ bytes "
            r"\(limit 10485\)"
        )
        # Idle sessions expire (no request in between: one would keep it alive); their ids
        # then answer 404 and room frees up.
        await served.await_log(rf"session {first[:12]} closed")
        assert session_post(served.url, first, listing).status_code == 404
        served.wait_for_log(r"404 unknown or expired session")
        open_session(served.url)


async def test_programs_per_session_and_per_server_are_bounded(tmp_path: Path) -> None:
    slow = "return await tools.slow({'tag': 'a', 'ms': 2000})"
    with http_serve(
        tmp_path, "-u", NOTES, "--max-runs-per-session", "1", "--max-runs", "2"
    ) as served:
        async with client(served.url, None) as a, client(served.url, None) as b:
            results: list[Any] = []

            async def run_slow(c: Any) -> None:
                results.append(await run(c, slow))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run_slow, a)
                tg.start_soon(run_slow, b)
                await served.await_log(r"session \w+ opened \(2 open\)")
                await anyio.sleep(0.5)
                second = await run(a, "return 1")
                async with client(served.url, None) as c:
                    third = await run(c, "return 1")
            assert second.is_error
            assert "already runs 1 program at once" in text_of(second)
            assert "limit is 1 per session" in text_of(second)
            assert third.is_error
            assert "the server already runs 2 programs at once (its limit is 2)" in text_of(third)
            assert [r.is_error for r in results] == [False, False], [text_of(r) for r in results]
            # Once the first has finished, the session runs programs again.
            assert (await run(a, "return 2")).structured_content["result"] == 2
        log = served.log()
        assert "refused a run_code call (1 already running, limit 1)" in log
        assert "refused a run_code call (2 running on the server, limit 2)" in log


async def test_a_stateless_client_gets_a_scope_per_request(tmp_path: Path) -> None:
    # The 2026-07-28 protocol has no sessions: every request is its own connection, so
    # its own scope, torn down when the request ends (its background jobs included).
    with http_serve(tmp_path, "--builtin-tools", "-w", str(tmp_path)) as served:
        async with client(served.url, None, mode="auto") as c:
            started = await run(
                c,
                "r = await tools.bash({'command': 'echo $$ > stateless.pid; exec sleep 300', "
                "'description': 's', 'run_in_background': True})\n"
                "await tools.bash({'command': 'for i in $(seq 100); do [ -s stateless.pid ] "
                "&& break; sleep 0.1; done', 'description': 'wait for the pid'})\n"
                "return [j['id'] for j in await tools.job_list({})]",
            )
            assert started.structured_content["result"] == ["bash-1"], text_of(started)
            later = await run(c, "return await tools.job_list({})")
            assert later.structured_content["result"] == []
        pid = int((tmp_path / "stateless.pid").read_text())
        with anyio.fail_after(20):
            while _pid_alive(pid):  # noqa: ASYNC110
                await anyio.sleep(0.1)


async def test_a_client_that_disconnects_mid_run_cancels_it_and_its_upstream_call(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "hang-marker"
    with http_serve(tmp_path, "-u", NOTES) as served:
        session = open_session(served.url)
        call = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "run_code",
                "arguments": {"code": f"return await tools.hang({{'marker': {str(marker)!r}}})"},
            },
        }
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        async with httpx2.AsyncClient(timeout=60) as http:
            async with http.stream("POST", served.url, json=call, headers=headers) as response:
                assert response.status_code == 200
                with anyio.fail_after(30):
                    while not marker.exists() or marker.read_text() != "started":  # noqa: ASYNC110
                        await anyio.sleep(0.05)
            # Leaving the stream closes the connection with the run in flight.
        with anyio.fail_after(30):
            while marker.read_text() != "cancelled":  # noqa: ASYNC110
                await anyio.sleep(0.05)
        # The session itself lives on and runs the next program.
        again = {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {"name": "run_code", "arguments": {"code": "return 5"}},
        }
        answer = session_post(served.url, session, again)
        payload = [
            json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")
        ]
        assert payload[-1]["result"]["structuredContent"] == {"logs": [], "result": 5}


# Job and terminal ids count per session ("bash-1", "terminal-1"): a starts two of each and
# b one, so a's second ids exist only in a's session.
JOB = (
    "ids = {'jobs': [], 'terminals': []}\n"
    "for i in range(COUNT):\n"
    "    r = await tools.bash({'command': f'echo $$ > pid-{NAME}-{i}; exec sleep 300', "
    "'description': 'sleep', 'run_in_background': True})\n"
    "    ids['jobs'].append(r['jobId'])\n"
    "    t = await tools.terminal_open({'type': 'shell', 'name': f'{NAME}-{i}'})\n"
    "    ids['terminals'].append(t['sessionId'])\n"
    "await tools.write({'file_path': 'mine.txt', 'content': NAME})\n"
    "ids['listed_jobs'] = [j['id'] for j in await tools.job_list({})]\n"
    "ids['listed_terminals'] = [s['sessionId'] for s in await tools.terminal_list({})]\n"
    "return ids"
)

PEEK = (
    "out = {'jobs': [j['id'] for j in await tools.job_list({})],\n"
    "       'terminals': [s['sessionId'] for s in await tools.terminal_list({})]}\n"
    "for what, call in (('job', lambda: tools.job_output({'job_id': OTHER_JOB})),\n"
    "                   ('terminal', lambda: tools.terminal_read({'sessionId': OTHER_TERM})),\n"
    "                   ('read', lambda: tools.read({'file_path': 'mine.txt'})),\n"
    "                   ('climb', lambda: tools.read({'file_path': '../' + OTHER_KEY + "
    "'/mine.txt'}))):\n"
    "    try:\n"
    "        out[what] = await call()\n"
    "    except ToolCallError as e:\n"
    "        out[what] = 'error: ' + str(e)\n"
    "out['glob'] = await tools.glob({'pattern': '**/*'})\n"
    "return out"
)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_two_clients_see_neither_jobs_terminals_nor_files(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    with http_serve(
        tmp_path, "--builtin-tools", "-w", str(tmp_path), "--workspace-per-session", str(root)
    ) as served:
        async with client(served.url, None) as a, client(served.url, None) as b:
            made_a = await run(a, "NAME = 'alpha'\nCOUNT = 2\n" + JOB)
            made_b = await run(b, "NAME = 'bravo'\nCOUNT = 1\n" + JOB)
            assert not made_a.is_error, text_of(made_a)
            assert not made_b.is_error, text_of(made_b)
            va, vb = made_a.structured_content["result"], made_b.structured_content["result"]
            assert va["listed_jobs"] == va["jobs"] == ["bash-1", "bash-2"]
            assert vb["listed_jobs"] == vb["jobs"] == ["bash-1"]
            assert va["listed_terminals"] == va["terminals"] and len(va["terminals"]) == 2
            assert vb["listed_terminals"] == vb["terminals"] and len(vb["terminals"]) == 1
            dirs = sorted(p.name for p in root.iterdir())
            assert len(dirs) == 2
            key_a = next(d for d in dirs if (root / d / "mine.txt").read_text() == "alpha")
            key_b = next(d for d in dirs if d != key_a)
            assert (root / key_b / "mine.txt").read_text() == "bravo"
            for d in dirs:
                assert (root / d).stat().st_mode & 0o777 == 0o700
            # b asks for a's second job and terminal by id, and a's file by path.
            peek = await run(
                b,
                f"OTHER_JOB = {va['jobs'][1]!r}\nOTHER_TERM = {va['terminals'][1]!r}\n"
                f"OTHER_KEY = {key_a!r}\n" + PEEK,
            )
            assert not peek.is_error, text_of(peek)
            seen = peek.structured_content["result"]
            assert seen["jobs"] == vb["jobs"] and seen["terminals"] == vb["terminals"]
            assert seen["job"].startswith("error:") and "bash-2" in seen["job"]
            assert seen["terminal"].startswith("error: unknown terminal session")
            assert "bravo" in json.dumps(seen["read"])
            assert seen["climb"].startswith("error:")
            assert "alpha" not in json.dumps(seen)
            pids = [int(p.read_text()) for p in (root / key_a).glob("pid-alpha-*")]
            assert len(pids) == 2 and all(_pid_alive(p) for p in pids)
        # Both clients left (DELETE): their sessions end, jobs die, directories go.
        served.wait_for_log(r"\(0 open\)")
        with anyio.fail_after(20):
            while any(_pid_alive(p) for p in pids) or any(root.iterdir()):  # noqa: ASYNC110
                await anyio.sleep(0.1)


async def test_a_kept_workspace_stays_and_a_symlink_swap_deletes_nothing_outside(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("do not delete")
    swap = (
        f'r = await tools.bash({{\'command\': \'d=$PWD; cd ..; mv "$d" "$d.moved"; '
        f"ln -s {outside} \"$d\"; echo swapped', 'description': 'swap'}})\n"
        "return r"
    )
    with http_serve(
        tmp_path, "--builtin-tools", "-w", str(tmp_path), "--workspace-per-session", str(root)
    ) as served:
        async with client(served.url, None) as c:
            result = await run(c, swap)
            assert not result.is_error and "swapped" in text_of(result), text_of(result)
        served.wait_for_log(r"was a symlink; removed the link only")
    assert (outside / "keep.txt").read_text() == "do not delete"
    assert not any(p.is_symlink() for p in root.iterdir())
    with http_serve(
        tmp_path,
        "--builtin-tools",
        "-w",
        str(tmp_path),
        "--workspace-per-session",
        str(root),
        "--keep-session-workspaces",
    ) as served:
        async with client(served.url, None) as c:
            made = await run(c, "await tools.write({'file_path': 'kept.txt', 'content': 'k'})")
            assert not made.is_error, text_of(made)
        served.wait_for_log(r"\(0 open\)")
    assert [p.read_text() for p in root.glob("*/kept.txt")] == ["k"]


async def test_sessions_without_a_per_session_workspace_still_have_private_jobs(
    tmp_path: Path,
) -> None:
    with http_serve(tmp_path, "--builtin-tools", "-w", str(tmp_path)) as served:
        async with client(served.url, None) as a, client(served.url, None) as b:
            todo = await run(
                a,
                "await tools.todo_write({'todos': [{'content': 'x', 'status': 'pending'}]})\n"
                "r = await tools.bash({'command': 'sleep 300', 'description': 's', "
                "'run_in_background': True})\nreturn r['jobId']",
            )
            assert not todo.is_error, text_of(todo)
            listed = await run(b, "return await tools.job_list({})")
            assert listed.structured_content["result"] == []
