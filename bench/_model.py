"""The data a bench run produces: rows, targets, suite results and the report.

Every time is in milliseconds (``unit`` says so on each row); ratios are plain floats.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

__all__ = [
    "FLOOR",
    "MONTY",
    "OURS_PY",
    "OURS_TS",
    "PEERS",
    "QUICKJS_FLOOR",
    "SMOLAGENTS",
    "Report",
    "Row",
    "SuiteResult",
    "Target",
    "in_table_order",
    "summarize",
]

OURS_PY = "codemode-python"
OURS_TS = "codemode-typescript"
MONTY = "pydantic-monty"
SMOLAGENTS = "smolagents"
FLOOR = "asyncio-floor"
#: A plain ``os.fork()`` of a process with the fork server's imports, answering over a
#: socket: the floor of a fresh process per run (no lock-down, no guest).
FORK_FLOOR = "fork-floor"
#: The TypeScript programs in a bare QuickJS context in the host (no guest, no limits):
#: what the TypeScript guest's compute cannot beat.
QUICKJS_FLOOR = "quickjs-floor"
#: The subjects measured next to codemode, in report order.
PEERS = (MONTY, SMOLAGENTS, FLOOR)


class Row(msgspec.Struct, kw_only=True):
    """One measured case for one subject: the distribution of its samples."""

    case: str
    subject: str
    n: int
    median: float
    p95: float
    p99: float
    unit: str = "ms"
    #: Operations per second at the median (what one operation is, the case says).
    throughput: float | None = None
    ideal: float | None = None
    ratio_to_ideal: float | None = None
    #: This row's median over the same case's median for each other subject measured.
    ratio_to: dict[str, float] = msgspec.field(default_factory=dict)
    #: Where the suite measured this subject and a peer side by side, one sample of each
    #: per round: the median of the per-round ratios (``paired_ratio``), by peer. A
    #: ``ratio_to_peer`` target reads this when it is there.
    paired: dict[str, float] = msgspec.field(default_factory=dict)
    note: str | None = None


class Target(msgspec.Struct, kw_only=True):
    """A speed target: ``measured <= target`` (``met`` is ``None`` when not measured)."""

    name: str
    subject: str
    target: float
    unit: str
    measured: float | None
    met: bool | None
    note: str = ""
    #: ``measured / target``: by how much a target is missed (or beaten).
    ratio: float | None = None
    #: The same measure of a floor measured in the same run (what no design with this
    #: target's constraints can beat: a bare fork per run, a bare interpreter's imports,
    #: bare QuickJS), when the target names one.
    floor: float | None = None
    #: Missed, but the floor itself is above the limit: the target is impossible here.
    below_floor: bool = False

    def __post_init__(self) -> None:
        if self.ratio is None and self.measured is not None and self.target > 0:
            self.ratio = round(self.measured / self.target, 3)


class SuiteResult(msgspec.Struct, kw_only=True):
    """What one suite measured."""

    description: str
    params: dict[str, Any]
    rows: list[Row] = msgspec.field(default_factory=list)
    targets: list[Target] = msgspec.field(default_factory=list)
    #: Peer -> ``"ok"``, ``"missing: <why>"`` or ``"n/a: <why>"`` for this suite.
    peers: dict[str, str] = msgspec.field(default_factory=dict)
    seconds: float = 0.0
    #: Series the plots draw (fan-out sweep, per-call overhead, one dispatch timeline).
    series: dict[str, Any] = msgspec.field(default_factory=dict)
    error: str | None = None


class Report(msgspec.Struct, kw_only=True):
    """One ``codemode bench`` run, as ``--json`` prints it."""

    env: dict[str, Any]
    suites: dict[str, SuiteResult]
    peers: dict[str, str]


def _rank(ordered: list[float], q: float) -> float:
    # Nearest rank: an observed sample, never an interpolation between two.
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def paired_ratio(samples: list[float], peer: list[float]) -> float | None:
    """The median of ``samples[i] / peer[i]`` over rounds that timed one sample of each,
    side by side; None unless both have the same number of samples (one per round) and
    every peer sample is positive.

    Each ratio is taken within its round: a slow phase of this machine that hits a round
    moves that round's ratio, where a ratio of the two medians could take one median from
    a fast round and the other from a slow one (the same commit read 0.35x and 1.1x
    pydantic-monty's round trip in two ``--check`` runs that way).
    """
    if not samples or len(samples) != len(peer) or any(p <= 0 for p in peer):
        return None
    ratios = sorted(s / p for s, p in zip(samples, peer, strict=True))
    middle = len(ratios) // 2
    median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
    return round(median, 4)


def pair_with(rows: list[Row], samples: dict[str, list[float]], peer: str) -> None:
    """Set ``paired[peer]`` on each row whose subject's ``samples`` were taken in the
    same rounds as ``peer``'s (a peer that failed part-way has none to pair with)."""
    theirs = samples.get(peer)
    if not theirs:
        return
    for row in rows:
        ours = samples.get(row.subject)
        if row.subject == peer or ours is None:
            continue
        ratio = paired_ratio(ours, theirs)
        if ratio is not None:
            row.paired[peer] = ratio


def summarize(
    case: str,
    subject: str,
    samples_ms: list[float],
    *,
    per_op: float = 1.0,
    ideal: float | None = None,
    note: str | None = None,
) -> Row:
    """A row from samples in ms; ``per_op`` operations happen in one sample."""
    if not samples_ms:
        raise ValueError(f"no samples for {case!r} ({subject})")
    ordered = sorted(samples_ms)
    median = (
        _rank(ordered, 0.5)
        if len(ordered) % 2
        else ((ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2)
    )
    return Row(
        case=case,
        subject=subject,
        n=len(ordered),
        median=round(median, 6),
        p95=round(_rank(ordered, 0.95), 6),
        p99=round(_rank(ordered, 0.99), 6),
        throughput=round(per_op * 1000.0 / median, 3) if median > 0 else None,
        ideal=ideal,
        ratio_to_ideal=round(median / ideal, 4) if ideal else None,
        note=note,
    )


def in_table_order(rows: list[Row], cases: list[str]) -> list[Row]:
    """``rows`` grouped by subject (in the order subjects first appear), each subject's
    rows in the order of ``cases`` (first listing wins; unlisted cases go last): for a
    suite that measured some cases out of their table order."""
    rank: dict[str, int] = {}
    for row in rows:
        rank.setdefault(row.subject, len(rank))
    position: dict[str, int] = {}
    for name in cases:
        position.setdefault(name, len(position))
    return sorted(rows, key=lambda row: (rank[row.subject], position.get(row.case, len(position))))


def cross_ratios(rows: list[Row]) -> None:
    """Fill each codemode row's ``ratio_to``: its median over every other subject's on the case."""
    by_case: dict[str, list[Row]] = {}
    for row in rows:
        by_case.setdefault(row.case, []).append(row)
    for same in by_case.values():
        for row in same:
            if not row.subject.startswith("codemode"):
                continue
            row.ratio_to = {
                other.subject: round(row.median / other.median, 4)
                for other in same
                if other.subject != row.subject and other.median > 0
            }
