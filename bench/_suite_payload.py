"""``payload``: one call carrying a large string each way: ``in`` (program -> tool),
``out`` (tool -> program) and ``in+out`` (echoed), from 1 KB to 10 MB. Each sample is a
run's time minus the median ``return 1`` run on the same runtime (start-up removed).
``quickjs-floor`` runs the TypeScript program in a bare QuickJS context of the host, its
tools one host function on JSON text: what any QuickJS guest pays at least. ``fork-floor``
moves ``in+out 1 MB`` through a fresh forked process per call with nothing else (no
guard, no engine): what any design with a fresh process per run pays at least."""

from __future__ import annotations

import contextlib
import json
import statistics
from typing import Any

import anyio.to_thread

from ._common import (
    GUESTS,
    BenchContext,
    monty_base,
    monty_pool,
    net_run,
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
    OURS_TS,
    QUICKJS_FLOOR,
    SMOLAGENTS,
    SuiteResult,
    cross_ratios,
    in_table_order,
    pair_with,
    summarize,
)

DESCRIPTION = "one call with 1 KB - 10 MB in, out, and in+out"
DIRECTIONS = ("in", "out", "in+out")


def label(size: int) -> str:
    """``1 KB`` ... ``10 MB`` (decimal units, as the targets are written)."""
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1000} KB"


def case(direction: str, size: int) -> str:
    """The row name (targets refer to ``in+out 1 MB``)."""
    return f"{direction} {label(size)}"


async def take(args: Any) -> Any:
    """``in``: the tool gets the blob and answers with its length."""
    return len(args["blob"])


async def give(args: Any) -> Any:
    """``out``: the tool answers with a blob of the asked size."""
    return "x" * args["n"]


async def echo(args: Any) -> Any:
    """``in+out``: the blob goes back."""
    return args


def _python(direction: str, size: int, call: str = "tools.") -> str:
    aw = "await "
    if direction == "in":
        return f"r = {aw}{call}take({{'blob': 'x' * {size}}})\n"
    if direction == "out":
        return f"r = len({aw}{call}give({{'n': {size}}}))\n"
    return f"r = len(({aw}{call}echo({{'blob': 'x' * {size}}}))['blob'])\n"


def _typescript(direction: str, size: int) -> str:
    if direction == "in":
        return f"return await tools.take({{blob: 'x'.repeat({size})}})"
    if direction == "out":
        return f"return (await tools.give({{n: {size}}})).length"
    return f"return (await tools.echo({{blob: 'x'.repeat({size})}})).blob.length"


QUICKJS_NOTE = (
    "the TypeScript program in a bare QuickJS context in the host; the tool is a host "
    "function taking and returning the arguments' JSON text"
)
# What any QuickJS guest pays at least: the program builds its value, the value leaves
# the JavaScript heap as JSON text (the binding converts nothing else) and the answer
# comes back as JSON text to parse. No process, no bridge, no guards, no limits.
_QUICKJS_SHIM = """(async function () {{
const tools = {{
  take: async (a) => JSON.parse(host_call("take", JSON.stringify(a))),
  give: async (a) => JSON.parse(host_call("give", JSON.stringify(a))),
  echo: async (a) => JSON.parse(host_call("echo", JSON.stringify(a))),
}};
{body}
}})().then((v) => {{ globalThis.__result = v }})"""


def _host_call(name: str, args_json: str) -> str:
    """The floor's tools, on JSON text (``echo`` hands the text straight back)."""
    if name == "echo":
        return args_json
    args = json.loads(args_json)
    return json.dumps(len(args["blob"]) if name == "take" else "x" * args["n"])


def _quickjs_sample(direction: str, size: int) -> float:
    """One run of the TypeScript program in a fresh bare QuickJS context, in ms."""
    import _quickjs  # type: ignore[import-not-found]

    context = _quickjs.Context()
    context.add_callable("host_call", _host_call)
    source = _QUICKJS_SHIM.format(body=_typescript(direction, size))
    clock = timed()
    context.eval(source)
    while context.execute_pending_job():
        pass
    elapsed = clock()
    value = context.eval("globalThis.__result")
    if value != size:
        raise RuntimeError(f"quickjs floor {direction} {size}: got {value!r}")
    return elapsed


def _quickjs_floor(result: SuiteResult, sizes: list[int], count: Any) -> None:
    for size in sizes:
        for direction in DIRECTIONS:
            if (direction, size) == PAIRED:
                continue
            samples = [_quickjs_sample(direction, size) for _ in range(count(size) + 1)]
            result.rows.append(
                summarize(
                    case(direction, size),
                    QUICKJS_FLOOR,
                    samples[1:],  # the first is a warm-up
                    per_op=size / 1e6,
                    note=QUICKJS_NOTE,
                )
            )


#: The size the fresh-process floor is measured at: the target's case, ``in+out 1 MB``.
FRESH_FLOOR_BYTES = 1_000_000
FRESH_FLOOR_NOTE = (
    "a fresh forked process per call, as the fork server's: the child builds, encodes, "
    "receives and decodes the value, the host decodes and encodes it; no guard, no engine"
)


#: The case the payload target judges: its guests, pydantic-monty and both floors are
#: measured in rounds (``_paired``).
PAIRED = ("in+out", FRESH_FLOOR_BYTES)


async def _paired(
    ctx: BenchContext, result: SuiteResult, functions: dict[str, Any], rounds: int
) -> None:
    """``in+out 1 MB`` in rounds: one run of each guest, of pydantic-monty, of the
    bare-QuickJS floor and of the fresh-process floor per round, pools refilled before
    each. This machine's speed drifts within seconds: each timed in a block of its own,
    the floor and the peer measured other machines (the verdict flipped between "below
    floor" and "missed" from one ``--check`` to the next).

    ``fork-floor`` is what a fresh process per run pays at least to move the value both
    ways (``_child._PAYLOAD_FLOOR``), the exchange of an empty value subtracted as a
    ``return 1`` run is from the guests' samples.
    """
    direction, size = PAIRED
    samples: dict[str, list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        guests = []
        for subject in GUESTS:
            runtime = await stack.enter_async_context(open_runtime(subject))
            program = (
                _typescript(direction, size)
                if subject == OURS_TS
                else _python(direction, size) + "return r"
            )
            guests.append((subject, runtime, program))
        monty = None
        with ctx.guard(MONTY):
            if ctx.has(MONTY):
                monty = await stack.enter_async_context(monty_pool())
        monty_program = _python(direction, size, call="") + "r"
        for i in range(rounds + 1):  # the first round is a warm-up
            taken: dict[str, float] = {}
            for subject, runtime, program in guests:
                taken[subject], value = await net_run(runtime, program, functions)
                if value != size:
                    raise RuntimeError(f"{subject} {direction} {size}: got {value!r}")
            if monty is not None:
                with ctx.guard(MONTY):
                    await ready_all()
                    base = await monty_base(monty)
                    async with monty.checkout() as session:
                        clock = timed()
                        value = await session.feed_run(monty_program, external_lookup=functions)
                        taken[MONTY] = max(0.0, clock() - base)
                    if value != size:
                        raise RuntimeError(f"monty {direction} {size}: got {value!r}")
                if MONTY in ctx.failures:
                    monty = None
                    samples.pop(MONTY, None)
                    taken.pop(MONTY, None)
            await ready_all()
            taken[QUICKJS_FLOOR] = _quickjs_sample(direction, size)
            measured = await anyio.to_thread.run_sync(run_child, "payload-floor", str(size), "3")
            taken[FORK_FLOOR] = max(
                0.0, statistics.median(measured["full"]) - statistics.median(measured["empty"])
            )
            if i:
                for subject, ms in taken.items():
                    samples.setdefault(subject, []).append(ms)
    notes = {QUICKJS_FLOOR: QUICKJS_NOTE, FORK_FLOOR: FRESH_FLOOR_NOTE}
    rows = [
        summarize(
            case(direction, size),
            subject,
            values,
            per_op=size / 1e6,
            note=notes.get(subject),
        )
        for subject, values in samples.items()
    ]
    pair_with(rows, samples, MONTY)  # the guests and both floors, round by round
    result.rows.extend(rows)


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    sizes = (
        [1000, 100_000, 1_000_000, 10_000_000]
        if ctx.quick
        else [1000, 10_000, 100_000, 1_000_000, 10_000_000]
    )
    result = SuiteResult(
        description=DESCRIPTION,
        params={"sizes_bytes": sizes, "runs": ctx.runs, "throughput_unit": "MB/s"},
    )
    functions = {"take": take, "give": give, "echo": echo}
    ctx.plan(len(GUESTS) + 5)

    def count(size: int) -> int:
        # Small payloads are quick: more samples for a stable median.
        return ctx.runs * (5 if size <= 1_000_000 else 1)

    for subject in GUESTS:
        async with open_runtime(subject) as runtime:
            for size in sizes:
                for direction in DIRECTIONS:
                    if (direction, size) == PAIRED:
                        continue
                    if subject == OURS_TS:
                        program = _typescript(direction, size)
                    else:
                        program = _python(direction, size) + "return r"
                    if size <= 1_000_000:  # warm-up (a 10 MB run is its own)
                        await run_direct(runtime, program, functions)
                    samples = []
                    for _ in range(count(size)):
                        sample, value = await net_run(runtime, program, functions)
                        samples.append(sample)
                        if value != size:
                            raise RuntimeError(f"{direction} {size}: got {value!r}")
                    result.rows.append(
                        summarize(case(direction, size), subject, samples, per_op=size / 1e6)
                    )
        ctx.step(subject)

    with ctx.guard(MONTY):
        if ctx.has(MONTY):
            async with monty_pool() as monty:
                for size in sizes:
                    for direction in DIRECTIONS:
                        if (direction, size) == PAIRED:
                            continue
                        program = _python(direction, size, call="") + "r"
                        samples = []
                        for i in range(count(size) + 1):
                            base = await monty_base(monty)
                            async with monty.checkout() as session:
                                clock = timed()
                                value = await session.feed_run(program, external_lookup=functions)
                                if i:
                                    samples.append(max(0.0, clock() - base))
                            if value != size:
                                raise RuntimeError(f"monty {direction} {size}: got {value!r}")
                        result.rows.append(
                            summarize(case(direction, size), MONTY, samples, per_op=size / 1e6)
                        )
    ctx.step("pydantic-monty")
    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            sync = {
                "take": lambda args: len(args["blob"]),
                "give": lambda args: "x" * args["n"],
                "echo": lambda args: args,
            }
            executor = smolagents_executor(sync)
            for size in sizes:
                for direction in DIRECTIONS:
                    program = _python(direction, size, call="").replace("await ", "") + "r"
                    samples = []
                    for _ in range(count(size)):
                        clock = timed()
                        value = executor(program).output
                        samples.append(clock())
                        if value != size:
                            raise RuntimeError(f"smolagents {direction} {size}: got {value!r}")
                    result.rows.append(
                        summarize(case(direction, size), SMOLAGENTS, samples, per_op=size / 1e6)
                    )
    ctx.step("smolagents")
    for size in sizes:
        for direction in DIRECTIONS:
            samples = []
            for _ in range(count(size)):
                clock = timed()
                if direction == "in":
                    value = await take({"blob": "x" * size})
                elif direction == "out":
                    value = len(await give({"n": size}))
                else:
                    value = len((await echo({"blob": "x" * size}))["blob"])
                samples.append(clock())
                assert value == size
            result.rows.append(summarize(case(direction, size), FLOOR, samples, per_op=size / 1e6))
    ctx.step("floor")
    _quickjs_floor(result, sizes, count)
    ctx.step("quickjs floor")
    await _paired(ctx, result, functions, count(FRESH_FLOOR_BYTES))
    ctx.step("in+out 1 MB, paired")
    result.rows = in_table_order(result.rows, [case(d, size) for size in sizes for d in DIRECTIONS])
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    return result
