"""``compute``: guarded compute inside the program (no sub-call), start-up subtracted.

Three loops, each against the same program in the host's CPython (the floor) and in
pydantic-monty: ``sum(i*i)`` over 1e6; the dict/str loop (200,000 x
``k = 'k' + str(i % 1000); d[k] = d.get(k, 0) + len(k)``: item writes and a method read
on a dict); and a class loop (a program-defined class, attribute reads, writes and a
method call on its instance, 200,000 times). The guests must not be slower than the floor
by more than the stated margin: the guards may cost nothing where they protect nothing.
Each floor sample is taken right beside a guest's sample (``_Floors``), at least
``MIN_SAMPLES`` of each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ._common import (
    GUESTS,
    BenchContext,
    monty_base,
    monty_pool,
    net_run,
    open_runtime,
    ready_all,
    run_direct,
    smolagents_executor,
    timed,
)
from ._model import (
    FLOOR,
    MONTY,
    OURS_TS,
    QUICKJS_FLOOR,
    SMOLAGENTS,
    SuiteResult,
    cross_ratios,
    summarize,
)

DESCRIPTION = "guarded compute in the program (sum, dict/str, class loops), start-up subtracted"
CASE = "sum(i*i) over 1e6"
DICT_CASE = "dict/str loop 200,000"
CLASS_CASE = "class loop 200,000"
N = 1_000_000
LOOP_N = 200_000
#: smolagents' tree-walking interpreter takes seconds for 1e6: it runs 1e5, scaled x10.
SMOL_N = 100_000


class Case(msgspec.Struct, frozen=True, kw_only=True):
    """One loop: its Python statements and result, and the TypeScript equivalent."""

    name: str
    #: Statements, then the expression whose value is the result.
    body: str
    result: str
    ts: str
    #: Whether the TypeScript result equals the Python one (QuickJS sums in doubles).
    exact_ts: bool = True

    @property
    def program(self) -> str:
        """The program as the guests run it."""
        return f"{self.body}return {self.result}\n"

    @property
    def monty(self) -> str:
        """The program as pydantic-monty runs it (the last expression is the value)."""
        return f"{self.body}{self.result}\n"

    def floor(self) -> Callable[[], Any]:
        """The same statements as a function of the host's CPython."""
        lines = "".join(f"    {line}\n" for line in self.program.splitlines())
        namespace: dict[str, Any] = {}
        exec(compile(f"def floor():\n{lines}", f"<floor {self.name}>", "exec"), namespace)
        function: Callable[[], Any] = namespace["floor"]
        return function


SUM = Case(
    name=CASE,
    body="",
    result=f"sum(i * i for i in range({N}))",
    ts=f"let s = 0\nfor (let i = 0; i < {N}; i++) s += i * i\nreturn s",
    exact_ts=False,
)
DICT_STR = Case(
    name=DICT_CASE,
    body=(
        "d = {}\n"
        f"for i in range({LOOP_N}):\n"
        "    k = 'k' + str(i % 1000)\n"
        "    d[k] = d.get(k, 0) + len(k)\n"
    ),
    result="sum(d.values())",
    ts=(
        "const d: Record<string, number> = {}\n"
        f"for (let i = 0; i < {LOOP_N}; i++) {{\n"
        "  const k = 'k' + String(i % 1000)\n"
        "  d[k] = (d[k] ?? 0) + k.length\n"
        "}\n"
        "let s = 0\nfor (const k in d) s += d[k]\nreturn s"
    ),
)
CLASS = Case(
    name=CLASS_CASE,
    body=(
        "class Point:\n"
        "    def __init__(self, x, y):\n"
        "        self.x = x\n"
        "        self.y = y\n"
        "\n"
        "    def move(self, dx):\n"
        "        self.x += dx\n"
        "        self.y = self.y + self.x % 7\n"
        "\n"
        "p = Point(0, 0)\n"
        f"for i in range({LOOP_N}):\n"
        "    p.move(i % 3)\n"
        "    p.x = p.x + p.y % 5\n"
    ),
    result="p.x + p.y",
    ts=(
        "class Point {\n"
        "  x: number\n  y: number\n"
        "  constructor(x: number, y: number) { this.x = x; this.y = y }\n"
        "  move(dx: number) { this.x += dx; this.y = this.y + this.x % 7 }\n"
        "}\n"
        "const p = new Point(0, 0)\n"
        f"for (let i = 0; i < {LOOP_N}; i++) {{\n"
        "  p.move(i % 3)\n"
        "  p.x = p.x + p.y % 5\n"
        "}\n"
        "return p.x + p.y"
    ),
)
CASES = (SUM, DICT_STR, CLASS)


#: Samples per guest and case, whatever ``--runs`` says: the verdict is a ratio of two
#: medians, and a median of two samples (``--quick``) moved by a third between runs.
MIN_SAMPLES = 5


class _Floors:
    """The floors' samples, each taken right beside a guest's sample of the same case.

    This machine's speed drifts (by up to 2x within a minute here): a floor timed in a
    block of its own, seconds after the guests, measured a different machine, and the
    guest-to-floor ratio moved with it. Beside each other, the two samples of a pair see
    the same machine.
    """

    def __init__(self) -> None:
        self.cpython: dict[str, list[float]] = {case.name: [] for case in CASES}
        self.quickjs: dict[str, list[float]] = {case.name: [] for case in CASES}
        self._programs: dict[str, str] = {}

    def cpython_sample(self, case: Case, floor: Callable[[], Any]) -> None:
        clock = timed()
        floor()
        self.cpython[case.name].append(clock())

    def quickjs_sample(self, case: Case) -> None:
        """One run of the case's TypeScript program in a fresh bare QuickJS context (the
        first run of each case is a warm-up, not kept)."""
        import _quickjs  # type: ignore[import-not-found]

        source = self._programs.get(case.name)
        if source is None:
            from ..sandbox.typescript._strip import strip_types

            source = self._programs[case.name] = (
                "(function () {\n" + strip_types(case.ts) + "\n})()"
            )
            _quickjs.Context().eval(source)
        context = _quickjs.Context()
        clock = timed()
        context.eval(source)
        self.quickjs[case.name].append(clock())


async def _guests(ctx: BenchContext, result: SuiteResult, runs: int, floors: _Floors) -> None:
    for subject in GUESTS:
        async with open_runtime(subject) as runtime:
            for case in CASES:
                floor = case.floor()
                expected = floor()
                program = case.ts if subject == OURS_TS else case.program
                await run_direct(runtime, program)  # warm-up
                samples = []
                for _ in range(runs):
                    sample, value = await net_run(runtime, program)
                    samples.append(sample)
                    if (subject != OURS_TS or case.exact_ts) and value != expected:
                        raise RuntimeError(f"{case.name}: {subject} gave {value!r}")
                    # The run's fresh worker is forked in the background: not beside the
                    # floor's sample.
                    await ready_all()
                    floors.cpython_sample(case, floor)
                    if subject == OURS_TS:
                        floors.quickjs_sample(case)
                note = None
                if subject == OURS_TS:
                    note = "TypeScript: the same loop in QuickJS"
                result.rows.append(summarize(case.name, subject, samples, note=note))
        ctx.step(subject)


QUICKJS_NOTE = (
    "the TypeScript program, types stripped, in a bare QuickJS context in the host, "
    "each run beside a TypeScript guest's run"
)
FLOOR_NOTE = "the same program in the host's CPython, each run beside a guest's run"


async def _monty(ctx: BenchContext, result: SuiteResult, runs: int) -> None:
    async with monty_pool() as monty:
        for case in CASES:
            expected = case.floor()()
            samples = []
            for _ in range(runs):
                base = await monty_base(monty)
                async with monty.checkout() as session:
                    clock = timed()
                    value = await session.feed_run(case.monty)
                    samples.append(max(0.0, clock() - base))
                if value != expected:
                    raise RuntimeError(f"{case.name}: monty gave {value!r}")
            result.rows.append(summarize(case.name, MONTY, samples))


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    runs = max(MIN_SAMPLES, ctx.runs)
    # The peers are shown, not checked: fewer runs of their slower loops.
    peer_runs = max(2, ctx.runs)
    result = SuiteResult(
        description=DESCRIPTION,
        params={"n": N, "loop_n": LOOP_N, "runs": runs, "smolagents_n": SMOL_N},
    )
    ctx.plan(len(GUESTS) + 2)
    floors = _Floors()
    await _guests(ctx, result, runs, floors)
    with ctx.guard(MONTY):
        if ctx.has(MONTY):
            await _monty(ctx, result, peer_runs)
    ctx.step("pydantic-monty")
    with ctx.guard(SMOLAGENTS):
        if ctx.has(SMOLAGENTS):
            executor = smolagents_executor({})
            samples = []
            for _ in range(max(1, peer_runs // 2)):
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
    for case in CASES:
        result.rows.append(summarize(case.name, FLOOR, floors.cpython[case.name], note=FLOOR_NOTE))
    for case in CASES:
        result.rows.append(
            summarize(case.name, QUICKJS_FLOOR, floors.quickjs[case.name], note=QUICKJS_NOTE)
        )
    cross_ratios(result.rows)
    result.peers = {p: ctx.peers[p] for p in (MONTY, SMOLAGENTS, FLOOR)}
    return result
