"""The host side of one worker's bridge: capped frame reads, serialised frame writes.

Everything that arrives is treated as hostile: payloads that are not a well-formed
``call``/``log``/``done`` frame (bad JSON, unknown tag, wrong field types, a ``ready``
after start-up) and frames over the cap are dropped and counted in ``dropped``.

Reading is ``pump(on_frame)``: frames are handed to a synchronous callback as they are
decoded. On asyncio the socket stays registered with the loop for the whole run (one
readiness callback per burst instead of a register/unregister pair per read); other
backends use ``anyio.wait_readable``. Either way a burst is cut into slices so a
flooding worker cannot starve the supervisor's watchdog. Writes try the socket
directly when no other write is in progress and fall back to a lock otherwise, so a
frame is never interleaved with another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import msgspec

from ._frames import CallFrame, DoneFrame, LogFrame, ReadyFrame, decode_frame, encode_frame
from ._pool import Worker

__all__ = ["HostBridge", "HostFrame"]

HostFrame = CallFrame | LogFrame | DoneFrame

_RECV = 256 * 1024
_SLICE = 16  # reads per readiness callback / between checkpoints


class HostBridge:
    """Frames to and from one worker (see module docstring)."""

    def __init__(
        self,
        worker: Worker,
        frame_bytes: int,
        spawn: Callable[..., Any],
    ) -> None:
        self._worker = worker
        self._frame_bytes = frame_bytes
        self._spawn = spawn
        self._decoder = msgspec.json.Decoder(CallFrame | LogFrame | DoneFrame | ReadyFrame)
        self._outbox: list[bytes] = []
        self._tail = bytearray()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend (trio): write at once
            self._loop = None
        self._decode_failures = 0
        self.broken = False

    @property
    def dropped(self) -> int:
        """Frames dropped so far (malformed, unexpected or oversized)."""
        return self._decode_failures + self._worker.buffer.oversized

    def count_drop(self) -> None:
        """Count a frame the supervisor rejected after decoding (duplicate id, ...)."""
        self._decode_failures += 1

    def send(self, frame: msgspec.Struct) -> bool:
        """Queue one frame for the worker; False if it exceeds the frame cap.

        Frames queued in one event-loop iteration leave in one write at the start of
        the next (100 binding results settling together cost one syscall and one
        worker wake-up). Bytes the socket does not take at once wait in ``_tail`` for
        a writer task; frames are never reordered or interleaved.
        """
        data = encode_frame(frame)
        if len(data) - 4 > self._frame_bytes:
            return False
        if self.broken:
            return True
        self._outbox.append(data)
        if len(self._outbox) == 1:
            if self._loop is not None:
                self._loop.call_soon(self._flush)
            else:
                self._flush()
        return True

    def _flush(self) -> None:
        if not self._outbox:
            return
        data = b"".join(self._outbox)
        self._outbox.clear()
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

    def _drain(self, on_frame: Callable[[HostFrame], None]) -> bool:
        """Read up to one slice of data; False once the worker closed its end."""
        sock = self._worker.sock
        buffer = self._worker.buffer
        for _ in range(_SLICE):
            try:
                data = sock.recv(_RECV)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                data = b""
            if not data:
                return False
            for payload in buffer.feed(data):
                try:
                    frame = decode_frame(self._decoder, payload)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    self._decode_failures += 1
                    continue
                if isinstance(frame, ReadyFrame):
                    self._decode_failures += 1
                    continue
                on_frame(frame)
        return True

    async def pump(self, on_frame: Callable[[HostFrame], None]) -> None:
        """Hand every well-formed frame to ``on_frame``; return when the worker hangs up."""
        if self._loop is not None:
            await self._pump_asyncio(self._loop, on_frame)
            return
        sock = self._worker.sock
        while self._drain(on_frame):
            await anyio.wait_readable(sock)

    async def _pump_asyncio(
        self, loop: asyncio.AbstractEventLoop, on_frame: Callable[[HostFrame], None]
    ) -> None:
        fd = self._worker.sock.fileno()
        hung_up = anyio.Event()

        def readable() -> None:
            if not self._drain(on_frame):
                loop.remove_reader(fd)
                hung_up.set()

        if not self._drain(on_frame):
            return
        loop.add_reader(fd, readable)
        try:
            await hung_up.wait()
        finally:
            loop.remove_reader(fd)
