"""The terminal tools and the persistent ``bash`` from real programs: a ``PythonRuntime``
and a ``TypeScriptRuntime`` behind ``run_code`` see the canonical values."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_terminal import make_cfg

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolRuntime,
)
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.tools.terminal import TerminalManager, build_persistent_bash, build_terminal_tools

pytestmark = pytest.mark.anyio

LIMITS = Limits(max_compute_ms=10_000, max_wall_ms=30_000)

PYTHON = """
opened = await tools.terminal_open({'type': 'shell', 'name': 'py'})
sid = opened['sessionId']
sent = await tools.terminal_send({'sessionId': sid, 'text': 'echo from-$((6 * 7))'})
page = await tools.terminal_read({'sessionId': sid, 'count': 2})
listed = await tools.terminal_list({})
closed = await tools.terminal_close({'sessionId': sid})
try:
    await tools.terminal_read({'sessionId': sid})
    unknown = None
except ToolCallError as e:
    unknown = e.message
await tools.bash({'command': 'cd /; export V=kept'})
kept = await tools.bash({'command': 'echo "$PWD $V"; false'})
return {'opened': opened, 'sent': sent, 'page': page, 'listed': [s['status'] for s in listed],
        'closed': closed, 'unknown': unknown, 'kept': kept}
"""

TYPESCRIPT = """
const opened = await tools.terminal_open({type: "shell", name: "ts"});
const sid = opened.sessionId;
const sent = await tools.terminal_send({sessionId: sid, text: "echo from-$((6 * 7))"});
const page = await tools.terminal_read({sessionId: sid, count: 2});
const listed = await tools.terminal_list({});
const closed = await tools.terminal_close({sessionId: sid});
let unknown: string | null = null;
try {
  await tools.terminal_read({sessionId: sid});
} catch (e: any) {
  unknown = e.message;
}
await tools.bash({command: "cd /; export V=kept"});
const kept = await tools.bash({command: 'echo "$PWD $V"; false'});
return {opened, sent, page, listed: listed.map((s: any) => s.status), closed, unknown, kept};
"""


@pytest.fixture
async def terminals(tmp_path: Path) -> AsyncIterator[TerminalManager]:
    async with TerminalManager(idle_ms=20_000, work_dir=tmp_path / "terms") as manager:
        yield manager


async def run_program(runtime: Any, code: str, cfg: Any, terminals: TerminalManager) -> Any:
    rt = ToolRuntime(mode="code", code_runtime=runtime)
    for tool in [*build_terminal_tools(cfg, terminals), build_persistent_bash(cfg, terminals)]:
        rt.register(tool)
    agent = rt.scope("agent", session=MemorySessionLog())
    result = await rt.execute(
        ToolExecutionInput(
            call_id="run-1",
            name="run_code",
            arguments={"code": code, "description": "Drive a terminal"},
            signal=AbortController().signal,
            agent=agent,
        )
    )
    assert not result.is_error, result.to_json()
    return result.value["result"]


def check(value: Any, name: str) -> None:
    opened = value["opened"]
    assert opened["sessionId"] == "terminal-1" and opened["name"] == name
    assert opened["type"] == "shell" and opened["motd"] == "$ "
    assert opened["status"] == {"kind": "running"} and isinstance(opened["pid"], int)
    assert value["sent"] == {
        "kind": "foreground",
        "viewport": "echo from-$((6 * 7))\nfrom-42\n$ ",
        "waitReason": "stdin_read",
        "sessionStatus": {"kind": "running"},
        "truncated": False,
    }
    assert value["page"] == {
        "text": "from-42\n$ ",
        "totalLines": 3,
        "lineBegin": 2,
        "lineEnd": 3,
        "truncated": False,
    }
    assert value["listed"] == [{"kind": "running"}]
    assert value["closed"] == {"sessionId": "terminal-1", "outcome": "closed"}
    assert value["unknown"] == "unknown terminal session terminal-1"
    # The persistent bash's value has the one-shot bash's shape (issue 29).
    kept = value["kept"]
    assert (kept["kind"], kept["exitCode"], kept["reset"]) == ("foreground", 1, False)
    assert kept["stdout"] == {"text": "/ kept", "truncated": False}


async def test_from_a_python_program(
    workspace: Path, tmp_path: Path, terminals: TerminalManager
) -> None:
    async with PythonRuntime(LIMITS) as runtime:
        value = await run_program(runtime, PYTHON, make_cfg(workspace, tmp_path), terminals)
    check(value, "py")


async def test_from_a_typescript_program(
    workspace: Path, tmp_path: Path, terminals: TerminalManager
) -> None:
    async with TypeScriptRuntime(LIMITS) as runtime:
        value = await run_program(runtime, TYPESCRIPT, make_cfg(workspace, tmp_path), terminals)
    check(value, "ts")
