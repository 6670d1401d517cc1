"""The worker side of the bridge: synchronous frame writes, loop-driven frame reads.

Writes are synchronous on purpose: a ``log`` frame is on the wire before ``print``
returns, so logs survive the supervisor killing the worker a moment later. Reads are
driven by the guest's asyncio loop (``attach``), which delivers ``result`` frames to
whatever the guest registered. Guest-agnostic: the Python guest and any other guest
(TypeScript) share it.

Waiting for a binding result first polls for a moment, then sleeps (``Spin``). On a VM
without halt polling a sleeping vCPU takes ~25 µs to wake, once per direction per
sub-call: a bare ping-pong of two Python processes costs 50-60 µs across cores and
~20 µs when the replying side polls for 50 µs first. The host's event loop is the
embedder's and never polls; the worker does, adaptively (only when recent waits were
short) and within an allowance per run, since the CPU it burns counts against the
run's compute budget.
"""

from __future__ import annotations

import asyncio
import math
import select
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ._frames import (
    FrameBuffer,
    Payload,
    ResultFrame,
    RunFrame,
    WorkerInbound,
    decode_frame,
    encode_frame,
)

__all__ = ["Spin", "SpinningSelector", "WorkerBridge", "WorkerLoop"]

_T = TypeVar("_T")

_RECV = 256 * 1024

# Built once, in the fork server (decoders are immutable): building one in every worker
# wrote to pages it shares with the server (msgspec's type information).
_DECODER = msgspec.json.Decoder(WorkerInbound)


def _recv(sock: socket.socket) -> bytes:
    return sock.recv(_RECV)


def _recv_now(sock: socket.socket) -> bytes:
    return sock.recv(_RECV, socket.MSG_DONTWAIT)


def _wait_ms(deadline: float | None) -> int:
    """``poll``'s timeout until ``deadline`` (``time.monotonic``): -1 for none, else whole
    milliseconds, rounded up, never negative."""
    if deadline is None:
        return -1
    return max(0, math.ceil((deadline - time.monotonic()) * 1000))


# How long a finished worker waits for the host's kill before exiting by itself (the
# host kills at once; this only bounds a worker whose host stopped listening).
_LINGER_S = 10.0


class Spin:
    """How long a wait for a binding result polls before it sleeps.

    A wait polls for up to twice the typical recent wait (a moving average), and not at
    all while that average is above ``MAX_WINDOW_S`` (slow tools: a sleep costs nothing
    next to them). ``ALLOWANCE_S`` bounds what one run can burn polling, whatever its
    calls do; a worker's is also at most ``ALLOWANCE_SHARE`` of the run's compute budget
    (its polling is CPU time the budget counts: ``RunFrame.poll_allowance_s``). With 0.1 s
    a program of 3,000 fast sequential calls polled for its first ~600 and slept after
    that: 364 us per call instead of 167 here (a sleeping vCPU is slow to wake).
    """

    MAX_WINDOW_S = 300e-6
    ALLOWANCE_S = 1.0
    ALLOWANCE_SHARE = 0.05
    __slots__ = ("allowed", "left", "typical")

    def __init__(self) -> None:
        self.left = self.ALLOWANCE_S
        # Optimistic start: the first wait the host allows polls up to the full window.
        self.typical = self.MAX_WINDOW_S / 2
        # Set from each result frame's ``poll``: the host allows it only while it serves
        # no other run (otherwise the polling would take the CPU the host needs).
        self.allowed = False

    def window(self, timeout: float | None) -> float:
        """Seconds the next wait may poll (0: sleep at once), within ``timeout``."""
        if not self.allowed or self.typical > self.MAX_WINDOW_S or self.left <= 0:
            return 0.0
        window = min(2 * self.typical, self.MAX_WINDOW_S, self.left)
        return window if timeout is None else min(window, timeout)

    def record(self, waited: float, polled: float) -> None:
        """One wait that ended with data after ``waited`` s, ``polled`` s of it polling."""
        self.left -= polled
        self.typical += (waited - self.typical) / 4

    def poll_first(self, probe: Callable[[], _T], timeout: float | None) -> tuple[_T | None, float]:
        """Call ``probe`` (a check that never sleeps) until it answers something true or
        the window ends: its last answer and the seconds spent (``None, 0.0`` when the
        window is empty)."""
        window = self.window(timeout)
        if window <= 0:
            return None, 0.0
        start = time.perf_counter()
        end = start + window
        while True:
            answer = probe()
            now = time.perf_counter()
            if answer or now >= end:
                return answer, now - start

    def ended(self, waited: float, polled: float, result: bool) -> None:
        """Account one wait: learnt from when a result ended it; a timer that ended it
        only spends the polling."""
        if result:
            self.record(waited, polled)
        else:
            self.left -= polled


class SpinningSelector(selectors.EpollSelector):
    """The worker loop's selector: while ``waiting()`` says a binding result is due, a
    blocking ``select`` polls first (``Spin``), then blocks for what is left."""

    def __init__(self) -> None:
        super().__init__()
        self.spin = Spin()
        self.waiting: Callable[[], bool] | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        waiting = self.waiting
        if waiting is None or (timeout is not None and timeout <= 0) or not waiting():
            return super().select(timeout)
        spin = self.spin
        start = time.perf_counter()
        ready, polled = spin.poll_first(lambda: super(SpinningSelector, self).select(0), timeout)
        if not ready:
            if timeout is not None:
                timeout = max(0.0, timeout - polled)
            ready = super().select(timeout)
        spin.ended(time.perf_counter() - start, polled, bool(ready))
        return ready


class WorkerLoop(asyncio.SelectorEventLoop):
    """A worker's event loop, built once in the fork server and inherited by every worker.

    Building an asyncio loop runs a good deal of Python (weak sets and dictionaries, the
    clock's resolution, the selector, the self-pipe's sockets) whose writes to pages the
    worker shares with the server became private memory in every worker (an idle
    worker's USS 0.15 MB lower for the Python guest, 0.26 MB for TypeScript, built here).
    The server builds this one and never runs it; each worker calls ``renew`` once the
    inherited descriptors are closed, for a selector and a self-pipe of its own.
    """

    def __init__(self) -> None:
        super().__init__(SpinningSelector())
        # The server's selector and self-pipe, retired in a worker: their descriptors
        # were closed with everything else it inherited, so these objects must never
        # close them again (the numbers are reused). Kept referenced, never finalised
        # (a worker ends in ``os._exit``).
        self._retired: list[object] = []

    def renew(self) -> None:
        """In a freshly forked worker whose inherited descriptors are closed: a new
        ``SpinningSelector`` and self-pipe (a ``socketpair``, which its seccomp filter
        refuses later), registered as ``BaseSelectorEventLoop.__init__`` does."""
        # ``BaseSelectorEventLoop``'s own attributes (stable since Python 3.4; not typed).
        base: Any = self
        ssock, csock = base._ssock, base._csock
        self._retired.append((base._selector, ssock, csock))
        ssock.detach()
        csock.detach()
        base._internal_fds -= 1
        base._selector = SpinningSelector()
        base._make_self_pipe()


class WorkerBridge:
    """Frames over the inherited bridge socket (see module docstring)."""

    def __init__(self, sock: socket.socket, max_frame_bytes: int) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self._buffer = FrameBuffer(max_frame_bytes)
        self._decoder = _DECODER
        self._pending: list[Any] = []
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLOUT)
        self.closed = False
        self.spin = Spin()
        # Set by ``attach``: where result frames go; by ``listen``: the loop whose reader
        # is registered and a POLLIN poller for ``wait_now``.
        self._on_result: Callable[[ResultFrame], None] | None = None
        self._listening: asyncio.AbstractEventLoop | None = None
        self._in_poll: Any = None

    def adopt(self, run: RunFrame) -> None:
        """Adopt what the ``run`` frame sets for the bridge: its frame cap and the polling
        allowance of its compute budget (never above ``Spin.ALLOWANCE_S``)."""
        self.max_frame_bytes = run.max_frame_bytes
        self._buffer._max = run.max_frame_bytes
        self.spin.left = max(0.0, min(run.poll_allowance_s, Spin.ALLOWANCE_S))

    # -- writing ---------------------------------------------------------------------

    def send(self, frame: msgspec.Struct) -> None:
        """Write one frame now (blocking until the kernel accepted all of it)."""
        self.send_raw(encode_frame(frame))

    def send_raw(self, data: bytes | bytearray) -> None:
        """Write raw bytes (test hook for hostile-peer tests; guests use ``send``)."""
        if self.closed:
            return
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                self._poll.poll()
                continue
            except OSError:
                # The host hung up: nobody is listening any more; the supervisor is
                # about to kill us.
                self.closed = True
                return
            view = view[sent:]

    # -- reading ---------------------------------------------------------------------

    def read_run(self) -> RunFrame | None:
        """Block until the ``run`` frame arrives (``None`` if the host hung up)."""
        while True:
            for payload in self._buffer.feed(b""):
                frame = self._decode(payload)
                if isinstance(frame, RunFrame):
                    return frame
            try:
                ready = self._buffer.receive(self.sock, _recv)
            except InterruptedError:
                continue
            if ready is None:
                return None
            for payload in ready:
                frame = self._decode(payload)
                if isinstance(frame, RunFrame):
                    return frame
                if frame is not None:
                    self._pending.append(frame)

    def wait_payloads(self, timeout: float | None, *, spin: bool = False) -> list[Payload] | None:
        """Block up to ``timeout`` seconds (``None``: no limit) for frames from the host.

        For guests that drive their own loop instead of ``attach`` (TypeScript). Returns
        the raw payloads of the complete frames, ``[]`` when the time ran out first, or
        ``None`` once the host hung up. ``spin``: a binding result is due, so poll
        first (``Spin``).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        start = time.perf_counter()
        answered, polled = (
            self.spin.poll_first(lambda: poller.poll(0), timeout) if spin else (None, 0.0)
        )
        # Readable already when the polling saw data: no second poll to be told so.
        readable = bool(answered)
        while True:
            if self.closed:
                return None
            if not readable and not poller.poll(_wait_ms(deadline)):
                if deadline is not None and time.monotonic() >= deadline:
                    if spin:
                        self.spin.ended(time.perf_counter() - start, polled, False)
                    return []
                continue
            readable = False
            try:
                ready = self._buffer.receive(self.sock, _recv_now, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                ready = None
            if ready is None:
                self.closed = True
                return None
            if ready:
                if spin:
                    self.spin.ended(time.perf_counter() - start, polled, True)
                return ready

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Register the bridge's reader with ``loop`` now, ahead of ``attach``.

        For a worker whose guests allow it (``EARLY_READER``, see ``_guest``), called
        before the run frame is read: the selector registration (an ``epoll_ctl`` through the
        seccomp filter, in a cold process) is then off the run's path. Nothing runs the
        loop until the guest has attached, so the reader cannot fire before; should it,
        result frames wait in ``_pending`` for ``attach``. Idempotent.
        """
        if self._listening is not None:
            return
        self._listening = loop
        if self._in_poll is None:
            self._in_poll = select.poll()
            self._in_poll.register(self.sock.fileno(), select.POLLIN)

        def readable() -> None:
            while True:
                try:
                    ready = self._buffer.receive(self.sock, _recv_now, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    ready = None
                if ready is None:
                    loop.remove_reader(self.sock.fileno())
                    self.closed = True
                    return
                self._deliver(ready)

        loop.add_reader(self.sock.fileno(), readable)

    def _deliver(self, payloads: list[Payload]) -> None:
        """Hand the result frames among ``payloads`` to ``attach``'s ``on_result`` (kept in
        ``_pending`` until there is one); each says whether the worker may poll next."""
        for payload in payloads:
            frame = self._decode(payload)
            if not isinstance(frame, ResultFrame):
                continue
            on_result = self._on_result
            if on_result is None:
                self._pending.append(frame)
                continue
            self.spin.allowed = frame.poll
            on_result(frame)

    def attach(
        self,
        loop: asyncio.AbstractEventLoop,
        on_result: Callable[[ResultFrame], None],
        waiting: Callable[[], bool] | None = None,
    ) -> None:
        """Deliver ``result`` frames to ``on_result`` from ``loop`` (``listen``, if the
        worker did not already).

        The socket stays blocking: the loop's reads and ``wait_now`` pass
        ``MSG_DONTWAIT``, and writes block until the kernel took them, as they always
        did (``send``). ``waiting``: whether a binding result is due, for a
        ``SpinningSelector`` loop to poll before it sleeps.
        """
        self._on_result = on_result
        selector = getattr(loop, "_selector", None)
        if isinstance(selector, SpinningSelector) and waiting is not None:
            selector.spin = self.spin
            selector.waiting = waiting
        for frame in self._pending:
            if isinstance(frame, ResultFrame):
                on_result(frame)
        self._pending.clear()
        self.listen(loop)

    def wait_now(self) -> None:
        """Block (polling first, ``Spin``) until at least one frame has been read, and
        hand its result frames to ``attach``'s ``on_result``, outside the event loop.

        For a guest that knows nothing else can happen in the worker until a result
        arrives (one call in flight, no timer, nothing ready in its loop): the loop
        would only select on this same socket and call the same ``on_result``, a few
        iterations and ~3 loop turns later. Sets ``closed`` when the host hung up.
        """
        poller = self._in_poll
        assert self._on_result is not None and poller is not None
        spin = self.spin
        start = time.perf_counter()
        polled = spin.poll_first(lambda: poller.poll(0), None)[1]
        while not self.closed:
            try:
                ready = self._buffer.receive(self.sock, _recv_now, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                poller.poll()
                continue
            except OSError:
                ready = None
            if ready is None:
                self.closed = True
                return
            if not ready:
                continue
            spin.ended(time.perf_counter() - start, polled, True)
            self._deliver(ready)
            return

    def linger(self, seconds: float = _LINGER_S) -> None:
        """After ``done``: block until the host hangs up (or kills us), at most ``seconds``.

        The host SIGKILLs a worker as soon as its run settles. Exiting on our own
        instead tears down the whole copied address space right away, and on a machine
        with few cores that teardown ran before the host was scheduled to read ``done``:
        measured, it added ~0.65 ms to every run. Blocked here, the worker yields the
        CPU to the host, and the kernel reclaims it after the host has its result.
        Whatever the host still sends is read and dropped.
        """
        if self.closed:
            return
        deadline = time.monotonic() + seconds
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        while True:
            wait_ms = math.ceil((deadline - time.monotonic()) * 1000)
            if wait_ms <= 0 or not poller.poll(wait_ms):
                return
            try:
                data = self.sock.recv(_RECV, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            if not data:
                return

    def _decode(self, payload: Payload) -> Any:
        try:
            return decode_frame(self._decoder, payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
