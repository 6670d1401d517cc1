"""The pure parts of the bench: statistics, ideals, seeded workloads, targets and the
``--check`` verdict on synthetic results, the plot file, peer probing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from codemode.bench import (
    Report,
    Row,
    SuiteResult,
    Target,
    apply_targets,
    check_exit_code,
    missed_targets,
    write_plot,
)
from codemode.bench._env import PEER_MODULES, peer_status
from codemode.bench._model import cross_ratios, pair_with, paired_ratio, summarize
from codemode.bench._suite_fanout import case_name, ideal_ms, latencies
from codemode.bench._suite_mixed import ideal_ms as mixed_ideal_ms


def _row(case: str, subject: str, median: float, **extra: object) -> Row:
    return Row(case=case, subject=subject, n=3, median=median, p95=median, p99=median, **extra)


def test_summarize_takes_nearest_rank_percentiles_and_throughput() -> None:
    row = summarize("c", "s", [float(x) for x in range(1, 101)], per_op=10, ideal=25.0)
    assert row.median == 50.5
    assert row.p95 == 95.0 and row.p99 == 99.0
    assert row.throughput == pytest.approx(10 * 1000 / 50.5, rel=1e-3)
    assert row.ratio_to_ideal == pytest.approx(50.5 / 25.0, rel=1e-3)
    with pytest.raises(ValueError, match="no samples"):
        summarize("c", "s", [])


def test_cross_ratios_compare_codemode_rows_with_every_other_subject_on_the_case() -> None:
    rows = [
        _row("x", "codemode-python", 2.0),
        _row("x", "pydantic-monty", 4.0),
        _row("y", "asyncio-floor", 1.0),
    ]
    cross_ratios(rows)
    assert rows[0].ratio_to == {"pydantic-monty": 0.5}
    assert rows[1].ratio_to == {}  # peers are not compared with each other


def test_fanout_ideal_is_ceil_n_over_k_times_latency_for_fixed_latencies() -> None:
    lat = latencies("fixed", 100, seed=0)
    for cap in (1, 3, 10, 100, 250):
        assert ideal_ms(lat, cap) == pytest.approx(math.ceil(100 / cap) * 10.0)
    # With varied latencies the ideal is the in-order list schedule: never below the
    # longest call or the total work spread over the slots.
    varied = latencies("long-tail", 100, seed=3)
    assert ideal_ms(varied, 10) >= max(max(varied), sum(varied) / 10)
    assert case_name("fixed", 100, 10) == "fixed 100 x 10 ms, cap 10"


def test_latency_draws_are_seeded() -> None:
    assert latencies("uniform", 50, seed=7) == latencies("uniform", 50, seed=7)
    assert latencies("uniform", 50, seed=7) != latencies("uniform", 50, seed=8)
    assert all(5.0 <= x <= 15.0 for x in latencies("uniform", 200, seed=1))
    assert all(4.0 <= x <= 200.0 for x in latencies("long-tail", 200, seed=1))
    with pytest.raises(ValueError, match="unknown latency distribution"):
        latencies("bimodal", 1, seed=0)


def test_mixed_ideal_counts_each_exclusive_call_as_a_barrier() -> None:
    # 100 calls of 5 ms, every tenth exclusive, cap 10: ten (9 parallel, 1 alone) rounds.
    assert mixed_ideal_ms(True) == pytest.approx(100.0)
    assert mixed_ideal_ms(False) == pytest.approx(50.0)


def _suite(rows: list[Row]) -> SuiteResult:
    return SuiteResult(description="synthetic", params={}, rows=rows)


def test_targets_judge_median_ratio_to_ideal_floor_and_peer() -> None:
    startup = _suite(
        [
            _row("warm start", "codemode-python", 0.5),
            _row("warm start", "codemode-typescript", 0.7),
            _row("warm start", "pydantic-monty", 0.625),
            _row("back-to-back", "codemode-python", 0.9),
        ]
    )
    apply_targets("startup", startup)
    # Warm start is judged against pydantic-monty's median of the same run.
    warm = {t.subject: t for t in startup.targets if t.name.startswith("warm start p50")}
    assert warm["codemode-python"].met is True and warm["codemode-python"].measured == 0.8
    assert warm["codemode-typescript"].met is False and warm["codemode-typescript"].measured == 1.12
    assert warm["codemode-python"].unit == "x monty"
    b2b = {t.subject: t for t in startup.targets if t.name == "back-to-back p50"}
    assert b2b["codemode-python"].met is True and b2b["codemode-python"].measured == 0.9

    # Without the peer's row, the ratio is not measured (never met by default).
    alone = _suite([_row("warm start", "codemode-python", 0.5)])
    apply_targets("startup", alone)
    lone = next(t for t in alone.targets if t.name.startswith("warm start p50"))
    assert lone.met is None and lone.note == "pydantic-monty not measured"

    # A peer's row on another case: our RTT through run_code against Monty's RTT.
    roundtrip = _suite(
        [
            _row("sub-call round trip via run_code", "codemode-python", 0.1),
            _row("sub-call round trip", "pydantic-monty", 0.2),
        ]
    )
    apply_targets("roundtrip", roundtrip)
    rtt = next(t for t in roundtrip.targets if t.subject == "codemode-python" and "RTT" in t.name)
    assert rtt.measured == 0.5 and rtt.met is True
    cold = [t for t in startup.targets if t.name.startswith("cold start")]
    assert cold and all(t.met is None and t.note == "not measured" for t in cold)

    fanout = _suite(
        [
            _row(
                "fixed 100 x 10 ms, cap 100",
                "codemode-python",
                12.0,
                ideal=10.0,
                ratio_to_ideal=1.2,
            )
        ]
    )
    apply_targets("fanout", fanout)
    at_100 = next(
        t for t in fanout.targets if t.subject == "codemode-python" and "cap 100" in t.name
    )
    assert at_100.met is True and at_100.unit == "x ideal"

    compute = _suite(
        [_row("sum(i*i) over 1e6", "codemode-python", 50.0, ratio_to={"asyncio-floor": 1.6})]
    )
    apply_targets("compute", compute)
    py = next(t for t in compute.targets if t.subject == "codemode-python")
    assert py.measured == 1.6 and py.met is False


def test_a_target_below_its_floor_is_reported_so_and_does_not_fail_check() -> None:
    # Back-to-back under 1 ms when a bare fork per run already takes 1.4 ms in the same
    # run: impossible here, said so; a floor under the limit leaves a miss a miss.
    startup = _suite(
        [
            _row("back-to-back", "codemode-python", 1.9),
            _row("back-to-back", "codemode-typescript", 1.9),
            _row("back-to-back", "fork-floor", 1.4),
            _row("cold start", "codemode-python", 110.0),
            _row("cold start", "fork-floor", 20.0),
        ]
    )
    apply_targets("startup", startup)
    b2b = next(t for t in startup.targets if t.name == "back-to-back p50")
    assert b2b.met is False and b2b.below_floor and b2b.floor == 1.4
    assert b2b.note == "below the floor: fork-floor is 1.4 ms"
    cold = next(
        t for t in startup.targets if t.name.startswith("cold") and t.subject == "codemode-python"
    )
    assert cold.met is False and not cold.below_floor and cold.floor == 20.0
    assert [t for _, t in missed_targets({"startup": startup})] == [cold]
    assert check_exit_code(_report({"startup": startup})) == 1

    # Python's 1 MB payload against Monty's, when a fresh process per call alone takes
    # longer than Monty's whole call: below the fresh-process floor.
    payload = _suite(
        [
            _row("in+out 1 MB", "codemode-python", 9.0),
            _row("in+out 1 MB", "pydantic-monty", 5.0),
            _row("in+out 1 MB", "fork-floor", 7.5),
        ]
    )
    apply_targets("payload", payload)
    py_payload = next(t for t in payload.targets if t.subject == "codemode-python")
    assert py_payload.measured == 1.8 and py_payload.below_floor and py_payload.floor == 1.5

    # The TypeScript guest's compute against bare QuickJS, both as ratios to CPython.
    compute = _suite(
        [
            _row("class loop 200,000", "codemode-typescript", 36.0),
            _row("class loop 200,000", "quickjs-floor", 35.0),
            _row("class loop 200,000", "asyncio-floor", 20.0),
        ]
    )
    cross_ratios(compute.rows)
    apply_targets("compute", compute)
    ts = next(
        t for t in compute.targets if t.subject == "codemode-typescript" and "class" in t.name
    )
    assert ts.measured == 1.8 and ts.floor == 1.75 and ts.below_floor
    assert check_exit_code(_report({"compute": compute})) == 0


def test_a_paired_ratio_is_the_median_of_per_round_ratios() -> None:
    # Three rounds; the machine slowed down in the third for both: either way, half.
    ours = [1.0, 1.5, 6.0]
    peer = [2.0, 3.0, 12.0]
    assert paired_ratio(ours, peer) == 0.5
    assert summarize("c", "a", ours).median / summarize("c", "b", peer).median == 0.5
    # A slow phase that hit only the peer's third sample, and ours in the second: the
    # rounds read 0.5, 0.75 and 0.125 (median 0.5); the medians, taken from different
    # rounds (our second, the peer's first or second), read 0.75.
    ours_drift = [1.0, 1.5, 1.5]
    peer_drift = [2.0, 2.0, 12.0]
    assert paired_ratio(ours_drift, peer_drift) == 0.5
    assert summarize("c", "a", ours_drift).median / summarize("c", "b", peer_drift).median == 0.75
    assert paired_ratio([1.0, 3.0], [2.0, 2.0]) == 1.0  # an even count: the middle two
    # Not rounds of the same run: unequal counts, an empty side, a zero peer sample.
    assert paired_ratio([1.0, 2.0], [1.0]) is None
    assert paired_ratio([], []) is None
    assert paired_ratio([1.0], [0.0]) is None


def test_a_peer_target_reads_the_paired_ratio_where_the_suite_paired_the_rounds() -> None:
    # The medians alone say 1.2x Monty (missed); round by round it was 0.9x, and the
    # floor too is judged round by round.
    samples = {
        "codemode-python": [1.8, 0.9, 4.5],
        "pydantic-monty": [2.0, 1.0, 3.75],
        "fork-floor": [2.4, 1.2, 6.0],
    }
    rows = [summarize("in+out 1 MB", subject, values) for subject, values in samples.items()]
    pair_with(rows, samples, "pydantic-monty")
    by_subject = {row.subject: row for row in rows}
    assert by_subject["codemode-python"].paired == {"pydantic-monty": 0.9}
    assert by_subject["fork-floor"].paired == {"pydantic-monty": 1.2}
    assert by_subject["pydantic-monty"].paired == {}
    payload = _suite(rows)
    apply_targets("payload", payload)
    py = next(t for t in payload.targets if t.subject == "codemode-python")
    assert py.measured == 0.9 and py.met is True and py.floor == 1.2

    # A peer that failed part-way (fewer samples) pairs with nothing: medians decide.
    short = {"codemode-python": [1.0, 1.0, 1.0], "pydantic-monty": [2.0, 2.0]}
    rows = [summarize("warm start", subject, values) for subject, values in short.items()]
    pair_with(rows, short, "pydantic-monty")
    assert all(row.paired == {} for row in rows)
    startup = _suite(rows)
    apply_targets("startup", startup)
    warm = next(t for t in startup.targets if t.subject == "codemode-python")
    assert warm.measured == 0.5


def _report(suites: dict[str, SuiteResult]) -> Report:
    return Report(env={}, suites=suites, peers={})


def _target(met: bool | None) -> Target:
    return Target(
        name="t", subject="s", target=1.0, unit="ms", measured=None if met is None else 0.5, met=met
    )


def test_check_exit_code_is_1_only_for_a_missed_target_or_a_failed_suite() -> None:
    ok = _suite([])
    ok.targets = [_target(True), _target(None)]
    assert check_exit_code(_report({"a": ok})) == 0
    assert check_exit_code(_report({})) == 0
    missed = _suite([])
    missed.targets = [_target(True), _target(False)]
    assert check_exit_code(_report({"a": ok, "b": missed})) == 1
    assert [name for name, _ in missed_targets({"a": ok, "b": missed})] == ["b"]
    failed = SuiteResult(description="x", params={}, error="RuntimeError: boom")
    assert check_exit_code(_report({"a": ok, "c": failed})) == 1


def test_plot_writes_a_png_with_and_without_fanout_data(tmp_path: Path) -> None:
    fanout = _suite([])
    fanout.series = {
        "sweep": {
            "fixed": {"codemode-python": [[10, 120.0], [100, 20.0]], "smolagents": [[1, 1000.0]]}
        },
        "ideal": {"fixed": [[10, 100.0], [100, 10.0]]},
        "overhead": {"codemode-python": [[10, 50.0], [100, 30.0]]},
        "timeline": [
            {
                "queuedMs": 1.0,
                "startedMs": 1.5,
                "settledMs": 11.5,
                "committedMs": 11.6,
                "inFlight": 0,
            },
            {
                "queuedMs": 1.1,
                "startedMs": None,
                "settledMs": None,
                "committedMs": None,
                "inFlight": 1,
            },
        ],
    }
    full = write_plot(
        Report(env={"cpu": "x"}, suites={"fanout": fanout}, peers={}), tmp_path / "a.png"
    )
    empty = write_plot(_report({}), tmp_path / "b.png")
    for path in (full, empty):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unimportable_peer_is_reported_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PEER_MODULES, "pydantic-monty", ("codemode_bench_no_such_module", "x"))
    monkeypatch.delenv("CODEMODE_BENCH_NO_PEERS", raising=False)
    status = peer_status()
    assert status["pydantic-monty"].startswith(
        "missing: codemode_bench_no_such_module not importable"
    )
    assert status["asyncio-floor"] == "ok"


def test_a_peer_failing_inside_a_suite_is_marked_failed_not_raised() -> None:
    from codemode.bench._common import BenchContext

    ctx = BenchContext(runs=1, quick=True, seed=0, peers={"pydantic-monty": "ok"})
    measured = []
    with ctx.guard("pydantic-monty"):
        measured.append(1)
        raise RuntimeError("suspension limit 1000 exceeded")
    assert measured == [1]
    assert ctx.failures == {
        "pydantic-monty": "missing: failed here (RuntimeError: suspension limit 1000 exceeded)"
    }
