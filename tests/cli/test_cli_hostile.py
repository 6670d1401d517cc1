"""Hostile programs through ``codemode run``: each is contained with a clear error (exit 1)
and leaves no process behind. Real CLI subprocesses, real sandboxes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIGHT = ["--compute-ms", "2000", "--wall-ms", "10000", "--memory-mb", "256", "--output-mb", "1"]


def run(program: str, lang: str, workspace: Path) -> tuple[int, dict[str, object]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "run",
            "-",
            "--lang",
            lang,
            "-w",
            str(workspace),
            "--json",
            *TIGHT,
        ],
        input=program,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return proc.returncode, json.loads(proc.stdout)


def _children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.append(int(entry.name))
    return out


PYTHON = [
    ("().__class__.__mro__[1].__subclasses__()", "forbidden", "__class__"),
    ("import os\nreturn os.listdir('/')", "exception", "os"),
    ("'{0.__class__.__init__.__globals__}'.format(1)", "forbidden", "invalid attribute name"),
    ("g = (x for x in [1])\nreturn g.gi_frame.f_globals", "forbidden", "gi_frame"),
    ("open('/etc/passwd').read()", "exception", "open"),
    ("while True:\n    pass", "timeout", "compute budget exhausted (2000ms busy)"),
    ("x = []\nwhile True:\n    x.append(' ' * 10**6)", "memory", "memory"),
    ("try:\n    x = 'a' * 10**10\nexcept MemoryError:\n    return 'survived'", "memory", "memory"),
    ("while True:\n    print('x' * 1000)", "output-limit", "outer output exceeded 1048576 bytes"),
    ("def f():\n    return f()\nreturn f()", "recursion", "RecursionError"),
]

TYPESCRIPT = [
    ("while (true) {}", "timeout", "compute budget exhausted (2000ms busy)"),
    ("for (;;) { try { while (true) {} } catch {} }", "timeout", "compute budget exhausted"),
    ("const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20));", "memory", "memory"),
    (
        "for (;;) console.log('x'.repeat(1000));",
        "output-limit",
        "outer output exceeded 1048576 bytes",
    ),
    ("return (globalThis as any).require('fs')", "exception", "TypeError"),
    ("namespace N { export const x = 1 }\nreturn N.x", "syntax", "namespace is not supported"),
    ("function f(): number { return f() }\nreturn f()", "recursion", "RangeError"),
]


@pytest.mark.parametrize(
    ("lang", "program", "kind", "needle"),
    [("python", *case) for case in PYTHON] + [("typescript", *case) for case in TYPESCRIPT],
    ids=[f"py-{i}" for i in range(len(PYTHON))] + [f"ts-{i}" for i in range(len(TYPESCRIPT))],
)
def test_hostile_program_is_contained(
    lang: str, program: str, kind: str, needle: str, tmp_path: Path
) -> None:
    before = set(_children_of(os.getpid()))
    code, payload = run(program, lang, tmp_path)
    assert code == 1
    assert payload["isError"] is True
    error = payload["error"]
    assert isinstance(error, dict)
    assert error["code"] == "CODE_RUN_FAILED"
    assert error["kind"] == kind  # machine-readable, not only in the message
    message = str(error["message"])
    assert message.startswith(f"code run failed ({kind}): "), message[:300]
    assert needle in message, message[:300]
    assert set(_children_of(os.getpid())) == before
    assert list(tmp_path.iterdir()) == []  # nothing written into the workspace
