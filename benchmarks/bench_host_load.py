"""Host load benchmark, now the package's ``host-load`` suite: loop lag and RSS of the
host under hostile program data, both guests, one fresh process per case (``--quick``
runs three of the seven cases).

Usage: ``python benchmarks/bench_host_load.py [--quick] [--json] [--check]``.
"""

import sys

from codemode.bench import script_main

if __name__ == "__main__":
    sys.exit(script_main(["host-load"], sys.argv[1:], description=__doc__))
