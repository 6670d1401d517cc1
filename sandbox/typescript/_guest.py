"""The TypeScript guest: one type-stripped program in one QuickJS (quickjs-ng) context.

``JsGuest`` runs in the current process (the sandbox worker hosts it) and needs nothing
but the worker loop driving it, single-threaded, in slices:

    guest = JsGuest(limits)                  # context + prelude; may be made before the run
    guest.start(program_js, bindings)        # compile, run until no job is left
    while True:
        send(guest.drain_logs())             # log entries, metered and capped
        send(guest.pending_calls())          # binding calls for the host
        if not isinstance(guest.state, GuestRunning):
            break                            # GuestDone(value_json) / GuestFailed(kind, msg)
        reply = wait(timeout=guest.timer_delay())   # None: no timer is pending
        if reply is None:
            guest.run_timers()
        elif reply.ok:
            guest.resolve(reply.id, reply.value_json)
        else:
            guest.reject(reply.id, reply.message, reply.code)
    guest.close()

JavaScript never calls into Python (a QuickJS time limit forbids it): calls go to an
outbox that ``pending_calls`` drains, and replies settle stored resolvers, after which
``execute_pending_job`` runs until the job queue is empty.

Every slice runs under ``set_time_limit`` with the compute budget still left, and the
whole slice is charged to it. Three things end a run for good whatever the program
catches: the budget (QuickJS's interrupt is uncatchable), memory (QuickJS lets programs
catch that, so every ``catch`` clause and rejection handler hands its value to a guard,
see ``_catch.py``, and the heap is probed between jobs), a stack overflow (the same
guard spots QuickJS's stack-less ``RangeError``; kind ``recursion``, as Python's
``RecursionError``), a write to ``tools`` (kind ``forbidden``) and an output flood (the
ledger below). A program that swallows what a doomed run throws at it keeps running
only until its slice ends or its budget runs out; the first cause is what is reported.

Timers are real: ``setTimeout``/``setInterval`` record a due time, the driver waits at
most ``timer_delay()`` and calls ``run_timers()``. A run with no pending call, no job
and no timer can never finish and fails as a drained Node worker does: ``worker exited with code 0 before completing``.

The context must only ever be used from the thread that made it, and that thread needs
a native stack well above ``max_stack_bytes`` (the main thread's 8 MiB).
"""

from __future__ import annotations

import functools
import importlib
import json
import pathlib
import re
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias

import msgspec

from ..worker._ledger import LogLedger
from ._catch import guard_catches

# `import quickjs` starts a helper thread at import time; workers are forked, so load
# only the C extension, which starts nothing.
_quickjs: Any = importlib.import_module("_quickjs")

__all__ = [
    "GuestDone",
    "GuestFailed",
    "GuestRunning",
    "GuestState",
    "JsBinding",
    "JsCall",
    "JsGuest",
    "JsLimits",
]

MAX_STACK_BYTES: Final = 1 << 20
MIN_MEMORY_BYTES: Final = 8 << 20  # the context and prelude take about 1 MiB
OUTPUT_EXCEEDED: Final = "outer output exceeded {} bytes"
COMPUTE_EXHAUSTED: Final = "compute budget exhausted ({}ms busy)"
MEMORY_EXCEEDED: Final = "memory limit exceeded ({} bytes)"
RECURSION_EXCEEDED: Final = "RangeError: Maximum call stack size exceeded (recursion too deep)"
# A program awaiting something nothing can settle: reported as a Node worker's clean
# exit reads, since programs and hosts written for Node hosts match this text.
STALLED: Final = "worker exited with code 0 before completing"

_OP_FLAGS, _OP_INSTALL, _OP_RUN, _OP_SETTLE, _OP_POLL, _OP_FIRE_TIMER, _OP_FORBIDDEN = range(7)
_FLAG_OOM, _FLAG_OUTPUT, _FLAG_RECURSION, _FLAG_FORBIDDEN = 1, 2, 4, 8
_STACK_TRACE_LIMIT = 64  # prelude frames count too; only program frames are shown
_HOUSEKEEPING_SECONDS = 5.0  # the prelude's own set-up runs under this limit
_NO_TIME_LIMIT = -1.0  # flags/poll/forbidden (``_housekeeping``), charged as busy time
_JOBS_BETWEEN_FLAG_CHECKS = 256
_CHEAP_MARGIN_S = 1.0  # below this much budget left, ``_remaining`` reads the clock
_meta_decoder = msgspec.json.Decoder()
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JsLimits(msgspec.Struct, frozen=True):
    """Per-run limits: CPU budget, heap ceiling, native stack (at most 1 MiB), output."""

    max_compute_ms: int = 60_000
    max_heap_bytes: int = 512 * 2**20
    max_stack_bytes: int = MAX_STACK_BYTES
    max_output_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        for field in self.__struct_fields__:
            if getattr(self, field) <= 0:
                raise ValueError(f"JsLimits.{field} must be positive")
        if self.max_stack_bytes > MAX_STACK_BYTES:
            raise ValueError(f"JsLimits.max_stack_bytes must be at most {MAX_STACK_BYTES}")
        if self.max_heap_bytes < MIN_MEMORY_BYTES:
            raise ValueError(f"JsLimits.max_heap_bytes must be at least {MIN_MEMORY_BYTES}")


class JsBinding(msgspec.Struct, frozen=True):
    """A namespace global (``tools``) with its functions and optional error class."""

    global_name: str
    functions: tuple[str, ...]
    error_class: str | None = "ToolCallError"
    member_name_property: str = "toolName"


class JsCall(msgspec.Struct, frozen=True):
    """A binding call from the program; ``args_json`` is compact lossless JSON."""

    id: int
    global_name: str
    name: str
    args_json: str


class GuestRunning(msgspec.Struct, frozen=True):
    """The program has not finished."""


class GuestDone(msgspec.Struct, frozen=True):
    """The program returned; ``value_json`` is ``None`` when it returned ``undefined``."""

    value_json: str | None = None


class GuestFailed(msgspec.Struct, frozen=True):
    """The program failed; ``kind`` is an ``engine.ErrorKind``."""

    kind: str
    message: str


GuestState: TypeAlias = GuestRunning | GuestDone | GuestFailed
_RUNNING: Final = GuestRunning()


class _Stop(Exception):
    """A slice ended the run (the state is already terminal)."""


@functools.cache
def _sources() -> tuple[str, str, int]:
    here = pathlib.Path(__file__).parent
    prelude = (here / "_prelude.js").read_text("utf-8")
    inspect = (here / "_inspect.js").read_text("utf-8")
    # Program line numbers start above every prelude line (see the prelude's header).
    return prelude, inspect, max(prelude.count("\n"), inspect.count("\n")) + 2


def _clean(text: str) -> str:
    """Replace lone surrogates (legal in JS strings, not in UTF-8) with U+FFFD."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def _json_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8"))


def _call_args(text: str, cut: int, count: int) -> list[str]:
    """The ``count`` arguments' JSON texts after the poll reply's meta, which ends at
    ``cut`` (each one follows a U+0001; the last runs to the end of ``text``)."""
    args: list[str] = []
    while cut >= 0 and len(args) < count:
        start = cut + 1
        cut = text.find("\x01", start) if len(args) + 1 < count else -1
        args.append(text[start:] if cut < 0 else text[start:cut])
    return args


class JsGuest:
    """One program in one QuickJS context; see the module docstring for the protocol."""

    def __init__(self, limits: JsLimits | None = None) -> None:
        self._limits = limits = limits if limits is not None else JsLimits()
        prelude, inspect, pad = _sources()
        self._ctx: Any = _quickjs.Context()
        self._ctx.set_memory_limit(limits.max_heap_bytes)
        self._ctx.set_max_stack_size(limits.max_stack_bytes)
        self._ctx.set_time_limit(_HOUSEKEEPING_SECONDS)
        config = json.dumps(
            {
                "pad": pad,
                "maxOutputBytes": limits.max_output_bytes,
                "memoryBytes": limits.max_heap_bytes,
                "stackTraceLimit": _STACK_TRACE_LIMIT,
            }
        )
        make_inspect = self._ctx.eval(inspect)
        self._host: Any = self._ctx.eval(prelude)(make_inspect, config)
        self._budget = limits.max_compute_ms / 1000
        self._busy = 0.0  # CPU charged by finished slices
        self._slice_start = self._slice_busy = 0.0
        # The budget left at the last reading of the process clock, and when (the wall
        # clock) it was read: see ``_remaining``.
        self._left = self._budget
        self._left_read = 0.0
        self._state: GuestState = _RUNNING
        self._ledger = LogLedger(limits.max_output_bytes)
        self._logs: list[str] = []
        self._calls: list[JsCall] = []
        self._outstanding = 0
        self._timer_at: float | None = None
        self._started = False

    # -- public API -------------------------------------------------------------------

    @property
    def state(self) -> GuestState:
        """``GuestRunning()`` until the run ends, then ``GuestDone`` or ``GuestFailed``."""
        return self._state

    @property
    def busy_seconds(self) -> float:
        """CPU time charged to the compute budget so far (whole slices, not just JS)."""
        return self._busy

    @property
    def outstanding(self) -> int:
        """Binding calls issued and not yet settled."""
        return self._outstanding

    def start(self, program_js: str, bindings: Sequence[JsBinding]) -> None:
        """Install ``bindings``, compile ``program_js`` (an async function body) and run it."""
        if self._started:
            raise RuntimeError("JsGuest.start() runs one program per guest")
        self._started = True
        spec = json.dumps(
            [
                [b.global_name, list(b.functions), b.error_class, b.member_name_property]
                for b in bindings
            ]
        )
        suffix = secrets.token_hex(6)
        guard, caught = f"__codemode_guard_{suffix}", f"__codemode_caught_{suffix}"
        program = guard_catches(_clean(program_js), guard, caught)
        # An upper bound of the program's lines whatever its line terminators; frames
        # below it are the program's own.
        lines = sum(map(program.count, ("\n", "\r", "\u2028", "\u2029"))) + 1

        def begin() -> None:
            self._js(self._host, _OP_INSTALL, spec)
            self._js(self._host, _OP_RUN, program, lines, guard)

        self._slice(begin)

    def pending_calls(self) -> list[JsCall]:
        """Drain the binding calls issued since the last drain, in issue order."""
        calls, self._calls = self._calls, []
        return calls

    def drain_logs(self) -> list[str]:
        """Drain the log entries (one per console call) emitted since the last drain."""
        logs, self._logs = self._logs, []
        return logs

    def resolve(self, call_id: int, value_json: str) -> None:
        """Settle call ``call_id`` with a JSON value; unknown or settled ids are dropped."""
        # ASCII text (checked at C speed) holds no surrogate: a 1 MB result skips the
        # regex pass.
        text = (
            value_json
            if value_json.isascii()
            else _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value_json)
        )
        self._settle(call_id, True, text, None)

    def reject(self, call_id: int, message: str, code: str | None = None) -> None:
        """Fail call ``call_id``: the program sees ``ToolCallError(message)`` with ``code``."""
        self._settle(call_id, False, _clean(message), None if code is None else _clean(code))

    def timer_delay(self) -> float | None:
        """Seconds until the next timer is due (0 when overdue); ``None`` with no timers."""
        if self._timer_at is None or not isinstance(self._state, GuestRunning):
            return None
        return max(0.0, self._timer_at - time.monotonic())

    def run_timers(self) -> None:
        """Fire every due timer, each followed by its microtasks (as Node does)."""

        def fire() -> None:
            while self._js(self._host, _OP_FIRE_TIMER):
                self._drain()

        if isinstance(self._state, GuestRunning):
            self._slice(fire)

    def close(self) -> None:
        """Release the context. The guest is unusable afterwards."""
        self._host = None
        self._ctx = None
        if isinstance(self._state, GuestRunning):
            self._state = GuestFailed("abort", "guest closed")

    # -- slices -----------------------------------------------------------------------

    def _settle(self, call_id: int, ok: bool, payload: str, code: str | None) -> None:
        if isinstance(self._state, GuestRunning):
            self._slice(lambda: self._js(self._host, _OP_SETTLE, call_id, ok, payload, code))

    def _slice(self, action: Callable[[], object]) -> None:
        # The whole slice is charged, the driver's own loop included: a microtask storm
        # costs as much Python per job as JavaScript.
        self._slice_start, self._slice_busy = time.process_time(), self._busy
        self._left, self._left_read = self._budget - self._busy, time.perf_counter()
        try:
            action()
            self._drain()
        except _Stop:
            pass
        self._end_slice()
        self._busy = self._elapsed()

    def _elapsed(self) -> float:
        return self._slice_busy + time.process_time() - self._slice_start

    def _drain(self) -> None:
        jobs = 0
        while self._js(self._ctx.execute_pending_job):
            jobs += 1
            # A doomed run (output flood, memory) that keeps queueing microtasks would
            # otherwise only stop at the time limit.
            if jobs % _JOBS_BETWEEN_FLAG_CHECKS == 0 and self._housekeeping(_OP_FLAGS):
                return

    def _remaining(self) -> float:
        """The compute budget left, never overestimated.

        The process clock is a system call (~0.5 µs here) and a sub-call's slice makes
        five or six calls into QuickJS. Within a slice the worker's one thread never
        waits, so the wall time since the last reading bounds the CPU time since: while
        more than ``_CHEAP_MARGIN_S`` is left that bound is enough (QuickJS may stop a
        call early by at most the time the worker was descheduled in this slice, never
        late); closer to the end the clock is read every time.
        """
        left = self._left - (time.perf_counter() - self._left_read)
        if left > _CHEAP_MARGIN_S:
            return left
        left = self._budget - self._elapsed()
        self._left, self._left_read = left, time.perf_counter()
        return left

    def _js(self, fn: Any, *args: Any) -> Any:
        """Call into QuickJS under the compute budget left; ``_Stop`` when the run ends."""
        remaining = self._remaining()
        if remaining <= 0:
            if not self._fail_flagged():
                self._fail("timeout", self._timeout_message())
            raise _Stop
        self._ctx.set_time_limit(remaining)
        try:
            return fn(*args)
        except _quickjs.JSException as exc:
            self._engine_error(str(exc))
            raise _Stop from None

    def _housekeeping(self, op: int, *args: Any) -> Any:
        # These ops run no program code: every global they use was captured before the
        # program ran (the heap probe's ArrayBuffer too) and what they serialise is the
        # prelude's own strings, so no time limit. With one, QuickJS reads the process
        # clock (a system call) on every call in, and every sub-call's slice ends in a
        # poll.
        self._ctx.set_time_limit(_NO_TIME_LIMIT)
        return self._host(op, *args)

    def _timeout_message(self) -> str:
        return COMPUTE_EXHAUSTED.format(self._limits.max_compute_ms)

    def _engine_error(self, text: str) -> None:
        """Classify an exception that escaped JS (only uncatchable ones can)."""
        if self._fail_flagged():
            return
        if "out of memory" in text:
            self._fail("memory", MEMORY_EXCEEDED.format(self._limits.max_heap_bytes))
        elif text.startswith("InternalError: interrupted"):
            self._fail("timeout", self._timeout_message())
        else:
            self._fail("worker-exit", f"worker error: {text.splitlines()[0] if text else text}")

    def _fail_flagged(self) -> int:
        """Fail with what the prelude flagged (memory, output flood), if anything.

        A program that swallows the errors a flagged run throws at it keeps running until
        the time limit; the flag, not the timeout, is the cause to report.
        """
        try:
            flags: int = self._housekeeping(_OP_FLAGS)
        except _quickjs.JSException:
            return 0
        return self._fail_for(flags)

    def _fail_for(self, flags: int) -> int:
        """``_fail_flagged`` for flags already read (``_end_slice``'s poll)."""
        if flags & _FLAG_OOM:
            self._fail("memory", MEMORY_EXCEEDED.format(self._limits.max_heap_bytes))
        elif flags & _FLAG_RECURSION:
            self._fail("recursion", RECURSION_EXCEEDED)
        elif flags & _FLAG_FORBIDDEN:
            try:
                message = str(self._housekeeping(_OP_FORBIDDEN))
            except _quickjs.JSException:
                message = "a guard denied access"
            self._fail("forbidden", _clean(message))
        elif flags & _FLAG_OUTPUT:
            self._fail("output-limit", OUTPUT_EXCEEDED.format(self._limits.max_output_bytes))
        return flags

    def _end_slice(self) -> None:
        try:
            # One call when nothing is flagged (the poll probes first); a flagged run
            # answers ``!<flags>``: fail with the cause, then poll for what it printed.
            text: str = self._housekeeping(_OP_POLL, False)
            if text.startswith("!"):
                if self._fail_for(int(text[1:])) & _FLAG_OOM:
                    # Room to collect what the program printed before it ran out.
                    self._ctx.set_memory_limit(self._limits.max_heap_bytes + 64 * 2**20)
                    self._ctx.gc()
                text = self._housekeeping(_OP_POLL, True)
            # The meta, then each call's arguments after a U+0001 (JSON text never holds
            # a raw control character). Found with ``find`` (``memchr``), not ``split``,
            # which walks a 1 MB argument character by character (0.8 ms here).
            cut = text.find("\x01")
            meta = text if cut < 0 else text[:cut]
            try:
                payload = _meta_decoder.decode(meta)
            except msgspec.DecodeError:  # msgspec refuses a lone surrogate's escape
                payload = json.loads(meta)
            call_args = _call_args(text, cut, len(payload["calls"]))
        except Exception as exc:  # the engine or the binding broke; the run cannot go on
            lines = str(exc).splitlines()
            self._fail("worker-exit", f"worker error: {lines[0] if lines else type(exc).__name__}")
            return
        for entry in payload["logs"]:
            kept = self._ledger.add(_clean(entry))
            if kept is not None:
                self._logs.append(kept)
            if self._ledger.overflowed:
                self._fail("output-limit", OUTPUT_EXCEEDED.format(self._limits.max_output_bytes))
                break
        self._calls.extend(
            JsCall(i, g, n, a) for (i, g, n), a in zip(payload["calls"], call_args, strict=True)
        )
        self._outstanding = payload["outstanding"]
        timer = payload["timer"]
        self._timer_at = None if timer < 0 else time.monotonic() + timer / 1000
        state = payload["state"]
        if state is not None and state[0] == "done":
            value_json = state[1]
            if value_json is not None and not self._ledger.fits(len(value_json.encode())):
                self._fail("output-limit", OUTPUT_EXCEEDED.format(self._limits.max_output_bytes))
            elif isinstance(self._state, GuestRunning):
                self._state = GuestDone(value_json)
        elif state is not None:
            self._fail(state[1], _clean(state[2]))
        elif self._outstanding == 0 and self._timer_at is None:
            self._fail("worker-exit", STALLED)

    def _fail(self, kind: str, message: str) -> None:
        if not isinstance(self._state, GuestRunning):
            return
        if kind != "output-limit" and not self._ledger.fits(_json_size(message)):
            kind, message = "output-limit", OUTPUT_EXCEEDED.format(self._limits.max_output_bytes)
        self._state = GuestFailed(kind, message)
