"""``codemode log SESSION.db``: a real ``codemode run --session`` writes a SQLite session; the command prints its
calls as presentation cards (subprocesses throughout, real sandbox and tools)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROGRAM = """\
await tools.read(file_path="notes.txt")
await tools.write(file_path="new.txt", content="fresh line\\n")
await tools.grep(pattern="needle")
await tools.bash(command="echo out; exit 3", description="print and fail")
return 1
"""


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"},
    )


def codemode_log(*args: str) -> subprocess.CompletedProcess[str]:
    return _run(["-m", "codemode.cli", "log", *args])


@pytest.fixture(scope="module")
def session_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("log")
    ws = base / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("first\na needle here\n")
    db = base / "session.db"
    done = _run(["-m", "codemode.cli", "run", "-", "-w", str(ws), "--session", str(db)], _PROGRAM)
    assert done.returncode == 0, done.stderr
    return db


def test_log_prints_each_call_as_its_card(session_file: Path) -> None:
    done = codemode_log(str(session_file))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # read: the call card's title, the read card's numbered lines.
    assert "Read notes.txt" in out
    assert "2  a needle here" in out
    # write: a diff card, rendered as a unified diff of a new file.
    assert "Write new.txt" in out and "+fresh line" in out and "/dev/null" in out
    # grep: a search card of path:line: text rows.
    assert "notes.txt:2: a needle here" in out
    # bash: a terminal card with its exit code.
    assert "$ echo out; exit 3" in out and "exit code 3" in out
    # Every sub-call names the run_code call it came from.
    assert out.count("in cli-1") == 4


def test_log_json_pairs_calls_with_their_stored_cards(session_file: Path) -> None:
    done = codemode_log(str(session_file), "--json")
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout)["calls"]
    assert [c["name"] for c in calls] == ["read", "write", "grep", "bash"]
    cards = {c["name"]: (c["callCard"]["card"], c["resultCard"]["card"]) for c in calls}
    assert cards == {
        "read": ("generic", "read"),
        "write": ("diff", "diff"),
        "grep": ("generic", "search"),
        "bash": ("terminal", "terminal"),
    }
    bash = calls[3]
    assert bash["resultCard"]["exitCode"] == 3 and bash["parentId"] == "cli-1"


def test_a_call_without_cards_falls_back_to_the_generic_card(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    events = [
        {"type": "tool/call", "callId": "k1", "name": "lookup", "arguments": '{"q": "zebra"}'},
        {
            "type": "tool/result",
            "callId": "k1",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "k1",
                        "content": [{"type": "text", "text": "striped horse"}],
                        "isError": False,
                    }
                ],
            },
        },
    ]
    script = (
        "import sys, json; from codemode.engine import SqliteSessionLog\n"
        "with SqliteSessionLog(sys.argv[1]) as log:\n"
        "    [log.append_now(e) for e in json.loads(sys.stdin.read())]\n"
    )
    assert _run(["-c", script, str(db)], stdin=json.dumps(events)).returncode == 0
    done = codemode_log(str(db))
    assert done.returncode == 0, done.stderr
    assert "lookup" in done.stdout and '"q": "zebra"' in done.stdout
    assert "striped horse" in done.stdout


def test_missing_and_non_session_files_are_usage_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    done = codemode_log(str(missing))
    assert done.returncode == 2
    assert "no such session file" in done.stderr
    assert not missing.exists()  # reading never creates a log

    text = tmp_path / "notes.txt"
    text.write_text("not sqlite at all\n" * 100)
    done = codemode_log(str(text))
    assert done.returncode == 2 and "is not a session log" in done.stderr

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    done = codemode_log(str(other))
    assert done.returncode == 2 and "is not a session log" in done.stderr
    with sqlite3.connect(other) as conn:  # and it was left as it was
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    assert tables == ["t"]


def test_run_session_keeps_the_run_for_codemode_log(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("first\na needle here\n")
    db = tmp_path / "run.db"
    program = 'await tools.read(file_path="notes.txt")\nreturn 1\n'
    for _ in range(2):  # the second run appends to the same file
        done = _run(
            ["-m", "codemode.cli", "run", "-", "-w", str(ws), "--session", str(db), "--json"],
            stdin=program,
        )
        assert done.returncode == 0, done.stderr
        # --json reports this run's events only, however many the file holds.
        events = json.loads(done.stdout)["events"]
        assert [e["type"] for e in events].count("tool/code-dispatch") == 1
    listed = codemode_log(str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert "Read notes.txt" in codemode_log(str(db)).stdout
    calls = json.loads(listed.stdout)["calls"]
    assert [c["name"] for c in calls].count("read") == 2


def test_run_session_refuses_a_path_inside_the_workspace_or_a_directory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    junk = tmp_path / "notes.db"
    junk.write_text("not a database\n")
    cases = {
        str(junk): "notes.db is not a session log: file is not a database",
        str(ws / "s.db"): "is inside the workspace, where the program's file tools could change it",
        str(tmp_path): "is a directory",
        str(tmp_path / "missing" / "s.db"): "not found",
    }
    for path, message in cases.items():
        done = _run(
            ["-m", "codemode.cli", "run", "-", "-w", str(ws), "--session", path], "return 1"
        )
        assert done.returncode == 2
        assert message in done.stderr
        assert not (ws / "s.db").exists()
    assert junk.read_text() == "not a database\n"  # refused, never rewritten
