"""The rich tables a run prints: one per suite, then the targets."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from ._model import FLOOR, MONTY, SMOLAGENTS, Report, Row

__all__ = ["console_for", "render_report"]


def console_for(*, stderr: bool) -> Console:
    """A console on stdout or stderr; piped, 200 columns wide (rich would wrap the wide
    tables at 80)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 200)


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


def _rate(row: Row) -> str:
    return "—" if row.throughput is None else f"{row.throughput:,.0f}/s"


def render_report(report: Report, console: Console) -> None:
    """Print every suite's rows, its peers' status and the targets."""
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
    for name, suite in report.suites.items():
        table = Table(
            title=f"{name} — {suite.description} ({suite.seconds:.1f} s)", title_justify="left"
        )
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
        for row in suite.rows:
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
        console.print(table)
        if suite.error:
            console.print(f"[bold red]{name} failed:[/] {suite.error}", highlight=False)
    targets = Table(title="targets", title_justify="left")
    for column in ("suite", "target", "subject", "measured", "limit", "measured / limit", "met"):
        targets.add_column(column)
    for name, suite in report.suites.items():
        for t in suite.targets:
            verdict = (
                "—" if t.met is None else ("[green]met[/]" if t.met else "[bold red]MISSED[/]")
            )
            measured = "—" if t.measured is None else f"{t.measured:.4g} {t.unit}"
            over = "—" if t.ratio is None else f"{t.ratio:.2f}"
            targets.add_row(
                name, t.name, t.subject, measured, f"≤ {t.target:g} {t.unit}", over, verdict
            )
    console.print(targets)
