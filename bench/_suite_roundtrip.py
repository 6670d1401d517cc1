"""``roundtrip``: sequential sub-call round trip (program -> host tool -> program), per
call, on a ready runtime; and what the engine alone adds (in-process, no sandbox: a
``run_code`` sub-call against a native ``execute()`` of the same no-op tool)."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from codemode.engine import AbortController, MemorySessionLog, ToolExecutionInput, ToolRuntime
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
    run_direct,
    smolagents_executor,
    time_ready,
    timed,
    tool,
)
from ._model import (
    FLOOR,
    MONTY,
    OURS_TS,
    SMOLAGENTS,
    SuiteResult,
    cross_ratios,
    pair_with,
    summarize,
)

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


#: Rounds per run whatever ``--runs`` says: the RTT verdict is a ratio of two medians.
MIN_ROUNDS = 5

_DIRECT_NOTE = "direct binding"
_CODE_NOTE = "pipeline + 2 session events per call"


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite.

    The guests (direct and through ``run_code``) and pydantic-monty are measured in
    rounds, one run of each per round: this machine's speed drifts within seconds, and a
    subject timed in a block of its own measured another machine than its peer did.
    """
    calls = 300 if ctx.quick else 1000
    rounds = max(MIN_ROUNDS, ctx.runs)
    result = SuiteResult(description=DESCRIPTION, params={"calls_per_run": calls, "runs": rounds})
    ctx.plan(len(GUESTS) + 4)
    # (case, subject, note) -> one measurement (ms per call), in the order of a round.
    measures: dict[tuple[str, str, str], Callable[[], Awaitable[float]]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for subject in GUESTS:
            runtime = await stack.enter_async_context(open_runtime(subject))
            measures[(CASE, subject, f"{calls} calls per run, {_DIRECT_NOTE}")] = await _direct(
                runtime, subject, calls
            )
            mode = CodeMode(runtime, [tool("echo", echo)], cap=10)
            measures[(f"{CASE} via run_code", subject, _CODE_NOTE)] = await _code(
                mode, subject, calls
            )
            ctx.step(subject)
        with ctx.guard(MONTY):
            if ctx.has(MONTY):
                monty = await stack.enter_async_context(monty_pool())
                measures[(CASE, MONTY, "async external function")] = _monty(monty, calls)
        samples: dict[tuple[str, str, str], list[float]] = {key: [] for key in measures}
        for i in range(rounds + 1):  # the first round is a warm-up
            for key, measure in list(measures.items()):
                if key[1] == MONTY:
                    with ctx.guard(MONTY):
                        value = await measure()
                    if MONTY in ctx.failures:
                        del measures[key], samples[key]
                        continue
                else:
                    value = await measure()
                if i:
                    samples[key].append(value)
        ctx.step("guests and pydantic-monty")
    by_case: dict[str, dict[str, list[float]]] = {}
    for (case, subject, note), values in samples.items():
        result.rows.append(summarize(case, subject, values, note=note))
        by_case.setdefault(case, {})[subject] = values
    # Each guest's rows against pydantic-monty's samples, taken in the same rounds.
    monty_samples = by_case.get(CASE, {}).get(MONTY)
    if monty_samples:
        for case, subjects in by_case.items():
            rows = [row for row in result.rows if row.case == case]
            pair_with(rows, {**subjects, MONTY: monty_samples}, MONTY)

    native, code = await _engine(calls, rounds)
    result.rows.append(summarize("native execute()", ENGINE, native, note="in-process, no sandbox"))
    result.rows.append(
        summarize(f"{CASE} via run_code", ENGINE, code, note="InProcessRuntime: engine cost alone")
    )
    ctx.step("engine")
    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            executor = smolagents_executor({"echo": lambda args: args})
            per_call = []
            for i in range(rounds + 1):
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
    for _ in range(rounds):
        clock = timed()
        for i in range(calls):
            await echo({"i": i})
        per_call.append(clock() / calls)
    result.rows.append(summarize(CASE, FLOOR, per_call, note="await echo(args) in the host"))
    ctx.step("floor")
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    return result


async def _direct(runtime: Any, subject: str, calls: int) -> Callable[[], Awaitable[float]]:
    """One run of ``calls`` echo calls through a direct binding, per call, its start-up
    (the median of five ``return 1`` runs, taken now) subtracted."""
    base = statistics.median([await time_ready(run_direct(runtime, "return 1")) for _ in range(5)])
    text = program(subject, calls)

    async def measure() -> float:
        total = await time_ready(run_direct(runtime, text, {"echo": echo}))
        return (total - base) / calls

    return measure


async def _code(mode: Any, subject: str, calls: int) -> Callable[[], Awaitable[float]]:
    """The same through ``run_code`` (the pipeline and its session log), per call."""
    base = statistics.median([await time_ready(mode.run("return 1")) for _ in range(3)])
    text = program(subject, calls)

    async def measure() -> float:
        return (await time_ready(mode.run(text)) - base) / calls

    return measure


def _monty(monty: Any, calls: int) -> Callable[[], Awaitable[float]]:
    """One pydantic-monty run of the loop, per call, a run of ``0`` just before it (in a
    session of its own) subtracted."""
    text = f"for i in range({calls}):\n    await echo({{'i': i}})\n1"

    async def measure() -> float:
        await ready_all()
        base = await monty_base(monty)
        async with monty.checkout() as session:
            clock = timed()
            await session.feed_run(text, external_lookup={"echo": echo})
            return (clock() - base) / calls

    return measure


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
