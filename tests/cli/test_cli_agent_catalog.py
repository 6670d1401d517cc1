"""``codemode agent`` with the agent-bound tools (goals, schedules, session queries): a real
process, the real openai client and the scripted loopback model server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.engine import SqliteSessionLog
from tests.agent.model_server import Call, ModelServer, Reply
from tests.cli.test_cli_agent import _argv, _events, _run


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "todo.txt").write_text("1. write docs\n", encoding="utf-8")
    return workspace


def _args(**values: object) -> list[str]:
    return [json.dumps(values)]


@pytest.mark.parametrize("mode", ["native", "code"])
def test_one_shot_goal_runs_rounds_to_completion(ws: Path, tmp_path: Path, mode: str) -> None:
    complete = _args(goal_id="goal-1", revision=1, action="complete")
    if mode == "native":
        create = Call("c1", "create_goal", _args(objective="finish the todo list"))
        work = Call("c2", "write", _args(file_path="done.txt", content="done\n"))
        finish = Call("c3", "update_goal", complete)
    else:
        work = Call(
            "c2",
            "run_code",
            _args(
                description="work",
                code="return await tools.write(file_path='done.txt', content='done\\n')",
            ),
        )
        create = Call(
            "c1",
            "run_code",
            _args(
                description="set the goal",
                code="return await tools.create_goal(objective='finish the todo list')",
            ),
        )
        finish = Call(
            "c3",
            "run_code",
            _args(
                description="complete it",
                code=(
                    "g = (await tools.get_goal())['goal']\n"
                    "return await tools.update_goal("
                    "goal_id=g['id'], revision=g['revision'], action='complete')"
                ),
            ),
        )
    script = [
        Reply(calls=[create]),
        Reply(text=["Goal set."]),
        Reply(calls=[work]),
        Reply(text=["Wrote it."]),
        Reply(calls=[finish]),
        Reply(text=["The todo list is finished."]),
    ]
    session = tmp_path / "s.db"
    with ModelServer(script) as server:
        proc = _run(
            _argv(
                server,
                ws,
                "work through todo.txt",
                "--mode",
                mode,
                "--session",
                str(session),
                "--json",
            )
        )
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stdout)
    ends = [e for e in events if e["type"] == "turn-end"]
    assert [e["reason"] for e in ends] == ["done", "done", "done"]
    starts = [e["origin"] for e in events if e["type"] == "turn-start"]
    assert starts == ["user", "goal", "goal"]
    goals = [e for e in events if e["type"] == "goal"]
    assert [g["goal"]["phase"] for g in goals] == ["active", "active", "active", "complete"]
    assert goals[-1]["activation"] == "disarmed"
    assert (ws / "done.txt").read_text() == "done\n"
    # The round prompt reached the model as a context message.
    assert server.requests[2].messages[-1]["content"].startswith("[goal round 1 of 20]")
    assert ends[-1]["text"] == "The todo list is finished."
    stored = [e for e in SqliteSessionLog.read(session) if e["type"] == "agent/goal"]
    assert stored[-1]["goal"]["phase"] == "complete"


def test_typescript_program_reads_and_sets_the_goal(ws: Path, tmp_path: Path) -> None:
    program = (
        "const made = await tools.create_goal({objective: 'ship 1.0', max_goal_rounds: 1});\n"
        "const read = await tools.get_goal({});\n"
        "return [made.goal.id, read.goal.maxGoalRounds, read.activation];"
    )
    script = [
        Reply(calls=[Call("c1", "run_code", _args(description="goal", code=program))]),
        Reply(text=["Set."]),
        Reply(text=["Round one."]),
    ]
    with ModelServer(script) as server:
        proc = _run(
            _argv(
                server,
                ws,
                "ship it",
                "--mode",
                "both",
                "--lang",
                "typescript",
                "--session",
                str(tmp_path / "s.db"),
                "--json",
            )
        )
    assert proc.returncode == 0, proc.stderr
    results = [e for e in _events(proc.stdout) if e["type"] == "tool-result"]
    assert json.loads(results[0]["content"]) == ["goal-1", 1, "armed"]
    # Both mode: the native goal tools are offered next to run_code.
    names = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert {"run_code", "create_goal", "get_goal", "update_goal"} <= names
    goals = [e for e in _events(proc.stdout) if e["type"] == "goal"]
    assert goals[-1]["goal"]["blockedReason"]["code"] == "max_goal_rounds"
