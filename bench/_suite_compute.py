"""``compute``: ``sum(i*i)`` over 1e6 inside the program (no sub-call): the guests must
not be slower than plain CPython in the host (the floor) by more than the stated margin."""

from __future__ import annotations

import statistics

from ._common import (
    GUESTS,
    BenchContext,
    monty_pool,
    open_runtime,
    ready_all,
    run_direct,
    smolagents_executor,
    time_ready,
    timed,
)
from ._model import FLOOR, MONTY, OURS_TS, SMOLAGENTS, SuiteResult, cross_ratios, summarize

DESCRIPTION = "sum(i*i) over 1e6 in the program, start-up subtracted"
CASE = "sum(i*i) over 1e6"
N = 1_000_000
EXPECTED = sum(i * i for i in range(N))
PY = f"sum(i * i for i in range({N}))"
TS = f"let s = 0\nfor (let i = 0; i < {N}; i++) s += i * i\nreturn s"
#: smolagents' tree-walking interpreter takes seconds for 1e6: it runs 1e5, scaled x10.
SMOL_N = 100_000


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    runs = max(2, ctx.runs)
    result = SuiteResult(
        description=DESCRIPTION, params={"n": N, "runs": runs, "smolagents_n": SMOL_N}
    )
    ctx.plan(len(GUESTS) + 3)
    for subject in GUESTS:
        program = TS if subject == OURS_TS else f"return {PY}"
        async with open_runtime(subject) as runtime:
            await run_direct(runtime, program)  # warm-up
            samples = []
            for _ in range(runs):
                base = statistics.median(
                    [await time_ready(run_direct(runtime, "return 1")) for _ in range(2)]
                )
                await ready_all()
                clock = timed()
                value = await run_direct(runtime, program)
                samples.append(max(0.0, clock() - base))
                # QuickJS sums in doubles: past 2**53 the total is rounded, the work is the same.
                if subject != OURS_TS and value != EXPECTED:
                    raise RuntimeError(f"compute gave {value!r}")
        result.rows.append(
            summarize(
                CASE,
                subject,
                samples,
                note="TypeScript: a for loop in QuickJS" if subject == OURS_TS else None,
            )
        )
        ctx.step(subject)
    with ctx.guard(MONTY):
        if ctx.has(MONTY):
            async with monty_pool() as monty:
                samples = []
                for _ in range(runs):
                    async with monty.checkout() as session:
                        clock = timed()
                        await session.feed_run("0")
                        base = clock()
                    async with monty.checkout() as session:
                        clock = timed()
                        value = await session.feed_run(PY)
                        samples.append(max(0.0, clock() - base))
                    if value != EXPECTED:
                        raise RuntimeError(f"monty compute gave {value!r}")
                result.rows.append(summarize(CASE, MONTY, samples))
    ctx.step("pydantic-monty")
    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            executor = smolagents_executor({})
            samples = []
            for _ in range(max(1, runs // 2)):
                clock = timed()
                executor(f"sum(i * i for i in range({SMOL_N}))")
                samples.append(clock() * (N / SMOL_N))
            result.rows.append(
                summarize(
                    CASE,
                    SMOLAGENTS,
                    samples,
                    note=f"measured over {SMOL_N:,}, scaled x{N // SMOL_N}",
                )
            )
    ctx.step("smolagents")
    samples = []
    for _ in range(runs):
        clock = timed()
        value = sum(i * i for i in range(N))
        samples.append(clock())
    result.rows.append(
        summarize(CASE, FLOOR, samples, note="the same expression in the host's CPython")
    )
    ctx.step("floor")
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    return result
