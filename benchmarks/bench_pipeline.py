"""Pipeline overhead, now the package's ``pipeline`` suite: ``execute()`` with no
listener, one per stage, three per stage, against a bare ``await body(args)``; schema
validation next to ``jsonschema``.

Usage: ``python benchmarks/bench_pipeline.py [--runs N] [--quick] [--json] [--check]``.
"""

import sys

from codemode.bench import script_main

if __name__ == "__main__":
    sys.exit(script_main(["pipeline"], sys.argv[1:], description=__doc__))
