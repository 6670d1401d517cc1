"""``startup``: cold start (fresh process per run: runtime open -> first result), warm
start (``return 1`` on a ready pool, with a pause to refill it) and back-to-back runs,
for both guests and the peers."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from ..sandbox.host._forkserver_client import worker_interpreter
from ._cli_startup import agent_one_shot, cli_environment, python_c
from ._common import (
    GUESTS,
    BenchContext,
    monty_pool,
    open_runtime,
    ready_all,
    run_child,
    run_direct,
    smolagents_executor,
    timed,
)
from ._model import (
    FLOOR,
    FORK_FLOOR,
    MONTY,
    SMOLAGENTS,
    SuiteResult,
    cross_ratios,
    pair_with,
    summarize,
)

DESCRIPTION = "cold / warm / back-to-back start of `return 1`, per guest and peer"
REFILL_S = 0.01
RSS_CASE = "host RSS growth per 1,000 runs"
#: Warm-up runs, then measured runs, of ``return 1`` in a fresh process per sample. The
#: warm-up is long because a host's first thousand or so runs touch fresh pages of the
#: allocator's arenas once (measured over 20,000 runs: +330 KB by run 8,000, flat after);
#: growth after it is what would accumulate. Every subject gets the same counts.
RSS_RUNS = ("1000", "2000")
COLD_FLOOR_NOTE = (
    "a fresh `python -I -S -c 'import asyncio, msgspec'` (the fork server's start: its "
    "sys.path, no ssl) from spawn to exit: the interpreter and the imports every worker "
    "needs, without a sandbox"
)
FORK_NOTE = (
    "plain os.fork() of a process started as the fork server (its imports, the Python "
    "guest warmed, GC frozen); child makes a loop, reports ready, answers one round trip "
    "(no lock-down, no guest run)"
)
USS_CASE = "idle worker USS"
#: The package and the CLI (issue 24, target 8): fresh processes, spawn to exit.
CLI = "codemode-cli"
INTERPRETER = "python-interpreter"
IMPORT_CASE = "import codemode"
AGENT_CASE = "agent one-shot, to exit"
AGENT_FIRST_CASE = "agent one-shot, to the first request"
AGENT_NOTE = (
    "`codemode agent TASK` against a loopback model server that answers at once with one "
    "streamed text (no tool call); a fresh process per run, with bytecode caches"
)
USS_NOTE = "a ready spare's private memory (smaps_rollup), after its pre-fault"
RSS_NOTE = "fresh process; 1,000 warm-up runs, growth over the next 2,000 (runtime alone)"


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    cold_runs = max(2, ctx.runs)
    samples = ctx.runs * (10 if ctx.quick else 20)
    result = SuiteResult(
        description=DESCRIPTION,
        params={"cold_runs": cold_runs, "warm_samples": samples, "refill_pause_ms": REFILL_S * 1e3},
    )
    cold_subjects = [*GUESTS] + [p for p in (MONTY, SMOLAGENTS) if ctx.has(p)]
    rss_subjects = [*GUESTS] + ([MONTY] if ctx.has(MONTY) else [])
    ctx.plan(len(cold_subjects) + len(rss_subjects) + len(GUESTS) + 7)
    for subject in cold_subjects:
        # A peer that fails is marked failed in this suite; a guest that fails fails it.
        with ctx.guard(subject) if subject not in GUESTS else contextlib.nullcontext():
            if subject == SMOLAGENTS:
                cold = [await anyio.to_thread.run_sync(_smolagents_cold) for _ in range(cold_runs)]
                note = SMOLAGENTS_COLD_NOTE
            else:
                cold = [
                    (await anyio.to_thread.run_sync(run_child, "cold", subject))["ms"]
                    for _ in range(cold_runs)
                ]
                note = "fresh process per run"
            result.rows.append(summarize("cold start", subject, cold, note=note))
        ctx.step(f"cold {subject}")

    # The floor of a cold start with guests that run asyncio programs: a fresh
    # interpreter that imports what every worker needs (asyncio, msgspec), nothing else.
    floor_cold = [await anyio.to_thread.run_sync(_interpreter_cold) for _ in range(cold_runs)]
    result.rows.append(summarize("cold start", FORK_FLOOR, floor_cold, note=COLD_FLOOR_NOTE))
    ctx.step("cold floor")

    for subject in rss_subjects:
        with ctx.guard(subject) if subject not in GUESTS else contextlib.nullcontext():
            grown = [
                (await anyio.to_thread.run_sync(run_child, "rss", subject, *RSS_RUNS))[
                    "kb_per_1000"
                ]
                for _ in range(max(1, ctx.runs // 2))
            ]
            row = summarize(RSS_CASE, subject, grown, note=RSS_NOTE)
            row.unit, row.throughput = "KB", None  # a size, not a duration
            result.rows.append(row)
        ctx.step(f"rss {subject}")

    async with contextlib.AsyncExitStack() as stack:
        runtimes = {s: await stack.enter_async_context(open_runtime(s)) for s in GUESTS}
        monty = None
        with ctx.guard(MONTY):
            if ctx.has(MONTY):
                monty = await stack.enter_async_context(monty_pool())
        # Warm start is a verdict against pydantic-monty: measured side by side, one run
        # of each subject per round (this machine's speed drifts within seconds).
        warm = await _warm_rounds(ctx, runtimes, monty, samples)
        rows = [summarize("warm start", subject, times) for subject, times in warm.items()]
        pair_with(rows, warm, MONTY)
        result.rows.extend(rows)
        ctx.step("warm start, guests and pydantic-monty side by side")
        for subject, runtime in runtimes.items():
            result.rows.append(summarize("back-to-back", subject, await _ours(runtime, samples)))
            ctx.step(f"back-to-back {subject}")
            sizes = await _idle_uss_kb(runtime)
            if sizes:
                row = summarize(USS_CASE, subject, sizes, note=USS_NOTE)
                row.unit, row.throughput = "KB", None
                result.rows.append(row)
        with ctx.guard(MONTY):
            if monty is not None and MONTY not in ctx.failures:
                result.rows.append(
                    summarize("back-to-back", MONTY, await _monty(monty, samples, 0.0))
                )
    ctx.step("pydantic-monty")
    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            executor = smolagents_executor({})
            for case, pause in (("warm start", REFILL_S), ("back-to-back", 0.0)):
                result.rows.append(
                    summarize(case, SMOLAGENTS, await _smol(executor, samples, pause))
                )
    ctx.step("smolagents")

    async def floor_program() -> int:
        return 1

    for case in ("warm start", "back-to-back"):
        times = []
        for _ in range(samples):
            clock = timed()
            assert await floor_program() == 1
            times.append(clock())
        result.rows.append(summarize(case, FLOOR, times, note="an awaited coroutine, no sandbox"))
    ctx.step("floor")
    # The floor of a fresh process per run, in a fresh process of its own (a fork of
    # this multi-threaded one would not be representative, nor safe).
    forked = await anyio.to_thread.run_sync(run_child, "fork-floor", str(samples), str(REFILL_S))
    for case, key in (("warm start", "warm"), ("back-to-back", "b2b")):
        result.rows.append(summarize(case, FORK_FLOOR, forked[key], note=FORK_NOTE))
    ctx.step("fork floor")
    result.rows.extend(await anyio.to_thread.run_sync(_cli_rows, cold_runs))
    ctx.step("cli")
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    result.peers[FLOOR] = "ok (warm / back-to-back only: nothing to open)"
    result.peers[INTERPRETER] = "ok (`python -c pass`: the floor of any fresh process)"
    result.peers[FORK_FLOOR] = "ok (warm / back-to-back only)"
    return result


def _cli_rows(runs: int) -> list[Any]:
    """``import codemode`` and the agent one-shot (to its first request and to its
    exit), each in fresh processes, with ``python -c pass`` as the floor."""
    samples: dict[tuple[str, str], list[float]] = {}
    with cli_environment() as (env, workspace):
        agent_one_shot(env, workspace)  # warm-up: bytecode caches, the page cache
        for _ in range(runs):
            floor = python_c("pass", env)
            samples.setdefault((IMPORT_CASE, INTERPRETER), []).append(floor)
            samples.setdefault((AGENT_CASE, INTERPRETER), []).append(floor)
            samples.setdefault((IMPORT_CASE, CLI), []).append(python_c("import codemode", env))
            first, total = agent_one_shot(env, workspace)
            samples.setdefault((AGENT_FIRST_CASE, CLI), []).append(first)
            samples.setdefault((AGENT_CASE, CLI), []).append(total)
    notes = {
        INTERPRETER: "`python -c pass`, spawn to exit",
        CLI: "fresh process, spawn to exit",
    }
    return [
        summarize(
            case,
            subject,
            values,
            note=AGENT_NOTE if case != IMPORT_CASE and subject == CLI else notes[subject],
        )
        for (case, subject), values in samples.items()
    ]


# smolagents' executor runs in its caller's process: made inside a process that has
# already imported it (as the bench child does for the others), its "cold start" timed no
# process at all (~0.1 ms), while ours and pydantic-monty's each start one. Its cold start
# is a fresh interpreter instead, timed from the spawn to the first result: the price of
# a process of its own, like the fork server ours boots.
SMOLAGENTS_COLD_NOTE = "fresh interpreter per run: spawn, import, first result"
_SMOLAGENTS_COLD = (
    "from smolagents.local_python_executor import LocalPythonExecutor\n"
    "executor = LocalPythonExecutor([], timeout_seconds=None)\n"
    "executor.send_tools({})\n"
    "value = executor('1').output\n"
    "raise SystemExit(0 if value == 1 else f'`1` gave {value!r}')\n"
)


def _interpreter_cold() -> float:
    """One fresh interpreter importing asyncio and msgspec, spawn to exit, in ms."""
    start = time.perf_counter()
    done = subprocess.run(
        worker_interpreter("import asyncio, msgspec\n"),
        capture_output=True,
        check=False,
        timeout=120,
    )
    elapsed = (time.perf_counter() - start) * 1e3
    if done.returncode != 0:
        raise RuntimeError(f"interpreter floor failed: {done.stderr[-1500:]!r}")
    return elapsed


def _smolagents_cold() -> float:
    """One fresh-interpreter cold start of smolagents' executor, in ms."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _SMOLAGENTS_COLD], capture_output=True, text=True, timeout=300
    )
    elapsed = (time.perf_counter() - start) * 1e3
    if done.returncode != 0:
        raise RuntimeError(f"smolagents cold start failed: {done.stderr[-1500:]}")
    return elapsed


def _uss_kb(pid: int) -> float | None:
    """``pid``'s private memory in KB (None where /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            return float(
                sum(
                    int(line.split()[1])
                    for line in handle
                    if line.startswith(("Private_Clean:", "Private_Dirty:"))
                )
            )
    except (OSError, ValueError, IndexError):
        return None


async def _idle_uss_kb(runtime: Any) -> list[float]:
    """Private memory of each ready spare, in KB (empty where /proc cannot say)."""
    await ready_all()
    await anyio.sleep(0.2)  # past the spares' pre-fault
    sizes = [_uss_kb(pid) for pid in runtime.processes().idle_pids]
    return [size for size in sizes if size is not None]


async def _ours(runtime: Any, samples: int) -> list[float]:
    """Back-to-back ``return 1`` runs: no pause, so each run also meets the refill the
    previous one caused."""
    for _ in range(5):  # warm-up
        await run_direct(runtime, "return 1")
    times = []
    for _ in range(samples):
        clock = timed()
        value = await run_direct(runtime, "return 1")
        times.append(clock())
        if value != 1:
            raise RuntimeError(f"`return 1` gave {value!r}")
    return times


async def _warm_one(run: Callable[[], Awaitable[Any]], what: str) -> float:
    """One warm run of ``run`` (which must give 1): a full pool of ready workers and an
    idle loop first, the same for every subject."""
    await ready_all()
    await anyio.sleep(REFILL_S)
    clock = timed()
    value = await run()
    elapsed = clock()
    if value != 1:
        raise RuntimeError(f"{what} gave {value!r}")
    return elapsed


async def _monty_one(monty: Any) -> Any:
    """pydantic-monty's ``1`` in a session of its own: its value."""
    async with monty.checkout() as session:
        return await session.feed_run("1")


async def _warm_rounds(
    ctx: BenchContext, runtimes: dict[str, Any], monty: Any, samples: int
) -> dict[str, list[float]]:
    """``samples`` rounds of one warm run per guest and of pydantic-monty (when it is
    here and has not failed), after five warm-up rounds."""
    times: dict[str, list[float]] = {s: [] for s in runtimes}
    if monty is not None:
        times[MONTY] = []
    for i in range(samples + 5):
        for subject, runtime in runtimes.items():
            elapsed = await _warm_one(partial(run_direct, runtime, "return 1"), "`return 1`")
            if i >= 5:
                times[subject].append(elapsed)
        if MONTY in times:
            with ctx.guard(MONTY):
                elapsed = await _warm_one(partial(_monty_one, monty), "monty `1`")
            if MONTY in ctx.failures:
                del times[MONTY]
            elif i >= 5:
                times[MONTY].append(elapsed)
    return times


async def _monty(monty: Any, samples: int, pause: float) -> list[float]:
    times = []
    for i in range(samples + 5):
        await anyio.sleep(pause)
        clock = timed()
        value = await _monty_one(monty)
        if i >= 5:
            times.append(clock())
        if value != 1:
            raise RuntimeError(f"monty `1` gave {value!r}")
    return times


async def _smol(executor: Any, samples: int, pause: float) -> list[float]:
    times = []
    for i in range(samples + 5):
        await anyio.sleep(pause)
        clock = timed()
        value = executor("1").output
        if i >= 5:
            times.append(clock())
        if value != 1:
            raise RuntimeError(f"smolagents `1` gave {value!r}")
    return times
