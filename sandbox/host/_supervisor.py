"""One run on one worker, and its supervisor.

A *run* is one execution of one program (``CodeRunRequest``) on one worker; the only
*session* in codemode is the engine's ``SessionLog``. ``RunSupervisor.run`` owns a task
group for the whole run: it checks a worker out of the pool, sends ``run``, reads frames
(logs into the ledger, calls relayed to binding functions, ``done``), and watches the
budgets. The first terminal event *settles* the run and
wins; settling kills the worker at once (so no limit can be caught or outlived by the
program) and cancels the task group, which also cancels binding calls still in flight.

Terminal events and their results:

- ``done`` from the guest: value, ``exception``, ``invalid-output``, ``memory``, or
  ``timeout`` (only from a guest that meters its own compute, i.e. one run with
  ``compute_grace_s``; reported with our message);
- compute budget (worker CPU time from ``/proc/<pid>/schedstat``, polled every 25 ms):
  ``timeout`` -- ``compute budget exhausted (<computeMs>ms busy)``. A guest that meters
  its own compute gets ``compute_grace_s`` on top, so that its clean stop (which ships
  the logs of the slice it interrupts) normally comes first and the kill is a backstop;
- wall clock: ``timeout`` -- ``wall-clock ceiling reached (<maxWallMs>ms)``;
- log ledger overflow, or a value/diagnostic that does not fit: ``output-limit``;
- more calls than ``max_sub_calls``: ``sub-call-limit`` -- ``sub-call limit reached (<n>
  calls per run)``;
- call arguments of more JSON bytes in all than ``max_call_bytes``: ``call-bytes-limit``
  -- ``call-bytes limit reached (<n> argument bytes per run)``; the call that crosses the
  budget is not dispatched (the bytes are the call frame's, less its envelope: what the
  guest sent, so whitespace or unknown keys can only count against it);
- a completion value nested deeper than ``max_nesting_depth``: ``invalid-output`` --
  ``program completion nests deeper than <n> levels``;
- the abort signal: ``abort`` -- ``str(reason)``; runtime disposal: ``runtime disposed``;
- the bridge closing before ``done``: ``worker-exit`` -- ``worker exited with code <n>
  before completing`` (``timeout`` when the kernel's CPU rlimit fired, ``memory`` when the
  worker died near its memory limit).

Not terminal: a call whose arguments nest deeper than ``max_nesting_depth`` fails alone
with ``INVALID_ARGS`` (``arguments nest deeper than 10,000 levels``) before it reaches a
binding (the bridge never built the value); a binding result nested deeper fails its call
(``binding result nests deeper than ...``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import msgspec

from codemode.engine import (
    AbortSignal,
    BindingCallError,
    CodeRunError,
    CodeRunRequest,
    CodeRunResult,
    SettlingBinding,
    reason_text,
)
from codemode.engine.json import is_lossless

from .._limits import Limits
from ..worker._bridge import Spin
from ..worker._frames import (
    BindingSpec,
    CallFrame,
    DoneFrame,
    ErrorClassSpec,
    LogFrame,
    NestingError,
    PreparedFrame,
    ResultFrame,
    RunFrame,
    TooDeep,
    encode_payload,
    json_string_length,
    sanitize_text,
)
from ._bridge import HostBridge, HostFrame
from ._forkserver_client import ForkServerError
from ._ledger import OutputLedger, json_value_length
from ._pool import Worker, WorkerPool, cpu_ns
from ._prepared import PreparedCache

__all__ = ["RunSupervisor"]

_POLL_S = 0.025
_EXIT_REPORT_TIMEOUT = 2.0
_GUEST_ERROR_KINDS = frozenset(
    {"exception", "invalid-output", "memory", "worker-exit", "syntax", "forbidden", "recursion"}
)
_MAX_ID = 2**53
# Calls relayed at once. Beyond this they wait in a queue instead of each holding a task:
# a storm of 10,000 calls would otherwise be 10,000 tasks, all woken in one event-loop
# iteration when the run settles (a stall of hundreds of ms), and every full garbage
# collection walks them all. Far above any sensible parallel-call cap (the engine's
# default is 10), so no program sees fewer concurrent calls than it asks for in practice.
_MAX_RELAYS = 512


def _ms(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class _Outcome(msgspec.Struct):
    kind: str  # "ok" or an ErrorKind
    message: str = ""
    value: Any = msgspec.UNSET


# Runs being supervised in this process (one event loop serves them all, usually).
_ACTIVE = [0]


def _serves_one_run() -> bool:
    """Whether this host serves one run alone: only then may either side of the bridge
    poll for the other's next frame instead of sleeping (``Spin``)."""
    return _ACTIVE[0] == 1


class RunSupervisor:
    """Supervises one run: one ``CodeRunRequest`` on one worker; see module docstring."""

    def __init__(
        self,
        request: CodeRunRequest,
        limits: Limits,
        *,
        guest: str,
        options: dict[str, Any] | None = None,
        compute_grace_s: float = 0.0,
        prepared: PreparedCache | None = None,
    ) -> None:
        self.request = request
        self._cache = prepared
        # Whether the run frame asked for the program's prepared form (``PreparedCache``),
        # and whether a frame of the worker's has been read yet: only its first may be it.
        self._asked = False
        self._first_frame = True
        self.compute_grace_s = compute_grace_s
        self.limits = limits
        self.guest = guest
        self.options = options or {}
        self.ledger = OutputLedger(limits.max_output_bytes)
        self.worker: Worker | None = None
        self.bridge: HostBridge | None = None
        self.calls = 0
        # Calls answered (a result frame queued): with ``calls``, whether a reply is the
        # only one the worker waits for (then it leaves at once, nothing to batch with).
        self._answered = 0
        self.call_bytes = 0
        self.dropped = 0
        self.polls: tuple[int, int, float] = (0, 0, 0.0)
        self.thread_decodes = 0
        self._seen_ids: set[int] = set()
        self._queued: deque[CallFrame] = deque()
        self._relays = 0
        self._parked: list[_Wakeup] = []  # idle relay tasks, each waiting for a call
        # On asyncio, relays are plain tasks (a task-group spawn costs four times as
        # much, and a fan-out of 100 calls starts 100 relays); ``run`` owns them as the
        # task group would: cancelled and awaited when it ends, a crash re-raised.
        self._relay_tasks: set[asyncio.Task[None]] = set()
        self._relay_crash: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None  # the watchdog's next check
        self._outcome: _Outcome | None = None
        # The worker sent its ``done`` frame: its program is over and it only waits to
        # be killed (see ``run``'s release).
        self._finished = False
        self._scope: anyio.CancelScope | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        # Read once in the run's own task: frames are often handed on from the socket's
        # readiness callback, where there is no current task to tell asyncio from trio
        # (anyio's spawn fails there under a plain ``asyncio.run``).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._functions = {b.global_name: b.functions for b in request.bindings}

    @property
    def settled(self) -> bool:
        """True once the run's outcome is decided."""
        return self._outcome is not None

    def settle(self, kind: str, message: str = "", value: Any = msgspec.UNSET) -> None:
        """Decide the outcome (first call wins), kill the worker, stop the run."""
        if self._outcome is not None:
            return
        self._outcome = _Outcome(kind, message, value)
        if self.worker is not None and kind != "ok":
            # A program that completed lingers, blocked, until ``run`` releases it.
            self.worker.kill()
        if self._scope is not None and (self.bridge is None or not self.bridge.stop()):
            self._scope.cancel()

    def dispose(self) -> None:
        """Abort the run because the runtime is shutting down."""
        self.settle("abort", "runtime disposed")

    async def run(self, pool: WorkerPool) -> CodeRunResult:
        """Run the request to completion and return its result."""
        signal_: AbortSignal = self.request.signal
        dispose = signal_.add_listener(lambda s: self.settle("abort", reason_text(s.reason)))
        _ACTIVE[0] += 1
        try:
            self._loop = _asyncio_loop()
            if self._loop is not None:
                # On asyncio the run spawns no task of the group's: the reader runs in
                # this task, the watchdog is a timer chain and relays are plain tasks
                # the run ends itself (``_end_relays``). A cancel scope is all settle
                # needs (a task group costs three times as much on every run).
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    if self._outcome is None:
                        await self._drive(pool)
            else:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    self._scope = tg.cancel_scope
                    if self._outcome is None:
                        # The checkout, the run frame and then the watchdog run in the
                        # task group's own body (cancelled at settle like its tasks):
                        # only the reader is a task of its own.
                        await self._drive(pool)
        finally:
            _ACTIVE[0] -= 1
            if self._timer is not None:
                self._timer.cancel()
            try:
                await self._end_relays()
            finally:
                dispose()
            if self.worker is not None:
                if self._finished and self._loop is not None:
                    # A worker that sent ``done`` is killed right after the result is
                    # handed back, on the loop's next turn: the kill is a signal or two
                    # (~25 µs here, at times far more) the caller need not wait for, and
                    # the worker only lingers meanwhile (nothing it sends is read). Any
                    # other ending (a limit, an abort, a crash) kills it at once.
                    self._loop.call_soon(pool.release, self.worker, True)
                else:
                    pool.release(self.worker)
            if self.bridge is not None:
                self.dropped = self.bridge.dropped
                self.polls = self.bridge.polls
                self.thread_decodes = self.bridge.thread_decodes
        if self._relay_crash is not None:
            raise self._relay_crash
        return self._result()

    async def _end_relays(self) -> None:
        tasks = list(self._relay_tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(tasks)

    def _relay_done(self, task: asyncio.Task[None]) -> None:
        self._relay_tasks.discard(task)
        if task.cancelled() or self._relay_crash is not None:
            return
        exc = task.exception()
        if exc is not None:
            self._relay_crash = exc
            if self._scope is not None:
                self._scope.cancel()

    async def _drive(self, pool: WorkerPool) -> None:
        try:
            worker = await pool.checkout()
        except (ForkServerError, OSError, TimeoutError) as exc:
            self.settle("worker-exit", f"worker could not be started: {exc}")
            return
        except RuntimeError:  # the pool closed under us: the runtime is being disposed
            self.settle("abort", "runtime disposed")
            return
        self.worker = worker
        if self._outcome is not None:
            worker.kill()
            return
        self.bridge = bridge = HostBridge(
            worker,
            self.limits.frame_bytes,
            self._spawn,
            max_depth=self.limits.max_nesting_depth,
            may_poll=_serves_one_run,
        )
        baseline = worker.cpu_ns if worker.cpu_ns is not None else cpu_ns(worker.pid)
        prepared, ask = b"", False
        if self._cache is not None:
            prepared, ask = self._cache.lookup(self.request.program)
            self._asked = ask
        frame = RunFrame(
            guest=self.guest,
            program=self.request.program,
            bindings=[
                BindingSpec(
                    global_name=b.global_name,
                    names=sorted(b.functions),
                    error_class=(
                        ErrorClassSpec(b.error_class.name, b.error_class.member_name_property)
                        if b.error_class is not None
                        else None
                    ),
                )
                for b in self.request.bindings
            ],
            max_output_bytes=self.limits.max_output_bytes,
            max_frame_bytes=self.limits.frame_bytes,
            max_sub_calls=self.limits.max_sub_calls,
            poll_allowance_s=poll_allowance_s(self.limits),
            options=self.options,
            prepare=ask,
            prepared=prepared,
        )
        # Written now, not at the end of the loop iteration: nothing else is queued
        # for a worker that has not started. A prepared form that makes the frame too
        # big for the bridge is left out: the worker compiles instead.
        sent = bridge.send(frame, flush=True)
        if not sent and prepared:
            sent = bridge.send(msgspec.structs.replace(frame, prepared=b""), flush=True)
        if not sent:
            self.settle("exception", "program is too large for the bridge")
            return
        loop = self._loop
        if loop is not None:
            # On asyncio the watchdog is a timer chain and the reader runs here: no task
            # spawn on the path of every run (a tenth of a warm start's host time).
            self._arm_watchdog(loop, worker.pid, baseline or 0)
            await self._read(bridge)
        else:
            assert self._tg is not None
            self._tg.start_soon(self._read, bridge)
            await self._watchdog(worker.pid, baseline or 0)

    def _watch(self, pid: int, baseline: int) -> Any:
        """The watchdog's check: the delay to the next one, or None once it settled."""
        budget_ns = self.limits.max_compute_ms * 1e6 + self.compute_grace_s * 1e9
        deadline = time.monotonic() + self.limits.max_wall_ms / 1000
        first = True

        def check() -> float | None:
            nonlocal first
            if self._outcome is not None:
                return None
            if not first:
                used = cpu_ns(pid)
                if used is not None and used - baseline > budget_ns:
                    self.settle("timeout", self._compute_message())
                    return None
            first = False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.settle(
                    "timeout", f"wall-clock ceiling reached ({_ms(self.limits.max_wall_ms)}ms)"
                )
                return None
            return min(_POLL_S, remaining)

        return check

    async def _watchdog(self, pid: int, baseline: int) -> None:
        check = self._watch(pid, baseline)
        while True:
            delay = check()
            if delay is None:
                return
            await anyio.sleep(delay)

    def _arm_watchdog(self, loop: asyncio.AbstractEventLoop, pid: int, baseline: int) -> None:
        check = self._watch(pid, baseline)

        def tick() -> None:
            try:
                delay = check()
            except Exception as exc:  # fail closed: a run is never left unwatched
                self.settle("worker-exit", f"run watchdog failed: {exc}")
                return
            if delay is not None:
                self._timer = loop.call_later(delay, tick)

        tick()

    def _compute_message(self) -> str:
        return f"compute budget exhausted ({_ms(self.limits.max_compute_ms)}ms busy)"

    async def _read(self, bridge: HostBridge) -> None:
        def on_frame(frame: HostFrame, size: int) -> None:
            if self._outcome is not None:
                return  # settled: the rest of the stream is moot
            first, self._first_frame = self._first_frame, False
            if isinstance(frame, PreparedFrame):
                # Asked for, first, and written before any program code ran: anything
                # else is a forgery of the program's, dropped (``PreparedCache``).
                if first and self._asked and self._cache is not None:
                    self._cache.store(self.request.program, frame.data)
                else:
                    bridge.count_drop()
            elif isinstance(frame, LogFrame):
                if not self.ledger.add_log(frame.text):
                    self.settle("output-limit", self.ledger.message)
            elif isinstance(frame, CallFrame):
                self._on_call(bridge, frame, size)
            else:
                self._on_done(bridge, frame)

        await bridge.pump(on_frame)
        if self._outcome is None:
            await self._on_eof()

    def _on_call(self, bridge: HostBridge, frame: CallFrame, size: int) -> None:
        if not 0 <= frame.id < _MAX_ID or frame.id in self._seen_ids:
            bridge.count_drop()
            return
        self._seen_ids.add(frame.id)
        self.calls += 1
        limits = self.limits
        if self.calls > limits.max_sub_calls:
            self.settle(
                "sub-call-limit", f"sub-call limit reached ({limits.max_sub_calls} calls per run)"
            )
            return
        self.call_bytes += _args_bytes(frame, size)
        if self.call_bytes > limits.max_call_bytes:
            self.settle(
                "call-bytes-limit",
                f"call-bytes limit reached ({limits.max_call_bytes} argument bytes per run)",
            )
            return
        if isinstance(frame.args, TooDeep):
            # Refused before any work: the bridge skipped the value instead of building it.
            message = f"arguments nest deeper than {frame.args.limit:,} levels"
            reply = ResultFrame(id=frame.id, ok=False, message=message, code="INVALID_ARGS")
            self._send_reply(bridge, reply)
            return
        functions = self._functions.get(frame.global_name)
        fn = functions.get(frame.name) if functions is not None else None
        if isinstance(fn, SettlingBinding):
            # Started from this read callback and answered from the task that commits
            # it: no relay task parks on the call (two event-loop turns fewer).
            call_id = frame.id

            def settle(ok: bool, payload: Any) -> None:
                self._answer(bridge, call_id, ok, payload)

            try:
                fn.begin(frame.args, settle)
            except BindingCallError as exc:
                self._answer(bridge, call_id, False, exc)
            return
        self._queued.append(frame)
        if self._parked:
            self._parked.pop().set()
        elif self._relays < _MAX_RELAYS:
            self._relays += 1
            self._spawn(self._relay_queued, bridge, name="sandbox call relay")

    def _spawn(
        self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any, name: str = ""
    ) -> None:
        """Start ``fn(*args)`` as a task the run owns (safe from a loop callback)."""
        loop = self._loop
        if loop is not None:
            task: asyncio.Task[None] = loop.create_task(fn(*args), name=name or None)
            self._relay_tasks.add(task)
            task.add_done_callback(self._relay_done)
        else:
            assert self._tg is not None
            self._tg.start_soon(fn, *args)

    async def _relay_queued(self, bridge: HostBridge) -> None:
        """Relay queued calls (one of at most ``_MAX_RELAYS`` tasks); park when none is
        left, for the next call to reuse. A task spawn per call was a quarter of the host's
        work per sequential sub-call; parked relays end with the run's task group."""
        try:
            while self._outcome is None:
                while self._queued and self._outcome is None:
                    await self._relay(bridge, self._queued.popleft())
                if self._outcome is not None:
                    return
                wakeup = _Wakeup()
                self._parked.append(wakeup)
                await wakeup.wait()
        finally:
            self._relays -= 1

    async def _relay(self, bridge: HostBridge, frame: CallFrame) -> None:
        functions = self._functions.get(frame.global_name)
        fn = functions.get(frame.name) if functions is not None else None
        if fn is None:
            message = f'unknown binding "{frame.global_name}.{frame.name}"'
            self._send_reply(bridge, ResultFrame(id=frame.id, ok=False, message=message))
            return
        try:
            value = await fn(frame.args)
        except BindingCallError as exc:
            self._answer(bridge, frame.id, False, exc)
        except Exception as exc:
            # A binding function may only raise BindingCallError; anything else is a
            # host bug, relayed so the program fails loudly instead of hanging.
            self._send_reply(bridge, ResultFrame(id=frame.id, ok=False, message=str(exc)))
        else:
            self._answer(bridge, frame.id, True, value)

    def _answer(self, bridge: HostBridge, call_id: int, ok: bool, payload: Any) -> None:
        """Reply to call ``call_id``: its value, or the ``BindingCallError`` it failed with."""
        reply: ResultFrame
        # The worker may poll for its next result only while no other run shares this
        # host's loop: with several, the CPU it would burn is the host's (``Spin``).
        poll = _serves_one_run()
        if not ok:
            if isinstance(payload, BindingCallError):
                reply = ResultFrame(
                    id=call_id, ok=False, message=payload.message, code=payload.code, poll=poll
                )
            else:
                reply = ResultFrame(id=call_id, ok=False, message=str(payload), poll=poll)
        elif is_lossless(payload):
            reply = ResultFrame(id=call_id, ok=True, value=payload, poll=poll)
        else:
            message = "binding resolution must be lossless JSON"
            reply = ResultFrame(id=call_id, ok=False, message=message, poll=poll)
        self._send_reply(bridge, reply)

    def _send_reply(self, bridge: HostBridge, reply: ResultFrame) -> None:
        if self._outcome is not None:
            return
        self._answered += 1
        last = self._answered >= self.calls
        try:
            sent = bridge.send(reply, now=last)
        except NestingError as exc:
            message = f"binding result nests deeper than {exc.limit:,} levels"
            sent = bridge.send(ResultFrame(id=reply.id, ok=False, message=message))
        if not sent:
            limit = self.limits.frame_bytes
            message = f"binding result exceeds the bridge frame limit ({limit} bytes)"
            bridge.send(ResultFrame(id=reply.id, ok=False, message=message))

    def _on_done(self, bridge: HostBridge, frame: DoneFrame) -> None:
        error = frame.error
        # A guest that meters its own compute (QuickJS's interrupt) stops at the budget
        # before our kill; the budget and the message are ours. Other guests never report
        # it, so from them it is a forged frame, dropped like any unknown kind.
        if error is not None and not (
            error.kind in _GUEST_ERROR_KINDS
            or error.kind == "output-limit"
            or (error.kind == "timeout" and self.compute_grace_s > 0)
        ):
            bridge.count_drop()
            return
        # The worker reported its end (it only waits to be killed now).
        self._finished = True
        if error is not None:
            if error.kind == "output-limit":
                self.settle("output-limit", self.ledger.message)
            elif error.kind == "memory":
                self.settle("memory", self._memory_message())
            elif error.kind == "timeout":
                self.settle("timeout", self._compute_message())
            else:
                self.settle(error.kind, sanitize_text(error.message))
            return
        if frame.value is msgspec.UNSET:
            self.settle("ok")
        elif isinstance(frame.value, TooDeep):
            self.settle(
                "invalid-output",
                f"program completion nests deeper than {frame.value.limit:,} levels",
            )
        elif is_lossless(frame.value):
            self.settle("ok", value=frame.value)
        else:
            self.settle("invalid-output", "program completion must be lossless JSON")

    async def _on_eof(self) -> None:
        worker = self.worker
        assert worker is not None
        status = await worker.exit.wait(_EXIT_REPORT_TIMEOUT)
        if status is None or status < 0:
            self.settle("worker-exit", "worker exited before completing")
            return
        code = os.waitstatus_to_exitcode(status)
        if code == -signal.SIGXCPU:
            self.settle("timeout", self._compute_message())
        elif code != 0 and worker.exit.maxrss_kb * 1024 >= 0.8 * self.limits.max_memory_bytes:
            self.settle("memory", self._memory_message())
        else:
            self.settle("worker-exit", f"worker exited with code {code} before completing")

    def _memory_message(self) -> str:
        return f"memory limit exceeded ({self.limits.max_memory_bytes} bytes)"

    def _result(self) -> CodeRunResult:
        outcome = self._outcome or _Outcome("worker-exit", "worker exited before completing")
        # Handed over, not copied: the supervisor can outlive the run in a reference
        # cycle (its tasks and callbacks), and a flooded run's logs are up to the whole
        # output cap; the result must be their only holder.
        logs, self.ledger.logs = self.ledger.logs, []
        if outcome.kind == "ok":
            if outcome.value is msgspec.UNSET:
                return CodeRunResult(logs=logs)
            try:
                size = json_value_length(outcome.value)
            except (TypeError, ValueError, msgspec.EncodeError):
                error = CodeRunError("invalid-output", "program completion must be lossless JSON")
                return CodeRunResult(logs=logs, error=error)
            if not self.ledger.fits(size):
                return CodeRunResult(
                    logs=logs, error=CodeRunError("output-limit", self.ledger.message)
                )
            return CodeRunResult(logs=logs, value=outcome.value)
        message = outcome.message
        if outcome.kind != "output-limit" and not self.ledger.fits(json_string_length(message)):
            return CodeRunResult(logs=logs, error=CodeRunError("output-limit", self.ledger.message))
        return CodeRunResult(logs=logs, error=CodeRunError(outcome.kind, message))


def poll_allowance_s(limits: Limits) -> float:
    """Seconds a run's worker may poll for binding results (``Spin``): CPU time its
    compute budget counts, so at most ``Spin.ALLOWANCE_SHARE`` of that budget."""
    return min(Spin.ALLOWANCE_S, Spin.ALLOWANCE_SHARE * limits.max_compute_ms / 1000)


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop when the current task is an asyncio task, else None."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop if asyncio.current_task(loop) is not None else None


class _Wakeup:
    """A one-shot wake-up for one parked relay task: a bare future on asyncio (half the
    cost of an ``anyio.Event``), an ``anyio.Event`` on other backends."""

    __slots__ = ("_event", "_future")

    def __init__(self) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._future = loop.create_future() if loop is not None else None
        self._event = anyio.Event() if loop is None else None

    def set(self) -> None:
        if self._future is None:
            assert self._event is not None
            self._event.set()
        elif not self._future.done():
            self._future.set_result(None)

    async def wait(self) -> None:
        if self._future is None:
            assert self._event is not None
            await self._event.wait()
        else:
            await self._future


def _args_bytes(frame: CallFrame, size: int) -> int:
    """JSON bytes of a call's arguments: its payload less the envelope around ``args``."""
    envelope = len(encode_payload(msgspec.structs.replace(frame, args=None))) - len(b"null")
    return max(size - envelope, 0)
