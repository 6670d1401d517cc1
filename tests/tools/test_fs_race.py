"""Confinement under a concurrent attacker: paths swapped for symlinks while calls run.

A background process exchanges (``renameat2(RENAME_EXCHANGE)``) workspace files and
directories with symlinks to look-alike files outside, in a tight loop, while 400 mixed
``read``/``write``/``edit``/``str_replace_editor``/``grep``/``glob`` calls run. A check-then-
walk-again implementation leaks the planted secret or writes outside within a few dozen
calls; the tools here do their I/O on the descriptors they resolved, so every call either
sees an inside file, or fails — and the outside tree is byte-for-byte unchanged afterwards.
"""

# The attacker is a plain subprocess started and killed around the async calls.
# ruff: noqa: ASYNC220

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.tools.fs import _paths
from codemode.tools.search import _rg
from tests.tools.conftest import Harness

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SECRET = "SECRET-7f3a"
FILES = ("f0", "f1", "f2")
DIRS = ("d0", "d1")

# The attacker: swap each name with its link, forever (until the test kills it by pid).
_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100
ws = sys.argv[1]
names = sys.argv[2:]
pairs = [(os.path.join(ws, n).encode(), os.path.join(ws, "l" + n).encode()) for n in names]
print("ready", flush=True)
while True:
    for a, b in pairs:
        libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
"""


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file bytes, link targets, directory markers."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_bytes()
    return out


def _plant(workspace: Path, outside: Path) -> None:
    for name in FILES:
        (workspace / name).write_text("inside needle\n")
        (outside / name).write_text(f"{SECRET} needle\n")
        (workspace / f"l{name}").symlink_to(outside / name)
    for name in DIRS:
        (workspace / name).mkdir()
        (workspace / name / "x.txt").write_text("inside needle\n")
        (outside / name).mkdir()
        (outside / name / "x.txt").write_text(f"{SECRET} needle\n")
        (workspace / f"l{name}").symlink_to(outside / name)


def _calls(workspace: Path, count: int) -> list[tuple[str, dict[str, Any]]]:
    ws = str(workspace)
    calls: list[tuple[str, dict[str, Any]]] = []
    for i in range(count):
        f = FILES[i % len(FILES)]
        d = DIRS[i % len(DIRS)]
        menu: list[tuple[str, dict[str, Any]]] = [
            ("read", {"file_path": f}),
            ("read", {"file_path": f"{d}/x.txt"}),
            ("str_replace_editor", {"command": "view", "path": f"{ws}/{f}"}),
            ("str_replace_editor", {"command": "view", "path": f"{ws}/{d}"}),
            ("str_replace_editor", {"command": "view", "path": f"{ws}/{d}/x.txt"}),
            ("grep", {"pattern": "needle"}),
            ("grep", {"pattern": "needle", "path": d}),
            ("grep", {"pattern": "needle", "path": f}),
            ("glob", {"pattern": "*", "path": d}),
            ("glob", {"pattern": "*"}),
            ("write", {"file_path": f, "content": "inside needle\n"}),
            ("write", {"file_path": f"{d}/x.txt", "content": "inside needle\n"}),
            ("write", {"file_path": f"{d}/new-{i}.txt", "content": "inside\n"}),
            ("edit", {"file_path": f, "old_string": "inside", "new_string": "inside!"}),
            ("edit", {"file_path": f"{d}/x.txt", "old_string": "inside!", "new_string": "inside"}),
            (
                "str_replace_editor",
                {"command": "str_replace", "path": f"{ws}/{f}", "old_str": "!", "new_str": ""},
            ),
            (
                "str_replace_editor",
                {"command": "create", "path": f"{ws}/{d}/c-{i}.txt", "file_text": "c\n"},
            ),
            (
                "str_replace_editor",
                {"command": "insert", "path": f"{d}/x.txt", "insert_line": 0, "new_str": "top"},
            ),
        ]
        calls.append(menu[i % len(menu)])
    return calls


@pytest.mark.parametrize("resolver", ["openat2", "walk", "walk-without-landlock"])
async def test_swapping_symlinks_leak_nothing_and_write_nothing_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resolver: str
) -> None:
    if resolver.startswith("walk"):
        monkeypatch.setattr(_paths, "_OPENAT2", False)
    elif not _paths.openat2_available():
        pytest.skip("this kernel has no openat2")
    if resolver.endswith("without-landlock"):
        # What older kernels get: rg unconfined, its results re-checked through fds.
        monkeypatch.setattr(_rg, "landlock_abi", lambda: 0)
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    _plant(workspace, outside)
    before = _snapshot(outside)
    beside = sorted(os.listdir(tmp_path))
    harness = Harness(workspace, tmp_path / "runtime")
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(workspace), *FILES, *DIRS],
        stdout=subprocess.PIPE,
        text=True,
    )
    leaks: list[str] = []
    outcomes = {"ok": 0, "error": 0}
    try:
        assert swapper.stdout is not None
        assert swapper.stdout.readline().strip() == "ready"
        calls = _calls(workspace, 400)

        async def run(name: str, args: dict[str, Any]) -> None:
            result = await harness.call(name, args)
            outcomes["error" if result.is_error else "ok"] += 1
            seen = json.dumps(result.to_json(), ensure_ascii=False)
            if SECRET in seen:
                leaks.append(f"{name} {args}: {seen[:300]}")

        # Eight calls at a time, so reads and writes also interleave with each other.
        for start in range(0, len(calls), 8):
            async with anyio.create_task_group() as group:
                for name, args in calls[start : start + 8]:
                    group.start_soon(run, name, args)
    finally:
        swapper.kill()
        swapper.wait()
        assert swapper.stdout is not None
        swapper.stdout.close()
    assert leaks == []
    # Nothing outside changed, and nothing (not even a temp file) appeared next to it.
    assert _snapshot(outside) == before
    assert set(os.listdir(tmp_path)) <= {*beside, "runtime"}
    # The calls really ran against the race: most succeeded on inside files.
    assert outcomes["ok"] > 100, outcomes
