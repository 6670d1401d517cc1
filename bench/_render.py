"""The rich tables a run prints: one per suite, then the targets."""

from __future__ import annotations

import os
import sys

from rich import box
from rich.console import Console
from rich.table import Table

from ._model import FLOOR, FORK_FLOOR, MONTY, QUICKJS_FLOOR, SMOLAGENTS, Report, Row, Target

__all__ = ["console_for", "render_report"]


#: Below this many columns the tables take their compact form (see ``render_report``).
WIDE = 150
#: Short subject names of the compact tables (the legend spells them out).
SHORT = {
    "codemode-python": "py",
    "codemode-typescript": "ts",
    "codemode-engine": "engine",
    MONTY: "monty",
    SMOLAGENTS: "smol",
    FLOOR: "floor",
    FORK_FLOOR: "fork",
    QUICKJS_FLOOR: "quickjs",
}


def console_for(*, stderr: bool) -> Console:
    """A console on stdout or stderr as wide as the terminal, or ``$COLUMNS`` when set;
    piped without ``$COLUMNS``, 200 columns (the full tables)."""
    stream = sys.stderr if stderr else sys.stdout
    width: int | None = None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        width = int(columns)
    elif not stream.isatty():
        width = 200
    return Console(stderr=stderr, width=width)


def _time(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit != "ms":
        return f"{value:,.1f} {unit}"
    if value < 1:
        return f"{value * 1e3:,.1f} µs"
    return f"{value:,.2f} ms"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _short_ratio(value: float) -> str:
    """Three significant figures or fewer: ``1.32×``, ``21.2×``, ``1,569×``."""
    if value < 10:
        return f"{value:.2f}×"
    if value < 100:
        return f"{value:.1f}×"
    return f"{value:,.0f}×"


def _rate(row: Row) -> str:
    return "—" if row.throughput is None else f"{row.throughput:,.0f}/s"


def render_report(report: Report, console: Console) -> None:
    """Print every suite's rows, its peers' status and the targets: every column from
    ``WIDE`` columns on, else a compact form that fits the console (80 columns and up):
    short subject names, p99 and throughput left to ``--json``, the peer ratios in one
    column, notes under the table."""
    env = report.env
    console.print(
        f"[bold]codemode bench[/] — {env.get('cpu')} ({env.get('cores')} cores, load {env.get('load_average')}), "
        f"Python {env.get('python')}, kernel {env.get('kernel')}, seed {env.get('seed')}, runs {env.get('runs')}"
        f"{', quick' if env.get('quick') else ''}",
        highlight=False,
    )
    console.print(
        "peers: " + ", ".join(f"{k}: {v}" for k, v in report.peers.items()), highlight=False
    )
    wide = console.width >= WIDE
    if not wide:
        console.print(
            "subjects: "
            + ", ".join(f"{short} = {name}" for name, short in SHORT.items())
            + "; p99 and throughput: --json, or a terminal of "
            + f"{WIDE}+ columns",
            highlight=False,
        )
    for name, suite in report.suites.items():
        title = f"{name} — {suite.description} ({suite.seconds:.1f} s)"
        console.print(
            _suite_table(suite.rows, title) if wide else _compact_table(suite.rows, title)
        )
        if not wide:
            for line in _notes(suite.rows):
                console.print(line, highlight=False, soft_wrap=False)
        if suite.error:
            console.print(f"[bold red]{name} failed:[/] {suite.error}", highlight=False)
    console.print(_targets_table(report, wide))


def _suite_table(rows: list[Row], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in (
        "case",
        "subject",
        "median",
        "p95",
        "p99",
        "throughput",
        "× ideal",
        f"× {MONTY}",
        f"× {SMOLAGENTS}",
        f"× {FLOOR}",
        "note",
    ):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row.case,
            row.subject,
            _time(row.median, row.unit),
            _time(row.p95, row.unit),
            _time(row.p99, row.unit),
            _rate(row),
            _ratio(row.ratio_to_ideal),
            _ratio(row.ratio_to.get(MONTY)),
            _ratio(row.ratio_to.get(SMOLAGENTS)),
            _ratio(row.ratio_to.get(FLOOR)),
            row.note or "",
        )
    return table


def _compact_table(rows: list[Row], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("case", ratio=1, overflow="fold")
    table.add_column("subject", no_wrap=True)
    for column in ("median", "p95", "× ideal"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("× peers", no_wrap=True)
    for row in rows:
        peers = [
            f"{SHORT[peer]} {_short_ratio(row.ratio_to[peer])}"
            for peer in (MONTY, SMOLAGENTS, FLOOR, FORK_FLOOR, QUICKJS_FLOOR)
            if row.ratio_to.get(peer) is not None
        ]
        table.add_row(
            row.case,
            SHORT.get(row.subject, row.subject),
            _time(row.median, row.unit),
            _time(row.p95, row.unit),
            _ratio(row.ratio_to_ideal),
            "\n".join(peers) or "—",
        )
    return table


def _notes(rows: list[Row]) -> list[str]:
    """The rows' notes as lines under a compact table: once per case when every row of
    the case says the same, else per subject."""
    out: list[str] = []
    cases: dict[str, list[Row]] = {}
    for row in rows:
        cases.setdefault(row.case, []).append(row)
    for case, case_rows in cases.items():
        notes = {row.note for row in case_rows}
        if notes == {None}:
            continue
        if len(notes) == 1:
            out.append(f"  {case}: {case_rows[0].note}")
            continue
        for row in case_rows:
            if row.note:
                out.append(f"  {case}, {SHORT.get(row.subject, row.subject)}: {row.note}")
    return out


def _verdict(t: Target) -> str:
    if t.met is None:
        return "—"
    if t.met:
        return "[green]met[/]"
    if t.below_floor and t.floor is not None:
        return f"[yellow]below floor[/] ({t.floor:.4g})"
    return "[bold red]MISSED[/]"


def _targets_table(report: Report, wide: bool) -> Table:
    targets = Table(title="targets", title_justify="left", box=None if wide else box.SIMPLE_HEAD)
    columns = ["suite", "target", "subject", "measured", "limit", "measured / limit", "met"]
    if not wide:
        columns.remove("measured / limit")
    for column in columns:
        targets.add_column(column, overflow="fold")
    if wide:
        targets.box = box.HEAVY_HEAD
    for name, suite in report.suites.items():
        for t in suite.targets:
            verdict = _verdict(t)
            measured = "—" if t.measured is None else f"{t.measured:.4g} {t.unit}"
            over = "—" if t.ratio is None else f"{t.ratio:.2f}"
            cells = [name, t.name, t.subject if wide else SHORT.get(t.subject, t.subject)]
            cells += [measured, f"≤ {t.target:g} {t.unit}"]
            cells += [over, verdict] if wide else [verdict]
            targets.add_row(*cells)
    return targets
