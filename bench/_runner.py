"""Running suites: the registry, option checks, progress bars and the report."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from codemode.engine import HarnessError

from . import (
    _suite_compute,
    _suite_fanout,
    _suite_host_load,
    _suite_mixed,
    _suite_payload,
    _suite_pipeline,
    _suite_roundtrip,
    _suite_startup,
    _suite_tools,
)
from ._common import BenchContext
from ._env import DISABLE_ENV, PEER_MODULES, environment, peer_status, probe_peers
from ._model import FLOOR, Report, SuiteResult
from ._targets import apply_targets

__all__ = ["SUITES", "BenchError", "BenchOptions", "resolve_suites", "run_bench"]

SuiteFn = Callable[[BenchContext], Awaitable[SuiteResult]]

#: name -> suite, in the order ``codemode bench`` runs them.
SUITES: dict[str, SuiteFn] = {
    "startup": _suite_startup.run,
    "roundtrip": _suite_roundtrip.run,
    "fanout": _suite_fanout.run,
    "mixed": _suite_mixed.run,
    "pipeline": _suite_pipeline.run,
    "payload": _suite_payload.run,
    "compute": _suite_compute.run,
    "host-load": _suite_host_load.run,
    "tools": _suite_tools.run,
}
DEFAULT_RUNS = 5
QUICK_RUNS = 2


class BenchError(HarnessError, ValueError):
    """A usage error in the bench options (an unknown suite or peer, a bad number)."""


class BenchOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What to run: suite names (empty = all), repetitions, quick mode, seed, peers off,
    and ``hog``: busy processes to run beside the host-load measurements."""

    suites: tuple[str, ...] = ()
    runs: int | None = None
    quick: bool = False
    seed: int = 0
    no_peers: tuple[str, ...] = ()
    hog: int = 0


def resolve_suites(names: tuple[str, ...] | list[str]) -> list[str]:
    """The suites to run, in registry order, or ``BenchError`` naming an unknown one."""
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise BenchError(f"unknown suite {unknown[0]!r} (choose from: {', '.join(SUITES)})")
    wanted = set(names) or set(SUITES)
    return [n for n in SUITES if n in wanted]


def _check(options: BenchOptions) -> list[str]:
    names = resolve_suites(options.suites)
    if options.runs is not None and options.runs < 1:
        raise BenchError(f"--runs must be at least 1 (got {options.runs})")
    if not 0 <= options.hog <= 64:
        raise BenchError(f"--hog must be between 0 and 64 (got {options.hog})")
    known = (*PEER_MODULES, FLOOR)
    for peer in options.no_peers:
        if peer not in known:
            raise BenchError(f"unknown peer {peer!r} (choose from: {', '.join(known)})")
    return names


def run_bench(options: BenchOptions, *, console: Console | None = None) -> Report:
    """Run the suites (progress bars on ``console`` when given); the report.

    Raises ``BenchError`` for bad options before anything runs. A suite that fails is
    reported with its ``error`` and the others still run.
    """
    names = _check(options)
    if options.no_peers:
        # Children (cold start, host load) read the same switch.
        off = {p for p in os.environ.get(DISABLE_ENV, "").split(",") if p}
        os.environ[DISABLE_ENV] = ",".join(sorted(off | set(options.no_peers)))
    runs = options.runs or (QUICK_RUNS if options.quick else DEFAULT_RUNS)
    peers = peer_status()
    env = environment(seed=options.seed, runs=runs, quick=options.quick, suites=names)
    suites: dict[str, SuiteResult] = {}
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=console is None,
        transient=False,
    )

    async def main() -> None:
        peers.update(await probe_peers(peers))
        overall = progress.add_task("[bold]suites", total=len(names))
        for name in names:
            task = progress.add_task(f"  {name}", total=None)
            ctx = BenchContext(
                runs=runs,
                quick=options.quick,
                seed=options.seed,
                peers=peers,
                step=_stepper(progress, task, name),
                on_plan=_planner(progress, task),
                hog=options.hog,
            )
            started = time.perf_counter()
            try:
                result = await SUITES[name](ctx)
            except Exception as exc:
                result = SuiteResult(
                    description=f"{name} failed",
                    params={},
                    error=f"{type(exc).__name__}: {exc}",
                    series={"traceback": traceback.format_exc(limit=6)},
                )
            result.seconds = round(time.perf_counter() - started, 3)
            result.peers.update(ctx.failures)
            apply_targets(name, result)
            suites[name] = result
            progress.update(
                task,
                description=f"  {name} ({result.seconds:.1f} s)",
                completed=ctx.planned or 1,
                total=ctx.planned or 1,
            )
            progress.advance(overall)

    with progress:
        anyio.run(main, backend="asyncio")
    return Report(env=env, suites=suites, peers=peers)


def _stepper(progress: Progress, task: TaskID, name: str) -> Callable[[str], None]:
    def step(label: str) -> None:
        progress.update(task, advance=1, description=f"  {name}: {label}")

    return step


def _planner(progress: Progress, task: TaskID) -> Callable[[int], None]:
    def plan(steps: int) -> None:
        progress.update(task, total=steps)

    return plan


def report_json(report: Report) -> str:
    """The report as one JSON object (``--json``)."""
    return msgspec.json.encode(report).decode()


def as_builtins(report: Report) -> dict[str, Any]:
    """The report as plain dicts and lists."""
    return dict(msgspec.to_builtins(report))
