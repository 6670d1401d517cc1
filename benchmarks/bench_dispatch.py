"""Code-mode sub-dispatch benchmark: driver overhead and fan-out concurrency.

Runs entirely in-process with ``codemode.engine.testing.InProcessRuntime`` (no sandbox), so the
numbers measure the engine: the per-run single-lane driver plus the guarded pipeline.

1. **Per-call overhead.** One ``run_code`` program makes N sequential sub-calls of a
   no-op tool; in the same run (same event loop, same registry, same scope and session)
   the program also times N bare native ``rt.execute()`` calls of that tool. The ratio is
   what code mode costs per call over a native call. Target: < 2x.
2. **Fan-out.** One program gathers 100 calls of a parallel-safe tool that sleeps 10 ms,
   with ``max_parallel_sub_calls`` 1, 10 and 100. Wall time is compared with the ideal
   ``ceil(100 / k) * 10 ms``. Target: <= 1.15x.

Usage: ``python benchmarks/bench_dispatch.py [--calls N] [--repeat R] [--check]``;
``--check`` exits 1 when a target is missed. The best of R repeats is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import sys
import time
from typing import Any

import anyio

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.testing import InProcessRuntime

OVERHEAD_TARGET = 2.0
FANOUT_TARGET = 1.15
FANOUT_CALLS = 100
FANOUT_SLEEP_S = 0.010


def _noop_tool() -> Any:
    async def execute(args: Any, ctx: Any) -> Any:
        return None

    return define_tool(
        name="noop",
        description="Do nothing.",
        parameters={},
        output=ToolOutput(schema={"type": "null"}, render=lambda args, value: [text("ok")]),
        execute=execute,
    )


def _sleep_tool() -> Any:
    async def execute(args: Any, ctx: Any) -> Any:
        await anyio.sleep(FANOUT_SLEEP_S)
        return args["i"]

    return define_tool(
        name="nap",
        description="Sleep 10 ms and return the index.",
        parameters={"i": {"type": "integer", "required": True}},
        output=ToolOutput(
            schema={"type": "integer"}, render=lambda args, value: [text(str(value))]
        ),
        execute=execute,
        is_concurrency_safe=lambda args: True,
    )


def _run_code(rt: ToolRuntime, agent: Any, call_id: str) -> Any:
    return rt.execute(
        ToolExecutionInput(
            call_id=call_id,
            name="run_code",
            arguments={"code": "benchmark", "description": "Run the benchmark program"},
            signal=AbortController().signal,
            agent=agent,
        )
    )


async def overhead(calls: int, *, session: bool = True) -> tuple[float, float]:
    """Seconds per native ``execute()`` and per sub-call, measured in one run.

    Native calls and sub-calls are timed in interleaved blocks of 100 so that load on
    the machine affects both sides alike. With ``session`` the calling scope has a
    ``MemorySessionLog``, so every sub-call also appends its two dispatch events.
    """
    totals = {"native": 0.0, "code": 0.0}
    block = 100

    async def program(tools: Any, print: Any) -> Any:
        signal = AbortController().signal

        def native(i: int) -> Any:
            return rt.execute(
                ToolExecutionInput(
                    call_id=f"n{i}", name="noop", arguments={}, signal=signal, agent=agent
                )
            )

        for i in range(50):  # warm both paths
            await tools.noop({})
            await native(i)
        gc.collect()
        for first in range(0, calls, block):
            n = min(block, calls - first)
            start = time.perf_counter()
            for i in range(n):
                await native(first + i)
            middle = time.perf_counter()
            for _ in range(n):
                await tools.noop({})
            totals["native"] += middle - start
            totals["code"] += time.perf_counter() - middle
        return None

    rt = ToolRuntime(mode="both", code_runtime=InProcessRuntime(program))
    rt.register(_noop_tool())
    agent = rt.scope("bench", session=MemorySessionLog() if session else None)
    result = await _run_code(rt, agent, "overhead")
    assert not result.is_error, result
    if session:
        assert len(agent.session.events) == 2 * (calls + 50)
    return totals["native"] / calls, totals["code"] / calls


async def fanout(cap: int) -> float:
    """Wall seconds for one program gathering 100 10-ms calls under ``cap``."""
    elapsed: dict[str, float] = {}

    async def program(tools: Any, print: Any) -> Any:
        start = time.perf_counter()
        values = await asyncio.gather(*(tools.nap({"i": i}) for i in range(FANOUT_CALLS)))
        elapsed["wall"] = time.perf_counter() - start
        assert values == list(range(FANOUT_CALLS))
        return None

    rt = ToolRuntime(
        mode="code", max_parallel_sub_calls=cap, code_runtime=InProcessRuntime(program)
    )
    rt.register(_sleep_tool())
    agent = rt.scope("bench", session=MemorySessionLog())
    result = await _run_code(rt, agent, f"fanout-{cap}")
    assert not result.is_error, result
    return elapsed["wall"]


def _best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return min(runs, key=lambda pair: pair[1] / pair[0])


async def main(calls: int, repeat: int) -> bool:
    with_log = _best([await overhead(calls) for _ in range(repeat)])
    without_log = _best([await overhead(calls, session=False) for _ in range(repeat)])
    print(f"Per-call overhead ({calls:,} sequential calls of a no-op tool; best of {repeat})")
    print(f"  {'path':<40}{'per call':>10}{'ratio':>8}{'target':>9}")
    all_ok = True
    for label, (native, code) in (
        ("run_code sub-call, 2 session events", with_log),
        ("run_code sub-call, no session", without_log),
    ):
        ratio = code / native
        ok = ratio < OVERHEAD_TARGET
        all_ok = all_ok and ok
        print(f"  {'native rt.execute()':<40}{native * 1e6:>8.1f}us{1.0:>8.2f}")
        print(
            f"  {label:<40}{code * 1e6:>8.1f}us{ratio:>8.2f}{'< 2.00':>9}  {'ok' if ok else 'MISS'}"
        )
    print()
    print(f"Fan-out ({FANOUT_CALLS} calls of a 10 ms parallel-safe tool; best of {repeat})")
    print(f"  {'max_parallel_sub_calls':<24}{'wall':>10}{'ideal':>10}{'ratio':>8}{'target':>9}")
    for cap in (1, 10, 100):
        wall = min([await fanout(cap) for _ in range(repeat)])
        ideal = math.ceil(FANOUT_CALLS / cap) * FANOUT_SLEEP_S
        ratio = wall / ideal
        ok = ratio <= FANOUT_TARGET
        all_ok = all_ok and ok
        print(
            f"  {cap:<24}{wall * 1e3:>8.1f}ms{ideal * 1e3:>8.1f}ms{ratio:>8.2f}"
            f"{'<= 1.15':>9}  {'ok' if ok else 'MISS'}"
        )
    return all_ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    options = parser.parse_args()
    passed = anyio.run(main, options.calls, options.repeat)
    sys.exit(1 if options.check and not passed else 0)
