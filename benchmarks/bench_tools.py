"""Search and read tools against plain ripgrep, now the package's ``tools`` suite:
``glob``/``grep`` through the pipeline vs ``rg`` with the same argv on a generated tree
(20,000 files; 2,000 with ``--quick``), and ``read`` of a large file.

Usage: ``python benchmarks/bench_tools.py [--runs N] [--quick] [--json] [--check]``.
"""

import sys

from codemode.bench import script_main

if __name__ == "__main__":
    sys.exit(script_main(["tools"], sys.argv[1:], description=__doc__))
