"""Host-side memory hygiene: socket reads that leave no holes in the C heap, and freed heap
given back to the system between runs.

A long-lived host runs thousands of short runs. Its Python objects stay flat, but its RSS
did not (~150-250 KB per 1,000 runs): ``sock.recv(n)`` allocates ``n`` bytes and shrinks
them to what arrived, and once glibc's adaptive mmap threshold has risen past ``n`` every
such buffer is carved from the heap and leaves a hole there; the holes and the heap's free
top stay resident. Reading into one reused scratch buffer and copying out what arrived
allocates exactly that much; ``malloc_trim`` every so many runs returns what is free.
"""

from __future__ import annotations

import ctypes
import socket
import threading
from collections.abc import Callable

__all__ = ["HeapTrimmer", "Scratch", "recv"]

#: The largest single read: a big frame arrives in pieces of at most this size.
RECV_BYTES = 256 * 1024


class Scratch:
    """A reused receive buffer: ``recv`` returns a fresh ``bytes`` of what arrived."""

    __slots__ = ("_buf", "_view")

    def __init__(self, size: int) -> None:
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)

    def recv(self, sock: socket.socket) -> bytes:
        """One ``recv`` on ``sock`` (its exceptions propagate); ``b""`` at end of stream."""
        n = sock.recv_into(self._buf)
        # A copy: the caller keeps it, the scratch is overwritten by the next read.
        return bytes(self._view[:n])


_local = threading.local()


def recv(sock: socket.socket) -> bytes:
    """Up to ``RECV_BYTES`` from ``sock`` through this thread's scratch buffer (one per
    thread: a host may run event loops in several)."""
    scratch: Scratch | None = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = Scratch(RECV_BYTES)
    return scratch.recv(sock)


def _load_trim() -> Callable[[int], int] | None:
    # glibc only (musl and others have no malloc_trim: nothing to do there).
    try:
        # The process's own symbols hold libc's: ``find_library`` would spawn
        # ``ldconfig -p`` (milliseconds of every cold start) to name the same library.
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


class HeapTrimmer:
    """Calls ``malloc_trim(0)`` once every ``every`` runs (a few tens of microseconds
    each, so well under a microsecond per run); a no-op where libc has none."""

    __slots__ = ("_every", "_left", "_trim", "trims")

    def __init__(self, every: int = 64) -> None:
        self._every = every
        self._left = every
        self._trim = _load_trim()
        #: How many trims ran (0 forever where libc has no ``malloc_trim``).
        self.trims = 0

    @property
    def available(self) -> bool:
        """Whether this libc can give freed heap back (glibc)."""
        return self._trim is not None

    def run_ended(self) -> None:
        """Count a run; trim when ``every`` runs ended since the last trim."""
        self._left -= 1
        if self._left > 0 or self._trim is None:
            return
        self._left = self._every
        self._trim(0)
        self.trims += 1
