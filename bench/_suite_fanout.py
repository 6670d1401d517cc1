"""``fanout``: one program gathers N calls of a parallel-safe tool whose latencies follow
a seeded distribution (fixed / uniform / long-tail), swept over the engine's
``max_parallel_sub_calls`` (a ``ToolRuntime`` option: the cap on sub-call bodies running
at once), against the ideal schedule and the peers under the same cap.

The ideal is the makespan of N calls started in submission order on k slots (for fixed
latencies ``ceil(N / k) * latency``). A guest's wall time is ``run_code``'s minus the
median of adjacent ``return True`` runs (worker checkout and program start).

The targets' configurations (fixed latencies, ``CALLS`` calls, caps ``PAIRED_CAPS``) are
measured in rounds: one run of each guest, of the engine alone and of the asyncio floor
per round, at least ``MIN_ROUNDS``; the floor decides "below floor", and timed seconds
apart it measured another machine (at cap 10 it read 1.08 in one ``--check`` and 1.165 in
the next).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
import statistics
from typing import Any

import anyio

from codemode.engine import MemorySessionLog, ToolRuntime
from codemode.engine.testing import InProcessRuntime

from ._common import (
    GUESTS,
    BenchContext,
    CodeMode,
    execute_run_code,
    monty_base,
    monty_pool,
    open_runtime,
    ready_all,
    smolagents_executor,
    timed,
    tool,
)
from ._model import (
    FLOOR,
    MONTY,
    OURS_PY,
    OURS_TS,
    SMOLAGENTS,
    Row,
    SuiteResult,
    cross_ratios,
    in_table_order,
    summarize,
)

DESCRIPTION = "N gathered calls, latency distributions x max_parallel_sub_calls, vs ideal"
ENGINE = "codemode-engine"
CALLS = 100
FIXED_MS = 10.0
#: pydantic-monty ends a run at 1,000 suspensions ("suspension limit 1000 exceeded").
MONTY_MAX_CALLS = 1000
#: The caps of the targets' configurations (fixed, ``CALLS`` calls): measured in rounds.
PAIRED_CAPS = (10, 100)
#: Rounds for those, whatever ``--runs`` says.
MIN_ROUNDS = 5
_ENGINE_NOTE = "InProcessRuntime: the engine's driver without a sandbox"


def latencies(dist: str, n: int, seed: int) -> list[float]:
    """``n`` latencies in ms for distribution ``dist``, the same for a given ``seed``."""
    rng = random.Random(f"{dist}-{n}-{seed}")
    if dist == "fixed":
        return [FIXED_MS] * n
    if dist == "uniform":
        return [round(rng.uniform(5.0, 15.0), 3) for _ in range(n)]
    if dist == "long-tail":
        # Pareto (alpha 1.5) from 4 ms, capped at 200 ms: most calls short, a few very long.
        return [round(min(200.0, 4.0 * rng.paretovariate(1.5)), 3) for _ in range(n)]
    raise ValueError(f"unknown latency distribution {dist!r}")


def ideal_ms(lat: list[float], cap: int) -> float:
    """Makespan of ``lat`` started in order on ``cap`` slots (each starts when one frees)."""
    slots = [0.0] * min(cap, len(lat))
    end = 0.0
    for ms in lat:
        start = heapq.heappop(slots)
        heapq.heappush(slots, start + ms)
        end = max(end, start + ms)
    return end


def case_name(dist: str, n: int, cap: int) -> str:
    """The row name of one configuration (targets refer to these)."""
    return (
        f"{dist} {n} x {int(FIXED_MS)} ms, cap {cap}"
        if dist == "fixed"
        else f"{dist} {n} calls, cap {cap}"
    )


def _program(subject: str, n: int) -> str:
    if subject == OURS_TS:
        return (
            f"const values = await Promise.all(Array.from({{length: {n}}}, (_, i) => tools.nap({{i}})))\n"
            "return values.every((v, i) => v === i)"
        )
    return (
        "import asyncio\n"
        f"values = await asyncio.gather(*[tools.nap({{'i': i}}) for i in range({n})])\n"
        f"return values == list(range({n}))"
    )


class _Workload:
    """The latency list the ``nap`` tool of every subject reads (index -> ms)."""

    def __init__(self) -> None:
        self.lat: list[float] = []

    async def nap(self, args: Any) -> Any:
        i = args["i"]
        await anyio.sleep(self.lat[i] / 1e3)
        return i


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    if ctx.quick:
        sweep = {"fixed": [5, 10, 50, 100], "uniform": [10, 100], "long-tail": [10, 100]}
        sizes = [10, 100, 500]
    else:
        sweep = {
            "fixed": [1, 5, 10, 25, 50, 100],
            "uniform": [1, 10, 50, 100],
            "long-tail": [1, 10, 50, 100],
        }
        sizes = [10, 50, 100, 200, 500, 1000]
    configs = [(dist, cap) for dist, caps in sweep.items() for cap in caps]
    work = _Workload()
    result = SuiteResult(
        description=DESCRIPTION,
        params={
            "calls": CALLS,
            "sweep": sweep,
            "overhead_sizes": sizes,
            "seed": ctx.seed,
            "runs": ctx.runs,
            "latency": {
                "fixed": "10 ms",
                "uniform": "U(5, 15) ms",
                "long-tail": "min(200, 4 * Pareto(1.5)) ms",
            },
        },
    )
    ctx.plan(len(GUESTS) * 2 + 6)
    series: dict[str, Any] = {"sweep": {}, "overhead": {}, "timeline": []}

    def record(
        subject: str, dist: str, cap: int, n: int, walls: list[float], note: str | None = None
    ) -> Row:
        row = summarize(
            case_name(dist, n, cap),
            subject,
            walls,
            per_op=n,
            ideal=round(ideal_ms(work.lat, cap), 3),
            note=note,
        )
        result.rows.append(row)
        if n == CALLS:
            curve = series["sweep"].setdefault(dist, {}).setdefault(subject, [])
            curve.append([cap, row.median])
        return row

    def reuse(subject: str, n: int) -> Row | None:
        # N calls at cap N may already be a point of the fixed sweep (100 at cap 100).
        wanted = case_name("fixed", n, n)
        return next((r for r in result.rows if r.case == wanted and r.subject == subject), None)

    def overhead(subject: str, n: int, row: Row) -> None:
        # Per-call overhead in µs: what the wall time exceeds one latency by, per call.
        series["overhead"].setdefault(subject, []).append(
            [n, round((row.median - FIXED_MS) / n * 1e3, 3)]
        )

    paired = [cap for cap in PAIRED_CAPS if ("fixed", cap) in configs]
    work.lat = latencies("fixed", CALLS, ctx.seed)
    walls_of: dict[tuple[str, int], list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        modes: dict[tuple[str, int], CodeMode] = {}
        for subject in GUESTS:
            runtime = await stack.enter_async_context(open_runtime(subject))
            for cap in paired:
                modes[(subject, cap)] = CodeMode(runtime, [tool("nap", work.nap)], cap=cap)
        for i in range(max(MIN_ROUNDS, ctx.runs) + 1):  # the first round is a warm-up
            for cap in paired:
                taken = {
                    subject: await _guest_wall(modes[(subject, cap)], _program(subject, CALLS))
                    for subject in GUESTS
                }
                taken[ENGINE] = await _engine_wall(work, cap)
                await ready_all()
                taken[FLOOR] = await _floor_wall(work, cap, CALLS)
                if i:
                    for subject, ms in taken.items():
                        walls_of.setdefault((subject, cap), []).append(ms)
        if 10 in paired:
            series["timeline"] = modes[(OURS_PY, 10)].dispatch_timings()
    for (subject, cap), walls in walls_of.items():
        note = _ENGINE_NOTE if subject == ENGINE else None
        record(subject, "fixed", cap, CALLS, walls, note=note)
    ctx.step("the targets' configurations, in rounds")

    for subject in GUESTS:
        async with open_runtime(subject) as runtime:
            for dist, cap in configs:
                if dist == "fixed" and cap in paired:
                    continue
                work.lat = latencies(dist, CALLS, ctx.seed)
                mode = CodeMode(runtime, [tool("nap", work.nap)], cap=cap)
                walls = await _guest_walls(mode, _program(subject, CALLS), ctx.runs)
                record(subject, dist, cap, CALLS, walls)
            ctx.step(f"{subject} sweep")
            for n in sizes:
                row = reuse(subject, n)
                if row is None:
                    work.lat = latencies("fixed", n, ctx.seed)
                    mode = CodeMode(runtime, [tool("nap", work.nap)], cap=n)
                    row = record(
                        subject,
                        "fixed",
                        n,
                        n,
                        await _guest_walls(mode, _program(subject, n), ctx.runs),
                    )
                overhead(subject, n, row)
            ctx.step(f"{subject} overhead")

    for dist, cap in configs:
        if dist == "fixed" and cap not in paired:
            work.lat = latencies(dist, CALLS, ctx.seed)
            record(
                ENGINE,
                dist,
                cap,
                CALLS,
                [await _engine_wall(work, cap) for _ in range(ctx.runs)],
                note=_ENGINE_NOTE,
            )
    ctx.step("engine")

    with ctx.guard(MONTY):
        if ctx.has(MONTY):
            async with monty_pool() as monty:
                for dist, cap in configs:
                    work.lat = latencies(dist, CALLS, ctx.seed)
                    record(
                        MONTY,
                        dist,
                        cap,
                        CALLS,
                        [await _monty_wall(monty, work, cap, CALLS) for _ in range(ctx.runs)],
                        note="host-side semaphore of the cap's size",
                    )
                # Monty stops a run past 1,000 suspensions (its own limit): N = 1,000 is left out.
                for n in [n for n in sizes if n < MONTY_MAX_CALLS]:
                    row = reuse(MONTY, n)
                    if row is None:
                        work.lat = latencies("fixed", n, ctx.seed)
                        row = record(
                            MONTY,
                            "fixed",
                            n,
                            n,
                            [await _monty_wall(monty, work, n, n) for _ in range(ctx.runs)],
                        )
                    overhead(MONTY, n, row)
    ctx.step("pydantic-monty")

    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            import time

            work.lat = latencies("fixed", CALLS, ctx.seed)

            def nap(args: Any) -> Any:
                time.sleep(work.lat[args["i"]] / 1e3)  # its tools are plain functions
                return args["i"]

            executor = smolagents_executor({"nap": nap})
            walls = []
            for _ in range(min(ctx.runs, 2)):
                clock = timed()
                executor(f"values = [nap({{'i': i}}) for i in range({CALLS})]\nlen(values)")
                walls.append(clock())
            # Sequential: the same workload at cap 1 (no fan-out in its executor).
            record(
                SMOLAGENTS, "fixed", 1, CALLS, walls, note="sequential: no async in its executor"
            )
    ctx.step("smolagents")

    for dist, cap in configs:
        if dist == "fixed" and cap in paired:
            continue
        work.lat = latencies(dist, CALLS, ctx.seed)
        record(
            FLOOR, dist, cap, CALLS, [await _floor_wall(work, cap, CALLS) for _ in range(ctx.runs)]
        )
    for n in sizes:
        row = reuse(FLOOR, n)
        if row is None:
            work.lat = latencies("fixed", n, ctx.seed)
            row = record(
                FLOOR, "fixed", n, n, [await _floor_wall(work, n, n) for _ in range(ctx.runs)]
            )
        overhead(FLOOR, n, row)
    ctx.step("floor")

    series["ideal"] = {
        dist: [[cap, round(ideal_ms(latencies(dist, CALLS, ctx.seed), cap), 3)] for cap in caps]
        for dist, caps in sweep.items()
    }
    for curves in series["sweep"].values():
        for curve in curves.values():
            curve.sort()
    result.series = series
    result.rows = in_table_order(
        result.rows,
        [case_name(dist, CALLS, cap) for dist, cap in configs]
        + [case_name("fixed", n, n) for n in sizes],
    )
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    if ctx.has(SMOLAGENTS):
        result.peers[SMOLAGENTS] = "ok (sequential: measured at cap 1 only)"
    if ctx.has(MONTY) and max(sizes) >= MONTY_MAX_CALLS:
        result.peers[MONTY] = f"ok (overhead sweep to N < {MONTY_MAX_CALLS}: its suspension limit)"
    return result


async def _guest_walls(mode: CodeMode, program: str, runs: int) -> list[float]:
    walls = [await _guest_wall(mode, program) for _ in range(runs + 1)]
    return walls[1:]  # the first is a warm-up


async def _guest_wall(mode: CodeMode, program: str) -> float:
    """One run's wall time, the median of three adjacent ``return True`` runs subtracted."""
    base = []
    for _ in range(3):
        await ready_all()
        clock = timed()
        await mode.run(
            "return true" if mode.rt.code_runtime.language == "typescript" else "return True"
        )
        base.append(clock())
    await ready_all()
    clock = timed()
    value = await mode.run(program)
    elapsed = clock()
    if value is not True:
        raise RuntimeError(f"fan-out program returned {value!r}")
    return max(0.0, elapsed - statistics.median(base))


async def _engine_wall(work: _Workload, cap: int) -> float:
    elapsed: list[float] = []

    async def body(tools: Any, print: Any) -> Any:
        clock = timed()
        values = await asyncio.gather(*(tools.nap({"i": i}) for i in range(len(work.lat))))
        elapsed.append(clock())
        assert values == list(range(len(work.lat)))
        return None

    rt = ToolRuntime(mode="code", max_parallel_sub_calls=cap, code_runtime=InProcessRuntime(body))
    rt.register(tool("nap", work.nap))
    agent = rt.scope("bench", session=MemorySessionLog())
    await execute_run_code(rt, agent, "fanout", "benchmark")
    return elapsed[0]


async def _monty_wall(monty: Any, work: _Workload, cap: int, n: int) -> float:
    gate = asyncio.Semaphore(cap)

    async def nap(args: Any) -> Any:
        async with gate:
            return await work.nap(args)

    program = f"import asyncio\nvalues = await asyncio.gather(*[nap({{'i': i}}) for i in range({n})])\nlen(values)"
    base = await monty_base(monty)
    async with monty.checkout() as session:
        clock = timed()
        value = await session.feed_run(program, external_lookup={"nap": nap})
        elapsed = clock()
    if value != n:
        raise RuntimeError(f"monty fan-out returned {value!r}")
    return max(0.0, elapsed - base)


async def _floor_wall(work: _Workload, cap: int, n: int) -> float:
    gate = asyncio.Semaphore(cap)

    async def nap(i: int) -> Any:
        async with gate:
            return await work.nap({"i": i})

    clock = timed()
    values = await asyncio.gather(*(nap(i) for i in range(n)))
    elapsed = clock()
    assert values == list(range(n))
    return elapsed
