"""``codemode agent`` end to end: a real process, the real model client, a scripted model
server on loopback (tests/agent/model_server.py), real tools and sandboxes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from codemode.engine import SqliteSessionLog
from tests.agent.model_server import Call, Hold, ModelServer, Reply, Status

SECRET = "sk-cli-secret-4242"
# A guard against a hung child, not a measurement.
_WAIT_S = 50.0


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return workspace


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    env.pop("OPENAI_API_KEY", None)
    env.update({"AGENT_TEST_KEY": SECRET, "NO_COLOR": "1", "COLUMNS": "120"}, **extra)
    return env


def _argv(server: ModelServer, ws: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "codemode.cli",
        "agent",
        *args,
        "-w",
        str(ws),
        "--base-url",
        server.base_url,
        "--model",
        "scripted",
        "--api-key-env",
        "AGENT_TEST_KEY",
    ]


def _as_from_a_terminal() -> None:
    # A suite started in the background inherits SIGINT ignored; a terminal's child has it
    # at its default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def _run(argv: list[str], stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=_WAIT_S,
        preexec_fn=_as_from_a_terminal,
    )


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_one_shot_native_task_with_json_events(ws: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.db"
    script = [
        Reply(
            text=["Reading both."],
            calls=[
                Call("c1", "read", ['{"file_', 'path": "notes.txt"}']),
                Call("c2", "glob", ['{"pattern"', ': "*.txt"}']),
            ],
        ),
        Reply(calls=[Call("c3", "write", ['{"file_path": "out.txt", "content": "done\\n"}'])]),
        Reply(text=["All ", "done."]),
    ]
    with ModelServer(script) as server:
        proc = _run(
            _argv(server, ws, "do it", "--mode", "native", "--json", "--session", str(session))
        )
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stdout)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session" and events[0]["path"] == str(session)
    assert kinds[-1] == "turn-end"
    calls = [e for e in events if e["type"] == "tool-call"]
    assert [(c["id"], c["name"]) for c in calls] == [
        ("c1", "read"),
        ("c2", "glob"),
        ("c3", "write"),
    ]
    assert calls[0]["arguments"] == '{"file_path": "notes.txt"}'
    results = [e for e in events if e["type"] == "tool-result"]
    assert [r["isError"] for r in results] == [False, False, False]
    assert "alpha" in results[0]["content"] and "notes.txt" in results[1]["content"]
    assert "".join(e["delta"] for e in events if e["type"] == "text") == "Reading both.All done."
    end = events[-1]
    assert end["reason"] == "done" and end["steps"] == 3
    assert end["usage"]["totalTokens"] == 45 and end["sessionUsage"]["requests"] == 3
    assert (ws / "out.txt").read_text() == "done\n"
    # The key went to the server and nowhere else.
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in proc.stdout + proc.stderr
    stored = SqliteSessionLog.read(session)
    assert SECRET not in json.dumps([_plain(e) for e in stored])
    assert [e["type"] for e in stored].count("tool/result") == 3


def _plain(event: Any) -> Any:
    from codemode.engine.json import thaw

    return thaw(event)


def test_code_mode_typescript_program_and_rich_cards(ws: Path, tmp_path: Path) -> None:
    program = (
        'const seen = await tools.read({file_path: "notes.txt"});\n'
        'await tools.write({file_path: "ts.txt", content: typeof seen});\n'
        'return "written";\n'
    )
    script = [
        Reply(calls=[Call("t1", "run_code", [json.dumps({"code": program, "description": "ts"})])]),
        Reply(text=["Wrote ts.txt\x1b[2J"]),
    ]
    with ModelServer(script) as server:
        proc = _run(
            _argv(server, ws, "go", "--lang", "typescript", "--session", str(tmp_path / "s.db"))
        )
    assert proc.returncode == 0, proc.stderr
    assert (ws / "ts.txt").read_text() == "object"
    first = server.requests[0].body
    assert [t["function"]["name"] for t in first["tools"]] == ["run_code"]
    assert (
        "TypeScript" in first["messages"][0]["content"]
        or "typescript" in first["messages"][0]["content"].lower()
    )
    # Model text is shown, not obeyed: the clear-screen sequence arrives escaped.
    assert "Wrote ts.txt\\x1b[2J" in proc.stdout and "\x1b" not in proc.stdout
    # Cards on stderr: the run_code call and the program's own calls inside it.
    assert "run_code" in proc.stderr and "write" in proc.stderr and "in t1" in proc.stderr
    # The program's calls are drawn inside the run_code card, before its end.
    lines = proc.stderr.splitlines()
    run_end = next(i for i, line in enumerate(lines) if "run_code · ok" in line)
    write_end = next(i for i, line in enumerate(lines) if "write · ok" in line)
    read_end = next(i for i, line in enumerate(lines) if "read · ok" in line)
    assert read_end < write_end < run_end
    assert lines[write_end].lstrip().startswith("│")  # nested: inside the outer border
    assert "done · 2 steps" in proc.stderr


def test_resume_sends_the_earlier_messages(ws: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.db"
    script = [
        Reply(calls=[Call("r1", "read", ['{"file_path": "notes.txt"}'])]),
        Reply(text=["It says alpha."]),
        Reply(text=["Still alpha."]),
    ]
    with ModelServer(script) as server:
        first = _run(
            _argv(server, ws, "what is in notes?", "--mode", "native", "--session", str(session))
        )
        assert first.returncode == 0, first.stderr
        second = _run(
            _argv(server, ws, "and now?", "--mode", "native", "--resume", str(session), "--json")
        )
    assert second.returncode == 0, second.stderr
    recorded = [e for e in SqliteSessionLog.read(session) if e["type"] == "agent/session"]
    assert len(recorded) == 1 and recorded[0]["id"].startswith("ses-")
    assert _events(second.stdout)[0] == {
        "type": "session",
        "id": recorded[0]["id"],
        "path": str(session),
        "restored": 4,
    }
    sent = server.requests[2].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "what is in notes?"
    assert sent[2]["tool_calls"][0]["id"] == "r1"
    assert "alpha" in sent[3]["content"] and sent[4]["content"] == "It says alpha."
    assert sent[5]["content"] == "and now?"
    turns = [e["turn"] for e in SqliteSessionLog.read(session) if e["type"] == "agent/turn-end"]
    assert turns == [1, 2]


def test_ctrl_c_mid_turn_keeps_the_session_and_exits_130(ws: Path, tmp_path: Path) -> None:
    session = tmp_path / "s.db"
    with ModelServer([Hold(text=["Let me think"])]) as server:
        child = subprocess.Popen(
            _argv(
                server, ws, "think hard", "--mode", "native", "--json", "--session", str(session)
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            preexec_fn=_as_from_a_terminal,
        )
        try:
            assert server.holding.wait(_WAIT_S)
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=_WAIT_S)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 130, err
    assert err.strip().endswith("codemode: interrupted") and "Traceback" not in err
    events = _events(out)
    assert events[-1]["type"] == "turn-end" and events[-1]["reason"] == "interrupted"
    stored = [_plain(e) for e in SqliteSessionLog.read(session)]
    messages = [e["message"] for e in stored if e["type"] == "agent/message"]
    assert messages == [
        {"role": "user", "content": "think hard"},
        {"role": "assistant", "content": "Let me think"},
    ]
    assert stored[-1]["type"] == "agent/turn-end" and stored[-1]["reason"] == "interrupted"


def test_interactive_ctrl_c_stops_the_turn_then_exits_at_the_prompt(
    ws: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.db"
    script = [Hold(text=["hmm"]), Reply(text=["second answer"])]
    with ModelServer(script) as server:
        argv = _argv(server, ws, "--mode", "native", "--session", str(session))
        child = pexpect.spawn(
            argv[0],
            argv[1:],
            env=_env(),
            encoding="utf-8",
            timeout=_WAIT_S,
            preexec_fn=_as_from_a_terminal,
        )
        try:
            child.expect("› ")
            child.sendline("first question")
            assert server.holding.wait(_WAIT_S)
            child.sendintr()
            child.expect("turn stopped")
            child.expect("› ")
            child.sendline("second question")
            child.expect("second answer")
            child.expect("› ")
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 130
    sent = server.requests[1].messages
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "first question"),
        ("assistant", "hmm"),
        ("user", "second question"),
    ]


def test_interactive_ctrl_c_stops_a_running_program_and_the_sandbox_still_works(
    ws: Path, tmp_path: Path
) -> None:
    # Ctrl-C at a terminal reaches the whole foreground process group, sandbox included.
    hot = 'await tools.write({"file_path": "started", "content": "x"})\nwhile True:\n    pass\n'
    script = [
        Reply(calls=[Call("h1", "run_code", [json.dumps({"code": hot, "description": "spin"})])]),
        Reply(
            calls=[
                Call("h2", "run_code", [json.dumps({"code": "return 6 * 7", "description": "x"})])
            ]
        ),
        Reply(text=["forty-two"]),
    ]
    with ModelServer(script) as server:
        argv = _argv(server, ws, "--session", str(tmp_path / "s.db"))
        child = pexpect.spawn(
            argv[0],
            argv[1:],
            env=_env(),
            encoding="utf-8",
            timeout=_WAIT_S,
            preexec_fn=_as_from_a_terminal,
        )
        try:
            child.expect("› ")
            child.sendline("spin")
            _wait_for(lambda: (ws / "started").exists(), "the program to start")
            child.sendintr()
            child.expect("turn stopped")
            child.expect("› ")
            child.sendline("compute")
            child.expect("forty-two")
            child.expect("› ")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    tools = [m for m in server.requests[2].messages if m["role"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["h1", "h2"]
    assert tools[0]["content"].startswith("Error: ")
    assert "42" in tools[1]["content"] and not tools[1]["content"].startswith("Error")


def test_interactive_reads_prompts_from_piped_stdin(ws: Path, tmp_path: Path) -> None:
    script = [Reply(text=["one"]), Reply(text=["two"])]
    with ModelServer(script) as server:
        proc = _run(
            _argv(server, ws, "--mode", "native", "--json", "--session", str(tmp_path / "s.db")),
            stdin="first\n\nsecond\n",
        )
    assert proc.returncode == 0, proc.stderr
    ends = [e for e in _events(proc.stdout) if e["type"] == "turn-end"]
    assert [(e["turn"], e["text"]) for e in ends] == [(1, "one"), (2, "two")]
    assert [m["content"] for m in server.requests[1].messages[1:]] == ["first", "one", "second"]


def test_step_limit_fails_the_task(ws: Path, tmp_path: Path) -> None:
    script = [
        Reply(calls=[Call(f"s{i}", "read", ['{"file_path": "notes.txt"}'])]) for i in range(2)
    ]
    with ModelServer(script) as server:
        proc = _run(
            _argv(
                server,
                ws,
                "spin",
                "--mode",
                "native",
                "--max-steps",
                "2",
                "--session",
                str(tmp_path / "s.db"),
            )
        )
    assert proc.returncode == 1
    assert "max_steps · 2 steps" in proc.stderr and "step limit" in proc.stderr
    assert len(server.requests) == 2


def test_usage_errors(ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In process (the command's own code, no interpreter start-up per case).
    from typer.testing import CliRunner

    from codemode.cli import app

    for name in [k for k in os.environ if k.startswith("CODEMODE_") or k == "OPENAI_API_KEY"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AGENT_TEST_KEY", SECRET)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    def usage(server: ModelServer, *args: str, after: tuple[str, ...] = ()) -> str:
        result = CliRunner().invoke(app, [*_argv(server, ws, *args)[3:], *after])
        assert result.exit_code == 2, result.output
        return result.stderr

    with ModelServer([]) as server:
        assert "NOT_SET_ANYWHERE is not set" in usage(
            server, "x", after=("--api-key-env", "NOT_SET_ANYWHERE")
        )
        assert "--mode must be one of" in usage(server, "x", "--mode", "sideways")
        assert "unknown language 'cobol'" in usage(server, "x", "--lang", "cobol")
        assert "inside the workspace" in usage(server, "x", "--session", str(ws / "s.db"))
        assert "no such session file" in usage(server, "x", "--resume", str(tmp_path / "nope.db"))
        other = tmp_path / "other.db"
        assert "name different files" in usage(
            server, "x", "--session", str(other), "--resume", str(tmp_path / "s.db")
        )
        assert "must be an http(s) URL" in usage(
            server, "x", after=("--base-url", "file:///etc/passwd")
        )
    assert server.requests == []
    result = CliRunner().invoke(
        app, ["agent", "x", "-w", str(ws), "--api-key-env", "AGENT_TEST_KEY"]
    )
    assert result.exit_code == 2 and "pass --model NAME or set CODEMODE_MODEL" in result.stderr


def test_no_key_needed_for_a_keyless_server_and_a_401_names_the_variable(
    ws: Path, tmp_path: Path
) -> None:
    argv = [sys.executable, "-m", "codemode.cli", "agent", "hi", "-w", str(ws), "--mode", "native"]
    with ModelServer([Reply(text=["hello"]), Status(401, message="no key")]) as server:
        env = {"CODEMODE_BASE_URL": server.base_url, "CODEMODE_MODEL": "local"}
        ok = _run([*argv, "--session", str(tmp_path / "a.db")], **env)
        refused = _run([*argv, "--session", str(tmp_path / "b.db")], **env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "hello"
    assert server.requests[0].body["model"] == "local"
    assert refused.returncode == 1
    assert "refused the API key (HTTP 401); check $OPENAI_API_KEY (not set)" in refused.stderr
    # A session that never got a model answer leaves no file; one that did is kept.
    assert (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()
    assert f"no model answer: the session file {tmp_path / 'b.db'} was not kept" in refused.stderr


def test_environment_fallbacks_and_unreachable_server(ws: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode.cli",
            "agent",
            "hi",
            "-w",
            str(ws),
            "--mode",
            "native",
            "--max-retries",
            "0",
            "--session",
            str(tmp_path / "s.db"),
        ],
        capture_output=True,
        text=True,
        env=_env(
            OPENAI_API_KEY=SECRET,
            CODEMODE_BASE_URL=f"http://127.0.0.1:{port}/v1",
            CODEMODE_MODEL="m",
        ),
        timeout=_WAIT_S,
    )
    assert proc.returncode == 1
    assert f"cannot reach the model server at http://127.0.0.1:{port}/v1" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert not (tmp_path / "s.db").exists()


def test_a_failed_connection_leaves_no_default_session_behind(ws: Path, tmp_path: Path) -> None:
    with ModelServer([Status(401, message="no key")]) as server:
        proc = _run(_argv(server, ws, "hi", "--mode", "native", "--json"))
    assert proc.returncode == 1
    folder = tmp_path / "state" / "codemode" / "sessions"
    assert sorted(p.name for p in folder.glob("agent-*")) == []
    # Nor in the session index: a search from a later session does not list it.
    from codemode.agent import SessionStore

    assert SessionStore(folder).sessions() == []
    notes = [e["message"] for e in _events(proc.stdout) if e["type"] == "note"]
    assert any(n.startswith("no model answer: the session file ") for n in notes)


def test_default_session_file_is_private_and_named(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with ModelServer([Reply(text=["hi"])]) as server:
        proc = _run(
            _argv(server, ws, "hello", "--mode", "native", "--json"), XDG_STATE_HOME=str(state)
        )
    assert proc.returncode == 0, proc.stderr
    path = Path(_events(proc.stdout)[0]["path"])
    assert path.parent == state / "codemode" / "sessions" and path.exists()
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    # A planted symlink in its place is refused rather than followed.
    planted = tmp_path / "planted"
    planted.mkdir()
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "codemode").mkdir()
    (tmp_path / "evil" / "codemode" / "sessions").symlink_to(planted)
    with ModelServer([Reply(text=["hi"])]) as server:
        refused = _run(
            _argv(server, ws, "hello", "--mode", "native"), XDG_STATE_HOME=str(tmp_path / "evil")
        )
    assert refused.returncode == 2 and "not a directory owned by you" in refused.stderr
    assert list(planted.iterdir()) == [] and server.requests == []


def test_a_whole_turn_runs_without_openai(ws: Path, tmp_path: Path) -> None:
    """The agent's model client is its own: with ``openai`` unimportable the command runs a
    turn (a tool call, then the answer), and neither the SDK nor pydantic is ever loaded."""
    script = [
        Reply(calls=[Call("r1", "read", ['{"file_path": "notes.txt"}'])]),
        Reply(text=["read ", "it"]),
    ]
    with ModelServer(script) as server:
        argv = _argv(server, ws, "read notes.txt", "--json", "--session", str(tmp_path / "s.db"))
        probe = (
            "import atexit, sys; sys.modules['openai'] = None\n"
            "heavy = ('pydantic', 'pygments', 'rich.syntax', 'yaml', 'importlib.metadata')\n"
            "atexit.register(lambda: print('loaded:', [m for m in heavy if m in sys.modules],"
            " sys.modules.get('httpx._main'), file=sys.stderr))\n"
            f"sys.argv = {['codemode', *argv[3:]]!r}\n"
            "from codemode.cli import main\n"
            "main()\n"
        )
        proc = _run([sys.executable, "-c", probe])
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stdout)
    assert [e["name"] for e in events if e["type"] == "tool-call"] == ["read"]
    assert "".join(e["delta"] for e in events if e["type"] == "text") == "read it"
    assert events[-1]["type"] == "turn-end" and events[-1]["reason"] == "done"
    assert len(server.requests) == 2
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    # Start-up (issue 24): no pydantic (typer < 0.29), no httpx CLI (pygments, rich's
    # syntax), no PyYAML without a SKILL.md, no importlib.metadata.
    assert proc.stderr.splitlines()[-1] == "loaded: [] None"


# What a one-shot turn that calls no tool never needs (issue 24, target 8: start-up): rich
# (its output is not a terminal: the CLI writes its plain lines itself, cli/_console.py),
# and the tools' implementations that load on their first call: ripgrep's runner, the
# language servers' JSON-RPC, the web fetch and its HTML conversion.
_NOT_LOADED_BY_A_PLAIN_ONE_SHOT = (
    "rich",
    "codemode.tools.search._rg",
    "codemode.tools.lsp._jsonrpc",
    "codemode.tools.web._client",
    "codemode.tools.web._markdown",
)


def test_a_plain_one_shot_turn_loads_no_rich(ws: Path, tmp_path: Path) -> None:
    """``codemode agent "..."`` with stderr not a terminal and no tool call: the answer on
    stdout, the summary line on stderr, and none of the modules above ever imported."""
    with ModelServer([Reply(text=["all ", "done"])]) as server:
        argv = _argv(server, ws, "say done", "--session", str(tmp_path / "s.db"))
        probe = (
            "import atexit, json, os, sys\n"
            # Forced colour would make stderr a terminal to rich (and rich draw it).
            "os.environ.pop('FORCE_COLOR', None); os.environ.pop('TTY_COMPATIBLE', None)\n"
            f"heavy = {_NOT_LOADED_BY_A_PLAIN_ONE_SHOT!r}\n"
            "atexit.register(lambda: print('loaded:', json.dumps([m for m in heavy"
            " if m in sys.modules]), file=sys.stderr))\n"
            f"sys.argv = {['codemode', *argv[3:]]!r}\n"
            "from codemode.cli import main\n"
            "main()\n"
        )
        proc = _run([sys.executable, "-c", probe])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "all done\n"
    *_, summary, loaded = proc.stderr.splitlines()
    assert summary.startswith("[done · 1 step · ") and summary.endswith(")]"), proc.stderr
    assert loaded == "loaded: []", proc.stderr


def test_both_mode_native_call_then_a_python_program(ws: Path, tmp_path: Path) -> None:
    program = (
        'seen = await tools.glob({"pattern": "*.txt"})\n'
        'await tools.write({"file_path": "both.txt", "content": "from python"})\n'
        "return seen\n"
    )
    script = [
        Reply(calls=[Call("b1", "read", ['{"file_path": "notes.txt"}'])]),
        Reply(calls=[Call("b2", "run_code", [json.dumps({"code": program, "description": "py"})])]),
        Reply(text=["both worked"]),
    ]
    with ModelServer(script) as server:
        proc = _run(
            _argv(
                server, ws, "mix", "--mode", "both", "--json", "--session", str(tmp_path / "s.db")
            )
        )
    assert proc.returncode == 0, proc.stderr
    names = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert {"run_code", "read", "write", "glob"} <= names
    assert (
        "def read" in server.requests[0].messages[0]["content"]
        or "read(" in server.requests[0].messages[0]["content"]
    )
    results = [e for e in _events(proc.stdout) if e["type"] == "tool-result"]
    assert [(r["name"], r["isError"]) for r in results] == [("read", False), ("run_code", False)]
    assert "notes.txt" in results[1]["content"]
    assert (ws / "both.txt").read_text() == "from python"


def test_run_code_arguments_that_are_not_json_are_named_and_the_agent_carries_on(
    ws: Path, tmp_path: Path
) -> None:
    script = [
        Reply(calls=[Call("c1", "run_code", ['{"code": "return 6 * 7" "description": "x"}'])]),
        Reply(
            calls=[
                Call("c2", "run_code", [json.dumps({"code": "return 6 * 7", "description": "x"})])
            ]
        ),
        Reply(text=["42."]),
    ]
    with ModelServer(script) as server:
        proc = _run(_argv(server, ws, "compute", "--json"))
    assert proc.returncode == 0, proc.stderr
    results = [e for e in _events(proc.stdout) if e["type"] == "tool-result"]
    assert results[0]["isError"] is True
    assert results[0]["content"] == (
        "Error: arguments are not valid JSON: Expecting ',' delimiter at line 1 column 25: "
        '{"code": "return 6 * 7" "descrip…'
    )
    assert results[1]["isError"] is False and "42" in results[1]["content"]


def _png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _image_parts(request: Any) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in request.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]


@pytest.mark.parametrize("mode", ["native", "code"])
def test_images_reach_a_model_that_takes_them(ws: Path, tmp_path: Path, mode: str) -> None:
    import base64

    (ws / "dot.png").write_bytes(_png())
    if mode == "native":
        call = Call("i1", "read_image", [json.dumps({"file_path": "dot.png"})])
    else:
        program = "r = await tools.read_image({'file_path': 'dot.png'})\nreturn r['image']['width']"
        call = Call("i1", "run_code", [json.dumps({"code": program, "description": "look"})])
    script = [Reply(calls=[call]), Reply(text=["A red square."])]
    with ModelServer(script) as server:
        proc = _run(_argv(server, ws, "look at dot.png", "--mode", mode, "--images", "--json"))
    assert proc.returncode == 0, proc.stderr
    if mode == "native":
        offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
        assert "read_image" in offered
    expected = "data:image/png;base64," + base64.b64encode(_png()).decode()
    assert _image_parts(server.requests[1]) == [expected]


def test_without_images_read_image_is_not_offered(ws: Path) -> None:
    with ModelServer([Reply(text=["ok"])]) as server:
        proc = _run(_argv(server, ws, "hi", "--mode", "native"))
    assert proc.returncode == 0, proc.stderr
    offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert "read_image" not in offered and "read" in offered
