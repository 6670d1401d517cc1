"""``codemode bench`` as a real subprocess: tiny configurations, the JSON's shape, exit
codes, peers switched off, and the plot file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from codemode.bench import Report, check_exit_code

PNG = b"\x89PNG\r\n\x1a\n"
PEERS = ("pydantic-monty", "smolagents", "asyncio-floor")


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode.cli", "bench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def one_run_without_peers(suite: str) -> dict[str, Any]:
    """``suite`` of a ``--quick --runs 1`` JSON run with both external peers off."""
    proc = bench(
        "--suite", suite, "--runs", "1", "--quick", "--json",
        "--no-peer", "smolagents", "--no-peer", "pydantic-monty",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)["suites"][suite]
    return result


def counts(rows: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Each row's sample count, by (case, subject)."""
    return {(row["case"], row["subject"]): row["n"] for row in rows}


def _assert_shape(data: dict[str, Any], suites: list[str]) -> None:
    assert set(data) == {"env", "suites", "peers"}
    env = data["env"]
    for key in ("cpu", "cores", "python", "kernel", "packages", "seed", "runs"):
        assert key in env, key
    assert env["packages"]["codemode"]
    assert list(data["suites"]) == suites
    assert set(data["peers"]) == set(PEERS)
    for status in data["peers"].values():
        assert status == "ok" or status.startswith("missing: ")
    for suite in data["suites"].values():
        assert suite["error"] is None
        assert suite["rows"]
        for row in suite["rows"]:
            for key in ("case", "subject", "n", "median", "p95", "p99", "unit"):
                assert key in row, (key, row)
            assert row["median"] <= row["p95"] <= row["p99"]
        for target in suite["targets"]:
            assert {"name", "subject", "target", "measured", "met"} <= set(target)


def test_roundtrip_json_has_the_documented_shape_and_measures_monty(tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    proc = bench("--suite", "roundtrip", "--runs", "2", "--quick", "--json", "--plot", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # exactly one JSON object on stdout
    _assert_shape(data, ["roundtrip"])
    assert data["env"]["runs"] == 2 and data["env"]["quick"] is True
    suite = data["suites"]["roundtrip"]
    subjects = {row["subject"] for row in suite["rows"]}
    assert {"codemode-python", "codemode-typescript", "asyncio-floor"} <= subjects
    assert data["peers"]["pydantic-monty"] == "ok"  # a dev dependency
    assert "pydantic-monty" in subjects
    # The guests and pydantic-monty are measured round by round (one run of each per
    # round), at least five rounds whatever --runs says: the same count in every row.
    counts = {
        (row["case"], row["subject"]): row["n"]
        for row in suite["rows"]
        if row["subject"] in ("codemode-python", "codemode-typescript", "pydantic-monty")
    }
    assert len(counts) == 5 and set(counts.values()) == {5}
    rtt = [t for t in suite["targets"] if t["name"].startswith("sub-call RTT")]
    assert {t["subject"] for t in rtt} == {"codemode-python", "codemode-typescript"}
    # Measured against pydantic-monty's row of the same run: a ratio, met or not.
    assert all(t["met"] in (True, False) and t["unit"] == "x monty" for t in rtt)
    # Progress bars and tables went to stderr, the plot to its file.
    assert "roundtrip" in proc.stderr
    assert out.read_bytes()[:8] == PNG


def test_disabled_peers_are_reported_missing_and_not_measured() -> None:
    proc = bench(
        "--suite", "mixed", "--runs", "1", "--quick", "--json", "--no-peer", "smolagents",
        env={"CODEMODE_BENCH_NO_PEERS": "pydantic-monty"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["peers"]["pydantic-monty"].startswith("missing: disabled")
    assert data["peers"]["smolagents"].startswith("missing: disabled")
    assert data["peers"]["asyncio-floor"] == "ok"
    subjects = {row["subject"] for row in data["suites"]["mixed"]["rows"]}
    assert "pydantic-monty" not in subjects
    assert "asyncio-floor" in subjects


def test_compute_floors_are_sampled_beside_every_guest_sample() -> None:
    # A floor timed in a block of its own measured a different machine (this one's speed
    # drifts): each guest sample has a CPython floor sample beside it, and each
    # TypeScript sample a bare-QuickJS one; at least five of each, even with --runs 1.
    rows = one_run_without_peers("compute")["rows"]
    n = counts(rows)
    cases = {case for case, _ in n}
    assert len(cases) == 3
    for case in cases:
        py, ts = n[(case, "codemode-python")], n[(case, "codemode-typescript")]
        assert py == ts == 5
        assert n[(case, "asyncio-floor")] == py + ts
        assert n[(case, "quickjs-floor")] == ts
        assert "beside" in next(
            r["note"] for r in rows if r["case"] == case and r["subject"] == "asyncio-floor"
        )


def test_payload_target_case_is_measured_in_rounds_with_its_peer_and_floors() -> None:
    # `in+out 1 MB` (the target's case): both guests, pydantic-monty and both floors take
    # one run each per round, so every one of them has the same count; the rows still
    # read grouped by subject, in size order, though that case was measured last.
    proc = bench(
        "--suite", "payload", "--runs", "1", "--quick", "--json", "--no-peer", "smolagents"
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["suites"]["payload"]["rows"]
    paired = {row["subject"]: row for row in rows if row["case"] == "in+out 1 MB"}
    subjects = ("codemode-python", "codemode-typescript", "pydantic-monty")
    for subject in (*subjects, "quickjs-floor", "fork-floor"):
        assert paired[subject]["n"] == 5, subject
    assert "fresh forked process" in paired["fork-floor"]["note"]
    for subject in subjects:
        cases = [row["case"] for row in rows if row["subject"] == subject]
        assert cases[6:9] == ["in 1 MB", "out 1 MB", "in+out 1 MB"], cases
    order = [row["subject"] for row in rows]
    assert order == sorted(order, key=order.index)  # each subject's rows are together


def test_fanout_target_configurations_are_measured_in_rounds_with_their_floor() -> None:
    # Fixed 100 x 10 ms at caps 10 and 100 (the targets): both guests, the engine alone
    # and the asyncio floor take one run each per round, at least five rounds; the rest
    # of the sweep keeps --runs. The rows still read grouped by subject, in sweep order.
    suite = one_run_without_peers("fanout")
    rows = suite["rows"]
    n = counts(rows)
    subjects = ("codemode-python", "codemode-typescript", "codemode-engine", "asyncio-floor")
    for cap in (10, 100):
        for subject in subjects:
            assert n[(f"fixed 100 x 10 ms, cap {cap}", subject)] == 5, (cap, subject)
    assert n[("fixed 100 x 10 ms, cap 5", "codemode-python")] == 1
    cases = [row["case"] for row in rows if row["subject"] == "codemode-python"]
    assert cases[:4] == [f"fixed 100 x 10 ms, cap {cap}" for cap in (5, 10, 50, 100)]
    order = [row["subject"] for row in rows]
    assert order == sorted(order, key=order.index)
    assert suite["series"]["timeline"]  # one cap-10 run's sub-call timeline, for the plot


def test_check_exit_status_follows_the_targets_in_the_report() -> None:
    proc = bench("--suite", "pipeline", "--runs", "1", "--quick", "--json", "--check")
    assert proc.returncode in (0, 1), proc.stderr
    report = msgspec.convert(json.loads(proc.stdout), Report)
    assert proc.returncode == check_exit_code(report)
    targets = report.suites["pipeline"].targets
    assert [t.name for t in targets] == ["execute() with no listeners"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "nope"], "unknown suite 'nope' (choose from: startup, roundtrip, fanout"),
        (["--suite", "roundtrip", "--no-peer", "monty"], "unknown peer 'monty'"),
        (["--runs", "0"], "--runs"),
        (["--hog", "65"], "--hog"),
    ],
)
def test_usage_errors_exit_2_before_anything_runs(args: list[str], message: str) -> None:
    proc = bench(*args, "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert message in proc.stderr


def test_plot_into_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    proc = bench("--suite", "pipeline", "--plot", str(tmp_path / "no" / "out.png"))
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr


def test_the_benchmarks_scripts_are_thin_wrappers_over_the_suites() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pipeline.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--runs", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data["suites"]) == ["pipeline"]
    assert data["suites"]["pipeline"]["rows"]


def _busy_children() -> set[int]:
    """Pids of this process's children running the bench's busy loop."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except (OSError, ValueError):
            continue
        if ppid == os.getpid() and b"while os.getppid() == parent" in cmdline:
            found.add(int(entry))
    return found


def test_the_cpu_hog_runs_n_busy_processes_and_kills_them() -> None:
    from codemode.bench._common import cpu_hog

    assert _busy_children() == set()
    with cpu_hog(2):
        running = _busy_children()
        assert len(running) == 2
        for pid in running:
            with open(f"/proc/{pid}/stat") as handle:
                assert handle.read().rsplit(")", 1)[1].split()[0] in {"R", "S"}
    assert _busy_children() == set()
    for pid in running:
        assert not os.path.exists(f"/proc/{pid}")
