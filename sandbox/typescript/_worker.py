"""The TypeScript guest's worker side: drive a ``JsGuest`` from the bridge.

``serve(run, bridge, loop)`` is called in a locked-down worker with the ``run`` frame
(the program already type-stripped by the host). It runs the program in one QuickJS
context on the main thread (8 MiB native stack; QuickJS gets at most 1 MiB of it) and
relays between the guest's step API and the bridge:

    start the program
    loop: send the logs and binding calls the last slice produced (one write)
          finished? send ``done`` and return
          wait for ``result`` frames, at most until the next timer is due
          results -> resolve/reject each; nothing before the timer -> run the timers

Everything the run is held to is the same as for Python: the supervisor meters CPU,
wall time, the output ledger and the sub-call count from outside; the guest meters its
own compute (QuickJS's interrupt stops a hot loop without a kill; the supervisor
reports it with its own message), its heap (QuickJS's memory limit, sized to fit inside
the worker's address-space rlimit) and its log flood.

``warm()`` runs in the fork server: it imports QuickJS (the C extension only: the
``quickjs`` package starts a helper thread, which a locked-down worker must not have and,
with its process rlimit at 0, cannot start), the catch-guard parser and the prelude
sources, and runs one program. ``prepare_template`` then builds the runs' context once,
in the server, with the runtime's limits from ``ServerConfig.warm_options``; each worker
inherits its own copy (about 2 ms off every run's latency, and off every fork).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import resource
from typing import Any

import msgspec

from ..worker._bridge import WorkerBridge
from ..worker._frames import (
    CallFrame,
    DoneFrame,
    ErrorSpec,
    LogFrame,
    RunFrame,
    decode_frame,
    dumps_deep,
    encode_frame,
    json_string_length,
    truncate_to_json_length,
)
from ._guest import (
    MIN_MEMORY_BYTES,
    GuestDone,
    GuestFailed,
    GuestRunning,
    JsBinding,
    JsGuest,
    JsLimits,
)
from ._options import TsGuestOptions

__all__ = ["prefault", "prepare_template", "serve", "warm"]

_ARGS_TOO_BIG = "binding arguments exceed the bridge frame limit ({} bytes)"
_ARGS_LOSSY = "binding arguments must be lossless JSON"
_VALUE_LOSSY = "program completion must be lossless JSON"
# JSON.stringify writes a surrogate pair as its character and a lone surrogate as an
# escape (an odd run of backslashes before `u`), so any surrogate escape in its output is
# lone. Lone surrogates cannot be UTF-8, so the host could not read them: such values
# are lossy, as in Python (whose encoder refuses them).
_LONE_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_MEMORY = "memory limit exceeded (MemoryError)"  # the host reports its own message
# Left of the address-space rlimit for Python's side of a run: the poll payloads that
# carry logs out of the context, their decoded copies and the frames built from them.
_PYTHON_SHARE = 4
_FRAME_ENVELOPE = 256

_prepared: tuple[dict[str, Any], JsGuest] | None = None
# A second guest built with the template, only ever run by ``prefault``: building one in
# each worker (the prelude's evaluation) took longer than the rest of the pre-fault, and a
# worker taken back to back waited for it.
_prefault_guest: JsGuest | None = None

#: The worker may register the bridge's loop reader before the run frame (``Guest``):
#: this guest never runs the worker's loop; it reads with ``wait_payloads``.
EARLY_READER = True


def _null() -> msgspec.Raw:
    return msgspec.Raw(b"null")


class _Result(msgspec.Struct, frozen=True, tag="result", tag_field="type", omit_defaults=True):
    """``ResultFrame`` with the value kept as JSON text (QuickJS parses it); a value
    nested past msgspec's reach arrives parsed instead (``decode_frame``'s fallback)."""

    id: int
    ok: bool
    value: msgspec.Raw = msgspec.field(default_factory=_null)
    message: str = ""
    code: str | None = None
    poll: bool = False


_result_decoder = msgspec.json.Decoder(_Result)


def _address_space_in_use() -> int:
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 64 * 2**20


def _limits(raw: dict[str, Any]) -> JsLimits:
    """QuickJS limits for the runtime's options: the heap gets most of what the
    address-space rlimit leaves."""
    options = msgspec.convert(raw, TsGuestOptions)
    memory = options.max_memory_bytes
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        memory = min(memory, soft)
    free = memory - _address_space_in_use()
    heap = max(MIN_MEMORY_BYTES, free - free // _PYTHON_SHARE)
    return JsLimits(
        max_compute_ms=math.ceil(options.max_compute_ms),
        max_heap_bytes=heap,
        max_output_bytes=options.max_output_bytes,
    )


def _lossy(json_text: str) -> bool:
    """Whether JSON text from ``JSON.stringify`` holds a lone surrogate.

    ``JSON.stringify`` writes a lone surrogate as an escape (``\\ud800`` to ``\\udfff``),
    so text without a backslash has none: that one-character search runs at ``memchr``
    speed, where the two three-character searches cost 1.7 ms on a 1 MB argument of plain
    text here.
    """
    if "\\" not in json_text:
        return False
    return ("\\ud" in json_text or "\\uD" in json_text) and bool(_LONE_SURROGATE.search(json_text))


def _bindings(run: RunFrame) -> list[JsBinding]:
    out = []
    for spec in run.bindings:
        error = spec.error_class
        out.append(
            JsBinding(
                spec.global_name,
                tuple(spec.names),
                error_class=None if error is None else error.name,
                member_name_property="toolName" if error is None else error.member_name_property,
            )
        )
    return out


class _Driver:
    """One program in one worker: the relay loop of the module docstring."""

    def __init__(self, run: RunFrame, bridge: WorkerBridge, guest: JsGuest) -> None:
        self.run = run
        self.bridge = bridge
        self.guest = guest
        self.max_frame = run.max_frame_bytes
        # Longest log entry (JSON bytes) one frame can carry; a longer one is cut here,
        # as the Python guest cuts it (only with a frame cap below the output cap).
        self.max_entry = max(2, min(run.max_output_bytes, run.max_frame_bytes - _FRAME_ENVELOPE))

    def execute(self) -> None:
        guest = self.guest
        guest.start(self.run.program, _bindings(self.run))
        while True:
            while self.flush():
                pass  # a call failed here ran the program on: send what that produced
            state = guest.state
            if not isinstance(state, GuestRunning):
                self.finish(state)
                return
            payloads = self.bridge.wait_payloads(guest.timer_delay(), spin=guest.outstanding > 0)
            if payloads is None:
                return  # the host hung up: the run is over
            if not payloads:
                guest.run_timers()
                continue
            for payload in payloads:
                try:
                    frame = decode_frame(_result_decoder, payload)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue  # the host never sends junk; nothing to answer if it did
                if isinstance(frame, _Result):
                    self.bridge.spin.allowed = frame.poll
                    self.settle(frame)

    def settle(self, frame: _Result) -> None:
        if not frame.ok:
            self.guest.reject(frame.id, frame.message, frame.code)
            return
        value: Any = frame.value  # parsed, not Raw, when it came through the deep fallback
        # Straight from the frame's bytes to text: one copy (a 1 MB result is ~250 fresh
        # pages per copy in a new worker).
        data = value if isinstance(value, msgspec.Raw) else dumps_deep(value)
        self.guest.resolve(frame.id, str(data, "utf-8"))

    def flush(self) -> bool:
        """Send what the last slice produced (logs first, then calls) in one write.

        Returns True when a call was failed here instead (arguments that cannot cross
        the bridge), which runs the program on and may produce more.
        """
        out: list[bytearray] = []
        failed = False
        for text in self.guest.drain_logs():
            if json_string_length(text) > self.max_entry:
                text = truncate_to_json_length(text, self.max_entry)
            out.append(encode_frame(LogFrame(text=text)))
        for call in self.guest.pending_calls():
            if _lossy(call.args_json):
                self.guest.reject(call.id, _ARGS_LOSSY)
                failed = True
                continue
            args = msgspec.Raw(call.args_json.encode("utf-8"))
            frame = CallFrame(id=call.id, global_name=call.global_name, name=call.name, args=args)
            data = encode_frame(frame)
            if len(data) - 4 > self.max_frame:
                # Never sent: the call fails in the program like any failed binding.
                self.guest.reject(call.id, _ARGS_TOO_BIG.format(self.max_frame))
                failed = True
                continue
            out.append(data)
        if out:
            # One frame (a big argument) leaves as it is; joining would copy it.
            self.bridge.send_raw(out[0] if len(out) == 1 else b"".join(out))
        return failed

    def finish(self, state: GuestDone | GuestFailed | GuestRunning) -> None:
        if isinstance(state, GuestDone):
            if state.value_json is None:
                frame = DoneFrame()
            elif _lossy(state.value_json):
                frame = DoneFrame(error=ErrorSpec(kind="invalid-output", message=_VALUE_LOSSY))
            else:
                frame = DoneFrame(value=msgspec.Raw(state.value_json.encode("utf-8")))
        elif isinstance(state, GuestFailed):
            frame = DoneFrame(error=ErrorSpec(kind=state.kind, message=state.message))
        else:
            raise AssertionError("finish() on a running guest")
        data = encode_frame(frame)
        if len(data) - 4 > self.max_frame:
            # Cannot cross the bridge (with the default cap it could not fit the output
            # ledger either); the host renders the diagnostic, as for Python.
            data = encode_frame(DoneFrame(error=ErrorSpec(kind="output-limit", message="")))
        self.bridge.send_raw(data)


def serve(run: RunFrame, bridge: WorkerBridge, loop: asyncio.AbstractEventLoop) -> None:
    """Run ``run.program`` (stripped JavaScript) to completion and send ``done``."""
    global _prepared
    prepared, _prepared = _prepared, None
    try:
        if prepared is not None and prepared[0] == run.options:
            guest = prepared[1]
        else:
            if prepared is not None:
                prepared[1].close()
            guest = JsGuest(_limits(run.options))
        try:
            _Driver(run, bridge, guest).execute()
        finally:
            guest.close()
    except MemoryError:
        # Python's side of the run ran out inside the address-space rlimit.
        bridge.send(DoneFrame(error=ErrorSpec(kind="memory", message=_MEMORY)))


_WARM_PROGRAM = """
const seen = new Map([["a", 1]]);
let caught = "";
try { await tools.fail({ n: 1 }); } catch (e) { caught = `${e.name}:${e.toolName}`; }
const [x, y] = await Promise.all([tools.echo({ v: [1, 2.5, "x"] }), tools.echo({})]);
console.log("warm", { seen, x, nested: { a: [1, { b: null }] } }, [1, 2, 3], new Error("e"));
try { null.f(); } catch { }
return { caught, x, y, n: [...seen.keys()].length };
"""


def warm() -> None:
    """Import and exercise what a run needs (called in the fork server)."""
    guest = JsGuest(JsLimits(max_compute_ms=5_000, max_heap_bytes=64 * 2**20))
    guest.start(_WARM_PROGRAM, [JsBinding("tools", ("echo", "fail"))])
    for _ in range(10):
        if not isinstance(guest.state, GuestRunning):
            break
        guest.drain_logs()
        for call in guest.pending_calls():
            if call.name == "fail":
                guest.reject(call.id, "failed", "E_WARM")
            else:
                guest.resolve(call.id, call.args_json)
    assert isinstance(guest.state, GuestDone), guest.state
    guest.close()
    encode_frame(DoneFrame(value=msgspec.Raw(b"1")))
    decode_frame(_result_decoder, b'{"type":"result","id":1,"ok":true,"value":[1]}')


def prepare_template(
    loop: asyncio.AbstractEventLoop, options: dict[str, Any] | None = None
) -> None:
    """Build the runs' QuickJS context once, in the fork server, with the runtime's
    limits: every worker inherits its own copy of it, untouched by any run."""
    global _prepared, _prefault_guest
    if options is not None:
        _prepared = (options, JsGuest(_limits(options)))
    _prefault_guest = JsGuest(JsLimits(max_compute_ms=1_000, max_heap_bytes=16 * 2**20))


# Small on purpose, like the Python guest's: what nearly every run writes (a context's
# first objects, a log line, a result's JSON), in a throwaway context.
_PREFAULT_PROGRAM = (
    "const d = {k: [1, 'x']}; console.log('p', d); return {v: d.k.length, s: `${1}`}"
)


def prefault(loop: asyncio.AbstractEventLoop) -> None:
    """In a fresh, locked-down worker: run a small program once, before the run frame.

    The worker shares its pages with the fork server; its first run copies those it
    writes (QuickJS's allocator and the C heap, the driver's Python objects): taken here,
    while the worker idles, they are off the run's latency. The program runs in a
    context of its own (built in the fork server beside the template, each worker's copy
    its own), closed before the run: the prepared context is never touched.
    """
    global _prefault_guest
    guest, _prefault_guest = _prefault_guest, None
    if guest is None:
        return
    try:
        guest.start(_PREFAULT_PROGRAM, [])
        for text in guest.drain_logs():
            encode_frame(LogFrame(text=text))
        state = guest.state
        if isinstance(state, GuestDone) and state.value_json is not None:
            encode_frame(DoneFrame(value=msgspec.Raw(state.value_json.encode())))
    finally:
        guest.close()
