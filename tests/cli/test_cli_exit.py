"""How the ``codemode`` process ends (``cli._leave``): as the interpreter would, minus
its teardown. Real processes; the observables are exit codes, streams and handlers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cli(prelude: str, *argv: str) -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nimport sys\nsys.argv = ['codemode', *{list(argv)!r}]\nfrom codemode.cli import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_exit_codes_and_both_streams_arrive_whole() -> None:
    full = _cli("", "sdk")
    assert full.returncode == 0, full.stderr
    # The SDK section is tens of kilobytes: every byte of it is flushed before the exit.
    assert len(full.stdout) > 10_000 and full.stdout.rstrip().endswith(("`", ".", ")", "}"))
    bad = _cli("", "no-such-command")
    assert bad.returncode == 2
    assert "No such command 'no-such-command'" in bad.stderr


def test_atexit_handlers_run_and_teardown_is_skipped() -> None:
    prelude = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stdout.write('atexit ran\\n'))\n"
        "class Loud:\n"
        "    def __del__(self):\n"
        "        sys.stdout.write('torn down\\n')\n"
        "keep = Loud()\n"
    )
    done = _cli(prelude, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("atexit ran")
    # The interpreter's teardown (which would collect ``keep``) did not run.
    assert "torn down" not in done.stdout


def test_a_running_non_daemon_thread_is_waited_for() -> None:
    # The thread writes once the main thread is over (whatever the machine's load), so
    # its line comes last only if the process waited for it.
    prelude = (
        "import threading, time, sys\n"
        "def late():\n"
        "    while threading.main_thread().is_alive():\n"
        "        time.sleep(0.01)\n"
        "    sys.stdout.write('thread done\\n')\n"
        "threading.Thread(target=late).start()\n"
    )
    done = _cli(prelude, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("thread done")
