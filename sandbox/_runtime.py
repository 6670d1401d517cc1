"""``PythonRuntime``: the ``CodeRuntime`` that runs programs in sandboxed worker processes.

``ProcessRuntime`` holds everything that is not Python-specific (the pool, its runs,
disposal); a guest language subclasses it with its ``language``, guest name and the
modules the fork server preloads, and may override ``_execute`` (preprocess the program
in the host) and ``_warm_options`` (what each new worker prepares ahead of a run).
``TypeScriptRuntime`` lives in ``_ts_runtime``.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import Any, ClassVar

import anyio
import msgspec

from codemode.engine import CodeRunError, CodeRunRequest, CodeRunResult, reason_text
from codemode.engine.code_mode import validate_bindings

from ._limits import Limits
from .host._pool import PoolStats, WorkerPool
from .host._prepared import PreparedCache
from .host._supervisor import RunSupervisor
from .worker._boundary import BoundarySpec

__all__ = ["ProcessRuntime", "PythonRuntime", "RuntimeStats"]

_DISPOSE_TIMEOUT = 10.0


class RuntimeStats(msgspec.Struct, kw_only=True):
    """Counters of one runtime (for tests, benchmarks and diagnostics)."""

    runs: int = 0
    dropped_frames: int = 0
    #: The host's polls for a worker's next frame after sending it results (instead of
    #: sleeping in the event loop), those that the frame ended, and their seconds.
    host_polls: int = 0
    host_poll_answers: int = 0
    host_poll_seconds: float = 0.0
    #: Frames from workers decoded in a thread instead of on the event loop: a payload
    #: over 64 KiB with many members, or over 4 MiB (``host._bridge``).
    thread_decodes: int = 0
    pool: PoolStats = msgspec.field(default_factory=PoolStats)


class RuntimeProcesses(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of a runtime's live processes (for tests, diagnostics and cleanup
    checks): the fork server's pid (0 when none runs), the workers running a program
    and the spares waiting for one."""

    server_pid: int
    worker_pids: tuple[int, ...]
    idle_pids: tuple[int, ...] = ()


class ProcessRuntime:
    """A ``CodeRuntime`` whose programs run in pooled, locked-down worker processes.

    Use as an async context manager; ``run`` is valid only inside it. Entering starts
    the fork server and waits for it (a server that cannot start raises there); with
    ``start_in_background=True`` entering returns at once, the server and the first
    workers start behind it, the first run waits for them, and a server that cannot
    start fails that run (``worker-exit``) instead.
    """

    language: ClassVar[str] = ""
    isolation: ClassVar[str] = "process"
    guest: ClassVar[str] = ""
    guest_modules: ClassVar[dict[str, str]] = {}
    # Extra CPU the supervisor allows past ``max_compute_ms`` before killing: for guests that
    # stop themselves at the budget (see ``_supervisor``).
    _compute_grace_s: ClassVar[float] = 0.0
    # At most how many of the pages earlier runs wrote the spares fault in while idle
    # (``host/_prefault``; 0: none), each a page of every spare's private memory. A warm
    # Python run copied ~45 pages: 36-48 learned, 54-62 -> 15-28 faults and 1.69 -> 1.49
    # ms per warm start (interleaved with an unlearned runtime in one process), the spare
    # 3.29 -> 3.38-3.49 MB; 48 pages at most keep it under its 3.5 MB target whatever the
    # first runs wrote.
    _prefault_pages: ClassVar[int] = 48

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        start_in_background: bool = False,
        _guests: dict[str, str] | None = None,
    ) -> None:
        self.limits = limits if limits is not None else Limits()
        # Entering returns before the fork server is up (it and the first workers start
        # in the background; the first run waits for them, and a server that cannot
        # start fails that run): for a host with other start-up work to overlap, such as
        # the agent's first model request.
        self._start_in_background = start_in_background
        self._guests = dict(_guests) if _guests is not None else dict(self.guest_modules)
        self._pool: WorkerPool | None = None
        self._runs: set[RunSupervisor] = set()
        self._closed = False
        self._idle = anyio.Event()
        self.stats = RuntimeStats()
        # What workers made of recurring programs (see ``host/_prepared``); only guests
        # that send a prepared form fill it.
        self._prepared = PreparedCache()

    def _boundary(self) -> BoundarySpec:
        # The kernel's CPU limit is a backstop behind the supervisor's 25 ms polling.
        cpu_seconds = math.ceil(self.limits.max_compute_ms / 1000) + 2
        return BoundarySpec(memory_bytes=self.limits.max_memory_bytes, cpu_seconds=cpu_seconds)

    def _warm_options(self) -> dict[str, dict[str, Any]]:
        """Options for each guest module's ``prepare_template`` (none by default)."""
        return {}

    def sdk_facts(self) -> dict[str, Any]:
        """Plain-data facts for the SDK's "sandbox facts" block (``sdk_gen.render_sdk``):
        this runtime's limits and its guest's surface (see ``_sdk_facts``)."""
        from ._sdk_facts import sdk_facts

        return sdk_facts(self.language, self.limits)

    async def __aenter__(self) -> ProcessRuntime:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} cannot be restarted after disposal")
        pool = WorkerPool(
            size=self.limits.pool_size,
            boundary=self._boundary(),
            frame_bytes=self.limits.frame_bytes,
            guests=self._guests,
            preload=sorted(set(self._guests.values())),
            warm_options=self._warm_options(),
            start_in_background=self._start_in_background,
            prefault_pages=self._prefault_pages,
        )
        await pool.__aenter__()
        self._pool = pool
        self.stats.pool = pool.stats
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Abort in-flight runs (``runtime disposed``), then stop the pool.

        ``__aexit__`` calls it; call it directly only from the task that entered the
        runtime (the pool's task group is scoped to that task).
        """
        if self._closed:
            return
        self._closed = True
        for supervisor in list(self._runs):
            supervisor.dispose()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_DISPOSE_TIMEOUT):
            while self._runs:
                self._idle = anyio.Event()
                await self._idle.wait()
        if self._pool is not None:
            # Not inside the shield: the pool's task group must exit as the current scope.
            await self._pool.aclose()

    async def wait_ready(self) -> None:
        """Wait until ``Limits.pool_size`` workers are forked, locked down and idle.

        For latency-sensitive moments (and benchmarks): a run that finds a ready worker
        skips the fork. Bound it with ``anyio.move_on_after`` (the pool keeps filling in
        the background either way). Raises ``RuntimeError`` when not started or closed.
        """
        if self._pool is None or self._closed:
            raise RuntimeError(f"{type(self).__name__} is not started: use `async with`")
        await self._pool.wait_full()

    async def run(self, request: CodeRunRequest) -> CodeRunResult:
        """Run ``request.program``; failures are reported in the result, not raised."""
        validate_bindings(request.bindings)
        for binding in request.bindings:
            names = [binding.global_name]
            if binding.error_class is not None:
                names.append(binding.error_class.name)
            for name in names:
                if name.startswith("_"):
                    raise ValueError(f'binding global "{name}" is not a usable identifier')
        if self._closed:
            raise RuntimeError(f"{type(self).__name__}.run() after disposal")
        if self._pool is None:
            raise RuntimeError(f"{type(self).__name__} is not started: use `async with`")
        if request.signal.aborted:
            error = CodeRunError("abort", reason_text(request.signal.reason))
            return CodeRunResult(logs=[], error=error)
        return await self._execute(request)

    async def _execute(self, request: CodeRunRequest) -> CodeRunResult:
        """Run a validated, not yet aborted request (a guest may preprocess it first)."""
        return await self._run_guest(request, self.guest)

    async def _run_guest(
        self, request: CodeRunRequest, guest: str, options: dict[str, Any] | None = None
    ) -> CodeRunResult:
        assert self._pool is not None
        supervisor = RunSupervisor(
            request,
            self.limits,
            guest=guest,
            options=options,
            compute_grace_s=self._compute_grace_s,
            prepared=self._prepared,
        )
        self._runs.add(supervisor)
        self.stats.runs += 1
        try:
            return await supervisor.run(self._pool)
        finally:
            self._runs.discard(supervisor)
            self._idle.set()
            self.stats.dropped_frames += supervisor.dropped
            polls, answers, seconds = supervisor.polls
            self.stats.host_polls += polls
            self.stats.host_poll_answers += answers
            self.stats.host_poll_seconds += seconds
            self.stats.thread_decodes += supervisor.thread_decodes

    def processes(self) -> RuntimeProcesses:
        """The fork server's pid, the pids of workers currently running a program and
        those of the ready spares."""
        server = self._pool.server_pid if self._pool is not None else 0
        workers = tuple(s.worker.pid for s in self._runs if s.worker is not None)
        idle = self._pool.idle_pids() if self._pool is not None else ()
        return RuntimeProcesses(server_pid=server, worker_pids=workers, idle_pids=idle)


class PythonRuntime(ProcessRuntime):
    """Runs Python programs (the body of an async function) under RestrictedPython in
    sandboxed worker processes; see ``sandbox/README.md``.

    ``async with PythonRuntime(Limits(...)) as runtime: await runtime.run(request)``
    """

    language: ClassVar[str] = "python"
    guest: ClassVar[str] = "python"
    guest_modules: ClassVar[dict[str, str]] = {"python": "codemode.sandbox.python._guest"}

    async def __aenter__(self) -> PythonRuntime:
        await super().__aenter__()
        return self
