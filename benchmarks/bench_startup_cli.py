"""Start-up of the package and the CLI, each a fresh process (median of ``--runs``):

- ``import codemode`` and ``import codemode.agent`` (``python -c``; the bare interpreter's
  own start, ``python -c pass``, is printed as the floor);
- ``codemode --version``;
- ``codemode agent TASK`` one-shot against the bench's loopback model server
  (``codemode.bench._cli_startup``, as ``codemode bench --suite startup`` runs it): from
  the spawn to the first model request, and to the exit (one streamed reply, no tool
  call).

The children run with bytecode caches, as an installed package has them (pip compiles a
wheel at install time): ``PYTHONDONTWRITEBYTECODE`` is dropped from their environment, and
the warm-up run writes the caches of a source checkout. With it set, ~150 of the project's
own modules are compiled from source on every start (~150 ms more on this machine).

Targets (issue 24, target 8): ``import codemode`` <= 100 ms, the agent one-shot to exit
<= 0.5 s. Wall-clock numbers: on a loaded machine, read them as such.

Usage: ``python benchmarks/bench_startup_cli.py [--runs N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from codemode.bench._cli_startup import agent_one_shot, cli_environment, python_c, spawn_ms

TARGETS_MS = {"import codemode": 100.0, "codemode agent one-shot, to exit": 500.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    py = sys.executable
    samples: dict[str, list[float]] = {}

    def add(label: str, value: float) -> None:
        samples.setdefault(label, []).append(value)

    with cli_environment() as (env, workspace):
        agent_one_shot(env, workspace)  # warm-up: bytecode caches, the page cache
        for _ in range(opts.runs):
            add("python -c pass (floor)", python_c("pass", env))
            add("import codemode", python_c("import codemode", env))
            add("import codemode.agent", python_c("import codemode.agent", env))
            add("codemode --version", spawn_ms([py, "-m", "codemode.cli", "--version"], env))
            first, total = agent_one_shot(env, workspace)
            add("codemode agent one-shot, to the first request", first)
            add("codemode agent one-shot, to exit", total)
    rows = []
    for label, values in samples.items():
        target = TARGETS_MS.get(label)
        median = statistics.median(values)
        rows.append(
            {
                "case": label,
                "median_ms": round(median, 1),
                "min_ms": round(min(values), 1),
                "target_ms": target,
                "met": None if target is None else median <= target,
            }
        )
    if opts.json:
        print(json.dumps({"runs": opts.runs, "rows": rows}, indent=2))
    else:
        print(f"{'case':<48} {'median ms':>10} {'min ms':>8}  target")
        for row in rows:
            target = "" if row["target_ms"] is None else f"<= {row['target_ms']:.0f} ms"
            met = "" if row["met"] is None else ("  met" if row["met"] else "  MISSED")
            print(
                f"{row['case']:<48} {row['median_ms']:>10.1f} {row['min_ms']:>8.1f}  {target}{met}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
