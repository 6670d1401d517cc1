"""The directory a command starts in is not on its module search path.

``python -m codemode.cli`` puts that directory first on ``sys.path``, and it is often the
agent's workspace, where a program's tools write files; the CLI loads modules on first
use (rich when a line needs styling, tools' implementations on their first call). A
module planted there must never run in the host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PLANTED = (
    "import pathlib\n"
    "pathlib.Path({marker!r}).write_text('ran')\n"
    "raise ImportError('a planted module ran in the host')\n"
)


def _plant(directory: Path, package: str, marker: Path) -> None:
    (directory / package).mkdir()
    (directory / package / "__init__.py").write_text(PLANTED.format(marker=str(marker)))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    env.pop("PYTHONSAFEPATH", None)
    env.update(extra)
    return env


def test_a_module_planted_where_the_command_starts_is_not_imported(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    _plant(tmp_path, "rich", marker)
    # FORCE_COLOR makes the error line go through rich, which loads only now.
    done = subprocess.run(
        [sys.executable, "-m", "codemode.cli", "agent", "x", "--base-url", "ftp://x"],
        cwd=tmp_path,
        env=_env(FORCE_COLOR="1", CODEMODE_MODEL="m"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not marker.exists(), done.stderr
    assert done.returncode == 2, done.stderr
    assert "--base-url must be an http(s) URL" in done.stderr
    assert "\x1b[" in done.stderr  # rich drew it: the real one was imported


def test_the_entry_is_dropped_only_when_it_is_the_start_directory(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "sys.path.insert(0, {first!r})\n"
        "from codemode.cli import _forget_start_directory\n"
        "before = list(sys.path)\n"
        "_forget_start_directory()\n"
        "print(len(before) - len(sys.path), sys.path[0] == before[1])\n"
    )

    def run(first: str, *flags: str) -> str:
        done = subprocess.run(
            [sys.executable, *flags, "-c", code.format(first=first)],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    for first, expected in ((str(tmp_path), "1 True"), ("", "1 True"), ("/nonexistent", "0 False")):
        # -P (safe_path): the interpreter added no such entry, and the function leaves
        # sys.path alone.
        assert run(first, "-P") == "0 False", first
        assert run(first) == expected, first
