"""Ctrl-C, SIGTERM and SIGHUP during ``codemode run``: a quiet exit (130 / 143 / 129, one
line, no traceback from any process) and no process left behind: not the fork server, not
a worker, not a bash call or background job. Real PTYs, real signals, real sandboxes."""

from __future__ import annotations

import os
import platform
import signal
import sys
import time
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parents[2]
# Generous: this waits for the run to reach a point, it does not assert on duration.
_WAIT_S = 60.0

MARK = 'await tools.write({"file_path": "started", "content": "x"})\n'

PY_HOT_LOOP = MARK + "while True:\n    pass\n"
TS_HOT_LOOP = 'await tools.write({file_path: "started", content: "x"});\nwhile (true) {}\n'
PY_SHELL = (
    'await tools.bash({"command": "sleep 987", "description": "bg", "run_in_background": True})\n'
    + MARK
    + 'await tools.bash({"command": "sleep 986", "description": "fg"})\n'
)


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a live process, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every live descendant of ``root``."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                table[int(entry.name)] = stat
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _state, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def _survivors(recorded: dict[int, int]) -> list[str]:
    out = []
    for pid, start in recorded.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[1] != "Z":
            out.append(f"{pid} {_cmdline(pid)}")
    return out


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def _as_from_a_terminal() -> None:
    # A command typed at a terminal starts with SIGINT at its default. A suite started in
    # the background by a non-interactive shell (``make test &``) inherits SIGINT ignored,
    # and Python then installs no KeyboardInterrupt handler: Ctrl-C before the run starts
    # would do nothing. Give the child what a terminal gives it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(program: str, lang: str, tmp_path: Path) -> tuple[pexpect.spawn, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / ("prog.ts" if lang == "typescript" else "prog.py")
    script.write_text(program, encoding="utf-8")
    args = ["-m", "codemode.cli", "run", str(script), "-w", str(workspace)]
    child = pexpect.spawn(
        sys.executable,
        [*args, "--compute-ms", "600000", "--wall-ms", "600000"],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        encoding="utf-8",
        timeout=_WAIT_S,
        preexec_fn=_as_from_a_terminal,
    )
    return child, workspace


def _running_tree(child: pexpect.spawn, workspace: Path, sleeps: int = 0) -> dict[int, int]:
    """Wait until the program is running (its marker file exists, and ``sleeps`` shell
    processes have started), then record the whole process tree under the CLI."""
    _wait_for(lambda: (workspace / "started").exists(), "the program to start")
    _wait_for(
        lambda: sum("sleep 98" in _cmdline(p) for p in _descendants(child.pid)) >= sleeps,
        "the shell commands to start",
    )
    tree = _descendants(child.pid)
    server = [p for p in tree if "codemode.sandbox.worker._forkserver" in _cmdline(p)]
    # The fork server and at least one worker (a fork of it, same command line).
    assert len(server) >= 2, {p: _cmdline(p) for p in tree}
    return tree


def _finish(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return str(child.before)


@pytest.mark.parametrize(
    ("lang", "program", "sleeps"),
    [("python", PY_HOT_LOOP, 0), ("typescript", TS_HOT_LOOP, 0), ("python", PY_SHELL, 2)],
    ids=["python-hot-loop", "typescript-hot-loop", "python-bash-calls"],
)
def test_ctrl_c_exits_130_quietly_and_leaves_no_process(
    lang: str, program: str, sleeps: int, tmp_path: Path
) -> None:
    child, workspace = _spawn(program, lang, tmp_path)
    tree = _running_tree(child, workspace, sleeps)
    child.sendintr()  # the terminal's Ctrl-C: SIGINT to the whole foreground group
    output = _finish(child)
    assert child.exitstatus == 130, output
    assert "Traceback" not in output
    assert [line for line in output.splitlines() if line.strip()][-1] == "codemode: interrupted"
    assert output.count("interrupted") == 1
    assert _survivors(tree) == []


@pytest.mark.parametrize(
    ("signum", "status", "line"),
    [(signal.SIGTERM, 143, "codemode: terminated"), (signal.SIGHUP, 129, "codemode: hung up")],
    ids=["sigterm", "sighup"],
)
def test_sigterm_and_sighup_exit_quietly_and_leave_no_process(
    signum: int, status: int, line: str, tmp_path: Path
) -> None:
    child, workspace = _spawn(PY_SHELL, "python", tmp_path)
    tree = _running_tree(child, workspace, sleeps=2)
    os.kill(child.pid, signum)
    output = _finish(child)
    assert child.exitstatus == status, output
    assert "Traceback" not in output
    assert [text for text in output.splitlines() if text.strip()] == [line]
    assert _survivors(tree) == []


def test_a_second_ctrl_c_during_teardown_is_still_quiet(tmp_path: Path) -> None:
    child, workspace = _spawn(PY_SHELL, "python", tmp_path)
    tree = _running_tree(child, workspace, sleeps=2)
    child.sendintr()
    child.sendintr()
    output = _finish(child)
    assert child.exitstatus == 130, output
    assert "Traceback" not in output
    assert _survivors(tree) == []


def test_background_jobs_die_when_the_run_ends(tmp_path: Path) -> None:
    program = (
        'await tools.bash({"command": "sleep 985", "description": "bg", '
        '"run_in_background": True})\n' + MARK + "return 'left it running'\n"
    )
    child, workspace = _spawn(program, "python", tmp_path)
    _wait_for(lambda: (workspace / "started").exists(), "the program to start")
    # Record the job while the CLI still runs (it may already be gone: the run is short).
    tree = _descendants(child.pid)
    output = _finish(child)
    assert child.exitstatus == 0, output
    assert "left it running" in output
    assert _survivors(tree) == []
    assert not [p for p in _descendants(os.getpid()) if "sleep 985" in _cmdline(p)]


_READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine(), "")


def _spawn_reading_stdin(tmp_path: Path) -> pexpect.spawn:
    """``codemode run -`` waiting for its program on the terminal (the PTY's stdin)."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "codemode.cli", "run", "-", "-w", str(tmp_path)],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        encoding="utf-8",
        timeout=_WAIT_S,
        preexec_fn=_as_from_a_terminal,
    )
    _wait_for(lambda: _reading_stdin(child.pid), "the CLI to read stdin")
    return child


def _reading_stdin(pid: int) -> bool:
    """Blocked in ``read(0, ...)``: past start-up, waiting for the program text."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return fields[:2] == [_READ_SYSCALL, "0x0"]


@pytest.mark.parametrize(
    ("signum", "status", "line"),
    [
        (signal.SIGINT, 130, "codemode: interrupted"),
        (signal.SIGTERM, 143, "codemode: terminated"),
    ],
    ids=["sigint", "sigterm"],
)
@pytest.mark.skipif(not _READ_SYSCALL, reason="read(2)'s syscall number is not known here")
def test_a_signal_while_reading_the_program_is_quiet(
    signum: int, status: int, line: str, tmp_path: Path
) -> None:
    child = _spawn_reading_stdin(tmp_path)
    if signum == signal.SIGINT:
        child.sendintr()
    else:
        os.kill(child.pid, signum)
    output = _finish(child)
    assert child.exitstatus == status, output
    assert "Traceback" not in output and "Aborted" not in output
    assert [text for text in output.splitlines() if text.strip()][-1].endswith(line)
