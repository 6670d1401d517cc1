"""What the suites share: the run context, the tools they call, and the ways to run a
program on each subject (codemode's two guests, pydantic-monty, smolagents' local
executor, and the in-process asyncio floor)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio

from codemode.engine import (
    AbortController,
    Binding,
    CodeRunRequest,
    ErrorClass,
    MemorySessionLog,
    ToolDefinition,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.sandbox import Limits, ProcessRuntime, PythonRuntime, TypeScriptRuntime

from ._model import MONTY, OURS_PY, OURS_TS, SMOLAGENTS

__all__ = [
    "GUESTS",
    "BenchContext",
    "CodeMode",
    "Step",
    "cpu_hog",
    "monty_base",
    "monty_pool",
    "net_run",
    "run_child",
    "execute_run_code",
    "ready_all",
    "time_ready",
    "run_direct",
    "smolagents_executor",
    "timed",
]

#: subject -> runtime class
GUESTS: dict[str, type[ProcessRuntime]] = {OURS_PY: PythonRuntime, OURS_TS: TypeScriptRuntime}

Step = Callable[[str], None]


class BenchContext:
    """One bench run's options, the peers it may use and its progress callback."""

    def __init__(
        self,
        *,
        runs: int,
        quick: bool,
        seed: int,
        peers: dict[str, str],
        step: Step | None = None,
        on_plan: Callable[[int], None] | None = None,
        hog: int = 0,
    ) -> None:
        self.runs = runs
        #: Busy processes to run beside the measurements that take them (``--hog``).
        self.hog = hog
        self.quick = quick
        self.seed = seed
        self.peers = peers
        self._step = step
        self._on_plan = on_plan
        self.planned = 0
        #: peer -> why it failed in the current suite (the runner copies it into the result).
        self.failures: dict[str, str] = {}

    @contextmanager
    def guard(self, peer: str) -> Iterator[None]:
        """Around one peer's measurements: a failure marks the peer failed in this suite
        (what it measured before stays) instead of failing the suite."""
        try:
            yield
        except Exception as exc:
            self.failures[peer] = f"missing: failed here ({type(exc).__name__}: {str(exc)[:200]})"

    def has(self, peer: str) -> bool:
        """Whether ``peer`` can be measured in this run."""
        return self.peers.get(peer) == "ok"

    def plan(self, steps: int) -> None:
        """Announce how many ``step`` calls the suite will make (sizes the progress bar)."""
        self.planned = steps
        if self._on_plan is not None:
            self._on_plan(steps)

    def step(self, label: str) -> None:
        """Report one finished step of the current suite."""
        if self._step is not None:
            self._step(label)


def timed() -> Callable[[], float]:
    """A stopwatch: returns a function giving the ms elapsed since ``timed()``."""
    start = time.perf_counter()
    return lambda: (time.perf_counter() - start) * 1e3


# -- codemode ------------------------------------------------------------------------


def _request(program: str, functions: dict[str, Any]) -> CodeRunRequest:
    return CodeRunRequest(
        program, [Binding("tools", functions, ErrorClass())], AbortController().signal
    )


async def run_direct(
    runtime: ProcessRuntime, program: str, functions: dict[str, Any] | None = None
) -> Any:
    """Run ``program`` on ``runtime`` with a ``tools`` binding (no pipeline); its value."""
    result = await runtime.run(_request(program, functions or {}))
    if result.error is not None:
        raise RuntimeError(f"{runtime.language} program failed: {result.error.message}")
    return result.value


def tool(
    name: str,
    body: Callable[[Any], Awaitable[Any]],
    *,
    parallel: bool = True,
    schema: Any = None,
) -> ToolDefinition:
    """A bench tool: ``body(args)``, parallel-safe unless told otherwise, open arguments."""

    async def execute(args: Any, ctx: Any) -> Any:
        return await body(args)

    return define_tool(
        name=name,
        description=f"Benchmark tool {name}.",
        parameters={},
        output=ToolOutput(schema=schema or {"type": "json"}, render=lambda a, v: [text("ok")]),
        execute=execute,
        is_concurrency_safe=(lambda args: True) if parallel else (lambda args: False),
    )


async def execute_run_code(rt: ToolRuntime, agent: Any, call_id: str, program: str) -> Any:
    """``run_code`` through ``rt``'s whole pipeline as ``agent``; the result (an error raises)."""
    result = await rt.execute(
        ToolExecutionInput(
            call_id=call_id,
            name="run_code",
            arguments={"code": program, "description": "benchmark"},
            signal=AbortController().signal,
            agent=agent,
        )
    )
    if result.is_error:
        # Only the head of the text: a flooded run's error carries up to the output cap,
        # and printing all of it would be measured as the host's cost.
        first = result.content[0] if result.content else {}
        head = str(first.get("text", ""))[:500] if isinstance(first, dict) else ""
        raise RuntimeError(f"run_code failed: {head}")
    return result


class CodeMode:
    """A ``ToolRuntime`` in code mode over one sandbox runtime, with a memory session."""

    def __init__(self, runtime: ProcessRuntime, tools: list[ToolDefinition], cap: int) -> None:
        self.rt = ToolRuntime(mode="code", max_parallel_sub_calls=cap, code_runtime=runtime)
        for definition in tools:
            self.rt.register(definition)
        # The default retention bound, as a host would run it (host-load measures RSS).
        self.session = MemorySessionLog()
        self.agent = self.rt.scope("bench", session=self.session)
        self._n = 0

    async def run(self, program: str) -> Any:
        """Run ``program`` through ``run_code``; its value (an error raises)."""
        self._n += 1
        result = await execute_run_code(self.rt, self.agent, f"bench-{self._n}", program)
        return result.value.get("result")

    def dispatch_timings(self, call_id: str | None = None) -> list[dict[str, Any]]:
        """The ``timing`` of every ``tool/code-dispatch`` event of the last run (or ``call_id``)."""
        wanted = call_id or f"bench-{self._n}"
        return [
            dict(event["timing"], name=event.get("name"))
            for event in self.session.events
            if event.get("type") == "tool/code-dispatch"
            and event.get("parentCallId") == wanted
            and isinstance(event.get("timing"), dict)
        ]


_OPEN: set[ProcessRuntime] = set()


async def ready_all() -> None:
    """Wait until every open bench runtime holds a full pool of ready workers.

    Every run takes a fresh worker; one measured right after another (a baseline) would
    otherwise also time the fork the previous run caused. Called before every timed run
    except the back-to-back case, whose point that fork is.
    """
    for runtime in list(_OPEN):
        with anyio.move_on_after(5):
            await runtime.wait_ready()


async def time_ready(awaitable: Any) -> float:
    """Milliseconds ``awaitable`` takes, started once the pools are full (``ready_all``)."""
    await ready_all()
    clock = timed()
    await awaitable
    return clock()


async def net_run(
    runtime: ProcessRuntime, program: str, functions: dict[str, Any] | None = None
) -> tuple[float, Any]:
    """One run of ``program`` with full pools: its milliseconds less the median of two
    ``return 1`` runs just before it (worker checkout and start-up; never below 0), and
    its value."""
    base = statistics.median([await time_ready(run_direct(runtime, "return 1")) for _ in range(2)])
    await ready_all()
    clock = timed()
    value = await run_direct(runtime, program, functions)
    return max(0.0, clock() - base), value


@asynccontextmanager
async def open_runtime(subject: str, **limits: Any) -> AsyncIterator[ProcessRuntime]:
    """A started runtime of ``subject``'s guest, its pool full (see ``ready_all``)."""
    async with GUESTS[subject](Limits(**limits)) as runtime:
        await run_direct(runtime, "return 1")
        _OPEN.add(runtime)
        try:
            await ready_all()
            yield runtime
        finally:
            _OPEN.discard(runtime)


# -- peers ---------------------------------------------------------------------------


@asynccontextmanager
async def monty_pool(processes: int = 2) -> AsyncIterator[Any]:
    """An ``AsyncMonty`` pool (pydantic-monty's async API), warmed up."""
    import pydantic_monty

    async with pydantic_monty.AsyncMonty(min_processes=processes) as monty:
        async with monty.checkout() as session:
            await session.feed_run("1")
        yield monty


async def monty_base(monty: Any) -> float:
    """Milliseconds of a pydantic-monty run of ``0`` in a session of its own: the
    start-up a suite subtracts from the measured run that follows it."""
    async with monty.checkout() as session:
        clock = timed()
        await session.feed_run("0")
        return clock()


def smolagents_executor(functions: dict[str, Callable[..., Any]]) -> Any:
    """smolagents' ``LocalPythonExecutor`` with ``functions`` as plain (sync) tools."""
    from smolagents.local_python_executor import LocalPythonExecutor

    # No timeout: smolagents enforces one with a thread per evaluation, which would be
    # measured as its cost; codemode's own wall-clock limit stays on, as configured.
    executor = LocalPythonExecutor([], additional_functions=functions, timeout_seconds=None)
    executor.send_tools({})
    return executor


# -- fresh processes -----------------------------------------------------------------


#: A busy loop that ends by itself once its parent (the bench) is gone.
_HOG = (
    "import os\nparent = os.getppid()\nos.write(1, b'r')\nwhile os.getppid() == parent:\n    pass\n"
)


@contextmanager
def cpu_hog(processes: int) -> Iterator[None]:
    """Run ``processes`` busy-looping Python processes for the duration (``--hog N``)."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", _HOG], stdout=subprocess.PIPE)
        for _ in range(processes)
    ]
    try:
        # Each hog says when it spins: what is measured next runs beside all of them.
        for hog in hogs:
            assert hog.stdout is not None
            hog.stdout.read(1)
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
            if hog.stdout is not None:
                hog.stdout.close()


def run_child(*args: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``python -m codemode.bench._child ARGS`` in a fresh process; its JSON line."""
    done = subprocess.run(
        [sys.executable, "-m", "codemode.bench._child", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env=os.environ.copy(),
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"bench child {' '.join(args)} failed (exit {done.returncode}): {done.stderr[-1500:]}"
        )
    return dict(json.loads(lines[-1]))


SUBJECT_NAMES = (OURS_PY, OURS_TS, MONTY, SMOLAGENTS)
