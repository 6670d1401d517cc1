"""``codemode agent`` with the agent-bound tools (goals, schedules, session queries): a real
process, the real openai client and the scripted loopback model server."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from codemode.engine import SqliteSessionLog
from tests.agent.model_server import Call, Hold, ModelServer, Reply
from tests.cli.test_cli_agent import (
    _WAIT_S,
    _argv,
    _as_from_a_terminal,
    _env,
    _events,
    _run,
    _wait_for,
)


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


def test_a_reminder_fires_in_a_live_interactive_session(ws: Path, tmp_path: Path) -> None:
    create = _args(prompt="check the build", after_seconds=1)
    script = [
        Reply(calls=[Call("s1", "schedule_create", create)]),
        Reply(text=["I will check in a second."]),
        Reply(text=["The build is green."]),
    ]
    with ModelServer(script) as server:
        argv = _argv(server, ws, "--mode", "native", "--json", "--session", str(tmp_path / "s.db"))
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            preexec_fn=_as_from_a_terminal,
        )
        try:
            assert child.stdin is not None
            child.stdin.write("remind me to check the build\n")
            child.stdin.flush()
            # Nothing more is typed: the reminder starts the next turn on its own.
            _wait_for(lambda: len(server.requests) >= 3, "the reminder's turn")
            # End of input (communicate closes stdin): the session ends once the turn has.
            out, err = child.communicate(timeout=_WAIT_S)
        finally:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    events = _events(out)
    assert [e["origin"] for e in events if e["type"] == "turn-start"] == ["user", "schedule"]
    created = json.loads(next(e for e in events if e["type"] == "tool-result")["content"])
    assert created["id"] == "schedule-1" and created["state"] == "scheduled"
    reminder = server.requests[2].messages[-1]
    assert reminder["role"] == "user"
    assert reminder["content"].startswith("[Scheduled reminder]")
    assert '"check the build"' in reminder["content"]
    assert [e["text"] for e in events if e["type"] == "turn-end"][-1] == "The build is green."


def test_overdue_reminders_batch_into_one_turn_on_resume(ws: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.db"
    first = [
        Reply(
            calls=[
                Call("s1", "schedule_create", _args(prompt="water the plants", after_seconds=1)),
                Call("s2", "schedule_create", _args(prompt="stretch", after_seconds=1)),
                Call("s3", "schedule_create", _args(prompt="much later", after_seconds=86400)),
            ]
        ),
        Reply(text=["Three reminders set."]),
    ]
    with ModelServer(first) as server:
        proc = _run(
            _argv(server, ws, "set reminders", "--mode", "native", "--session", str(session))
        )
    assert proc.returncode == 0, proc.stderr
    # Both short reminders come due while no process runs the session.
    _wait_for(lambda: time.time() > _created_at(session) + 1.5, "the reminders to come due")
    second = [
        Reply(calls=[Call("l1", "schedule_list")]),
        Reply(text=["Two are overdue."]),
        Reply(text=["Done both."]),
    ]
    with ModelServer(second) as server:
        proc = _run(
            _argv(server, ws, "what is pending?", "--mode", "native", "--resume", str(session))
        )
        requests = server.requests
    assert proc.returncode == 0, proc.stderr
    listed = json.loads([m for m in requests[1].messages if m["role"] == "tool"][-1]["content"])
    assert [(v["id"], v["state"]) for v in listed] == [
        ("schedule-1", "overdue"),
        ("schedule-2", "overdue"),
        ("schedule-3", "scheduled"),
    ]
    # One batched delivery after the prompt's turn, both overdue reminders in it.
    assert len(requests) == 3
    batch = requests[2].messages[-1]["content"]
    assert batch.startswith("[Scheduled reminders] 2 reminders")
    assert '"water the plants"' in batch and '"stretch"' in batch and "much later" not in batch


def _created_at(session: Path) -> float:
    import datetime

    [first] = [e for e in SqliteSessionLog.read(session) if e["type"] == "agent/schedule-create"][
        :1
    ]
    stamp = str(first["createdAt"]).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp).timestamp()


@pytest.mark.parametrize("mode", ["native", "code"])
def test_session_search_finds_prior_sessions_of_this_workspace_only(
    ws: Path, tmp_path: Path, mode: str
) -> None:
    other = tmp_path / "other-ws"
    other.mkdir()
    # Three earlier sessions here, one in another workspace, all in the default folder.
    for workspace, topic in [
        (ws, "the zebra migration plan"),
        (ws, "lunch options"),
        (ws, "zebra stripes in the logo"),
        (other, "zebra secrets elsewhere"),
    ]:
        with ModelServer([Reply(text=[f"Noted: {topic}."])]) as server:
            done = _run(_argv(server, workspace, f"remember {topic}", "--mode", "native"))
        assert done.returncode == 0, done.stderr
    if mode == "native":
        search = Call("q1", "session_search", _args(query="zebra"))
    else:
        search = Call(
            "q1",
            "run_code",
            _args(
                description="search",
                code="return await tools.session_search(query='zebra')",
            ),
        )
    with ModelServer([Reply(calls=[search]), Reply(text=["Found two."])]) as server:
        proc = _run(_argv(server, ws, "what did we say about zebras?", "--mode", mode, "--json"))
    assert proc.returncode == 0, proc.stderr
    # (A string result of run_code renders verbatim: both modes show the same text.)
    result = next(e for e in _events(proc.stdout) if e["type"] == "tool-result")["content"]
    assert result.startswith("Session search results (2):\n\n1. Session ses-")
    assert "zebra migration plan" in result and "zebra stripes in the logo" in result
    assert "lunch" not in result and "elsewhere" not in result
    assert "   Availability: persisted" in result and "   Parent: root" in result


def test_foreground_subagent_and_ralph_through_codemode_agent(ws: Path, tmp_path: Path) -> None:
    report = {
        "status": "complete",
        "summary": "all green",
        "evidence": ["tests pass"],
        "nextSteps": [],
        "blocker": None,
    }
    script = [
        Reply(calls=[Call("s1", "subagent", _args(description="look", prompt="CHILD-X: look"))]),
        Reply(calls=[Call("r1", "ralph", _args(objective="make it green", maxRounds=2))]),
        Reply(text=["Both done."]),
    ]
    with ModelServer(
        script,
        by_prompt={
            "CHILD-X": [Reply(text=["I looked: fine."])],
            "Ralph round 1 ": [Reply(text=[f"```json\n{json.dumps(report)}\n```"])],
        },
    ) as server:
        proc = _run(_argv(server, ws, "check the project", "--mode", "native", "--json"))
    assert proc.returncode == 0, proc.stderr
    results = [e["content"] for e in _events(proc.stdout) if e["type"] == "tool-result"]
    assert results[0] == "I looked: fine."
    assert results[1].startswith("Ralph worker reported completion after 1 round.")
    # Children's sessions live in the session folder, parented to this session.
    folder = tmp_path / "state" / "codemode" / "sessions"
    children = sorted(folder.glob("ses-*.db"))
    assert len(children) == 2
    session_id = _events(proc.stdout)[0]["id"]
    # The children's turns show in the stream, named by child and parent.
    child_events = [e for e in _events(proc.stdout) if e["type"] == "subagent"]
    assert {e["parentId"] for e in child_events} == {session_id}
    assert len({e["agentId"] for e in child_events}) == 2
    assert [e["event"]["type"] for e in child_events].count("turn-end") == 2
    for child in children:
        info = next(e for e in SqliteSessionLog.read(child) if e["type"] == "agent/session")
        assert info["parentId"] == session_id


def test_continuable_subagents_take_messages_and_report(ws: Path, tmp_path: Path) -> None:
    def child_id(body: dict[str, object]) -> str:
        messages = body["messages"]
        assert isinstance(messages, list)
        started = next(m["content"] for m in messages if m["role"] == "tool")
        return str(started).rsplit(" ", 1)[-1]

    script: list[object] = [
        Reply(calls=[Call("s1", "subagent", _args(description="helper", prompt="CHILD-Y: a"))]),
        Reply(text=["Started."]),
        # The child's first turn ended: message it.
        lambda body: Reply(
            calls=[Call("m1", "send_message", _args(subagent_id=child_id(body), message="b"))]
        ),
        Reply(text=["Sent."]),
        Reply(text=["Heard back."]),
        Reply(text=["All in."]),
    ]
    with ModelServer(
        script,  # type: ignore[arg-type]
        by_prompt={
            "CHILD-Y": [
                Reply(text=["a done"]),
                Reply(calls=[Call("r1", "report", _args(output="b is done"))]),
                Reply(text=["finished b"]),
            ]
        },
    ) as server:
        proc = _run(
            _argv(
                server, ws, "delegate", "--mode", "native", "--subagents", "continuable", "--json"
            )
        )
        requests = server.requests_for("delegate")
    assert proc.returncode == 0, proc.stderr
    heard = "\n".join(
        str(m["content"]) for r in requests for m in r.messages if m["role"] == "user"
    )
    assert "finished its turn: completed]\na done" in heard
    assert "b is done" in heard and "finished b" in heard


_FAN_OUT = """
phase("Scan");
const schema = {type: "object", required: ["file", "lines"], additionalProperties: false,
                properties: {file: {type: "string"}, lines: {type: "integer"}}};
const rows = await pipeline(args.files, (f) => agent(`AUDIT ${f}`, {schema, label: f}));
phase("Sum");
return {files: rows.filter(Boolean).length, lines: rows.reduce((n, r) => n + r.lines, 0)};
"""


def _auditor(body: dict[str, object]) -> Reply:
    """A child that writes its note into the shared workspace, then answers in JSON."""
    messages = body["messages"]
    assert isinstance(messages, list)
    task = str(next(m["content"] for m in messages if m["role"] == "user"))
    name = task.split()[1]
    if not any(m["role"] == "tool" for m in messages):
        note = _args(file_path=f"notes/{name}.txt", content=f"audited {name}\n")
        return Reply(calls=[Call("w", "write", note)])
    return Reply(text=[f'```json\n{{"file": "{name}", "lines": {len(name)}}}\n```'])


@pytest.mark.parametrize("as_json", [True, False])
def test_workflow_fans_out_over_20_children_with_a_schema(ws: Path, as_json: bool) -> None:
    files = [f"f{i:02d}" for i in range(20)]
    meta = {
        "name": "audit-all",
        "description": "Audit each file.",
        "phases": [{"title": "Scan", "detail": "one child per file"}, {"title": "Sum"}],
    }
    call = Call("w1", "workflow", _args(script=_FAN_OUT, meta=meta, args={"files": files}))
    with ModelServer(
        [Reply(calls=[call]), Reply(text=["All audited."])],
        by_prompt={"AUDIT ": [_auditor] * 40},
    ) as server:
        argv = _argv(server, ws, "audit everything", "--mode", "native")
        proc = _run([*argv, "--json"] if as_json else argv)
    assert proc.returncode == 0, proc.stderr
    # The children worked in the parent's workspace.
    assert sorted(p.name for p in (ws / "notes").iterdir()) == [f"{f}.txt" for f in files]
    if not as_json:
        assert "workflow audit-all: phase Scan — one child per file" in proc.stderr
        assert "workflow audit-all: agent f19 done" in proc.stderr
        assert "workflow audit-all: completed (0 running · 20 done · 0 failed · 20 started)" in (
            proc.stderr
        )
        return
    events = _events(proc.stdout)
    result = next(e["content"] for e in events if e["type"] == "tool-result")
    assert result == (
        'workflow "audit-all" completed (20 agents).\nReturn value:\n'
        '{\n  "files": 20,\n  "lines": 60\n}'
    )
    progress = [e for e in events if e["type"] == "workflow"]
    assert [e["title"] for e in progress if e["event"] == "phase"] == ["Scan", "Sum"]
    # The default cap: at most 8 children at once, and more than one at a time.
    assert 1 < max(e["running"] for e in progress) <= 8
    assert progress[-1]["event"] == "end" and progress[-1]["done"] == 20
    children = {e["agentId"] for e in events if e["type"] == "subagent"}
    assert len(children) == 20


def _tool_texts(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def _last_user(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return str([m for m in messages if m["role"] == "user"][-1]["content"])


def test_nested_subagents_with_an_interrupt_and_a_message(ws: Path) -> None:
    """A parent starts child A, A starts grandchild B (which hangs in its model call); the
    parent lists the whole tree, interrupts B only, and messages A, which answers."""

    def started(body: dict[str, object], n: int = 0) -> str:
        return _tool_texts(body)[n].rsplit(" ", 1)[-1]

    def grandchild_id(body: dict[str, object]) -> str:
        listing = _tool_texts(body)[-1]
        line = next(x for x in listing.splitlines() if "depth=2" in x)
        return line.split(" ", 1)[0]

    parent: list[object] = [
        Reply(calls=[Call("s1", "subagent", _args(description="a", prompt="CHILD-A: go"))]),
        Reply(text=["Started A."]),
        # A's first turn ended (it started B): look at the whole tree.
        Reply(calls=[Call("l1", "list_agents", _args(scope="descendants"))]),
        lambda body: Reply(
            calls=[Call("i1", "interrupt_agent", _args(agent_id=grandchild_id(body)))]
        ),
        lambda body: Reply(
            calls=[Call("m1", "send_message", _args(subagent_id=started(body), message="wrap up"))]
        ),
        *[Reply(text=["Noted."]) for _ in range(6)],
    ]
    child_a: list[object] = [
        Reply(calls=[Call("s2", "subagent", _args(description="b", prompt="CHILD-B: hang"))]),
        Reply(text=["started B"]),
        *[
            lambda body: Reply(
                text=["wrapped up" if "wrap up" in _last_user(body) else "B is stopped"]
            )
            for _ in range(4)
        ],
    ]
    with ModelServer(
        parent,  # type: ignore[arg-type]
        by_prompt={"CHILD-A": child_a, "CHILD-B": [Hold(text=["thinking"])]},  # type: ignore[dict-item]
    ) as server:
        proc = _run(
            _argv(
                server,
                ws,
                "delegate nested",
                "--mode",
                "native",
                "--subagents",
                "continuable",
                "--json",
            )
        )
        dropped = server.dropped.is_set()
        heard = "\n".join(
            m for r in server.requests_for("delegate nested") for m in _tool_texts(r.body)
        )
        parent_users = "\n".join(_last_user(r.body) for r in server.requests_for("delegate nested"))
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stdout)
    results = [e for e in events if e["type"] == "tool-result"]
    listing = next(e["content"] for e in results if e["name"] == "list_agents")
    lines = listing.splitlines()
    assert len(lines) == 2
    a_id, b_id = lines[0].split(" ", 1)[0], lines[1].split(" ", 1)[0]
    assert " depth=1 " in lines[0] and f"parent={a_id}" in lines[1] and "[running]" in lines[1]
    assert f"interrupt requested for agent {b_id}" in heard
    assert f"message queued as the next turn for subagent {a_id}" in heard
    # B's model stream was closed by the interrupt; A lived on and answered the message.
    assert dropped
    assert "wrapped up" in parent_users


def _late_child(answer: str, delay_s: float) -> object:
    """A child's reply that comes ``delay_s`` after its request: the parent's turn ends
    first."""

    def reply(body: dict[str, object]) -> Reply:
        time.sleep(delay_s)
        return Reply(text=[answer])

    return reply


def test_one_shot_task_waits_for_a_background_subagent_job(ws: Path, tmp_path: Path) -> None:
    start = _args(description="look", prompt="CHILD-BG: look", run_in_background=True)
    script: list[object] = [
        Reply(calls=[Call("s1", "subagent", start)]),
        Reply(text=["Started it."]),
        # The completion notice wakes the parent: it reads the job and answers.
        Reply(calls=[Call("o1", "job_output", _args(job_id="subagent-1"))]),
        Reply(text=["The child found it."]),
    ]
    with ModelServer(script, by_prompt={"CHILD-BG": [_late_child("child answer", 1.5)]}) as server:  # type: ignore[list-item]
        proc = _run(_argv(server, ws, "delegate", "--mode", "native", "--json"))
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stdout)
    kinds = [
        ("parent" if e["type"] == "turn-end" else "child")
        for e in events
        if e["type"] == "turn-end" or (e["type"] == "subagent" and e["event"]["type"] == "turn-end")
    ]
    # The parent's first turn ended before the child's, then the notice's turn after it.
    assert kinds == ["parent", "child", "parent"]
    assert (
        "codemode: waiting for background subagent job subagent-1 (look) to finish before "
        "exiting (Ctrl-C stops it)" in proc.stderr
    )
    parent_requests = [r for r in server.requests if r not in server.requests_for("CHILD-BG")]
    notice = next(
        m["content"]
        for m in parent_requests[2].messages
        if m["role"] == "user" and "background job" in str(m["content"])
    )
    assert "background job subagent-1 (subagent: look) finished [status: completed]" in notice
    results = [e for e in events if e["type"] == "tool-result"]
    assert results[-1]["content"].startswith("child answer")
    # The child's answer is in its own session file, its turn ended normally.
    folder = tmp_path / "state" / "codemode" / "sessions"
    (child,) = sorted(folder.glob("ses-*.db"))
    stored = SqliteSessionLog.read(child)
    ends = [e for e in stored if e["type"] == "agent/turn-end"]
    assert [e["reason"] for e in ends] == ["done"]
    said = [e["message"]["content"] for e in stored if e["type"] == "agent/message"]
    assert said[-1] == "child answer"


def test_ctrl_c_while_waiting_for_a_background_subagent_stops_it(ws: Path, tmp_path: Path) -> None:
    start = _args(description="slow", prompt="CHILD-HOLD: work", run_in_background=True)
    script = [Reply(calls=[Call("s1", "subagent", start)]), Reply(text=["Started."])]
    err_path = tmp_path / "stderr.txt"
    with (
        ModelServer(script, by_prompt={"CHILD-HOLD": [Hold(text=["thinking"])]}) as server,
        err_path.open("w") as err_file,
    ):
        child = subprocess.Popen(
            _argv(server, ws, "delegate", "--mode", "native", "--json"),
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            env=_env(),
            preexec_fn=_as_from_a_terminal,
        )
        try:
            _wait_for(lambda: "waiting for" in err_path.read_text(), "the waiting line")
            # The child's model request may still be on its way when the parent waits.
            assert server.holding.wait(_WAIT_S)
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=_WAIT_S)
            # The child's model stream was cut, not left to finish.
            assert server.dropped.wait(_WAIT_S)
        finally:
            if child.poll() is None:
                child.kill()
    err = err_path.read_text()
    assert child.returncode == 130, err
    assert err.strip().endswith("codemode: interrupted") and "Traceback" not in err
    assert [e["type"] for e in _events(out)].count("turn-end") == 1


def test_the_waiting_line_without_json(ws: Path) -> None:
    start = _args(description="look", prompt="CHILD-BG2: look", run_in_background=True)
    script: list[object] = [
        Reply(calls=[Call("s1", "subagent", start)]),
        Reply(text=["Started it."]),
        Reply(text=["Heard it."]),
    ]
    with ModelServer(
        script,  # type: ignore[arg-type]
        by_prompt={"CHILD-BG2": [_late_child("done", 1.0)]},  # type: ignore[list-item]
    ) as server:
        proc = _run(_argv(server, ws, "delegate", "--mode", "native"))
    assert proc.returncode == 0, proc.stderr
    assert (
        "codemode: waiting for background subagent job subagent-1 (look) to finish before "
        "exiting (Ctrl-C stops it)" in proc.stderr
    )
    assert proc.stdout.strip().endswith("Heard it.")
