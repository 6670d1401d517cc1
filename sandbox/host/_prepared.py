"""``PreparedCache``: programs' prepared forms, kept by the host between runs.

A worker spends most of a short run's time making the program runnable (the Python
guest's restricted compile: ~0.4 ms for ``return 1`` in a cold worker, ~3.5 ms for a
15-line class loop). Programs recur (a retried call, a template run with other tools'
results, a batch, a benchmark), so the host keeps what one worker made of a program and
hands it to the next worker that runs the same text, which then skips that work.

What is shared between runs is only that: a pure function of the program's text,
written by the worker *before any program code ran in it* (``PreparedFrame``), so no
program can plant something in it for a later run. The host accepts it only as a
run's first frame, only when it asked for it, and only within the size caps below; a
guest reads it back with its own checks (``marshal`` of a code object for Python).

Programs seen once cost nothing extra: a worker is asked to send the prepared form
only for a program the host has seen before (``lookup``'s ``ask``). Both tables are
bounded (entries and bytes), least recently used first out.
"""

from __future__ import annotations

from collections import OrderedDict

from ..worker._frames import MAX_PREPARED_BYTES

__all__ = ["PreparedCache"]

#: Programs longer than this are neither remembered nor cached.
MAX_PROGRAM_CHARS = 64 << 10
#: A prepared form larger than this is not kept (nor sent by a worker).
MAX_ENTRY_BYTES = MAX_PREPARED_BYTES


class PreparedCache:
    """Prepared forms by program text (one cache per runtime: one guest, one policy)."""

    def __init__(self, *, max_entries: int = 128, max_bytes: int = 8 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.stored = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes held: the prepared forms and the remembered programs' text."""
        return self._bytes

    def lookup(self, program: str) -> tuple[bytes, bool]:
        """``(prepared, ask)``: the cached form (``b""`` when none) and whether to ask
        this run's worker for it (a program seen before, not cached yet)."""
        if len(program) > MAX_PROGRAM_CHARS:
            return b"", False
        data = self._entries.get(program)
        if data is not None:
            self._entries.move_to_end(program)
            self.hits += 1
            return data, False
        if program in self._seen:
            return b"", True
        self._seen[program] = None
        self._bytes += len(program)
        self._trim()
        return b"", False

    def store(self, program: str, data: bytes) -> bool:
        """Keep ``data`` as ``program``'s prepared form; False if it is not kept."""
        if len(program) > MAX_PROGRAM_CHARS or not data or len(data) > MAX_ENTRY_BYTES:
            return False
        if program in self._entries:
            return False  # two runs of it raced: the first one's stays
        if self._seen.pop(program, 0) is None:
            self._bytes -= len(program)
        self._entries[program] = data
        self._bytes += len(program) + len(data)
        self.stored += 1
        self._trim()
        return program in self._entries

    def clear(self) -> None:
        """Forget everything. The runtime never needs to: a replaced fork server runs
        the same installed guest, so what its workers compile is the same."""
        self._entries.clear()
        self._seen.clear()
        self._bytes = 0

    def _trim(self) -> None:
        while self._seen and (
            len(self._seen) > self.max_entries * 4 or self._bytes > self.max_bytes
        ):
            program, _ = self._seen.popitem(last=False)
            self._bytes -= len(program)
        while self._entries and (
            len(self._entries) > self.max_entries or self._bytes > self.max_bytes
        ):
            program, data = self._entries.popitem(last=False)
            self._bytes -= len(program) + len(data)
