"""Sandbox benchmark, now the package's suites: ``codemode bench --suite startup --suite
roundtrip --suite fanout`` (warm/cold/back-to-back start, sub-call round trip, fan-out
swept over ``max_parallel_sub_calls``), next to pydantic-monty, smolagents and the floor.

Usage: ``python benchmarks/bench_sandbox.py [--runs N] [--quick] [--json] [--plot F] [--check]``.
"""

import sys

from codemode.bench import script_main

if __name__ == "__main__":
    sys.exit(script_main(["startup", "roundtrip", "fanout"], sys.argv[1:], description=__doc__))
