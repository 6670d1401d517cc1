"""The host side of one worker's bridge: capped frame reads, serialised frame writes.

Everything that arrives is treated as hostile: payloads that are not a well-formed
``call``/``log``/``done`` frame (bad JSON, unknown tag, wrong field types, a ``ready``
after start-up) and frames over the cap are dropped and counted in ``dropped``.

Reading is ``pump(on_frame)``: frames are handed to a synchronous callback
``on_frame(frame, size)`` (``size``: the payload's bytes) in arrival order, as they are
decoded. Values are decoded against ``max_depth`` (``decode_frame``): a value field
nested deeper arrives as a ``TooDeep`` marker, never built. A *heavy* payload -- above
``_INLINE_BYTES`` (unless it holds few members and at most ``_INLINE_WHOLE_BYTES``: that
decodes at about memcpy speed, on the loop), or nested past msgspec's reach -- is
decoded, and its ``args``/``value`` snapshotted (deep-frozen and sealed, so the engine's
own snapshot and validation of it cost nothing), in a worker thread, with short GIL slices
meanwhile (``_ShortSlices``): a 60 MiB or 10,000-deep frame of
program data costs the event loop only the hand-off, and reading pauses meanwhile so
frames stay in order. At most ``_FRAMES_PER_SLICE`` frames are handed on per loop
iteration, and for at most ``_SLICE_SECONDS``, so a storm of small calls cannot hold the
loop either. On asyncio the socket stays registered with the loop while frames flow (one
readiness callback per burst instead of a register/unregister pair per read); other
backends use ``anyio.wait_readable``. Either way a burst is cut into slices so a
flooding worker cannot starve the supervisor's watchdog. Writes try the socket
directly when no other write is in progress and fall back to a lock otherwise, so a
frame is never interleaved with another.
"""

from __future__ import annotations

import asyncio
import hashlib
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec

from codemode.engine.json import LosslessJsonError, snapshot

from ..worker._bridge import Spin
from ..worker._frames import (
    CallFrame,
    DoneFrame,
    LogFrame,
    NeedsDeepDecode,
    Payload,
    PreparedFrame,
    ReadyFrame,
    decode_frame,
    decode_host_frame_sliced_raw,
    encode_frame,
    few_members,
)
from . import _memory
from ._lift import lift
from ._pool import Worker

__all__ = ["HostBridge", "HostFrame"]

HostFrame = CallFrame | LogFrame | DoneFrame | PreparedFrame

_SLICE = 16  # reads per readiness callback / between checkpoints
# Payloads above this are decoded off the event loop. The worst case on the loop is the
# iterative fallback of a deep payload, ~1 µs per byte-sized token: 64 KiB stays far
# below the 100 ms a stall may cost; frames this large are rare enough that the thread
# hand-off (~0.1 ms) does not show in ordinary runs.
_INLINE_BYTES = 64 * 1024
# A bigger payload of few members (a big string, or a few: its bytes are in scalars,
# which msgspec decodes at about memcpy speed, ~0.5 ms per MB here) is decoded on the
# loop up to this size, ending its slice: the hand-off to a thread and back, and the
# hash of the arguments beside it, cost more than the decode (a 1 MB string argument
# took 1.7 ms from the loop to the thread and back, 0.5 ms decoded in place).
_INLINE_WHOLE_BYTES = 4 << 20
# Frames handed on per loop iteration: each call frame starts a task, and a storm of
# thousands started in one iteration would run in one iteration too.
_FRAMES_PER_SLICE = 128
# ...and at most about this long: a call frame may run its whole sub-call before the
# next is read (a body that does not wait), ~0.2 ms each here and twice that when other
# processes take the cores, so 128 of them held the loop 25-50 ms.
_SLICE_SECONDS = 0.004
# _drain outcomes.
_WAIT = 0  # nothing more readable now
_HEAVY = 1  # the backlog's head is a payload to decode off the loop
_EOF = 2  # the worker closed its end and the backlog is empty
_MORE = 3  # the slice's frame budget is spent: yield to the loop, then go on


# Decoders are immutable and thread-safe: one serves every bridge (building one per run
# was a fifth of the bridge's set-up).
_DECODER = msgspec.json.Decoder(CallFrame | LogFrame | DoneFrame | PreparedFrame | ReadyFrame)


_HEAD_BYTES = 4096  # of a big value's JSON, kept in its digest


def _digest(pieces: list[Any], started: threading.Event) -> tuple[int, str, bytes]:
    """What the session log's retention bound needs of a value's JSON bytes (the
    buffers ``pieces``, one after the other): their size, sha256 and first 4 KiB."""
    started.set()
    hasher = hashlib.sha256()
    size = 0
    head = bytearray()
    for piece in pieces:
        view = memoryview(piece).cast("B")
        hasher.update(view)
        size += len(view)
        if len(head) < _HEAD_BYTES:
            head += view[: _HEAD_BYTES - len(head)]
    return size, hasher.hexdigest(), bytes(head)


# Long enough for an idle thread to wake; a busy one (another big frame) is not waited for.
_HASH_START_WAIT_S = 0.002
_digests: ThreadPoolExecutor | None = None
_digests_lock = threading.Lock()


def _digest_pool() -> ThreadPoolExecutor:
    """One thread hashing big arguments beside the threads decoding them (made on first
    use: a host that never sees one never starts it)."""
    global _digests
    with _digests_lock:
        if _digests is None:
            _digests = ThreadPoolExecutor(1, thread_name_prefix="codemode-digest")
        return _digests


class _ShortSlices:
    """The interpreter's thread switch interval, shortened while heavy decodes run.

    A decode thread holds the GIL for up to ``sys.getswitchinterval()`` (5 ms by default)
    before the event loop's thread gets it back, each time the loop asks for it, and a
    decode takes hundreds of milliseconds of such slices (the loop waits for the GIL
    after every ``epoll_wait``). With 1 ms slices while any heavy decode runs, the loop
    waits less each time (10 MB object of 500,000 members: the loop's longest delay 37-60
    -> 18-32 ms here, a few percent slower decode). The previous interval is put back
    when the last one ends, unless someone else changed it meanwhile.
    """

    INTERVAL_S = 0.001
    _lock = threading.Lock()
    _active = 0
    _saved: float | None = None

    @classmethod
    def enter(cls) -> None:
        with cls._lock:
            cls._active += 1
            if cls._active == 1:
                current = sys.getswitchinterval()
                if current > cls.INTERVAL_S:
                    cls._saved = current
                    sys.setswitchinterval(cls.INTERVAL_S)

    @classmethod
    def exit(cls) -> None:
        with cls._lock:
            cls._active -= 1
            if cls._active == 0 and cls._saved is not None:
                if abs(sys.getswitchinterval() - cls.INTERVAL_S) < 1e-6:
                    sys.setswitchinterval(cls._saved)
                cls._saved = None


def _is_compact(raw: memoryview) -> bool:
    """Whether ``raw`` starts and ends like compact JSON (what both guests send): only then
    are its length and hash those of the value's compact encoding. A hostile guest
    padding with whitespace elsewhere only mislabels its own arguments' digest."""
    return bool(raw) and raw[0] not in b" \t\n\r" and raw[-1] not in b" \t\n\r"


class HostBridge:
    """Frames to and from one worker (see module docstring)."""

    def __init__(
        self,
        worker: Worker,
        frame_bytes: int,
        spawn: Callable[..., Any],
        *,
        max_depth: int | None = None,
        may_poll: Callable[[], bool] | None = None,
    ) -> None:
        self._worker = worker
        self._frame_bytes = frame_bytes
        self._spawn = spawn
        self._max_depth = max_depth
        self._backlog: deque[Payload] = deque()
        self._budget = 0
        self._slice_end = 0.0
        self._eof = False
        self._decoder = _DECODER
        self._outbox: list[bytearray] = []
        self._tail = bytearray()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend (trio): write at once
            self._loop = None
        self._decode_failures = 0
        self.broken = False
        # ``stop``: the pump returns after the frame being delivered, or wakes from its
        # wait to return, instead of being cancelled (see ``stop``).
        self._stop = False
        self._delivering = False
        self._parked: anyio.Event | None = None
        # The parked pump's reader (``_wait_asyncio``): what it delivers to, and what it
        # ended with.
        self._on_frame: Callable[[HostFrame, int], None] | None = None
        self._park_status = _WAIT
        # Polling for the worker's answer after a flush of results (``_flush_soon``):
        # allowed while ``may_poll()`` (the host serves this run alone), learnt per run.
        self._may_poll = may_poll
        self._spin = Spin()
        self._poller: select.poll | None = None
        self._sent_at = 0.0
        self._polled = 0.0
        self._poll_count = 0
        self._poll_answers = 0
        self._poll_seconds = 0.0
        #: Frames whose payload was decoded in a worker thread (``_deliver_heavy``).
        self.thread_decodes = 0

    @property
    def polls(self) -> tuple[int, int, float]:
        """Polls for the worker's answer so far (``_flush_soon``): how many, how many it
        ended, and their seconds."""
        return self._poll_count, self._poll_answers, self._poll_seconds

    @property
    def dropped(self) -> int:
        """Frames dropped so far (malformed, unexpected or oversized)."""
        return self._decode_failures + self._worker.buffer.oversized

    def stop(self) -> bool:
        """Make ``pump`` return as soon as it can; whether it will without a cancel.

        True while the pump is delivering a frame (the caller is ``on_frame``: it
        returns right after) or parked in its asyncio wait (woken now): then the run's
        scope ends without a cancellation, which costs a cancel delivery, an extra
        event-loop turn and the scope's unwinding on the path of every run (measured:
        done frame to the run's end 225 -> 160 us). Anywhere else (a heavy decode in a
        thread, another backend) the caller cancels as before.
        """
        self._stop = True
        parked = self._parked
        if parked is not None:
            parked.set()
            return True
        return self._delivering

    def count_drop(self) -> None:
        """Count a frame the supervisor rejected after decoding (duplicate id, ...)."""
        self._decode_failures += 1

    def send(self, frame: msgspec.Struct, *, flush: bool = False, now: bool = False) -> bool:
        """Queue one frame for the worker; False if it exceeds the frame cap.

        Raises ``NestingError`` when a value nests deeper than ``max_depth``.

        Frames queued in one event-loop iteration leave in one write at the start of
        the next (100 binding results settling together cost one syscall and one
        worker wake-up). Bytes the socket does not take at once wait in ``_tail`` for
        a writer task; frames are never reordered or interleaved. ``flush=True`` writes
        at once (after anything queued before it): the run frame, which nothing can
        join. ``now=True``: the caller knows no other frame can join this one (the one
        result the worker waits for): it leaves at once, and the poll for the worker's
        answer (``_flush_soon``) follows at the end of this loop iteration.
        """
        data = encode_frame(frame, max_depth=self._max_depth)
        if len(data) - 4 > self._frame_bytes:
            return False
        if self.broken:
            return True
        self._outbox.append(data)
        if flush:
            self._flush()
        elif len(self._outbox) == 1:
            if self._loop is not None:
                if now:
                    self._flush()
                self._loop.call_soon(self._flush_soon)
            else:
                self._flush()
        return True

    def _flush_soon(self) -> None:
        """The loop-turn-end flush of queued results, then, when the worker is likely to
        answer within a fraction of a millisecond, a poll for its answer (``Spin``).

        This VM, like many, has no guest halt polling: a host vCPU that sleeps in
        ``epoll_wait`` takes ~25 us to wake, on the path of every sequential sub-call
        (the worker polls for the result on its side; this is the other direction). The
        poll runs only while the host serves this run alone, the pump is parked, the
        loop has nothing ready and no timer falls due within the window, so it delays
        nothing else; within ``Spin``'s window (twice the typical recent wait, at most
        0.3 ms, never while waits are slower) and its 0.1 s allowance per run.
        """
        self._flush()
        if self._parked is None or self._tail or self.broken or self._may_poll is None:
            return
        self._sent_at = time.perf_counter()
        self._polled = 0.0
        loop = self._loop
        ready = getattr(loop, "_ready", None)
        timers = getattr(loop, "_scheduled", None)
        if ready is None or timers is None or ready or not self._may_poll():
            return
        timeout = None
        if timers:
            timeout = timers[0].when() - loop.time()  # type: ignore[union-attr]
            if timeout <= 0:
                return
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(self._worker.sock.fileno(), select.POLLIN)
        self._spin.allowed = True
        # Accounted when the answer comes (``_readable``), polled for or not.
        answer, self._polled = self._spin.poll_first(lambda: poller.poll(0), timeout)
        if self._polled:
            self._poll_count += 1
            self._poll_seconds += self._polled
        if answer:
            self._poll_answers += 1
            self._readable()

    def _flush(self) -> None:
        if not self._outbox:
            return
        outbox = self._outbox
        # One frame (a run, a big result) leaves as it is; joining would copy it.
        data = outbox[0] if len(outbox) == 1 else b"".join(outbox)
        outbox.clear()
        if self._tail:
            self._tail += data
            return
        try:
            sent = self._worker.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.broken = True
            return
        if sent < len(data):
            self._tail = bytearray(data[sent:])
            self._spawn(self._write_tail)

    async def _write_tail(self) -> None:
        sock = self._worker.sock
        while self._tail and not self.broken:
            await anyio.wait_writable(sock)
            try:
                sent = sock.send(self._tail)
            except BlockingIOError:
                continue
            except OSError:
                self.broken = True
                return
            del self._tail[:sent]

    def _decode(self, payload: Payload, *, deep: bool = True) -> HostFrame | None:
        """The frame, or None for a payload to drop (the caller counts it).

        ``deep=False`` raises ``NeedsDeepDecode`` for a payload past msgspec's reach.
        """
        try:
            frame: HostFrame | ReadyFrame = decode_frame(
                self._decoder, payload, max_depth=self._max_depth, deep=deep
            )
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if isinstance(frame, ReadyFrame):
            return None
        return frame

    def _decode_heavy(self, box: list[Payload]) -> HostFrame | None:
        """``_decode_sealed`` in a worker thread, with short GIL slices (``_ShortSlices``)
        for as long as it runs (an abandoned decode included)."""
        _ShortSlices.enter()
        try:
            return self._decode_sealed(box)
        finally:
            _ShortSlices.exit()

    def _decode_sealed(self, box: list[Payload]) -> HostFrame | None:
        """``_decode`` plus a deep-frozen snapshot of the value (run in a worker thread).

        ``box`` holds the payload, its only reference: a big one is taken out and let go
        as soon as nothing needs it (``decode_host_frame_sliced_raw``), so one huge
        argument is never held three times (payload, value bytes, value). A big payload
        with many members is decoded in slices: msgspec holds the GIL for a whole call,
        so one call on 10 MB of small members would stall the event loop as surely as
        decoding it there. Big ASCII strings are first lifted out of the payload with
        the GIL released (``host/_lift``). A big call's argument bytes are hashed for
        the session log in another thread while they are decoded (sha256 releases the
        GIL).
        """
        digest: Future[tuple[int, str, bytes]] | None = None
        # Its big strings first, built while the GIL is free (``host/_lift``).
        strings = None
        lifted = lift(box[0]) if len(box[0]) > _INLINE_WHOLE_BYTES else None
        if lifted is not None:
            box[0], strings = lifted

        def hash_meanwhile(raw: Any) -> None:
            nonlocal digest
            view = memoryview(raw)
            if _is_compact(view):
                started = threading.Event()
                pieces = [view] if strings is None else strings.expand(view)
                digest = _digest_pool().submit(_digest, pieces, started)
                # Decode only once the hashing thread runs: msgspec keeps the GIL for
                # the whole decode, so a thread that has not reached sha256 (which
                # lets the GIL go) by then would wait for it, and hash after it.
                started.wait(_HASH_START_WAIT_S)

        if strings is not None or len(box[0]) > _INLINE_BYTES:
            try:
                sliced, _raw = decode_host_frame_sliced_raw(
                    box, max_depth=self._max_depth, on_raw=hash_meanwhile
                )
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            del _raw
            frame = None if isinstance(sliced, ReadyFrame) else sliced
        else:
            frame = self._decode(box.pop())
        if strings is not None and frame is not None:
            frame = strings.restore_frame(frame)
        if isinstance(frame, CallFrame) and isinstance(frame.args, (dict, list)):
            try:
                args = snapshot(frame.args)
            except LosslessJsonError:
                return frame  # the engine refuses it with its own message
            if digest is not None:
                # The session log's retention bound needs the size and sha256 of these
                # bytes; hashing them here spares the loop an encode and a hash.
                args._digest = digest.result()
            frame = msgspec.structs.replace(frame, args=args)
        elif isinstance(frame, DoneFrame) and isinstance(frame.value, (dict, list)):
            try:
                frame = msgspec.structs.replace(frame, value=snapshot(frame.value))
            except LosslessJsonError:
                pass  # the supervisor refuses it as invalid output
        return frame

    def _process(self, on_frame: Callable[[HostFrame, int], None]) -> int:
        """Deliver the backlog's light payloads: ``_WAIT`` when it is empty, ``_HEAVY``
        when stopped at a heavy one, ``_MORE`` when this slice's budget is spent."""
        backlog = self._backlog
        while backlog:
            if self._budget <= 0 or time.perf_counter() >= self._slice_end:
                return _MORE
            payload = backlog[0]
            size = len(payload)
            big = size > _INLINE_BYTES
            if big and (size > _INLINE_WHOLE_BYTES or not few_members(payload)):
                return _HEAVY
            try:
                frame = self._decode(payload, deep=False)
            except NeedsDeepDecode:
                return _HEAVY
            backlog.popleft()
            # A big one ends the slice: the loop gets its turn before the next decode.
            self._budget -= _FRAMES_PER_SLICE if big else 1
            if frame is None:
                self._decode_failures += 1
            else:
                on_frame(frame, len(payload))
                if self._stop:
                    return _EOF
        return _WAIT

    def _drain(self, on_frame: Callable[[HostFrame, int], None]) -> int:
        """Read and deliver up to one slice of data (see ``_WAIT``, ``_HEAVY``, ...)."""
        self._delivering = True
        try:
            return self._drain_slice(on_frame)
        finally:
            self._delivering = False

    def _drain_slice(self, on_frame: Callable[[HostFrame, int], None]) -> int:
        if self._stop:
            return _EOF
        self._budget = _FRAMES_PER_SLICE
        self._slice_end = time.perf_counter() + _SLICE_SECONDS
        status = self._process(on_frame)
        if status != _WAIT:
            return status
        if self._eof:
            return _EOF
        sock = self._worker.sock
        buffer = self._worker.buffer
        for _ in range(_SLICE):
            try:
                ready = buffer.receive(sock, _memory.recv)
            except (BlockingIOError, InterruptedError):
                return _WAIT
            except OSError:
                ready = None
            if ready is None:
                self._eof = True
                return _EOF
            self._backlog.extend(ready)
            status = self._process(on_frame)
            if status != _WAIT or buffer.short:
                # Short: the socket was empty after that read; readiness says when more
                # comes (a read only to get EAGAIN was ~7 us of every sub-call here).
                return status
            if time.perf_counter() >= self._slice_end:
                return _MORE  # a big frame's reads fault in fresh pages: the loop's turn
        return _WAIT

    async def _deliver_heavy(self, on_frame: Callable[[HostFrame, int], None]) -> None:
        box = [self._backlog.popleft()]
        size = len(box[0])
        self.thread_decodes += 1
        # abandon_on_cancel: a run settled meanwhile does not wait for the decode.
        frame = await anyio.to_thread.run_sync(self._decode_heavy, box, abandon_on_cancel=True)
        if frame is None:
            self._decode_failures += 1
        else:
            on_frame(frame, size)

    async def pump(self, on_frame: Callable[[HostFrame, int], None]) -> None:
        """Hand every well-formed frame to ``on_frame``; return when the worker hangs up."""
        sock = self._worker.sock
        while True:
            status = self._drain(on_frame)
            if status == _WAIT:
                if self._loop is None:
                    await anyio.wait_readable(sock)
                    continue
                status = await self._wait_asyncio(self._loop, on_frame)
            if status == _HEAVY:
                await self._deliver_heavy(on_frame)
            elif status == _MORE:
                await anyio.lowlevel.checkpoint()
            elif status == _EOF:
                return

    async def _wait_asyncio(
        self, loop: asyncio.AbstractEventLoop, on_frame: Callable[[HostFrame, int], None]
    ) -> int:
        """Keep the socket registered and drain from its readiness callback until the
        pump task is needed (a heavy payload, a spent budget, the end of the stream): one
        callback per burst instead of a task switch per read."""
        fd = self._worker.sock.fileno()
        stopped = anyio.Event()
        self._on_frame = on_frame
        self._park_status = _WAIT
        loop.add_reader(fd, self._readable)
        self._parked = stopped
        try:
            await stopped.wait()
        finally:
            self._parked = None
            self._on_frame = None
            loop.remove_reader(fd)
        return _EOF if self._stop else self._park_status

    def _readable(self) -> None:
        """The parked pump's reader: deliver what arrived; wake the pump when it is needed."""
        on_frame, parked = self._on_frame, self._parked
        if on_frame is None or parked is None:
            return
        if self._sent_at:
            # The answer to the last flush of results: what the next poll learns from.
            self._spin.record(time.perf_counter() - self._sent_at, self._polled)
            self._sent_at = 0.0
        status = self._drain(on_frame)
        if status != _WAIT:
            assert self._loop is not None
            self._loop.remove_reader(self._worker.sock.fileno())
            self._park_status = status
            parked.set()
