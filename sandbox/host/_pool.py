"""The worker pool: warm, clean workers ready to be checked out, one run each.

``WorkerPool`` is an async context manager owning a task group with two long-lived
tasks: the fork-server reader and the refill loop, which keeps ``size`` workers forked,
locked down and ``ready``. ``checkout`` hands out a live idle worker (or forks one on the
spot when none is ready) and wakes the refill loop. A checked-out worker is never
returned: the supervisor kills it after its run. If the fork server dies, the pool starts
a new one on the next demand; closing the pool kills idle workers and stops the server,
which kills and reaps any worker still alive.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
from collections import deque
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import msgspec

from ..worker._boundary import BoundarySpec
from ..worker._frames import FrameBuffer, ReadyFrame
from . import _memory
from ._forkserver_client import ExitBox, ForkServerClient, ForkServerError
from ._prefault import PrefaultLearner

__all__ = ["PoolStats", "Worker", "WorkerPool", "cpu_ns"]

_log = logging.getLogger("sandbox")

_READY_TIMEOUT = 30.0
_REFILL_BACKOFF = 0.5
# How long a checkout with no spare waits for a refill in flight before forking its own.
_ARRIVAL_WAIT = 0.05
# How often a new spare is looked at until it is past its own pre-fault (``asleep``).
_SETTLE_POLL_S = 0.01


def asleep(pid: int) -> bool:
    """Whether process ``pid`` sleeps (state ``S``): for an idle worker, that it is past
    its pre-fault and waits for its run frame (it runs from ``ready`` until then). False
    when that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"S"
    except (OSError, IndexError):
        return False


class PoolStats(msgspec.Struct, kw_only=True):
    """Counters of one pool (mutable, for tests and benchmarks)."""

    workers_started: int = 0
    warm_checkouts: int = 0
    cold_checkouts: int = 0
    dead_discarded: int = 0
    server_starts: int = 0


class Worker:
    """A forked worker: pid, the host end of its bridge, and its exit report."""

    __slots__ = (
        "buffer",
        "cpu_ns",
        "exit",
        "killed",
        "learner",
        "notes",
        "pid",
        "pidfd",
        "sock",
    )

    def __init__(self, pid: int, sock: socket.socket, exit_box: ExitBox, frame_bytes: int):
        self.pid = pid
        self.sock = sock
        self.exit = exit_box
        self.buffer = FrameBuffer(frame_bytes)
        self.buffer.read_size = _memory.RECV_BYTES  # the host's reads (``_memory.recv``)
        self.notes: list[str] = []
        # CPU time when it reported ``ready``: the baseline of its run's compute budget,
        # read here, off the run's path. An idle worker blocks on its socket, so nothing
        # runs between the two (and anything that did would count against the run).
        self.cpu_ns: int | None = None
        # Its fork server's (``host/_prefault``): shown the worker after a normal run.
        self.learner: PrefaultLearner | None = None
        self.pidfd: int | None = None
        #: SIGKILL was sent (irrevocable: another one is only cost, ~35 µs of signal
        #: delivery each on this kind of VM).
        self.killed = False
        try:
            self.pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self.pidfd = None

    def alive(self) -> bool:
        """True until the worker has exited."""
        if self.exit.exited:
            return False
        if self.pidfd is not None:
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
            return not poller.poll(0)
        return True

    def kill(self) -> None:
        """SIGKILL the worker and its process group (idempotent, never raises)."""
        if self.exit.exited or self.killed:
            return
        self.killed = True
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass
            if not self.alive():
                return
        # The worker leads its own process group (setsid); while it has not been reaped
        # the group id cannot be reused. The group too: where no seccomp filter or
        # process limit stops it, a worker may have forked.
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
                return
            except OSError:
                continue

    def close(self) -> None:
        """Release the host-side descriptors."""
        self.sock.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def __del__(self) -> None:
        # The last resort of a worker nobody released: no process and no descriptor
        # outlives the object.
        try:
            if self.sock.fileno() != -1:
                self.kill()
                self.close()
        except Exception:  # interpreter teardown: nothing left to report to
            pass


class WorkerPool:
    """Keeps ``size`` warm workers; see module docstring."""

    def __init__(
        self,
        *,
        size: int,
        boundary: BoundarySpec,
        frame_bytes: int,
        guests: dict[str, str],
        preload: list[str],
        warm_options: dict[str, dict[str, Any]] | None = None,
        start_in_background: bool = False,
        prefault_pages: int = 0,
    ) -> None:
        self._size = size
        self._prefault_pages = prefault_pages
        self._start_in_background = start_in_background
        self._warm_options = warm_options
        self._boundary = boundary
        self._frame_bytes = frame_bytes
        self._guests = guests
        self._preload = preload
        self._idle: deque[Worker] = deque()
        self._spawning = 0
        self._want = anyio.Event()
        # Set (and replaced) whenever a refill ends, with a worker or without: what a
        # checkout that found no spare waits on while refills are in flight.
        self._arrived = anyio.Event()
        self._server: ForkServerClient | None = None
        self._server_lock = anyio.Lock()
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._logged_notes: set[str] = set()
        self.stats = PoolStats()
        # Freed C heap back to the system every so many runs (see ``_memory``).
        self.trimmer = _memory.HeapTrimmer()

    async def __aenter__(self) -> WorkerPool:
        stack = AsyncExitStack()
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        try:
            if not self._start_in_background:
                await self._ensure_server()
        except BaseException:
            self._tg.cancel_scope.cancel()
            await stack.aclose()
            raise
        # The first workers are on their way before the first checkout, which then takes
        # one of them instead of forking a third beside them.
        self._fill()
        self._tg.start_soon(self._refill_loop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Kill idle workers, stop the fork server, end the background tasks."""
        if self._closed:
            return
        self._closed = True
        while self._idle:
            worker = self._idle.popleft()
            worker.kill()
            worker.close()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            if self._server is not None:
                await self._server.aclose()
        if self._stack is not None:
            # The task group is already cancelled, so this returns promptly; it must not
            # run inside the shield scope above (cancel scopes nest strictly).
            await self._stack.aclose()

    @property
    def server_pid(self) -> int:
        """Pid of the current fork server (0 when none is running)."""
        return self._server.pid if self._server is not None and self._server.alive else 0

    def idle_pids(self) -> tuple[int, ...]:
        """The pids of the ready spares, oldest first."""
        return tuple(worker.pid for worker in self._idle)

    async def checkout(self) -> Worker:
        """A live, warm worker that nobody else will use."""
        if self._closed:
            raise RuntimeError("worker pool is closed")
        while self._idle:
            worker = self._idle.popleft()
            if not self._idle:
                # The last spare went: refill now, or the next run forks on its path.
                self._want.set()
            if worker.alive():
                self.stats.warm_checkouts += 1
                return worker
            self.stats.dead_discarded += 1
            worker.close()
        if self._spawning and not self.stats.workers_started:
            # The first workers, started as the pool opened, are on their way: take one
            # rather than fork a third beside them (on two cores that slows them all),
            # unless it takes longer than a set-up should. Later, back-to-back runs do
            # better forking their own: the extra set-ups run beside the refills and
            # keep more spares coming (p50 1.8-2.1 ms against 2.9-3.2 waiting). While a
            # server started in the background is still coming up, a cold spawn would
            # only queue behind it: wait for the first worker (or its failure) instead.
            starting = self._server is None or not self._server.alive
            with anyio.move_on_after(None if starting else _ARRIVAL_WAIT):
                await self._arrived.wait()
            if self._idle:
                return await self.checkout()
        self._want.set()
        self.stats.cold_checkouts += 1
        return await self._spawn()

    def release(self, worker: Worker, finished: bool = False) -> None:
        """A checked-out worker's run is over: kill it, free its descriptors, refill.

        ``finished``: the run ended normally (``done``); while its server's pre-fault is
        still being learned, the worker's written pages are read first."""
        learner = worker.learner
        if finished and learner is not None and learner.learning and not worker.killed:
            learner.learn(worker.pid)
        if learner is not None and learner.needs_baseline:
            spare = next((w for w in self._idle if w.learner is learner and asleep(w.pid)), None)
            if spare is not None:
                learner.baseline(spare.pid)
        worker.kill()
        worker.close()
        self.run_ended()

    def run_ended(self) -> None:
        """A checked-out worker's run is over: refill the pool now.

        While spares remain, the refill waits for this instead of starting at checkout:
        a fork and a new worker's set-up would otherwise compete with the run for the
        CPU (on two cores, a third of a warm start's latency). Every so many runs the
        host's freed C heap is also given back (``_memory.HeapTrimmer``).
        """
        self.trimmer.run_ended()
        if not self._closed and len(self._idle) + self._spawning < self._size:
            self._want.set()

    async def _ensure_server(self) -> ForkServerClient:
        async with self._server_lock:
            server = self._server
            if server is not None and server.alive:
                return server
            if server is not None:
                await server.aclose()
            if self._closed:
                # A refill that began as the pool closed: no new server for it.
                raise ForkServerError("the worker pool is closed")
            assert self._tg is not None
            server = ForkServerClient(
                guests=self._guests,
                boundary=self._boundary,
                preload=self._preload,
                warm_options=self._warm_options,
            )
            server.on_dead = lambda: self._want.set()
            # Learned anew for each server: its workers' layout is its own.
            server.learner = (
                PrefaultLearner(max_pages=self._prefault_pages) if self._prefault_pages else None
            )
            await server.start(self._tg)
            self._server = server
            self.stats.server_starts += 1
            for note in server.notes:
                self._note(note)
            return server

    async def _spawn(self) -> Worker:
        server = await self._ensure_server()
        learner = server.learner
        pid, sock = await server.fork(
            self._frame_bytes, learner.take() if learner is not None else None
        )
        box = server.exits.get(pid) or ExitBox()
        worker = Worker(pid, sock, box, self._frame_bytes)
        worker.learner = learner
        try:
            with anyio.fail_after(_READY_TIMEOUT):
                ready = await self._read_ready(worker)
        except BaseException:
            worker.kill()
            worker.close()
            raise
        worker.notes = ready.notes
        worker.cpu_ns = cpu_ns(pid)
        for note in ready.notes:
            self._note(note)
        self.stats.workers_started += 1
        return worker

    async def _read_baseline(self, worker: Worker, learner: PrefaultLearner) -> None:
        """Show ``learner`` what a new spare has private once it is past its own
        pre-fault (``host/_prefault``). A spare checked out first hands the read on to
        the next one (and, with more than one, ``release`` reads a settled one)."""
        while learner.needs_baseline and worker in self._idle and not worker.killed:
            if asleep(worker.pid):
                learner.baseline(worker.pid)
                return
            await anyio.sleep(_SETTLE_POLL_S)
        learner.asked = False

    async def _read_ready(self, worker: Worker) -> ReadyFrame:
        decoder = msgspec.json.Decoder(ReadyFrame)
        while True:
            try:
                data = _memory.recv(worker.sock)
            except BlockingIOError:
                await anyio.wait_readable(worker.sock)
                continue
            if not data:
                raise ForkServerError("sandbox worker exited during start-up")
            # Nothing but ``ready`` can precede the ``run`` frame, so exactly one frame
            # is expected here; anything else is a broken worker.
            for payload in worker.buffer.feed(data):
                try:
                    return decoder.decode(payload)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise ForkServerError("sandbox worker sent a bad ready frame") from exc

    async def _refill_loop(self) -> None:
        while not self._closed:
            self._fill()
            await self._want.wait()
            self._want = anyio.Event()
            if self._server is not None and not self._server.alive:
                # Workers die with their server; drop the stale ones.
                while self._idle:
                    stale = self._idle.popleft()
                    stale.close()
                    self.stats.dead_discarded += 1

    def _fill(self) -> None:
        assert self._tg is not None
        # Every missing worker at once: their forks and set-ups overlap (on the server's
        # core and the workers' own) instead of queueing one after another.
        while len(self._idle) + self._spawning < self._size and not self._closed:
            self._spawning += 1
            self._tg.start_soon(self._refill_one)

    def _signal_arrival(self) -> None:
        arrived, self._arrived = self._arrived, anyio.Event()
        arrived.set()

    async def _refill_one(self) -> None:
        try:
            await self._refill_attempt()
        finally:
            self._signal_arrival()

    async def _refill_attempt(self) -> None:
        try:
            worker = await self._spawn()
        except (ForkServerError, OSError, TimeoutError) as exc:
            if self._closed:
                # A refill that started as the pool closed meets the closed server: that
                # is the teardown, not a failure to report.
                self._spawning -= 1
                return
            _log.warning("sandbox: could not start a worker: %s", exc)
            if not self.stats.server_starts:
                # No server ever came up in this pool (one started in the background
                # that failed): no retry loop starting a doomed interpreter every
                # half second for the session's life; a checkout tries once itself
                # and fails its run with the reason.
                self._spawning -= 1
                return
            await anyio.sleep(_REFILL_BACKOFF)
            self._spawning -= 1
            self._want.set()
            return
        except BaseException:
            self._spawning -= 1
            raise
        self._spawning -= 1
        if self._closed:
            worker.kill()
            worker.close()
            return
        self._idle.append(worker)
        learner = worker.learner
        if learner is not None and learner.needs_baseline and not learner.asked:
            learner.asked = True
            assert self._tg is not None
            self._tg.start_soon(self._read_baseline, worker, learner)

    async def wait_full(self) -> None:
        """Wait until ``size`` workers are idle; ``RuntimeError`` if the pool closes."""
        while len(self._idle) < self._size:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            self._want.set()
            # Polled: a fill takes a few fork round trips, and this is not a hot path.
            await anyio.sleep(0.002)

    def _note(self, note: str) -> None:
        if note not in self._logged_notes:
            self._logged_notes.add(note)
            _log.warning("sandbox boundary degraded: %s", note)


def cpu_ns(pid: int) -> int | None:
    """CPU time of ``pid`` in nanoseconds (``schedstat``, falling back to ``stat``)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return int(ticks * 1e9 / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
