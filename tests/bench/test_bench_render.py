"""What ``codemode bench`` shows: tables that fit the terminal (80 columns and up), progress
on stderr only, one colour per subject in every panel of the plot, the mixed suite's
paired and clamped barrier cost, smolagents' cold start as a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from codemode.bench import Report, Row, SuiteResult, Target
from codemode.bench._plot import COLORS, color_of, draw
from codemode.bench._render import console_for, render_report
from codemode.bench._suite_mixed import CALLS, EVERY, barrier_ms, barrier_note
from codemode.bench._suite_mixed import ideal_ms as mixed_ideal_ms

ROOT = Path(__file__).resolve().parents[2]
SUBJECTS = list(COLORS)


def _report() -> Report:
    rows = []
    for subject in SUBJECTS:
        for case in ("cold start", "mixed 90 parallel + 10 exclusive, cap 10"):
            rows.append(
                Row(
                    case=case,
                    subject=subject,
                    n=3,
                    median=123456.789,
                    p95=234567.891,
                    p99=345678.912,
                    throughput=12345.6,
                    ideal=100.0,
                    ratio_to_ideal=1234.5,
                    ratio_to={s: 19830.8 for s in SUBJECTS if s != subject},
                    note="barrier cost 1.103 ms per exclusive call (over ideal, net of the "
                    "all-parallel overhead, paired runs)"
                    if case.startswith("mixed")
                    else "fresh process per run",
                )
            )
    suite = SuiteResult(
        description="parallel-safe and exclusive calls interleaved (1 in 10 exclusive)",
        params={},
        rows=rows,
        targets=[
            Target(
                name="fan-out 100 x 10 ms at cap 100 within 1.3x of ideal",
                subject="codemode-typescript",
                target=1.3,
                unit="x",
                measured=3.61,
                ratio=2.78,
                met=False,
            )
        ],
    )
    return Report(env={"cpu": "a CPU with a long name " * 3}, suites={"mixed": suite}, peers={})


@pytest.mark.parametrize("width", [80, 100, 149, 150, 200])
def test_every_table_fits_the_console(width: int) -> None:
    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, file=sink)
        render_report(_report(), console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    # Nothing is folded away: each subject's short or full name and the notes are there.
    if width < 150:
        assert "py = codemode-python" in text and "barrier cost 1.103 ms" in text
        assert "MISSED" in text
    else:
        assert "codemode-typescript" in text and "p99" in text


def test_the_console_follows_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert console_for(stderr=True).width == 80
    monkeypatch.delenv("COLUMNS")
    # Piped (as under pytest) without $COLUMNS: the full tables.
    assert console_for(stderr=True).width == 200


def test_the_cli_prints_tables_on_stdout_and_progress_on_stderr_only() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "codemode.cli", "bench", "--suite", "pipeline", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "━" not in proc.stdout and "suites" not in proc.stdout  # the progress bars
    assert "suites" in proc.stderr and "pipeline" in proc.stderr
    assert "execute(), no" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80


def test_a_subject_has_one_colour_in_every_panel() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    fanout = SuiteResult(description="", params={})
    fanout.series = {
        # Different subsets per panel: a colour cycle would shift between them.
        "sweep": {
            "fixed": {
                "codemode-typescript": [[10, 120.0], [100, 20.0]],
                "smolagents": [[1, 1000.0]],
                "pydantic-monty": [[10, 110.0], [100, 30.0]],
            }
        },
        "overhead": {
            "pydantic-monty": [[10, 50.0], [100, 30.0]],
            "codemode-python": [[10, 60.0], [100, 40.0]],
        },
    }
    rows = [
        Row(case="warm start", subject=s, n=1, median=1.0 + i, p95=1.0, p99=1.0)
        for i, s in enumerate(["asyncio-floor", "codemode-typescript", "smolagents"])
    ]
    startup = SuiteResult(description="", params={}, rows=rows)
    fig = draw(Report(env={}, suites={"fanout": fanout, "startup": startup}, peers={}))
    try:
        seen: dict[str, set[str]] = {}
        for ax in fig.axes:
            for line in ax.get_lines():
                label = str(line.get_label()).removesuffix(" (sequential)")
                seen.setdefault(label, set()).add(to_hex(line.get_color()))
            for container in ax.containers:
                label = str(container.get_label())
                for patch in container.patches:
                    seen.setdefault(label, set()).add(to_hex(patch.get_facecolor()))
        for subject in SUBJECTS:
            if subject in seen:
                assert seen[subject] == {COLORS[subject]}, subject
        assert {"codemode-typescript", "pydantic-monty", "smolagents"} <= set(seen)
    finally:
        plt.close(fig)
    assert color_of("a-new-peer") == color_of("a-new-peer")


def test_the_barrier_cost_is_paired_and_clamped_at_zero() -> None:
    over = mixed_ideal_ms(True) - mixed_ideal_ms(False)
    per = CALLS // EVERY
    # Drift between repetitions (the second pair 30 ms slower on both) cancels out.
    parallel = [60.0, 90.0, 61.0]
    mixed = [p + over + 1.0 * per for p in parallel]
    assert barrier_ms(parallel, mixed) == pytest.approx(1.0)
    # The mixed run lost less to overhead than the all-parallel one: reported as 0, with
    # the measured value said.
    negative = barrier_ms([60.0, 60.0], [60.0 + over - 2.0, 60.0 + over - 1.0])
    assert negative < 0
    note = barrier_note(negative)
    assert note.startswith("barrier cost 0.000 ms per exclusive call")
    assert f"measured {negative:.3f} ms: the mixed run lost less to overhead" in note
    assert barrier_note(1.25).startswith("barrier cost 1.250 ms")


def test_smolagents_cold_start_is_a_fresh_interpreter() -> None:
    # Measured from a process that never imports smolagents itself: the executor is
    # made (and answers) in the fresh interpreter the measurement starts.
    probe = (
        "import sys\n"
        "from codemode.bench._suite_startup import SMOLAGENTS_COLD_NOTE, _smolagents_cold\n"
        "ms = _smolagents_cold()\n"
        "assert ms > 0 and 'smolagents' not in sys.modules, sorted(sys.modules)\n"
        "print(SMOLAGENTS_COLD_NOTE)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "fresh interpreter per run: spawn, import, first result"
