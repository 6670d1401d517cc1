"""``CODEMODE_BASH_ENV``: what the CLI's bash tool sees of the host's environment (real
``codemode run`` subprocesses, real bash)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = (
    "r = await tools.bash({'command': 'echo \"[$CM_TEST_SECRET][$CM_TEST_OTHER]\"', "
    "'description': 'print two variables'})\nreturn r['stdout']['text'].strip()\n"
)


def _run(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    program = tmp_path / "p.py"
    program.write_text(PROGRAM)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CM_TEST_SECRET": "s3cr3t",
        "CM_TEST_OTHER": "other",
        **extra,
    }
    if "CODEMODE_BASH_ENV" not in extra:
        env.pop("CODEMODE_BASH_ENV", None)
    return subprocess.run(
        [sys.executable, "-m", "codemode.cli", "run", str(program), "-w", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _result(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["value"]["result"])


def test_bash_does_not_see_the_hosts_variables_by_default(tmp_path: Path) -> None:
    assert _result(_run(tmp_path)) == "[][]"


def test_named_variables_pass_through(tmp_path: Path) -> None:
    proc = _run(tmp_path, CODEMODE_BASH_ENV="CM_TEST_SECRET")
    assert _result(proc) == "[s3cr3t][]"


def test_inherit_passes_everything(tmp_path: Path) -> None:
    assert _result(_run(tmp_path, CODEMODE_BASH_ENV="inherit")) == "[s3cr3t][other]"


def test_a_bad_value_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    proc = _run(tmp_path, CODEMODE_BASH_ENV="CM_TEST_SECRET=leak")
    assert proc.returncode == 2
    assert (
        "CODEMODE_BASH_ENV must be scrubbed, inherit or comma-separated variable names, "
        "got 'CM_TEST_SECRET=leak'" in proc.stderr
    )
    assert proc.stdout == ""
