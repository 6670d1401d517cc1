"""``mixed``: parallel-safe and exclusive calls interleaved in one gather (every tenth
call exclusive), against the same calls all parallel-safe: what each exclusive call's
barrier (drain everything in flight, run alone, then resume) costs over the ideal.

The barrier cost is a difference of two overheads over their ideals, each a few ms, so
it is measured in pairs: each repetition runs the all-parallel program and then the
mixed one back to back, and the cost is the median of the pairs' differences. (Measured
as two separate blocks, all-parallel first, load drift between the blocks on a shared
machine landed in the difference whole and could make it negative.) A median below zero
remains possible — the mixed run lost less to overhead over its ideal than the
all-parallel one (seen for pydantic-monty's host-side gate even in paired runs): no
barrier cost shows, and it is reported as 0 with the measured value in the note."""

from __future__ import annotations

import asyncio
import functools
import math
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ._common import (
    GUESTS,
    BenchContext,
    CodeMode,
    monty_base,
    monty_pool,
    open_runtime,
    ready_all,
    time_ready,
    timed,
    tool,
)
from ._model import FLOOR, MONTY, OURS_TS, SMOLAGENTS, SuiteResult, cross_ratios, summarize

DESCRIPTION = "parallel-safe and exclusive calls interleaved (1 in 10 exclusive): barrier cost"
CALLS = 100
EVERY = 10
CAP = 10
LATENCY_MS = 5.0
MIXED = f"mixed {CALLS - CALLS // EVERY} parallel + {CALLS // EVERY} exclusive, cap {CAP}"
PARALLEL = f"all {CALLS} parallel, cap {CAP}"


def _exclusive(i: int, mixed: bool) -> bool:
    return mixed and i % EVERY == EVERY - 1


def ideal_ms(mixed: bool) -> float:
    """Submission-order schedule: parallel runs of calls in ``CAP`` slots, each exclusive alone."""
    total, run = 0.0, 0
    for i in range(CALLS):
        if _exclusive(i, mixed):
            total += math.ceil(run / CAP) * LATENCY_MS + LATENCY_MS
            run = 0
        else:
            run += 1
    return total + math.ceil(run / CAP) * LATENCY_MS


def _program(subject: str, mixed: bool) -> str:
    if subject == OURS_TS:
        pick = (
            f"i % {EVERY} === {EVERY - 1} ? tools.lock({{i}}) : tools.nap({{i}})"
            if mixed
            else "tools.nap({i})"
        )
        return (
            f"const values = await Promise.all(Array.from({{length: {CALLS}}}, (_, i) => {pick}))\n"
            "return values.every((v, i) => v === i)"
        )
    pick = (
        f"tools.lock({{'i': i}}) if i % {EVERY} == {EVERY - 1} else tools.nap({{'i': i}})"
        if mixed
        else "tools.nap({'i': i})"
    )
    return (
        "import asyncio\n"
        f"values = await asyncio.gather(*[{pick} for i in range({CALLS})])\n"
        f"return values == list(range({CALLS}))"
    )


async def _nap(args: Any) -> Any:
    await anyio.sleep(LATENCY_MS / 1e3)
    return args["i"]


class OrderedGate:
    """The engine's scheduling rule for the peers: calls start in submission order, at
    most ``cap`` at once; an exclusive call starts when nothing runs and runs alone."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._cond = asyncio.Condition()
        self._tickets = 0
        self._serving = 0
        self._in_flight = 0
        self._exclusive = False

    async def run(self, exclusive: bool, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``fn`` when the rule lets it start."""
        ticket = self._tickets
        self._tickets += 1

        def may_start() -> bool:
            if self._serving != ticket or self._exclusive:
                return False
            return self._in_flight == 0 if exclusive else self._in_flight < self.cap

        async with self._cond:
            await self._cond.wait_for(may_start)
            self._serving += 1
            self._in_flight += 1
            self._exclusive = exclusive
            self._cond.notify_all()
        try:
            return await fn()
        finally:
            async with self._cond:
                self._in_flight -= 1
                if exclusive:
                    self._exclusive = False
                self._cond.notify_all()


def barrier_ms(parallel: list[float], mixed: list[float]) -> float:
    """The median over paired repetitions of each exclusive call's cost: the mixed run's
    time over its ideal minus the all-parallel run's over its ideal, per exclusive call
    (may be negative: noise; see ``barrier_note``)."""
    pairs = [
        ((m - ideal_ms(True)) - (p - ideal_ms(False))) / (CALLS // EVERY)
        for p, m in zip(parallel, mixed, strict=False)
    ]
    return round(statistics.median(pairs), 4) if pairs else 0.0


def barrier_note(measured: float) -> str:
    """The mixed row's note: the cost, clamped at 0 with the measured value said (a
    negative cost is not a speed-up the barrier bought)."""
    tail = "per exclusive call (over ideal, net of the all-parallel overhead, paired runs)"
    if measured < 0:
        return (
            f"barrier cost 0.000 ms {tail}; measured {measured:.3f} ms: the mixed run lost "
            "less to overhead than the all-parallel one"
        )
    return f"barrier cost {measured:.3f} ms {tail}"


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    result = SuiteResult(
        description=DESCRIPTION,
        params={
            "calls": CALLS,
            "exclusive_every": EVERY,
            "cap": CAP,
            "latency_ms": LATENCY_MS,
            "runs": ctx.runs,
        },
    )
    ctx.plan(len(GUESTS) + 2)
    walls: dict[tuple[str, bool], list[float]] = {}
    for subject in GUESTS:
        async with open_runtime(subject) as runtime:
            mode = CodeMode(
                runtime, [tool("nap", _nap), tool("lock", _nap, parallel=False)], cap=CAP
            )
            base_program = "return true" if subject == OURS_TS else "return True"
            walls[subject, False], walls[subject, True] = [], []
            for i in range(ctx.runs + 1):
                # One pair per repetition (see the module docstring): all-parallel, mixed.
                for mixed in (False, True):
                    base = statistics.median(
                        [await time_ready(mode.run(base_program)) for _ in range(3)]
                    )
                    await ready_all()
                    clock = timed()
                    value = await mode.run(_program(subject, mixed))
                    elapsed = clock()
                    if value is not True:
                        raise RuntimeError(f"mixed program returned {value!r}")
                    if i:
                        walls[subject, mixed].append(max(0.0, elapsed - base))
        ctx.step(subject)

    async def gated(mixed: bool, call: Callable[[int], Awaitable[Any]]) -> float:
        gate = OrderedGate(CAP)
        clock = timed()
        values = await asyncio.gather(
            *(gate.run(_exclusive(i, mixed), functools.partial(call, i)) for i in range(CALLS))
        )
        assert list(values) == list(range(CALLS))
        return clock()

    with ctx.guard(MONTY):
        if ctx.has(MONTY):
            async with monty_pool() as monty:
                walls[MONTY, False], walls[MONTY, True] = [], []
                for _ in range(ctx.runs):
                    for mixed in (False, True):
                        gate = OrderedGate(CAP)

                        async def nap(args: Any, gate: OrderedGate = gate) -> Any:
                            return await gate.run(False, lambda: _nap(args))

                        async def lock(args: Any, gate: OrderedGate = gate) -> Any:
                            return await gate.run(True, lambda: _nap(args))

                        pick = (
                            f"lock({{'i': i}}) if i % {EVERY} == {EVERY - 1} else nap({{'i': i}})"
                            if mixed
                            else "nap({'i': i})"
                        )
                        program = f"import asyncio\nvalues = await asyncio.gather(*[{pick} for i in range({CALLS})])\nlen(values)"
                        base = await monty_base(monty)
                        async with monty.checkout() as session:
                            clock = timed()
                            value = await session.feed_run(
                                program, external_lookup={"nap": nap, "lock": lock}
                            )
                            walls[MONTY, mixed].append(max(0.0, clock() - base))
                        if value != CALLS:
                            raise RuntimeError(f"monty mixed program returned {value!r}")
    ctx.step("pydantic-monty")
    walls[FLOOR, False], walls[FLOOR, True] = [], []
    for _ in range(ctx.runs):
        for mixed in (False, True):
            walls[FLOOR, mixed].append(await gated(mixed, lambda i: _nap({"i": i})))
    ctx.step("floor")

    barrier: dict[str, float] = {}
    measured: dict[str, float] = {}
    for (subject, mixed), samples in walls.items():
        if not samples:
            continue
        result.rows.append(
            summarize(
                MIXED if mixed else PARALLEL, subject, samples, per_op=CALLS, ideal=ideal_ms(mixed)
            )
        )
    for subject in {s for s, _ in walls}:
        measured[subject] = barrier_ms(walls[subject, False], walls[subject, True])
        barrier[subject] = max(0.0, measured[subject])
    for row in result.rows:
        if row.case == MIXED:
            row.note = barrier_note(measured[row.subject])
    cross_ratios(result.rows)
    result.series = {"barrier_ms_per_exclusive": barrier, "barrier_measured_ms": measured}
    result.peers = {p: ctx.peers[p] for p in (MONTY, FLOOR)}
    result.peers[SMOLAGENTS] = "n/a: sequential executor, nothing runs in parallel"
    if ctx.has(MONTY):
        result.peers[MONTY] = "ok (host-side gate with the engine's rule)"
    return result
