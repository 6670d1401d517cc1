"""``script_main``: what the thin scripts under ``benchmarks/`` call (a fixed set of
suites with ``codemode bench``'s options)."""

from __future__ import annotations

import argparse
import os
import sys

from ._plot import write_plot
from ._render import console_for, render_report
from ._runner import BenchError, BenchOptions, report_json, run_bench
from ._targets import check_exit_code

__all__ = ["script_main"]


def script_main(suites: list[str], argv: list[str] | None = None, *, description: str = "") -> int:
    """Run ``suites`` with ``--runs/--seed/--quick/--json/--plot/--check``; the exit status."""
    parser = argparse.ArgumentParser(
        description=description or f"codemode bench --suite {' --suite '.join(suites)}"
    )
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--plot", default=None, help="write the fan-out figure to this PNG")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    console = console_for(stderr=args.json)
    try:
        report = run_bench(
            BenchOptions(suites=tuple(suites), runs=args.runs, quick=args.quick, seed=args.seed),
            console=console,
        )
    except BenchError as exc:
        console.print(f"error: {exc}", highlight=False)
        return 2
    render_report(report, console)
    if args.plot:
        write_plot(report, args.plot)
    if args.json:
        sys.stdout.write(report_json(report) + "\n")
    sys.stdout.flush()
    code = check_exit_code(report) if args.check else 0
    # pydantic-monty's runtime can abort while the interpreter shuts down; the report is out.
    os._exit(code)
