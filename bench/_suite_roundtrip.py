"""``roundtrip``: sequential sub-call round trip (program -> host tool -> program), per
call, on a ready runtime; and what the engine alone adds (in-process, no sandbox: a
``run_code`` sub-call against a native ``execute()`` of the same no-op tool)."""

from __future__ import annotations

import statistics
from typing import Any

from codemode.engine import AbortController, MemorySessionLog, ToolExecutionInput, ToolRuntime
from codemode.engine.testing import InProcessRuntime

from ._common import (
    GUESTS,
    BenchContext,
    CodeMode,
    execute_run_code,
    monty_pool,
    open_runtime,
    run_direct,
    smolagents_executor,
    time_ready,
    timed,
    tool,
)
from ._model import FLOOR, MONTY, OURS_TS, SMOLAGENTS, SuiteResult, cross_ratios, summarize

DESCRIPTION = "sequential sub-call round trip per call (baseline run subtracted)"
CASE = "sub-call round trip"
ENGINE = "codemode-engine"


async def echo(args: Any) -> Any:
    """The tool every subject calls: returns its argument."""
    return args


def program(subject: str, calls: int) -> str:
    """``calls`` sequential echo calls in the subject's language."""
    if subject == OURS_TS:
        return f"for (let i = 0; i < {calls}; i++) await tools.echo({{i}})\nreturn 1"
    return f"for i in range({calls}):\n    await tools.echo({{'i': i}})\nreturn 1"


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    calls = 300 if ctx.quick else 1000
    runs = ctx.runs
    result = SuiteResult(description=DESCRIPTION, params={"calls_per_run": calls, "runs": runs})
    ctx.plan(2 * len(GUESTS) + 4)
    for subject in GUESTS:
        async with open_runtime(subject) as runtime:
            base = statistics.median(
                [await time_ready(run_direct(runtime, "return 1")) for _ in range(5)]
            )
            per_call = []
            for i in range(runs + 1):
                total = await time_ready(
                    run_direct(runtime, program(subject, calls), {"echo": echo})
                )
                if i:  # the first is a warm-up
                    per_call.append((total - base) / calls)
            result.rows.append(
                summarize(CASE, subject, per_call, note=f"{calls} calls per run, direct binding")
            )
            ctx.step(f"{subject} direct")
            mode = CodeMode(runtime, [tool("echo", echo)], cap=10)
            base = statistics.median([await time_ready(mode.run("return 1")) for _ in range(3)])
            per_call = []
            for i in range(runs + 1):
                total = await time_ready(mode.run(program(subject, calls)))
                if i:
                    per_call.append((total - base) / calls)
            result.rows.append(
                summarize(
                    f"{CASE} via run_code",
                    subject,
                    per_call,
                    note="pipeline + 2 session events per call",
                )
            )
            ctx.step(f"{subject} run_code")

    native, code = await _engine(calls, runs)
    result.rows.append(summarize("native execute()", ENGINE, native, note="in-process, no sandbox"))
    result.rows.append(
        summarize(f"{CASE} via run_code", ENGINE, code, note="InProcessRuntime: engine cost alone")
    )
    ctx.step("engine")

    with ctx.guard(MONTY):
        if ctx.has(MONTY):
            async with monty_pool() as monty:
                per_call = []
                for i in range(runs + 1):
                    async with monty.checkout() as session:
                        clock = timed()
                        await session.feed_run("0")
                        base = clock()
                    async with monty.checkout() as session:
                        clock = timed()
                        await session.feed_run(
                            f"for i in range({calls}):\n    await echo({{'i': i}})\n1",
                            external_lookup={"echo": echo},
                        )
                        if i:
                            per_call.append((clock() - base) / calls)
                result.rows.append(summarize(CASE, MONTY, per_call, note="async external function"))
    ctx.step("pydantic-monty")
    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            executor = smolagents_executor({"echo": lambda args: args})
            per_call = []
            for i in range(runs + 1):
                clock = timed()
                executor("0")
                base = clock()
                clock = timed()
                executor(f"for i in range({calls}):\n    echo({{'i': i}})\n1")
                if i:
                    per_call.append((clock() - base) / calls)
            result.rows.append(summarize(CASE, SMOLAGENTS, per_call, note="sync tool function"))
    ctx.step("smolagents")
    per_call = []
    for _ in range(runs):
        clock = timed()
        for i in range(calls):
            await echo({"i": i})
        per_call.append(clock() / calls)
    result.rows.append(summarize(CASE, FLOOR, per_call, note="await echo(args) in the host"))
    ctx.step("floor")
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    return result


async def _engine(calls: int, runs: int) -> tuple[list[float], list[float]]:
    """Per native ``execute()`` and per ``run_code`` sub-call, interleaved in blocks of 100
    in one program so load on the machine hits both alike."""
    native_ms: list[float] = []
    code_ms: list[float] = []

    async def body(tools: Any, print: Any) -> Any:
        signal = AbortController().signal

        def native(i: int) -> Any:
            return rt.execute(
                ToolExecutionInput(
                    call_id=f"n{i}", name="echo", arguments={}, signal=signal, agent=agent
                )
            )

        for i in range(50):  # warm both paths
            await tools.echo({})
            await native(i)
        for _ in range(runs):
            totals = [0.0, 0.0]
            for first in range(0, calls, 100):
                n = min(100, calls - first)
                clock = timed()
                for i in range(n):
                    await native(first + i)
                middle = clock()
                for _ in range(n):
                    await tools.echo({})
                totals[0] += middle
                totals[1] += clock() - middle
            native_ms.append(totals[0] / calls)
            code_ms.append(totals[1] / calls)
        return None

    rt = ToolRuntime(mode="both", code_runtime=InProcessRuntime(body))
    rt.register(tool("echo", echo))
    agent = rt.scope("bench", session=MemorySessionLog())
    await execute_run_code(rt, agent, "engine", "benchmark")
    return native_ms, code_ms
