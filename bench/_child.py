"""Measurements that need a fresh process: ``python -m codemode.bench._child KIND ARGS``.

Prints one JSON line on stdout. Kinds: ``cold SUBJECT`` (runtime open -> first result
of ``return 1``, imports done before the clock starts) and ``host-load CASE LANG``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio


async def _cold(subject: str) -> dict[str, Any]:
    from ._model import MONTY, OURS_PY, OURS_TS, SMOLAGENTS

    if subject in (OURS_PY, OURS_TS):
        from ._common import GUESTS, run_direct

        cls = GUESTS[subject]
        start = time.perf_counter()
        async with cls() as runtime:
            value = await run_direct(runtime, "return 1")
            elapsed = time.perf_counter() - start
    elif subject == MONTY:
        import pydantic_monty

        start = time.perf_counter()
        async with pydantic_monty.AsyncMonty(min_processes=1) as monty:
            async with monty.checkout() as session:
                value = await session.feed_run("1")
            elapsed = time.perf_counter() - start
    elif subject == SMOLAGENTS:
        from smolagents.local_python_executor import LocalPythonExecutor

        start = time.perf_counter()
        executor = LocalPythonExecutor([], timeout_seconds=None)
        executor.send_tools({})
        value = executor("1").output
        elapsed = time.perf_counter() - start
    else:
        raise SystemExit(f"unknown subject {subject!r}")
    if value != 1:
        raise SystemExit(f"{subject}: `return 1` gave {value!r}")
    return {"ms": elapsed * 1e3}


def main(argv: list[str]) -> None:
    """Entry point: run one measurement, print its JSON line, exit without teardown."""
    if len(argv) == 2 and argv[0] == "cold":
        out = anyio.run(_cold, argv[1])
    elif len(argv) == 3 and argv[0] == "host-load":
        from ._suite_host_load import child

        out = anyio.run(child, argv[1], argv[2])
    else:
        raise SystemExit(
            f"usage: python -m codemode.bench._child cold SUBJECT | host-load CASE LANG (got {argv})"
        )
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    # pydantic-monty's runtime can abort while the interpreter shuts down; the number is out.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
