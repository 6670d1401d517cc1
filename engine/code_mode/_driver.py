"""The per-run single-lane sub-dispatch driver of ``run_code``.

One *lane* per run. The *ordered* stages run in the lane and never overlap: the
``tool/code-dispatch-start`` append, ``prepare`` (pre-execute, approval, guards) and
``commit`` (post-execute or finish, context forwarding, resolving the program's
awaitable). Only the around-dispatch/body stage runs concurrently, up to
``max_parallel_sub_calls`` bodies.

Whoever holds the lane repeats, until none applies (``_pump``):
1. commit the head of the commit queue if its body settled (head-of-line: programs
   receive results in submission order);
2. otherwise consider the head of the pending queue: abandon it if the run is over, else
   re-classify it *now* (fail-closed) and start it if no exclusive call is active and
   either it is exclusive and nothing is in flight, or it is parallel and fewer than the
   cap are in flight;
3. otherwise release the lane.

An exclusive call holds its barrier through its commit. After each commit the lane waits
while more than the cap of log appends are pending (backpressure that never delays the
value already delivered to the program).

Who pumps (an implementation choice; the observable order above is the contract): there
is no driver loop to wake. A body's worker that settles its body takes the lane itself
when it is free and commits what is ready (a body that settles while another task holds
the lane is seen by that holder's next pass, which re-checks before releasing: there is
no await between the last check and the release). A submission, or the run's abort, that
finds the lane free hands one pump to a worker; a submission that finds nothing queued,
started or committing takes the lane for its call at once and hands the worker the whole
pass in one job (``_lone``: a sequential program's every call). On asyncio that job's
first step runs at once, as an idle worker whose task it borrows (``_Workers._borrow``)
or in a new worker task (``_Workers._eager``), whether the call was begun from a loop
callback (a sandbox's read callback, ``begin``) or awaited by a program task: a body that
does not wait is started, committed and answered before the submission returns, so a
sequential sub-call costs no loop iteration and no task (handing it to a parked worker
and back cost two iterations, a driver loop woken per stage four, a task per call a fifth
of the driver's own time). Other backends hand the job to a worker.

Where the work runs: parallel bodies and settle-event appends run in worker tasks of the
run that are reused from one sub-call to the next (spawning a task per sub-call cost more
than the rest of the driver's bookkeeping; there are never more body workers than bodies
that overlapped, and workers end when the run drains). A worker that pumped runs the last
body it started itself (earlier ones go to other workers before the lane's next ordered
stage, so no body waits for another call's stage), and stops starting while workers
whose bodies settled have yet to look at the lane: each of those starts the next call
and runs its body itself (a fan-out's wave reuses its workers). An exclusive body runs
in the lane, since nothing else may start or commit until it has committed. The
program's own tasks never run a stage or a body: cancelling one (a program's timeout,
the run's end) only detaches it from its call, which still runs, commits and is logged.
A settle event whose session is a built-in log (``append`` never yields) and that has
no ``tools/code-dispatch-log`` listener is appended in the lane right after the program
got its value, so such an append is in effect synchronous with the settle.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.lowlevel
import msgspec

from .._errors import BindingCallError
from .._pipeline import Dispatch, Pipeline, Settled
from .._presentation import call_card_fields, result_card_fields
from .._results import error_message
from .._session import MemorySessionLog, SqliteSessionLog
from .._signals import AbortSignal, reason_text
from .._types import ToolDefinition, ToolExecutionInput, ToolExecutionResult
from ..json import sealed, snapshot
from ._events import (
    UNENCODABLE,
    SettleEvent,
    SettleTiming,
    StartEvent,
    StartTiming,
    encode_event,
    too_big,
)
from ._seam import Settle, SettlingBinding

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .._execution import ToolRunContext
    from .._hooks import HookRegistry
    from .._runtime import ToolRuntime

__all__ = ["CodeDispatchLog", "SubDispatchDriver"]

_log = logging.getLogger("engine.code_mode")

_IMAGE_SOURCE = {"kind": "plugin", "plugin": "tools-code-mode"}


class CodeDispatchLog(msgspec.Struct, frozen=True, kw_only=True):
    """One settled sub-dispatch as the ``tools/code-dispatch-log`` waterfall sees it."""

    exec: Any
    agent: Any
    sub_call_id: str
    name: str
    is_error: bool
    content: Any


class _Flag:
    """A one-shot event with a single waiter.

    On asyncio it is a bare future, which costs half of an ``anyio.Event`` round trip
    (measured: 5.5 µs vs 10.9 µs per hand-off) — and a sub-call whose body waits makes
    two hand-offs between the program's task and the driver. Other backends get
    ``anyio.Event``.
    A waiter cancelled while waiting cancels the future; ``set`` tolerates that.
    ``loop`` is the driver's (``_asyncio_loop()`` read once per run: five flags are made
    per sub-call, and the look-up was a tenth of the driver's own time).
    """

    __slots__ = ("_event", "_future")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        if loop is not None:
            self._future: asyncio.Future[None] | None = loop.create_future()
            self._event: anyio.Event | None = None
        else:
            self._future = None
            self._event = anyio.Event()

    def set(self) -> None:
        future = self._future
        if future is None:
            assert self._event is not None
            self._event.set()
        elif not future.done():
            future.set_result(None)

    async def wait(self) -> None:
        future = self._future
        if future is None:
            assert self._event is not None
            await self._event.wait()
        elif not future.done():
            await future


_current_task = asyncio.current_task
# What the stdlib's own task steps call to make a task current; ``_Workers.submit`` uses
# them to run a new task's first step from inside another task.
_enter_task = asyncio.tasks._enter_task
_leave_task = asyncio.tasks._leave_task


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    # Under trio there is no running asyncio loop (or, with trio-asyncio, no asyncio
    # task): fall back to anyio.Event there.
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop if asyncio.current_task(loop) is not None else None


class _Slot:
    """One worker's mailbox: the job it is handed while parked (``ready``), and on
    asyncio the worker's task and context, which ``_Workers._borrow`` runs a job under."""

    __slots__ = ("context", "job", "ready", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.job: Any = None
        self.ready = _Flag(loop)
        self.task: asyncio.Task[None] | None = None
        self.context: contextvars.Context | None = None


class _Adopt:
    """A job that a borrowed worker began and that is waiting (see ``_Workers._borrow``):
    the worker's task goes on driving ``coro`` from ``yielded``, what it waits on."""

    __slots__ = ("coro", "yielded")

    def __init__(self, coro: Coroutine[Any, Any, None], yielded: Any) -> None:
        self.coro = coro
        self.yielded = yielded


@types.coroutine
def _drive(coro: Coroutine[Any, Any, None], yielded: Any, thrown: BaseException | None) -> Any:
    """Drive ``coro``, suspended on ``yielded`` (or, with ``thrown``, about to receive
    it), to its end in the awaiting task: what ``await`` would do had that task begun it
    (it yields what ``coro`` waits on and passes back what the task sends or throws)."""
    send, throw = coro.send, coro.throw
    try:
        if thrown is not None:
            yielded = throw(thrown)
        while True:
            try:
                value = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                yielded = throw(exc)
            else:
                yielded = send(value)
    except StopIteration as stop:
        return stop.value


class _Workers:
    """Long-lived tasks running ``run(job)`` for each submitted job.

    A job goes to an idle worker when there is one, otherwise to a new worker, so the
    number of workers is the largest number of jobs that ran at once. ``close`` ends
    idle workers and makes busy ones end after their job.

    On asyncio the workers are plain tasks (an anyio task-group spawn costs four times
    as much, and a fan-out of 100 calls at cap 100 spawns 100 workers); the driver loop
    owns them as a task group would: a worker's crash is re-raised by the loop
    (``crash``, then ``on_crash`` wakes it), and ``wait_closed`` cancels and awaits
    what is left when the loop ends. Other backends spawn in ``tg``.

    On asyncio a job begins at once, in the submitter's call: a new worker's first step
    runs now (``_eager``), and an idle worker is *borrowed* (``_borrow``): the job's
    first step runs as that worker's task, in its context, and the worker's task goes
    on with the job only if it waits. A sequential program's sub-call thus costs no task
    at all (creating one, eager or not, was a fifth of the driver's own time per call).
    """

    __slots__ = ("_closed", "_idle", "_loop", "_on_crash", "_run", "_tasks", "_tg", "crash")

    def __init__(
        self,
        tg: TaskGroup,
        run: Callable[[Any], Coroutine[Any, Any, None]],
        on_crash: Callable[[], None],
    ) -> None:
        self._tg = tg
        self._run = run
        self._on_crash = on_crash
        self._idle: list[_Slot] = []
        self._closed = False
        self._loop = _asyncio_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self.crash: BaseException | None = None

    def submit(self, job: Any) -> None:
        loop = self._loop
        if loop is not None:
            # Submitted from a task (a program's, or a worker handing a body on) or from
            # a loop callback (a sandbox's read callback, ``begin``): that task, if any,
            # steps aside while the job's first step runs as another one, as Python
            # 3.12's eager task factory swaps the current task.
            caller = _current_task(loop)
            if caller is not None:
                _leave_task(loop, caller)
            try:
                if self._idle:
                    self._borrow(loop, self._idle.pop(), job)
                    return
                if self._eager(loop, job):
                    return
            finally:
                if caller is not None:
                    _enter_task(loop, caller)
        if self._idle:
            slot = self._idle.pop()
            slot.job = job
            slot.ready.set()
        elif loop is not None:
            slot = _Slot(loop)
            task = loop.create_task(self._work(job, slot), name="run_code sub-dispatch worker")
            slot.task = task
            self._tasks.add(task)
            task.add_done_callback(self._done)
        else:
            self._tg.start_soon(self._work, job, _Slot(None), name="run_code sub-dispatch worker")

    def _borrow(self, loop: asyncio.AbstractEventLoop, slot: _Slot, job: Any) -> None:
        """Run ``job``'s first step as the idle worker of ``slot`` (no task may be
        current: ``submit`` sets the caller's aside): ``current_task()`` is that worker,
        its context is the one the step runs in, and anyio's cancel scopes entered in
        the step belong to it. A job that ends in that step leaves the worker idle, as it
        was; one that waits is handed to it (``_Adopt``), and its task takes it over at
        once (on the stdlib loop; elsewhere when the loop next runs it) and waits on what
        the job waits on. Cancelling the worker then reaches the job: cancelling it while
        the hand-over is pending too (``_park``)."""
        task = slot.task
        context = slot.context
        assert task is not None and context is not None
        coro = self._run(job)
        _enter_task(loop, task)
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            self._repark(slot)
            return
        except asyncio.CancelledError:
            self._repark(slot)
            return
        except Exception as exc:
            self._repark(slot)
            self._crashed(exc)
            return
        finally:
            _leave_task(loop, task)
        slot.job = _Adopt(coro, yielded)
        slot.ready.set()
        # The worker takes the job over now (its wake-up is the step just queued), as
        # ``_eager`` runs a new task's first step: from the loop it cost an iteration per
        # body that waits, before the body even began to wait on what it asked for.
        ready = getattr(loop, "_ready", None)
        if ready:
            handle = ready[-1]
            if getattr(handle._callback, "__self__", None) is task:
                ready.pop()
                handle._run()

    def _repark(self, slot: _Slot) -> None:
        if self._closed:
            slot.job = None
            slot.ready.set()  # the worker ends (``close`` did not see it: it was lent)
        else:
            self._idle.append(slot)

    def _eager(self, loop: asyncio.AbstractEventLoop, job: Any) -> bool:
        """Run ``job`` in a new worker task whose first step runs now, as Python 3.12's
        eager tasks do (no task may be current: ``submit`` sets the caller's aside): a
        call whose body does not wait is started, run, committed and answered before
        the callback (a frame read from a worker) or the program's ``submit`` returns,
        where waking a parked worker cost a loop iteration (~10 us here) and put the
        reply behind it. A body that waits goes on as an ordinary task, and the worker
        parks after its job like any other (to be borrowed next: ``_borrow``).

        Only on the stdlib loop (its ``_ready`` queue), and only when the step the new
        task scheduled is the last one queued (else nothing is popped: it runs
        normally). The task is a real one (``current_task`` is it, anyio's cancel
        scopes work), and it is owned like any worker (``wait_closed``).
        """
        ready = getattr(loop, "_ready", None)
        if ready is None:
            return False
        slot = _Slot(loop)
        context = slot.context = contextvars.copy_context()
        # ``asyncio.Task`` itself when the loop has no task factory (what
        # ``create_task`` would do, without its frame).
        task = (
            asyncio.Task(
                self._work(job, slot), loop=loop, name="run_code sub-dispatch", context=context
            )
            if loop._task_factory is None  # type: ignore[attr-defined]
            else loop.create_task(
                self._work(job, slot), name="run_code sub-dispatch", context=context
            )
        )
        slot.task = task
        self._tasks.add(task)
        task.add_done_callback(self._done)
        handle = ready[-1] if ready else None
        if handle is not None and getattr(handle._callback, "__self__", None) is task:
            ready.pop()
            handle._run()
        return True

    def _crashed(self, exc: BaseException) -> None:
        if self.crash is None:
            self.crash = exc
            self._on_crash()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self.crash is not None:
            return
        exc = task.exception()
        if exc is not None:
            self._crashed(exc)

    async def wait_closed(self) -> None:
        """Close, cancel the workers still running, and wait until every one has ended."""
        self.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _work(self, job: Any, slot: _Slot) -> None:
        while job is not None:
            if type(job) is _Adopt:
                await _drive(job.coro, job.yielded, None)
            else:
                await self._run(job)
            if self._closed:
                return
            job = await self._park(slot)

    async def _park(self, slot: _Slot) -> Any:
        """Wait idle for the next job (None: the workers are closing)."""
        slot.job = None
        slot.ready = _Flag(self._loop)
        self._idle.append(slot)
        try:
            await slot.ready.wait()
        except BaseException as exc:
            job = slot.job
            if type(job) is _Adopt:
                # Cancelled between a borrowed job's wait and this task's taking it over:
                # the job gets the cancellation, as it would have had it waited here.
                await _drive(job.coro, None, exc)
            raise
        return slot.job

    def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for slot in idle:
            slot.job = None
            slot.ready.set()


class _Entry(msgspec.Struct, eq=False):
    """One queued sub-call and what the lane learns of it as it goes (a ``msgspec``
    struct, built in C with its defaults: one per sub-call, where an ``__init__`` that
    set twenty slots cost more than the rest of the enqueue). Compared by identity."""

    name: str
    arguments: Any
    log_arguments: Any
    input: ToolExecutionInput
    sub_call_id: str
    # One clock reading for the session log's timing and ``ToolExecution.queued_at``.
    queued_at: float
    # Who is told the outcome: the awaiting program task (``done``) or a callback.
    settle: Settle | None = None
    done: _Flag | asyncio.Future[None] | None = None
    exclusive: bool = False
    dispatch: Dispatch | None = None
    settled: Settled | None = None
    outcome: tuple[bool, Any] | None = None
    committed: bool = False
    started_at: float | None = None
    settled_at: float | None = None
    in_flight_at_start: int = 0
    # The definition and registry version ``classify`` resolved (``_may_start``).
    tool: ToolDefinition | None = None
    stamp: int = -1
    # Whether the arguments are known to be over the log's bound (None: not looked at
    # yet), for both session events.
    args_big: bool | None = None
    # Submitted to an idle lane, which ``_enqueue`` took for it (``_lone``).
    lone: bool = False


def _ms(seconds: float) -> float:
    """Milliseconds to 3 decimals (microseconds): ``round(x, 3)`` formats and parses a
    decimal string, ten times the cost of rounding to an integer and dividing (the
    quotient of two exact integers is the nearest double to the 3-decimal value)."""
    return round(seconds * 1_000_000) / 1000


_PUMP: Any = object()
"""A worker job: take the lane and run what is ready (then the body it last started)."""

# How long one worker task may keep going from stage to stage (pump, body, pump...)
# before it lets the event loop run: bodies that do not wait settle at once, so a queue
# of thousands of calls (a program's storm) would otherwise be started, run and
# committed in one loop iteration, holding everything else on the loop (45 ms for a
# slice of 128 queued calls here).
_LANE_SLICE_S = 0.004


class SubDispatchDriver:
    """Runs one program's sub-calls through the runtime's pipeline (see module docstring)."""

    def __init__(
        self,
        runtime: ToolRuntime,
        pipeline: Pipeline,
        hooks: HookRegistry,
        outer: ToolRunContext,
        run_signal: AbortSignal,
        tg: TaskGroup,
    ) -> None:
        self._rt = runtime
        self._pipeline = pipeline
        self._hooks = hooks
        self._outer = outer
        self._signal = run_signal
        self._cap = runtime.max_parallel_sub_calls
        self._bodies = _Workers(tg, self._job, self._crashed)
        self._logs = _Workers(tg, self._log_settle, self._crashed)
        self._pending: deque[_Entry] = deque()
        self._commits: deque[_Entry] = deque()
        self._in_flight = 0
        self._exclusive_active = False
        self._pending_logs = 0
        self._counter = 0
        self._stopping = False
        # The lane: True while a task runs the ordered stages (``_pump``).
        self._busy = False
        # A pump job handed to a worker and not yet begun: nobody else need hand one.
        self._kicked = False
        # Bodies handed to a worker that has not begun them yet.
        self._handed = 0
        # Workers whose body settled and that have not looked at the lane yet: each will
        # take it (or find it held) and start a body it then runs itself.
        self._returning = 0
        self._loop = _asyncio_loop()
        # Set by a log append that settles while the lane waits on backpressure.
        self._logs_flag: _Flag | None = None
        # When the worker task now running should let the loop run (``_LANE_SLICE_S``).
        self._slice_end = 0.0
        # Set once drain found nothing left (or the run's driver task ended).
        self._drained = _Flag(self._loop)
        self._ended = False
        self._end = anyio.Event()
        self._closed = anyio.Event()
        self._t0 = time.perf_counter()
        # The head fields every event of this run starts with.
        self._root_id = outer.root_call_id
        self._parent_id = outer.call_id
        agent = outer.agent
        self._session = agent.session if agent is not None else None
        # The built-in logs never yield in ``append`` (see ``_session``), so an append is
        # in effect synchronous: with no dispatch-log listener there is nothing
        # that could be slow, so the settle event is appended right in the lane.
        self._append_now: Callable[[dict[str, Any]], int] | None = (
            cast("MemorySessionLog | SqliteSessionLog", self._session).append_now
            if type(self._session) in (MemorySessionLog, SqliteSessionLog)
            else None
        )
        # The memory log also takes the two per-call events encoded (``_events``), up to
        # its retention bound (``_log_cap``).
        self._append_encoded: Callable[[bytes], int | None] | None = None
        self._log_cap: int | None = None
        if type(self._session) is MemorySessionLog:
            self._append_encoded = self._session.append_encoded
            self._log_cap = self._session.max_inline_bytes
        run_signal.add_listener(lambda _s: self._kick())

    def _over(self, name: str, what: str) -> BindingCallError:
        reason = reason_text(self._signal.reason)
        return BindingCallError(f"run_code run is over ({reason}); {name} {what}")

    # --------------------------------------------------------------- program side

    def binding(self, name: str) -> SettlingBinding:
        """The function the runtime exposes as ``tools.<name>``: awaitable, or started
        from a callback with ``begin`` (see ``SettlingBinding``)."""

        # A plain function returning ``submit``'s coroutine: no extra coroutine frame per
        # sub-call (awaiting it is awaiting ``submit``).
        def call(args: Any = msgspec.UNSET) -> Awaitable[Any]:
            return self.submit(name, args)

        def begin(args: Any, settle: Settle) -> None:
            self._enqueue(name, args, settle)

        return SettlingBinding(name, call, begin)

    async def submit(self, name: str, raw_args: Any) -> Any:
        """Queue one sub-call and wait for its committed outcome (value or raise)."""
        entry = self._enqueue(name, raw_args, None)
        done = entry.done
        if type(done) is _Flag:
            await done.wait()
        elif not done.done():  # type: ignore[union-attr]
            await done  # type: ignore[misc]
        ok, payload = self._handed_out(entry)
        if ok:
            return payload
        raise payload

    def _enqueue(self, name: str, raw_args: Any, settle: Settle | None) -> _Entry:
        """Queue one sub-call (``BindingCallError`` when it is refused before that)."""
        if self._signal.aborted:
            raise self._over(name, "not dispatched")
        if raw_args is msgspec.UNSET:
            raise BindingCallError(
                "tool arguments must be lossless JSON (call the tool with an arguments object, "
                "e.g. `{}`)"
            )
        try:
            # One deep-frozen snapshot serves both the dispatch and the log: nothing can
            # mutate it (the pipeline materialises its own frozen copy for the tool, and
            # the session log stores its own detached copy).
            arguments = snapshot(raw_args)
        except Exception as exc:  # lossy value, cycle, hostile container, deep recursion
            raise BindingCallError(
                f"tool arguments must be lossless JSON: {error_message(exc)}"
            ) from None
        # Only a well-formed call consumes a sub-call number.
        self._counter += 1
        outer = self._outer
        queued_at = time.perf_counter()
        call_id = f"{outer.call_id}:code:{self._counter}"
        loop = self._loop
        input_ = ToolExecutionInput(
            call_id=call_id,
            root_call_id=outer.root_call_id,
            name=name,
            arguments=arguments,
            agent=outer.agent,
            parent=outer.token,
            signal=self._signal,
            queued_at=queued_at,
        )
        entry = _Entry(
            name,
            arguments,
            arguments,
            input_,
            call_id,
            queued_at,
            settle,
            # Who awaits: a bare future on asyncio (a ``_Flag`` costs a wrapper
            # object and a call to set it, per sub-call), else a ``_Flag``.
            None if settle is not None else _Flag(None) if loop is None else loop.create_future(),
        )
        pending = self._pending
        if (
            not pending
            and not self._busy
            and not self._commits
            and not self._kicked
            and not self._ended
        ):
            # Nothing queued, started or committing: the lane is this call's alone. Take
            # it now (a call submitted meanwhile queues behind this one) and give the
            # whole pass to a worker in one job.
            self._busy = True
            entry.lone = True
            self._bodies.submit(entry)
            return entry
        pending.append(entry)
        # Only when this call heads the queue and could start: otherwise a body still in
        # flight (or the lane's holder) pumps when it is done.
        if len(pending) == 1 and not self._exclusive_active and self._in_flight < self._cap:
            self._kick()
        return entry

    # ----------------------------------------------------------------- the lane

    def _kick(self) -> None:
        """Have a worker pump, unless the lane is held (its holder re-checks) or a pump
        is already on its way."""
        if self._busy or self._kicked or self._ended or not self._pending:
            return
        self._kicked = True
        self._bodies.submit(_PUMP)

    async def _job(self, job: Any) -> None:
        """A body worker's job: a pump, or an entry whose body to run; after a body, the
        worker commits what is ready when the lane is free."""
        now = time.perf_counter()
        if now >= self._slice_end:
            # A new slice only when the last one ran out: a job begun from inside another
            # one's step (a body handed on, run at once) is part of that step, and a
            # fresh slice there kept the lane's holder starting a queue of thousands of
            # calls in one loop iteration.
            self._slice_end = now + _LANE_SLICE_S
        if job is _PUMP:
            self._kicked = False
            entry = await self._pump() if not self._busy else None
        elif job.lone:
            entry = await self._lone(job)
        else:
            self._handed -= 1
            entry = job
        while entry is not None:
            await self._body(entry)
            # Until it looks at the lane, this worker is one that will (``_returning``).
            self._returning += 1
            try:
                if time.perf_counter() >= self._slice_end:
                    await self._breathe()
            finally:
                self._returning -= 1
            entry = await self._pump() if not self._busy else None

    async def _breathe(self) -> None:
        """Let the event loop run, then start a new slice (``_LANE_SLICE_S``)."""
        await anyio.lowlevel.checkpoint()
        self._slice_end = time.perf_counter() + _LANE_SLICE_S

    def _hand_off(self, entry: _Entry) -> None:
        self._handed += 1
        self._bodies.submit(entry)

    async def _lone(self, entry: _Entry) -> _Entry | None:
        """``_pump``'s first pass for a call ``_enqueue`` gave the idle lane to (the
        commonest pass: a sequential program's every call): ``_solo``, since nothing
        else is queued, in flight or committing. Calls submitted meanwhile (queued behind
        it) get ``_pump``'s usual passes."""
        # From here on the entry is any other: its body may be handed on as a job.
        entry.lone = False
        if self._signal._aborted:
            # Aborted since the submission (a job a worker began later): the usual pass
            # abandons it.
            self._pending.appendleft(entry)
            self._busy = False
            return await self._pump()
        try:
            held = await self._solo(entry)
            commits = self._commits
            if self._pending or (commits and commits[0].settled is not None):
                # Queued while the lane was held (a start that waited, or a classifier
                # or guard that calls a tool): ``_pump`` goes on from here.
                held = await self._pump(held)
        finally:
            self._busy = False
            if self._stopping:
                self._check_drained()
        return held

    async def _pump(self, held: _Entry | None = None) -> _Entry | None:
        """Hold the lane and run the ordered stages that are ready (module docstring).

        Returns a parallel body it started, for the caller to run once the lane is
        released, when that keeps bodies beginning in start order; any other body is
        handed to a worker before the lane's next stage. ``held``: such a body the
        caller started holding the lane (``_lone``).
        """
        self._busy = True
        commits = self._commits
        pending = self._pending
        try:
            if held is not None:
                pass  # started by ``_lone``: straight to the loop
            elif not commits and len(pending) == 1 and not self._signal._aborted:
                # The commonest pass (a sequential program): one call queued and nothing
                # started that has not committed (so nothing in flight). The loop below
                # would take the same steps one pass at a time; it still looks for
                # whatever arrived meanwhile before the lane is released.
                held = await self._solo(pending.popleft())
            elif len(commits) == 1 and commits[0].settled is not None and not pending:
                # The other half of it: that call's body settled, nothing else is queued.
                await self._commit(commits.popleft())
                if self._pending_logs > self._cap:
                    await self._backpressure()
            if not pending and not (commits and commits[0].settled is not None):
                return held  # nothing else to do (the loop's first pass would find so)
            while True:
                if time.perf_counter() >= self._slice_end:
                    # Still holding the lane (order is kept): thousands of calls may be
                    # ready at once (a storm, or abandoned when its run ends).
                    await self._breathe()
                if commits and commits[0].settled is not None:
                    if held is not None:
                        self._hand_off(held)
                        held = None
                    await self._commit(commits.popleft())
                    if self._pending_logs > self._cap:
                        await self._backpressure()
                    continue
                if pending:
                    head = pending[0]
                    if self._signal.aborted:
                        pending.popleft()
                        self._settle(head, False, self._over(head.name, "tool call abandoned"))
                        continue
                    if self._may_start(head):
                        pending.popleft()
                        if held is not None:
                            self._hand_off(held)
                            held = None
                        started = self._start_now(head)
                        if started is None:
                            started = await self._start(head)
                        if started:
                            if head.exclusive:
                                # An exclusive call runs alone and is the commit head, so
                                # the lane has nothing else to do until its body settles:
                                # run the body here instead of handing it to a worker.
                                # (Queued calls are abandoned on the next pass.)
                                await self._body(head)
                            elif self._handed:
                                # Bodies begin in start order: one handed off earlier
                                # has not begun yet, so this one queues behind it.
                                self._hand_off(head)
                            else:
                                held = head
                                if self._returning:
                                    # Workers whose bodies settled will take the lane
                                    # next and start the calls after this one, each in
                                    # its own task: handing those bodies to new tasks
                                    # instead cost a task per sub-call of a fan-out's
                                    # wave (all of a wave's workers settle before the
                                    # first one takes the lane), and started them later.
                                    break
                        continue
                break
        finally:
            self._busy = False
            if self._stopping:
                self._check_drained()
        return held

    async def _solo(self, entry: _Entry) -> _Entry | None:
        """``_pump``'s steps for ``entry`` when it is the only call queued and nothing is
        in flight or waiting to commit (so it may start whatever its mode): start it, and
        run and commit it in the lane unless it is a parallel call whose body is to run
        (returned, as ``_pump`` returns a held body)."""
        mode, entry.tool, entry.stamp = self._rt.classify(entry.input)
        if mode == "exclusive":
            entry.exclusive = True
        started = self._start_now(entry)
        if started is None:
            started = await self._start(entry)
        if started:
            if not entry.exclusive:
                return entry
            await self._body(entry)
        await self._commit(self._commits.popleft())
        if self._pending_logs > self._cap:
            await self._backpressure()
        return None

    async def _backpressure(self) -> None:
        """After a commit: wait while more than the cap of log appends are pending."""
        while self._pending_logs > self._cap:
            flag = self._logs_flag = _Flag(self._loop)
            await flag.wait()

    def _check_drained(self) -> None:
        if (
            self._stopping
            and not self._busy
            and not self._pending
            and not self._commits
            and not self._pending_logs
        ):
            self._drained.set()

    def _may_start(self, entry: _Entry) -> bool:
        # With the cap reached nothing may start, exclusive (which needs nothing in
        # flight) or parallel: classify only a call that could start on its answer. A
        # fan-out's head was otherwise classified (its tool's classifier, its arguments
        # validated) at every pass that found the cap reached.
        if self._exclusive_active or self._in_flight >= self._cap:
            return False
        mode, entry.tool, entry.stamp = self._rt.classify(entry.input)
        if mode == "exclusive":
            entry.exclusive = True
            return self._in_flight == 0
        entry.exclusive = False
        return self._in_flight < self._cap

    def _settle(self, entry: _Entry, ok: bool, payload: Any) -> None:
        entry.outcome = (ok, payload)
        settle = entry.settle
        if settle is None:
            done = entry.done
            if type(done) is _Flag:
                done.set()
            elif not done.done():  # type: ignore[union-attr]
                # (done when the program's task, cancelled, cancelled it)
                done.set_result(None)  # type: ignore[union-attr]
            return
        ok, payload = self._handed_out(entry)
        try:
            settle(ok, payload)
        except Exception:
            # The runtime's callback failed: a bug of the runtime, not of this run's
            # lane, which goes on committing the calls behind this one.
            _log.exception("run_code: a binding's settle callback failed for %s", entry.name)

    def _handed_out(self, entry: _Entry) -> tuple[bool, Any]:
        """What the program is given for a settled ``entry``: its outcome, unless the run
        ended while the call was in flight (or before the program got back to it) — a
        result from a run that is over is not handed out."""
        assert entry.outcome is not None
        if entry.committed and self._signal.aborted:
            return False, self._over(entry.name, "result discarded")
        return entry.outcome

    def _start_now(self, entry: _Entry) -> bool | None:
        """``_start`` without a coroutine (one per sub-call otherwise), or None, with
        nothing done, where a step of it could wait: a session log other than the
        built-in ones, or a ``tools/pre-execute`` listener."""
        if (self._session is not None and self._append_now is None) or self._pipeline._listening[
            "tools/pre-execute"
        ]:
            return None
        self._started(entry)
        if self._session is not None and not self._append_start(entry):
            self._append_sync(self._start_event(entry))
        # No listener (checked above, and nothing since ran code that could add one).
        gate = self._pipeline.prepare_now(entry.input, (entry.tool, entry.stamp))
        assert gate is not None
        return self._gated(entry, gate)

    async def _start(self, entry: _Entry) -> bool:
        """Start ``entry``; True when its body is to run (else it is already settled)."""
        started = self._start_now(entry)
        if started is not None:
            return started
        self._started(entry)
        if self._session is not None and not self._append_start(entry):
            if self._append_now is not None:
                self._append_sync(self._start_event(entry))
            else:
                await self._append(self._start_event(entry))
        gate = self._pipeline.prepare_now(entry.input, (entry.tool, entry.stamp))
        if gate is None:
            gate = await self._pipeline.prepare(entry.input)
        return self._gated(entry, gate)

    def _started(self, entry: _Entry) -> None:
        """The lane's bookkeeping of a start: the commit queue and the timing fields."""
        if entry.exclusive:
            self._exclusive_active = True
        self._commits.append(entry)
        entry.started_at = time.perf_counter()
        entry.in_flight_at_start = self._in_flight

    def _start_event(self, entry: _Entry) -> dict[str, Any]:
        """``entry``'s start event as a dict (the way every log but a memory one gets it)."""
        args = entry.log_arguments
        event = self._event_dict("tool/code-dispatch-start", entry)
        # The definition ``_may_start`` classified with: for a sub-call (no code collapse
        # applies) the one ``get`` resolves.
        tool = entry.tool
        if tool is not None and tool.present_call is not None:
            event.update(call_card_fields(tool, args))
        t0 = self._t0
        assert entry.started_at is not None
        event["timing"] = sealed(
            {
                "queuedMs": _ms(entry.queued_at - t0),
                "startedMs": _ms(entry.started_at - t0),
                "inFlight": self._in_flight,
            }
        )
        return sealed(event)

    def _event_dict(self, kind: str, entry: _Entry) -> dict[str, Any]:
        """The fields both of ``entry``'s events start with, in their order, as a dict."""
        return {
            "type": kind,
            "rootCallId": self._root_id,
            "parentCallId": self._parent_id,
            "subCallId": entry.sub_call_id,
            "name": entry.name,
            "arguments": entry.log_arguments,
        }

    def _gated(self, entry: _Entry, gate: Dispatch | Settled) -> bool:
        """What ``prepare`` decided for ``entry``: True when its body is to run."""
        if isinstance(gate, Settled):
            entry.settled_at = time.perf_counter()
            entry.settled = gate
            return False
        entry.dispatch = gate
        self._in_flight += 1
        return True

    async def _body(self, entry: _Entry) -> None:
        assert entry.dispatch is not None
        try:
            entry.settled = await self._pipeline.run(entry.dispatch)
        finally:
            entry.settled_at = time.perf_counter()
            self._in_flight -= 1

    async def _commit(self, entry: _Entry) -> None:
        assert entry.settled is not None
        final = self._pipeline.commit_now(entry.settled)
        if final is None:
            final = await self._pipeline.commit(entry.settled)
        if entry.exclusive:
            self._exclusive_active = False
        entry.committed = True
        self._forward(final)
        if final.is_error:
            info = final.error.info
            ok, payload = False, BindingCallError(final.error.message, info.code if info else None)
        else:
            ok, payload = True, final.value
        if self._session is None:
            self._settle(entry, ok, payload)
            return
        committed = time.perf_counter()
        if self._append_now is not None and not self._has_log_listeners():
            # Appended here and now: never pending, so no backpressure count to keep.
            if entry.settle is None:
                self._settle(entry, ok, payload)
                self._append_settle(entry, final, committed, final.content)
            else:
                # A callback acts at once (its reply leaves for the sandbox): the settle
                # event is durable before the program can see the value.
                self._append_settle(entry, final, committed, final.content)
                self._settle(entry, ok, payload)
            return
        self._pending_logs += 1
        self._settle(entry, ok, payload)
        self._logs.submit((entry, final, committed))

    def _forward(self, final: ToolExecutionResult) -> None:
        outer = self._outer
        if not final.is_error:
            for block in final.content:  # a loop, not any(<genexpr>): on every sub-call
                if isinstance(block, dict) and block.get("type") == "image":
                    outer.defer_context(
                        {
                            "role": "user",
                            "content": list(final.content),
                            "source": dict(_IMAGE_SOURCE),
                        }
                    )
                    break
        for context in final.additional_contexts:
            outer.defer_context(context)
        if final.concludes_turn:
            outer.conclude_turn()

    def _has_log_listeners(self) -> bool:
        hooks = self._hooks
        return hooks.has("tools/code-dispatch-log") and bool(
            hooks.listeners("tools/code-dispatch-log", self._outer.agent)
        )

    async def _log_settle(self, job: tuple[_Entry, ToolExecutionResult, float]) -> None:
        """A log worker's job: shape the durable content, then append the settle event."""
        entry, final, committed = job
        try:
            content = await self._shape_log(entry, final)
        except BaseException:
            self._logged()
            raise
        if self._append_now is not None:
            self._log_settle_now(entry, final, committed, content)
            return
        try:
            await self._append(self._settle_event(entry, final, committed, content))
        finally:
            self._logged()

    def _log_settle_now(
        self, entry: _Entry, final: ToolExecutionResult, committed: float, content: Any
    ) -> None:
        try:
            self._append_settle(entry, final, committed, content)
        finally:
            self._logged()

    def _logged(self) -> None:
        self._pending_logs -= 1
        flag, self._logs_flag = self._logs_flag, None
        if flag is not None:
            flag.set()
        self._check_drained()

    def _append_start(self, entry: _Entry) -> bool:
        """Append ``entry``'s start event encoded (``_events``); False when it must go
        the dict way (not a memory log, presentation cards, over the bound...).

        Written out in one function, as ``_append_settle`` is: they run on every sub-call
        and each helper call was a measurable share of the engine's per-call cost.
        """
        append = self._append_encoded
        if append is None:
            return False
        tool = entry.tool
        if tool is not None and tool.present_call is not None:
            return False
        args = entry.log_arguments
        big = entry.args_big
        if big is None:
            big = entry.args_big = too_big(args, self._log_cap)
        if big:
            return False
        t0 = self._t0
        started = entry.started_at
        assert started is not None
        try:
            body = encode_event(
                StartEvent(
                    self._root_id,
                    self._parent_id,
                    entry.sub_call_id,
                    entry.name,
                    args,
                    # ``_ms``, written out.
                    StartTiming(
                        round((entry.queued_at - t0) * 1_000_000) / 1000,
                        round((started - t0) * 1_000_000) / 1000,
                        entry.in_flight_at_start,
                    ),
                )
            )
        except UNENCODABLE:
            return False
        return self._stored(append, body, "tool/code-dispatch-start")

    def _append_settle(
        self, entry: _Entry, final: ToolExecutionResult, committed: float, content: Any
    ) -> None:
        """Append the settle event now: encoded (``_events``) where that applies, else
        as the dict ``_settle_event`` makes."""
        append = self._append_encoded
        if append is not None:
            settled = entry.settled
            # The definition the call resolved at prepare (``_settled_tool``).
            tool = settled.exec._tool if settled is not None else self._settled_tool(entry)
            big = entry.args_big
            if big is None:
                big = entry.args_big = too_big(entry.log_arguments, self._log_cap)
            if (
                (tool is None or tool.present_result is None)
                and not big
                and not too_big(content, self._log_cap)
            ):
                t0 = self._t0
                started, settled_at = entry.started_at, entry.settled_at
                try:
                    body = encode_event(
                        SettleEvent(
                            self._root_id,
                            self._parent_id,
                            entry.sub_call_id,
                            entry.name,
                            entry.log_arguments,
                            final.is_error,
                            content,
                            # ``_ms``, written out.
                            SettleTiming(
                                round((entry.queued_at - t0) * 1_000_000) / 1000,
                                None
                                if started is None
                                else round((started - t0) * 1_000_000) / 1000,
                                None
                                if settled_at is None
                                else round((settled_at - t0) * 1_000_000) / 1000,
                                round((committed - t0) * 1_000_000) / 1000,
                                entry.in_flight_at_start,
                            ),
                        )
                    )
                except UNENCODABLE:
                    body = None
                if body is not None and self._stored(append, body, "tool/code-dispatch"):
                    return
        self._append_sync(self._settle_event(entry, final, committed, content))

    @staticmethod
    def _stored(append: Callable[[bytes], int | None], body: bytes, kind: str) -> bool:
        """``append(body)``: True once it is stored (or failed, which is logged as any
        failed append is), False when it is over the bound (append the dict instead)."""
        try:
            return append(body) is not None
        except Exception:
            _log.warning("session append failed for %s", kind, exc_info=True)
            return True

    def _settled_tool(self, entry: _Entry) -> ToolDefinition | None:
        # The definition the call resolved at prepare, not a new lookup.
        if entry.settled is not None:
            tool: ToolDefinition | None = entry.settled.exec._tool
            return tool
        return self._rt.get(entry.name, self._outer.agent)

    def _settle_event(
        self, entry: _Entry, final: ToolExecutionResult, committed: float, content: Any
    ) -> dict[str, Any]:
        args = entry.log_arguments
        event = self._event_dict("tool/code-dispatch", entry)
        event["isError"] = final.is_error
        event["content"] = content
        tool = self._settled_tool(entry)
        if tool is not None and tool.present_result is not None:
            event.update(result_card_fields(tool, args, final, content))
        t0 = self._t0
        settled_at = entry.settled_at
        event["timing"] = sealed(
            {
                "queuedMs": _ms(entry.queued_at - t0),
                "startedMs": None if entry.started_at is None else _ms(entry.started_at - t0),
                "settledMs": None if settled_at is None else _ms(settled_at - t0),
                "committedMs": _ms(committed - t0),
                "inFlight": entry.in_flight_at_start,
            }
        )
        return sealed(event)

    async def _shape_log(self, entry: _Entry, final: ToolExecutionResult) -> Any:
        """The durable copy of a settled sub-result's content: the
        ``tools/code-dispatch-log`` waterfall's output, or the original when a listener
        fails (contained and logged)."""
        hooks = self._hooks
        agent = self._outer.agent
        if not hooks.listeners("tools/code-dispatch-log", agent):
            return final.content
        try:
            dispatch = CodeDispatchLog(
                exec=self._outer,
                agent=self._outer.agent,
                sub_call_id=entry.sub_call_id,
                name=entry.name,
                is_error=final.is_error,
                content=final.content,
            )

            async def keep() -> Any:
                return dispatch.content

            content = await hooks.waterfall("tools/code-dispatch-log", agent, (dispatch,), keep)
            if content is final.content:
                return content
            # A replacement must be a lossless block list; the finalised content already
            # is one.
            if not isinstance(content, (list, tuple)):
                raise TypeError(f"expected a list of content blocks, got {type(content).__name__}")
            # Sealed, so the settle event built from it can be sealed as a whole.
            return snapshot(list(content))
        except Exception as exc:
            _log.warning(
                "tools: code-dispatch-log listener failed for %s: %s; logging the original "
                "settled content",
                entry.name,
                error_message(exc),
            )
            return final.content

    def _append_sync(self, event: dict[str, Any]) -> None:
        assert self._append_now is not None
        try:
            # The built-in logs never wait: no coroutine per event.
            self._append_now(event)
        except Exception:
            _log.warning("session append failed for %s", event.get("type"), exc_info=True)

    async def _append(self, event: dict[str, Any]) -> None:
        assert self._session is not None
        try:
            await self._session.append(event)
        except Exception:
            _log.warning("session append failed for %s", event.get("type"), exc_info=True)

    def _crashed(self) -> None:
        # A worker died of an error outside the pipeline's boundary (a bug): end the
        # driver task, which re-raises it into the run's task group.
        self._end.set()

    async def loop(self) -> None:
        """The run's driver task: owns the workers, re-raises a worker's crash, and
        closes every worker once the run has drained (or is cancelled)."""
        try:
            await self._end.wait()
            crash = self._bodies.crash or self._logs.crash
            if crash is not None:
                raise crash
        finally:
            self._ended = True
            try:
                # Normally only idle workers on their way out are left; after a crash or
                # a cancellation, bodies in flight are cancelled as a task group would.
                with anyio.CancelScope(shield=True):
                    await self._bodies.wait_closed()
                    await self._logs.wait_closed()
            finally:
                self._drained.set()
                self._closed.set()

    async def drain(self) -> None:
        """Stop accepting work, finish everything started, and wait for the driver task to
        close its workers."""
        self._stopping = True
        self._kick()
        self._check_drained()
        await self._drained.wait()
        self._end.set()
        await self._closed.wait()
