"""``--plot FILE.png``: fan-out wall time against the cap (with the ideal), per-call
overhead against N, and one run's per-sub-call timeline (queued / running / waiting to
commit) from the ``tool/code-dispatch`` events' timings. matplotlib, Agg backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._model import Report

__all__ = ["PlotUnavailable", "plot_available", "write_plot"]


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
    why = plot_available()
    if why is not None:
        raise PlotUnavailable(why)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fanout = report.suites.get("fanout")
    series: dict[str, Any] = fanout.series if fanout is not None else {}
    fig, (sweep_ax, over_ax, line_ax) = plt.subplots(1, 3, figsize=(18, 5.5))
    _sweep(sweep_ax, series)
    _overhead(over_ax, series)
    _timeline(line_ax, series.get("timeline") or [])
    env = report.env
    fig.suptitle(
        f"codemode bench — {env.get('cpu')} ({env.get('cores')} cores), Python {env.get('python')}, "
        f"seed {env.get('seed')}, runs {env.get('runs')}{' (quick)' if env.get('quick') else ''}",
        fontsize=10,
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out


def _empty(ax: Any, title: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, "fanout suite not run", ha="center", va="center", transform=ax.transAxes)


def _sweep(ax: Any, series: dict[str, Any]) -> None:
    title = "fan-out: 100 calls, wall time vs max_parallel_sub_calls"
    fixed = (series.get("sweep") or {}).get("fixed")
    if not fixed:
        _empty(ax, title)
        return
    ideal = (series.get("ideal") or {}).get("fixed") or []
    if ideal:
        xs, ys = zip(*ideal, strict=True)
        ax.plot(xs, ys, "k--", label="ideal ceil(N/k) x 10 ms", linewidth=2)
    for subject, points in sorted(fixed.items()):
        if len(points) < 2:
            ax.plot(*zip(*points, strict=True), "x", label=f"{subject} (sequential)")
            continue
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, "o-", label=subject)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cap k")
    ax.set_ylabel("wall time (ms)")
    ax.set_title(title + " (fixed 10 ms)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


def _overhead(ax: Any, series: dict[str, Any]) -> None:
    title = "fan-out: per-call overhead vs N (cap = N, 10 ms each)"
    overhead = series.get("overhead") or {}
    if not overhead:
        _empty(ax, title)
        return
    for subject, points in sorted(overhead.items()):
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, "o-", label=subject)
    ax.set_xscale("log")
    ax.set_xlabel("N calls")
    ax.set_ylabel("(wall - 10 ms) / N (µs per call)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


def _timeline(ax: Any, timings: list[dict[str, Any]]) -> None:
    title = "one run (Python, 100 x 10 ms, cap 10): each sub-call"
    rows = [t for t in timings if t.get("queuedMs") is not None]
    if not rows:
        _empty(ax, title)
        return
    # Times from the first submission: the run's start-up before it is not the fan-out.
    origin = min(t["queuedMs"] for t in rows)
    for index, t in enumerate(rows):
        queued = t["queuedMs"] - origin
        started = (t.get("startedMs") or t["queuedMs"]) - origin
        settled = (t.get("settledMs") or t.get("startedMs") or t["queuedMs"]) - origin
        committed = (t.get("committedMs") or t.get("settledMs") or t["queuedMs"]) - origin
        ax.barh(index, started - queued, left=queued, color="#cccccc", height=0.8)
        ax.barh(index, settled - started, left=started, color="#1f77b4", height=0.8)
        ax.barh(index, max(committed - settled, 0.0), left=settled, color="#ff7f0e", height=0.8)
    from matplotlib.patches import Patch

    ax.legend(
        handles=[
            Patch(color="#cccccc", label="queued"),
            Patch(color="#1f77b4", label="running"),
            Patch(color="#ff7f0e", label="settled -> committed"),
        ],
        fontsize=8,
        loc="lower right",
    )
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first sub-call was submitted")
    ax.set_ylabel("sub-call (submission order)")
    ax.set_title(title)
