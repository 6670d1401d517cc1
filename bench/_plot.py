"""``--plot FILE.png``: fan-out wall time against the cap (with the ideal), per-call
overhead against N, and one run's per-sub-call timeline (queued / running / waiting to
commit) from the ``tool/code-dispatch`` events' timings. matplotlib, Agg backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._model import Report
from ._targets import TARGETS

__all__ = ["COLORS", "PlotUnavailable", "color_of", "draw", "plot_available", "write_plot"]

#: One colour per subject, the same in every panel (matplotlib's cycle would colour a
#: subject by its position in each panel's own list).
COLORS = {
    "codemode-python": "#1f77b4",
    "codemode-typescript": "#2ca02c",
    "pydantic-monty": "#ff7f0e",
    "smolagents": "#9467bd",
    "asyncio-floor": "#7f7f7f",
    "fork-floor": "#d62728",
    "quickjs-floor": "#bcbd22",
}
# A subject without an entry (a future peer) gets one of these, always the same per name.
_SPARE = ("#8c564b", "#e377c2", "#17becf", "#000000")


def color_of(subject: str) -> str:
    """The colour ``subject`` has in every panel."""
    if subject in COLORS:
        return COLORS[subject]
    return _SPARE[sum(subject.encode()) % len(_SPARE)]


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (the ``bench`` extra)."""


def plot_available() -> str | None:
    """``None`` when plots can be drawn, else why not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return f"--plot needs matplotlib ({exc}); pip install 'codemode[bench]'"
    return None


def write_plot(report: Report, path: str | Path) -> Path:
    """Draw the figure into ``path`` (PNG); panels without data say so."""
    import matplotlib.pyplot as plt

    fig = draw(report)
    out = Path(path)
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out


def draw(report: Report) -> Any:
    """The figure ``write_plot`` saves (a matplotlib ``Figure``, Agg backend); close it
    with ``matplotlib.pyplot.close`` when done."""
    why = plot_available()
    if why is not None:
        raise PlotUnavailable(why)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fanout = report.suites.get("fanout")
    series: dict[str, Any] = fanout.series if fanout is not None else {}
    why = "fanout suite not run" if fanout is None else f"fanout failed: {fanout.error}"
    fig = plt.figure(figsize=(18, 11))
    grid = fig.add_gridspec(2, 3)
    _sweep(fig.add_subplot(grid[0, 0]), series, why)
    _overhead(fig.add_subplot(grid[0, 1]), series, why)
    _timeline(fig.add_subplot(grid[0, 2]), series.get("timeline") or [], why)
    _headline(fig.add_subplot(grid[1, :]), report)
    env = report.env
    fig.suptitle(
        f"codemode bench — {env.get('cpu')} ({env.get('cores')} cores), Python {env.get('python')}, "
        f"seed {env.get('seed')}, runs {env.get('runs')}{' (quick)' if env.get('quick') else ''}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def _empty(ax: Any, title: str, why: str) -> None:
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, why[:80], ha="center", va="center", transform=ax.transAxes, wrap=True)


def _sweep(ax: Any, series: dict[str, Any], why: str) -> None:
    title = "fan-out: 100 calls, wall time vs max_parallel_sub_calls"
    fixed = (series.get("sweep") or {}).get("fixed")
    if not fixed:
        _empty(ax, title, why)
        return
    ideal = (series.get("ideal") or {}).get("fixed") or []
    if ideal:
        xs, ys = zip(*ideal, strict=True)
        ax.plot(xs, ys, "k--", label="ideal ceil(N/k) x 10 ms", linewidth=2)
    for subject, points in sorted(fixed.items()):
        if len(points) < 2:
            ax.plot(
                *zip(*points, strict=True),
                "x",
                label=f"{subject} (sequential)",
                color=color_of(subject),
            )
            continue
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, "o-", label=subject, color=color_of(subject))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cap k")
    ax.set_ylabel("wall time (ms)")
    ax.set_title(title + " (fixed 10 ms)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


def _overhead(ax: Any, series: dict[str, Any], why: str) -> None:
    title = "fan-out: per-call overhead vs N (cap = N, 10 ms each)"
    overhead = series.get("overhead") or {}
    if not overhead:
        _empty(ax, title, why)
        return
    for subject, points in sorted(overhead.items()):
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, "o-", label=subject, color=color_of(subject))
    ax.set_xscale("log")
    ax.set_xlabel("N calls")
    ax.set_ylabel("(wall - 10 ms) / N (µs per call)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


# The timeline is a codemode-python run: running in its colour, the phases around it in
# shades no subject uses.
_QUEUED = "#d9d9d9"
_RUNNING = COLORS["codemode-python"]
_COMMIT = "#9ecae1"


def _timeline(ax: Any, timings: list[dict[str, Any]], why: str) -> None:
    title = "one run (Python, 100 x 10 ms, cap 10): each sub-call"
    rows = [t for t in timings if t.get("queuedMs") is not None]
    if not rows:
        _empty(ax, title, why)
        return
    # Times from the first submission: the run's start-up before it is not the fan-out.
    origin = min(t["queuedMs"] for t in rows)
    for index, t in enumerate(rows):
        queued = t["queuedMs"] - origin
        started = (t.get("startedMs") or t["queuedMs"]) - origin
        settled = (t.get("settledMs") or t.get("startedMs") or t["queuedMs"]) - origin
        committed = (t.get("committedMs") or t.get("settledMs") or t["queuedMs"]) - origin
        ax.barh(index, started - queued, left=queued, color=_QUEUED, height=0.8)
        ax.barh(index, settled - started, left=started, color=_RUNNING, height=0.8)
        ax.barh(index, max(committed - settled, 0.0), left=settled, color=_COMMIT, height=0.8)
    from matplotlib.patches import Patch

    ax.legend(
        handles=[
            Patch(color=_QUEUED, label="queued"),
            Patch(color=_RUNNING, label="running (codemode-python)"),
            Patch(color=_COMMIT, label="settled -> committed"),
        ],
        fontsize=8,
        loc="lower right",
    )
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first sub-call was submitted")
    ax.set_ylabel("sub-call (submission order)")
    ax.set_title(title)


#: (suite, case, label) of the bottom panel: codemode next to its peers, one group each.
HEADLINE = (
    ("startup", "warm start", "warm start"),
    ("startup", "back-to-back", "back-to-back"),
    ("startup", "cold start", "cold start"),
    ("roundtrip", "sub-call round trip", "round trip / call"),
    ("fanout", "fixed 100 x 10 ms, cap 10", "fan-out 100x10 ms cap 10"),
    ("fanout", "fixed 100 x 10 ms, cap 100", "fan-out 100x10 ms cap 100"),
    ("payload", "in+out 1 MB", "1 MB in + out"),
    ("compute", "sum(i*i) over 1e6", "sum(i*i) 1e6"),
)
SUBJECTS = (
    "codemode-python",
    "codemode-typescript",
    "pydantic-monty",
    "smolagents",
    "asyncio-floor",
)


def _headline(ax: Any, report: Report) -> None:
    title = "headline cases, median (ms, log scale): codemode next to the peers of the same run; black bar = target"
    groups = []
    for suite_name, case, label in HEADLINE:
        suite = report.suites.get(suite_name)
        if suite is None:
            continue
        rows = [r for r in suite.rows if r.case == case and r.median > 0]
        values = {r.subject: r.median for r in rows}
        limit = None
        for spec in TARGETS:
            if spec.suite == suite_name and spec.case == case:
                if spec.measure == "median":
                    limit = spec.limit
                elif spec.measure == "ratio_to_ideal":
                    ideal = next((r.ideal for r in rows if r.ideal), None)
                    limit = spec.limit * ideal if ideal else None
        if values:
            groups.append((label, values, limit))
    if not groups:
        _empty(ax, title, "no headline suite run")
        return
    width = 0.8 / len(SUBJECTS)
    for index, subject in enumerate(SUBJECTS):
        xs = [g for g, (_, values, _) in enumerate(groups) if subject in values]
        ys = [groups[g][1][subject] for g in xs]
        if xs:
            ax.bar(
                [x + (index - len(SUBJECTS) / 2 + 0.5) * width for x in xs],
                ys,
                width,
                label=subject,
                color=color_of(subject),
            )
    for g, (_, _, limit) in enumerate(groups):
        if limit is not None:
            ax.hlines(limit, g - 0.45, g + 0.45, colors="black", linewidth=2)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([label for label, _, _ in groups])
    ax.set_yscale("log")
    ax.set_ylabel("median (ms)")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=len(SUBJECTS))
    ax.grid(True, axis="y", which="both", alpha=0.3)
