"""The bench's fresh-process measurements (``codemode.bench._child``), run for real."""

from __future__ import annotations

import json
import subprocess
import sys


def _child(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "codemode.bench._child", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_fork_floor_reports_warm_and_back_to_back_samples() -> None:
    out = _child("fork-floor", "3", "0.001")
    assert set(out) == {"warm", "b2b"}
    for key in ("warm", "b2b"):
        samples = out[key]
        assert isinstance(samples, list) and len(samples) == 3
        assert all(isinstance(ms, float) and ms > 0 for ms in samples)


def test_payload_floor_moves_the_value_both_ways_and_times_an_empty_one_too() -> None:
    out = _child("payload-floor", "200000", "3")
    assert set(out) == {"full", "empty"}
    full, empty = out["full"], out["empty"]
    assert isinstance(full, list) and isinstance(empty, list)
    assert len(full) == len(empty) == 3
    assert all(isinstance(ms, float) and ms > 0 for ms in (*full, *empty))
    # 200 KB each way through a fresh process costs more than an empty exchange.
    assert sorted(full)[1] > sorted(empty)[1]


def test_rss_growth_is_reported_per_thousand_runs() -> None:
    out = _child("rss", "codemode-python", "5", "50")
    assert set(out) == {"kb_per_1000", "grown_kb"}
    # Scaled from 50 runs to 1,000: twenty times what grew (pages: multiples of 4 KB).
    assert out["kb_per_1000"] == out["grown_kb"] * 20  # type: ignore[operator]


def test_unknown_kinds_are_refused_with_the_usage() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "codemode.bench._child", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "fork-floor SAMPLES PAUSE" in done.stderr
