"""The speed targets (issue 13, part 1; issue 24) as data, and the ``--check`` verdict.

A target names a suite, a case and the subjects it applies to; it is met when the
measured value (the row's median, or its ratio to the ideal, to the floor or to a peer
measured in the same run) is at most the target. A target whose row was not measured is
reported with ``met: null`` and does not fail ``--check`` (``--suite`` may leave suites out
on purpose). A target may name, per subject, a floor subject measured in the same run: when
the target is missed and the floor's own value (the same measure) is above the limit too,
the target is ``below_floor`` -- impossible on this machine for any design with its
constraints -- and reported so; it does not fail ``--check`` (issue 24: "a target shown to
be below a floor measured in the same run").
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ._model import (
    FLOOR,
    FORK_FLOOR,
    MONTY,
    OURS_PY,
    OURS_TS,
    QUICKJS_FLOOR,
    Report,
    Row,
    SuiteResult,
    Target,
)

__all__ = ["TARGETS", "TargetSpec", "apply_targets", "check_exit_code", "missed_targets"]

BOTH = (OURS_PY, OURS_TS)
#: How much slower than plain CPython in the host the guests' compute may be.
COMPUTE_MARGIN = 1.3


class TargetSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One target: ``measure`` of the row (suite, case, subject) must be <= ``limit``."""

    suite: str
    case: str
    name: str
    limit: float
    unit: str
    #: ``median`` (the row's unit), ``ratio_to_ideal``, ``ratio_to_floor`` or
    #: ``ratio_to_peer`` (the row's ``paired`` ratio to ``peer`` where the suite measured
    #: them round by round, else its median over ``peer``'s median on ``peer_case``).
    measure: str = "median"
    subjects: tuple[str, ...] = BOTH
    peer: str = MONTY
    #: The peer's case, when it differs from ``case`` (default: the same case).
    peer_case: str | None = None
    #: (subject, floor subject) pairs: the floor that bounds that subject on this case.
    floors: tuple[tuple[str, str], ...] = ()


#: A fresh process per run costs at least a fork, the child's event loop and a round trip.
_FORK = ((OURS_PY, FORK_FLOOR), (OURS_TS, FORK_FLOOR))
#: Fan-out's floor: the same calls as plain asyncio tasks in the host (no boundary, no
#: pipeline), whose ratio to the ideal is the event loop's own timer and wake-up cost.
_ASYNCIO = ((OURS_PY, FLOOR), (OURS_TS, FLOOR))
#: The TypeScript guest's compute, and its values on the way out and in, run in QuickJS.
_QUICKJS = ((OURS_TS, QUICKJS_FLOOR),)


TARGETS: tuple[TargetSpec, ...] = (
    TargetSpec(
        suite="startup",
        case="warm start",
        name="warm start p50 <= pydantic-monty's",
        limit=1.0,
        unit="x monty",
        measure="ratio_to_peer",
    ),
    TargetSpec(
        suite="startup",
        case="back-to-back",
        name="back-to-back p50",
        limit=1.0,
        unit="ms",
        floors=_FORK,
    ),
    TargetSpec(
        suite="startup",
        case="cold start",
        name="cold start (runtime open -> first result)",
        limit=25.0,
        unit="ms",
        floors=_FORK,
    ),
    TargetSpec(
        suite="startup",
        case="host RSS growth per 1,000 runs",
        name="host RSS growth per 1,000 runs",
        limit=50.0,
        unit="KB",
    ),
    TargetSpec(
        suite="startup",
        case="idle worker USS",
        name="idle worker USS <= 3.5 MB",
        limit=3.5 * 1024,
        unit="KB",
    ),
    TargetSpec(
        suite="roundtrip",
        case="sub-call round trip via run_code",
        name="sub-call RTT with the session log <= 0.7x pydantic-monty's",
        limit=0.7,
        unit="x monty",
        measure="ratio_to_peer",
        peer_case="sub-call round trip",
    ),
    TargetSpec(
        suite="roundtrip",
        case="sub-call round trip via run_code",
        name="engine alone per sub-call",
        limit=0.030,
        unit="ms",
        subjects=("codemode-engine",),
    ),
    TargetSpec(
        suite="fanout",
        case="fixed 100 x 10 ms, cap 100",
        name="fan-out 100 x 10 ms at cap 100",
        limit=1.3,
        unit="x ideal",
        measure="ratio_to_ideal",
        floors=_ASYNCIO,
    ),
    TargetSpec(
        suite="fanout",
        case="fixed 100 x 10 ms, cap 10",
        name="fan-out 100 x 10 ms at cap 10",
        limit=1.1,
        unit="x ideal",
        measure="ratio_to_ideal",
        floors=_ASYNCIO,
    ),
    TargetSpec(
        suite="payload",
        case="in+out 1 MB",
        name="1 MB in + 1 MB out <= pydantic-monty's",
        limit=1.0,
        unit="x monty",
        measure="ratio_to_peer",
        floors=((OURS_PY, FORK_FLOOR), *_QUICKJS),
    ),
    TargetSpec(
        suite="compute",
        case="sum(i*i) over 1e6",
        name=f"compute within {COMPUTE_MARGIN}x of the floor",
        limit=COMPUTE_MARGIN,
        unit="x floor",
        measure="ratio_to_floor",
        floors=_QUICKJS,
    ),
    TargetSpec(
        suite="compute",
        case="dict/str loop 200,000",
        name=f"guarded dict/str loop within {COMPUTE_MARGIN}x of the floor",
        limit=COMPUTE_MARGIN,
        unit="x floor",
        measure="ratio_to_floor",
        floors=_QUICKJS,
    ),
    TargetSpec(
        suite="compute",
        case="class loop 200,000",
        name=f"guarded class loop within {COMPUTE_MARGIN}x of the floor",
        limit=COMPUTE_MARGIN,
        unit="x floor",
        measure="ratio_to_floor",
        floors=_QUICKJS,
    ),
    TargetSpec(
        suite="tools",
        case="glob *.py",
        name="glob within 1.3x of direct rg",
        limit=1.3,
        unit="x rg",
        measure="ratio_to_ideal",
        subjects=("codemode-tools",),
    ),
    TargetSpec(
        suite="tools",
        case="grep needle",
        name="grep within 1.3x of direct rg --json",
        limit=1.3,
        unit="x rg",
        measure="ratio_to_ideal",
        subjects=("codemode-tools",),
    ),
    TargetSpec(
        suite="tools",
        case="bash true, one-shot",
        name="one-shot bash within 2x of bash -c spawned directly",
        limit=2.0,
        unit="x bash -c",
        measure="ratio_to_ideal",
        subjects=("codemode-tools",),
    ),
    TargetSpec(
        suite="startup",
        case="import codemode",
        name="import codemode <= 100 ms",
        limit=100.0,
        unit="ms",
        subjects=("codemode-cli",),
    ),
    TargetSpec(
        suite="startup",
        case="agent one-shot, to exit",
        name="codemode agent one-shot <= 0.5 s",
        limit=500.0,
        unit="ms",
        subjects=("codemode-cli",),
    ),
    TargetSpec(
        suite="pipeline",
        case="execute(), no listeners",
        name="execute() with no listeners",
        limit=0.015,
        unit="ms",
        subjects=("codemode-engine",),
    ),
)


def _measured(row: Row, spec: TargetSpec, rows: Mapping[tuple[str, str], Row]) -> float | None:
    measure = spec.measure
    if measure == "ratio_to_peer":
        paired = row.paired.get(spec.peer)
        if paired is not None:
            return paired  # measured side by side, round by round (``paired_ratio``)
        peer = rows.get((spec.peer_case or spec.case, spec.peer))
        if peer is None or peer.median <= 0:
            return None
        return round(row.median / peer.median, 4)
    if measure == "median":
        return row.median
    if measure == "ratio_to_ideal":
        return row.ratio_to_ideal
    if measure == "ratio_to_floor":
        if FLOOR in row.ratio_to:  # a codemode row (``cross_ratios``)
            return row.ratio_to[FLOOR]
        floor = rows.get((row.case, FLOOR))  # a floor subject's own row
        if floor is None or floor.median <= 0:
            return None
        return round(row.median / floor.median, 4)
    raise ValueError(f"unknown target measure {measure!r}")


def apply_targets(name: str, result: SuiteResult, extra: tuple[Target, ...] = ()) -> None:
    """Append the suite's targets (from ``TARGETS``, plus ``extra``) to ``result``."""
    rows = {(row.case, row.subject): row for row in result.rows}
    for spec in TARGETS:
        if spec.suite != name:
            continue
        floors = dict(spec.floors)
        for subject in spec.subjects:
            row = rows.get((spec.case, subject))
            value = _measured(row, spec, rows) if row is not None else None
            floor_row = rows.get((spec.case, floors[subject])) if subject in floors else None
            floor = _measured(floor_row, spec, rows) if floor_row is not None else None
            met = None if value is None else value <= spec.limit
            below = met is False and floor is not None and floor > spec.limit
            note = (
                "not measured"
                if row is None
                else f"{spec.peer} not measured"
                if value is None
                else ""
            )
            if below:
                note = f"below the floor: {floors[subject]} is {floor:.4g} {spec.unit}"
            result.targets.append(
                Target(
                    name=spec.name,
                    subject=subject,
                    target=spec.limit,
                    unit=spec.unit,
                    measured=value,
                    met=met,
                    note=note,
                    floor=floor,
                    below_floor=below,
                )
            )
    result.targets.extend(extra)


def missed_targets(suites: Mapping[str, SuiteResult]) -> list[tuple[str, Target]]:
    """Every (suite, target) whose ``met`` is ``False`` and that its floor does not rule out."""
    return [
        (name, t)
        for name, suite in suites.items()
        for t in suite.targets
        if t.met is False and not t.below_floor
    ]


def check_exit_code(report: Report) -> int:
    """``--check``'s exit status: 1 when a measured target is missed or a suite failed, else 0."""
    failed = any(suite.error for suite in report.suites.values())
    return 1 if failed or missed_targets(report.suites) else 0
