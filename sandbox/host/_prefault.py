"""Learning which pages a run writes, so later workers copy them before their run.

A worker is a fork of its fork server and shares every page with it; the first write to
a shared page copies it (a copy-on-write fault, ~3 µs here). ``Guest.prefault`` takes
most of them while the worker idles by running a small program, but a real run also
writes pages that program never reaches (the prepared run's objects, QuickJS's heap of
the prepared context): 45-150 faults, a tenth to a third of a warm start.

``PrefaultLearner`` reads, after the first few runs that ended normally, which pages
of the finished worker are private (``/proc/PID/pagemap``: present and exclusively
mapped) in its private writable mappings, keeps the pages every such run had, and
hands them, as ranges, to the fork server, whose later workers fault them in while
idle (``worker._main.populate``). What one program alone wrote is not kept (the
intersection), and pages a spare already has private (read off one once, after it
idled long enough to have finished its own pre-fault) are left out: a spare's private
memory grows by what every run writes and nothing else, at most ``MAX_PAGES`` (or a
runtime's lower cap, ``max_pages``: each page learned is a page of every spare's
private memory).

The layout is the fork server's, so what is learned holds for that server only: a new
server starts learning again. Where the pagemap cannot be read (another user's worker
without ``CAP_SYS_PTRACE``, no ``/proc``), nothing is learned and workers start as before.
"""

from __future__ import annotations

import logging
import os
import struct

__all__ = ["PrefaultLearner", "private_pages", "to_ranges"]

_log = logging.getLogger("sandbox")

_PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT = 1 << 63
_EXCLUSIVE = 1 << 56
#: Runs learned from (their pages intersected) before the ranges are sent.
LEARN_RUNS = 2
#: Mappings larger than this are not scanned (a run's big buffers, not its machinery).
_MAX_MAPPING_PAGES = 1 << 16
#: A worker with more mappings than this (a few hundred is usual) is not read at all:
#: a program that made tens of thousands must not make the host's loop parse them.
_MAX_MAPPINGS = 4096
#: ... nor a maps file longer than this, nor more writable pages than this (1 GiB,
#: 2 MiB of pagemap entries) in all.
_MAX_MAPS_BYTES = 1 << 20
_MAX_SCANNED_PAGES = 1 << 18
#: At most this many pages (4 MiB) are handed on (the worker caps what it populates
#: too): the first runs of a server are whatever programs came first, and a program
#: that wrote all of the server's writable pages must not make every later spare
#: populate all of them.
MAX_PAGES = 1024


def private_pages(pid: int) -> set[int] | None:
    """The addresses of ``pid``'s present, exclusively mapped pages in its private
    writable mappings (``[vvar]``/``[vdso]``/``[vsyscall]`` aside); None when they
    cannot be read, or the process has more mappings than a worker should have."""
    pages: set[int] = set()
    scanned = 0
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
            # Line by line, not one read of the cap: ``read(n)`` allocates its n bytes up
            # front, a megabyte of host memory at the peak of whatever run is going on.
            lines: list[bytes] = []
            size = 0
            for line in maps:
                size += len(line)
                if size > _MAX_MAPS_BYTES or len(lines) >= _MAX_MAPPINGS:
                    return None
                lines.append(line)
            for line in lines:
                fields = line.split()
                perms = fields[1]
                if perms[1:2] != b"w" or perms[3:4] != b"p":
                    continue
                if len(fields) > 5 and fields[5].startswith(b"[v"):
                    continue
                low, high = (int(x, 16) for x in fields[0].split(b"-"))
                count = (high - low) // _PAGE
                if count > _MAX_MAPPING_PAGES:
                    continue
                scanned += count
                if scanned > _MAX_SCANNED_PAGES:
                    return None
                pm.seek(low // _PAGE * 8)
                entries = pm.read(count * 8)
                for i, entry in enumerate(struct.unpack(f"<{len(entries) // 8}Q", entries)):
                    if entry & _PRESENT and entry & _EXCLUSIVE:
                        pages.add(low + i * _PAGE)
    except (OSError, ValueError, IndexError, struct.error):
        return None
    return pages


def to_ranges(pages: set[int], limit: int = MAX_PAGES) -> list[tuple[int, int]]:
    """``pages`` as sorted (start, page count) runs of adjacent pages, at most
    ``limit`` pages in all."""
    ranges: list[tuple[int, int]] = []
    total = 0
    for address in sorted(pages):
        if total >= limit:
            break
        if ranges and ranges[-1][0] + ranges[-1][1] * _PAGE == address:
            ranges[-1] = (ranges[-1][0], ranges[-1][1] + 1)
        else:
            ranges.append((address, 1))
        total += 1
    return ranges


class PrefaultLearner:
    """What one fork server's workers should fault in; see the module docstring."""

    __slots__ = ("_baseline", "_common", "_done", "_max_pages", "_runs", "_sent", "asked", "ranges")

    def __init__(self, *, max_pages: int = MAX_PAGES) -> None:
        self._max_pages = min(max_pages, MAX_PAGES)
        self._common: set[int] | None = None
        # What a settled spare has private (before any populate): never sent.
        self._baseline: set[int] | None = None
        self._runs = 0
        self._done = False
        self._sent = False
        #: A spare's ``baseline`` read is on its way (``WorkerPool``): one is enough.
        self.asked = False
        #: The learned ranges, once ``LEARN_RUNS`` runs and a spare were seen (else empty).
        self.ranges: list[tuple[int, int]] = []

    @property
    def learning(self) -> bool:
        """Whether finished workers should still be shown to ``learn``."""
        return self._runs < LEARN_RUNS and not self._done

    @property
    def needs_baseline(self) -> bool:
        """Whether a settled spare should still be shown to ``baseline``."""
        return self._baseline is None and not self._done

    def learn(self, pid: int) -> None:
        """Take in the private pages of ``pid``, a worker whose run ended normally and
        that has not been killed yet."""
        if not self.learning:
            return
        pages = self._read(pid)
        if pages is None:
            return
        self._common = pages if self._common is None else self._common & pages
        self._runs += 1
        self._conclude()

    def baseline(self, spare: int) -> None:
        """Take in what ``spare`` has private: a ready worker of the same server, idle
        long enough to have finished its own pre-fault, that no learned ranges reached
        (those pages are never sent: every spare writes them anyway)."""
        if not self.needs_baseline:
            return
        pages = self._read(spare)
        if pages is None:
            return
        self._baseline = pages
        self._conclude()

    def _read(self, pid: int) -> set[int] | None:
        """``private_pages(pid)``; when they cannot be read, stop learning for good (the
        next worker's will not be readable either) and return None."""
        pages = private_pages(pid)
        if pages is None:
            _log.debug("sandbox: cannot read worker %d's pagemap; no pre-fault learned", pid)
            self._done = True
            self._common = self._baseline = None
        return pages

    def _conclude(self) -> None:
        if self._runs < LEARN_RUNS or self._common is None or self._baseline is None:
            return
        # The lowest addresses first when over the cap (no page is known to be hotter).
        self.ranges = to_ranges(self._common - self._baseline, self._max_pages)
        self._done = True
        self._common = self._baseline = None

    def take(self) -> list[tuple[int, int]] | None:
        """The ranges to send with the next fork request: once, when learned."""
        if self._sent or not self.ranges:
            return None
        self._sent = True
        return self.ranges
