"""Code-mode sub-dispatch benchmark, now the package's suites: the engine-only rows
(``codemode-engine``: in-process, no sandbox) of ``roundtrip`` (sub-call vs native
``execute()``) and ``fanout`` (100 x 10 ms over the caps), plus ``mixed`` (barriers).

Usage: ``python benchmarks/bench_dispatch.py [--runs N] [--quick] [--json] [--check]``.
"""

import sys

from codemode.bench import script_main

if __name__ == "__main__":
    sys.exit(script_main(["roundtrip", "fanout", "mixed"], sys.argv[1:], description=__doc__))
