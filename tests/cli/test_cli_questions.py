"""The CLI's interactive question provider on a real PTY (pexpect), and its refusal on a pipe.

Each test runs a small script that uses ``InteractiveQuestionProvider`` the way the CLI does
and prints what it got back as one ``RESULT``/``ERROR`` line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

SCRIPT = r"""
import json, signal, sys
import anyio
from codemode.cli._questions import InteractiveQuestionProvider
from codemode.engine import AbortController, ToolExecutionInput, ToolRuntime
from codemode.engine.policies import LocalSpillStore
from codemode.tools._config import ToolsConfig
from codemode.tools.fs._paths import Workspace
from codemode.tools.interact import (
    PlanReview, Question, QuestionError, QuestionOption, build_ask_user_question,
)

QUESTIONS = [
    Question(id="db", header="Database", question="Which \x1b]0;pwned\x07 [red]db[/red]?",
             options=(QuestionOption(label="Postgres", description="Mature."),
                      QuestionOption(label="SQLite"))),
    Question(id="langs", question="Which languages?", multi_select=True,
             options=tuple(QuestionOption(label=l) for l in ("Python", "TS", "Go"))),
    Question(id="name", question="Project name?"),
]


def emit(kind, value):
    print(kind, json.dumps(value), flush=True)


async def main():
    provider = InteractiveQuestionProvider()
    scope = ToolRuntime().scope("agent")
    sig = AbortController().signal
    mode = sys.argv[1]
    try:
        if mode == "ask":
            emit("FOR_TERMINAL", InteractiveQuestionProvider.for_terminal() is None)
            answers = await provider.ask(QUESTIONS, scope=scope, signal=sig)
            emit("RESULT", [a.to_value() for a in answers])
        elif mode == "plan":
            review = PlanReview(plan="# Ship\n\n- step **one**\n", title="Ship")
            for _ in range(3):
                try:
                    outcome = await provider.review_plan(review, scope=scope, signal=sig)
                    emit("RESULT", [outcome.decision, outcome.feedback])
                except QuestionError as exc:
                    emit("ERROR", [exc.code, exc.message])
        elif mode == "abort":
            # The real tool over the real provider: SIGUSR1 aborts the call while the user
            # is being asked; the next question must then read fresh input.
            rt = ToolRuntime()
            cfg = ToolsConfig(workspace=Workspace("."), spill_store=LocalSpillStore(sys.argv[2]),
                              output_dir=sys.argv[2])
            rt.register(build_ask_user_question(cfg, provider))
            agent = rt.scope("agent")
            controller = AbortController()
            args = {"questions": [{"id": "name", "question": "Project name?"}]}
            async with anyio.create_task_group() as tg:
                async def on_signal():
                    with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
                        async for _ in signals:
                            controller.abort("interrupted")
                            return
                tg.start_soon(on_signal)
                print("READY", flush=True)
                first = await rt.execute(ToolExecutionInput(
                    call_id="c1", name="ask_user_question", arguments=args,
                    signal=controller.signal, agent=agent))
                emit("ERROR", first.error.message)
                second = await rt.execute(ToolExecutionInput(
                    call_id="c2", name="ask_user_question", arguments=args,
                    signal=AbortController().signal, agent=agent))
                emit("RESULT", second.value)
        elif mode == "pipe":
            emit("FOR_TERMINAL", InteractiveQuestionProvider.for_terminal() is None)
            await provider.ask(QUESTIONS[2:], scope=scope, signal=sig)
    except QuestionError as exc:
        emit("ERROR", [exc.code, exc.message])

anyio.run(main)
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "ask_script.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def spawn(script: Path, *args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        [str(script), *args],
        cwd=str(script.parent),
        dimensions=(60, 200),
        timeout=20,
    )
    return child


def result_line(child: pexpect.spawn, kind: str = "RESULT") -> object:
    child.expect(kind.encode() + rb" (.*?)\r\n")
    return json.loads(child.match.group(1).decode())


def test_choices_multi_select_other_and_free_text(script: Path) -> None:
    child = spawn(script, "ask")
    assert result_line(child, "FOR_TERMINAL") is False
    child.expect_exact(b"Choose 1-3: ")
    shown = child.before
    # The model's text is shown, not acted upon: no escape sequence, no rich markup.
    assert b"\\x1b]0;pwned\\x07 [red]db[/red]?" in shown
    assert b"\x1b]0;pwned" not in shown
    assert b"Database" in shown and b"Postgres" in shown and b"Mature." in shown
    assert "Other…".encode() in shown
    child.sendline("7")
    child.expect_exact(b"Enter a number from 1 to 3.")
    child.expect_exact(b"Choose 1-3: ")
    child.sendline("2")
    child.expect_exact(b"Choose one or more (comma-separated, 1-4): ")
    child.sendline("1, x")
    child.expect_exact(b"Enter numbers separated by commas.")
    child.sendline("3,1,4")
    child.expect_exact(b"Other: ")
    child.sendline("Rust")
    child.expect_exact(b"Your answer: ")
    child.sendline("   ")
    child.expect_exact(b"Please type an answer.")
    child.sendline("zébra")
    assert result_line(child) == [
        {"id": "db", "selected": ["SQLite"]},
        {"id": "langs", "selected": ["Go", "Python"], "custom": "Rust"},
        {"id": "name", "selected": [], "custom": "zébra"},
    ]
    child.expect(pexpect.EOF)


def test_plan_review_keep_planning_dismiss_and_closed_input(script: Path) -> None:
    child = spawn(script, "plan")
    child.expect_exact(b"Plan review: Ship")
    child.expect_exact(b"Choose 1-3: ")
    assert b"step" in child.before and b"Approve" in child.before
    child.sendline("2")
    child.expect_exact(b"Feedback (Enter for none): ")
    child.sendline("more tests")
    assert result_line(child) == ["keep_planning", "more tests"]
    child.expect_exact(b"Choose 1-3: ")
    child.sendline("3")
    assert result_line(child) == ["dismiss", None]
    child.expect_exact(b"Choose 1-3: ")
    child.sendeof()
    assert result_line(child, "ERROR") == [
        "QUESTION_UNAVAILABLE",
        "the user closed the input before reviewing the plan",
    ]
    child.expect(pexpect.EOF)


def test_approve(script: Path) -> None:
    child = spawn(script, "plan")
    child.expect_exact(b"Choose 1-3: ")
    child.sendline("1")
    assert result_line(child) == ["approve", None]
    child.terminate(force=True)


def test_abort_leaves_the_terminal_usable(script: Path, tmp_path: Path) -> None:
    child = spawn(script, "abort", str(tmp_path / "spill"))
    child.expect_exact(b"READY")
    child.expect_exact(b"Your answer: ")
    child.kill(signal.SIGUSR1)
    assert result_line(child, "ERROR") == "ask_user_question was aborted before the user answered"
    child.expect_exact(b"Your answer: ")
    child.sendline("after")
    assert result_line(child) == {"answers": [{"id": "name", "selected": [], "custom": "after"}]}
    child.expect(pexpect.EOF)


def test_refuses_when_stdin_is_not_a_terminal(script: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "pipe"],
        input=b"some piped input\n",
        capture_output=True,
        cwd=script.parent,
        timeout=30,
        check=True,
    )
    lines = proc.stdout.decode().splitlines()
    assert lines[0] == "FOR_TERMINAL true"
    assert lines[1] == "ERROR " + json.dumps(
        [
            "QUESTION_UNAVAILABLE",
            "cannot ask the user: stdin is not a terminal; run codemode from an interactive "
            "terminal (not with piped or redirected stdin) to answer questions, or write the "
            "program so it does not need to ask",
        ]
    )
    # Nothing was prompted.
    assert b"Project name?" not in proc.stderr


def test_visible_neutralises_terminal_tricks() -> None:
    from codemode.cli._questions import visible

    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("ok\rFAKE") == "ok\\x0dFAKE"
    assert visible("\x1b[2J\x9b31m") == "\\x1b[2J\\x9b31m"
    # Right-to-left override and isolates would reorder the text the user reads.
    assert visible("rm \u202e-rf\u2066x\u2069") == "rm \\u202e-rf\\u2066x\\u2069"
    assert visible("zero\u200bwidth") == "zero\\u200bwidth"
    assert visible("café ✓ 日本") == "café ✓ 日本"
