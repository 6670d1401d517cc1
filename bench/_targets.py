"""The speed targets (issue 13, part 1; issue 24) as data, and the ``--check`` verdict.

A target names a suite, a case and the subjects it applies to; it is met when the
measured value (the row's median, or its ratio to the ideal, to the floor or to a peer
measured in the same run) is at most the target. A target whose row was not measured is reported with ``met: null`` and does
not fail ``--check`` (``--suite`` may leave suites out on purpose).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ._model import FLOOR, MONTY, OURS_PY, OURS_TS, Report, Row, SuiteResult, Target

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
    #: ``ratio_to_peer`` (the median over ``peer``'s median on ``peer_case``).
    measure: str = "median"
    subjects: tuple[str, ...] = BOTH
    peer: str = MONTY
    #: The peer's case, when it differs from ``case`` (default: the same case).
    peer_case: str | None = None


TARGETS: tuple[TargetSpec, ...] = (
    TargetSpec(
        suite="startup",
        case="warm start",
        name="warm start p50 <= pydantic-monty's",
        limit=1.0,
        unit="x monty",
        measure="ratio_to_peer",
    ),
    TargetSpec(suite="startup", case="back-to-back", name="back-to-back p50", limit=1.0, unit="ms"),
    TargetSpec(
        suite="startup",
        case="cold start",
        name="cold start (runtime open -> first result)",
        limit=25.0,
        unit="ms",
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
    ),
    TargetSpec(
        suite="fanout",
        case="fixed 100 x 10 ms, cap 10",
        name="fan-out 100 x 10 ms at cap 10",
        limit=1.1,
        unit="x ideal",
        measure="ratio_to_ideal",
    ),
    TargetSpec(
        suite="payload",
        case="in+out 1 MB",
        name="1 MB in + 1 MB out <= pydantic-monty's",
        limit=1.0,
        unit="x monty",
        measure="ratio_to_peer",
    ),
    TargetSpec(
        suite="compute",
        case="sum(i*i) over 1e6",
        name=f"compute within {COMPUTE_MARGIN}x of the floor",
        limit=COMPUTE_MARGIN,
        unit="x floor",
        measure="ratio_to_floor",
    ),
    TargetSpec(
        suite="compute",
        case="dict/str loop 200,000",
        name=f"guarded dict/str loop within {COMPUTE_MARGIN}x of the floor",
        limit=COMPUTE_MARGIN,
        unit="x floor",
        measure="ratio_to_floor",
    ),
    TargetSpec(
        suite="compute",
        case="class loop 200,000",
        name=f"guarded class loop within {COMPUTE_MARGIN}x of the floor",
        limit=COMPUTE_MARGIN,
        unit="x floor",
        measure="ratio_to_floor",
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
        peer = rows.get((spec.peer_case or spec.case, spec.peer))
        if peer is None or peer.median <= 0:
            return None
        return round(row.median / peer.median, 4)
    if measure == "median":
        return row.median
    if measure == "ratio_to_ideal":
        return row.ratio_to_ideal
    if measure == "ratio_to_floor":
        return row.ratio_to.get(FLOOR)
    raise ValueError(f"unknown target measure {measure!r}")


def apply_targets(name: str, result: SuiteResult, extra: tuple[Target, ...] = ()) -> None:
    """Append the suite's targets (from ``TARGETS``, plus ``extra``) to ``result``."""
    rows = {(row.case, row.subject): row for row in result.rows}
    for spec in TARGETS:
        if spec.suite != name:
            continue
        for subject in spec.subjects:
            row = rows.get((spec.case, subject))
            value = _measured(row, spec, rows) if row is not None else None
            result.targets.append(
                Target(
                    name=spec.name,
                    subject=subject,
                    target=spec.limit,
                    unit=spec.unit,
                    measured=value,
                    met=None if value is None else value <= spec.limit,
                    note=(
                        "not measured"
                        if row is None
                        else f"{spec.peer} not measured"
                        if value is None
                        else ""
                    ),
                )
            )
    result.targets.extend(extra)


def missed_targets(suites: Mapping[str, SuiteResult]) -> list[tuple[str, Target]]:
    """Every (suite, target) whose ``met`` is ``False``."""
    return [(name, t) for name, suite in suites.items() for t in suite.targets if t.met is False]


def check_exit_code(report: Report) -> int:
    """``--check``'s exit status: 1 when a measured target is missed or a suite failed, else 0."""
    failed = any(suite.error for suite in report.suites.values())
    return 1 if failed or missed_targets(report.suites) else 0
