"""``LazyConsole.line`` (cli/_console.py) writes, without rich, exactly what rich's
``Console.print`` of the same escaped markup writes, and leaves rich unloaded doing so."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys

import pytest
from rich.console import Console
from rich.markup import escape

from codemode.cli._console import LazyConsole

_ALPHABET = "ab :[]/\\·…—─#@\t\x1b\u200bé漢"


def _spans(rng: random.Random) -> list[str | tuple[str, str]]:
    text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 14)))
    if rng.random() < 0.5:
        return [(rng.choice(["", "dim", "bold red"]), text)]
    return [("bold red", "error:"), f" {text}"]


def _markup(spans: list[str | tuple[str, str]]) -> str:
    return "".join(
        escape(s)
        if isinstance(s, str)
        else (f"[{s[0]}]{escape(s[1])}[/]" if s[0] else escape(s[1]))
        for s in spans
    )


@pytest.mark.parametrize("seed", range(4))
def test_line_writes_what_rich_writes(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for key in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(key, raising=False)
    plain = 0
    for _ in range(500):
        spans = _spans(rng)
        soft_wrap = rng.random() < 0.5
        monkeypatch.setenv("COLUMNS", str(rng.randint(1, 16)))
        ours, theirs = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stderr", ours)
        console = LazyConsole(stderr=True, highlight=False)
        console.line(*spans, soft_wrap=soft_wrap)
        plain += console._console is None
        monkeypatch.setattr(sys, "stderr", theirs)
        Console(stderr=True, highlight=False).print(_markup(spans), soft_wrap=soft_wrap)
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        assert ours.getvalue() == theirs.getvalue(), (spans, soft_wrap)
    assert plain > 50  # the plain path was taken, not only rich's


def test_a_forced_terminal_goes_through_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    console = LazyConsole(stderr=True, highlight=False)
    assert console.is_terminal
    console.line(("bold red", "error:"), " no")
    assert "\x1b[" in sys.stderr.getvalue()


def test_plain_lines_do_not_import_rich() -> None:
    probe = (
        "import sys\n"
        "from codemode.cli._console import LazyConsole\n"
        "c = LazyConsole(stderr=True, highlight=False)\n"
        "c.line(('dim', 'codemode: waiting'), soft_wrap=True)\n"
        "c.line(('bold red', 'error:'), ' no such file')\n"
        "assert not c.is_terminal\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    assert proc.stderr == "codemode: waiting\nerror: no such file\n"
    assert proc.stdout == "[]\n"
