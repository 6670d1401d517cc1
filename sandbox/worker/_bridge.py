"""The worker side of the bridge: synchronous frame writes, loop-driven frame reads.

Writes are synchronous on purpose: a ``log`` frame is on the wire before ``print``
returns, so logs survive the supervisor killing the worker a moment later. Reads are
driven by the guest's asyncio loop (``attach``), which delivers ``result`` frames to
whatever the guest registered. Guest-agnostic: the Python guest and any other guest
(TypeScript) share it.
"""

from __future__ import annotations

import asyncio
import math
import select
import socket
import time
from collections.abc import Callable
from typing import Any

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

__all__ = ["WorkerBridge"]

_RECV = 256 * 1024


def _recv(sock: socket.socket) -> bytes:
    return sock.recv(_RECV)


def _recv_now(sock: socket.socket) -> bytes:
    return sock.recv(_RECV, socket.MSG_DONTWAIT)


# How long a finished worker waits for the host's kill before exiting by itself (the
# host kills at once; this only bounds a worker whose host stopped listening).
_LINGER_S = 10.0


class WorkerBridge:
    """Frames over the inherited bridge socket (see module docstring)."""

    def __init__(self, sock: socket.socket, max_frame_bytes: int) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self._buffer = FrameBuffer(max_frame_bytes)
        self._decoder = msgspec.json.Decoder(WorkerInbound)
        self._pending: list[Any] = []
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLOUT)
        self.closed = False

    def set_max_frame_bytes(self, max_frame_bytes: int) -> None:
        """Adopt the frame cap announced by the ``run`` frame."""
        self.max_frame_bytes = max_frame_bytes
        self._buffer._max = max_frame_bytes

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

    def wait_payloads(self, timeout: float | None) -> list[Payload] | None:
        """Block up to ``timeout`` seconds (``None``: no limit) for frames from the host.

        For guests that drive their own loop instead of ``attach`` (TypeScript). Returns
        the raw payloads of the complete frames, ``[]`` when the time ran out first, or
        ``None`` once the host hung up.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        while True:
            if self.closed:
                return None
            wait_ms = -1
            if deadline is not None:
                wait_ms = max(0, math.ceil((deadline - time.monotonic()) * 1000))
            if not poller.poll(wait_ms):
                if deadline is not None and time.monotonic() >= deadline:
                    return []
                continue
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
                return ready

    def attach(
        self, loop: asyncio.AbstractEventLoop, on_result: Callable[[ResultFrame], None]
    ) -> None:
        """Deliver ``result`` frames to ``on_result`` from ``loop``; switches to non-blocking."""
        self.sock.setblocking(False)
        for frame in self._pending:
            if isinstance(frame, ResultFrame):
                on_result(frame)
        self._pending.clear()

        def readable() -> None:
            while True:
                try:
                    ready = self._buffer.receive(self.sock, _recv)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    ready = None
                if ready is None:
                    loop.remove_reader(self.sock.fileno())
                    self.closed = True
                    return
                for payload in ready:
                    frame = self._decode(payload)
                    if isinstance(frame, ResultFrame):
                        on_result(frame)

        loop.add_reader(self.sock.fileno(), readable)

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
