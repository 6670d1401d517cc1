"""Learned pre-faulting (``host/_prefault``, ``worker/_main.populate``): which pages runs
write is read from real processes' pagemaps, and the spares of a runtime that learns it
take those copy-on-write faults while idle, not during the next run."""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from sandbox_helpers import make_runner, ok

from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.sandbox.host._pool import asleep
from codemode.sandbox.host._prefault import (
    LEARN_RUNS,
    MAX_PAGES,
    PrefaultLearner,
    private_pages,
    to_ranges,
)
from codemode.sandbox.worker._main import MAX_POPULATE_PAGES, populate

PAGE = os.sysconf("SC_PAGE_SIZE")


def _pagemap_readable() -> bool:
    return private_pages(os.getpid()) is not None


def _child(setup: Callable[[], object]) -> int:
    """A forked child that runs ``setup`` (keeping what it returns) and then waits, to be
    inspected, until the caller kills it (``_end``)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:  # a child: whatever happens, it never returns into the tests
            kept = setup()  # noqa: F841 - held until the process is killed
            os.write(write, b"x")
            signal.pause()
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"x"
    except BaseException:
        _end(pid)
        raise
    finally:
        os.close(read)
    return pid


def _child_writing(region: mmap.mmap, pages: range) -> int:
    """A forked child that writes ``pages`` of the shared-then-copied ``region`` and then
    waits to be inspected (killed by the caller)."""

    def write() -> None:
        for page in pages:
            region[page * PAGE] = 1

    return _child(write)


def _end(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _address(region: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(region))


def _learned_from(
    writes: tuple[range, ...], spare_writes: range | None = None, max_pages: int = MAX_PAGES
) -> tuple[set[int], int, int]:
    """What a learner keeps of ``region``'s 16 pages when each of ``writes`` is one
    finished run's writes (and ``spare_writes`` a settled spare's): the learned page
    addresses inside the region, the region's base address, and the pages learned in
    all (the children's other writes, their stacks say, count too)."""
    region = mmap.mmap(-1, 16 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.write(b"\1" * len(region))
    base = _address(region)
    learner = PrefaultLearner(max_pages=max_pages)
    spare = _child_writing(region, spare_writes or range(0))
    runs = [_child_writing(region, pages) for pages in writes]
    try:
        for pid in runs:
            assert learner.learning
            learner.learn(pid)
        # Nothing is concluded before a spare was seen, however many runs were.
        assert not learner.learning and learner.needs_baseline and learner.take() is None
        learner.baseline(spare)
    finally:
        for pid in (*runs, spare):
            _end(pid)
    assert not learner.learning and not learner.needs_baseline
    assert learner.take() == learner.ranges and learner.take() is None  # sent once
    learned = {start + i * PAGE for start, count in learner.ranges for i in range(count)}
    region.close()
    return learned & {base + page * PAGE for page in range(16)}, base, len(learned)


def test_ranges_merge_adjacent_pages_and_respect_the_limit() -> None:
    pages = {0x10000, 0x10000 + PAGE, 0x10000 + 2 * PAGE, 0x40000, 0x40000 + PAGE}
    assert to_ranges(pages) == [(0x10000, 3), (0x40000, 2)]
    assert to_ranges(pages, limit=4) == [(0x10000, 3), (0x40000, 1)]
    assert to_ranges(set()) == []


@pytest.mark.skipif(not _pagemap_readable(), reason="no readable /proc/self/pagemap here")
def test_the_learner_keeps_the_pages_every_learned_run_wrote() -> None:
    # A private mapping written in the parent is shared with a fork until the child
    # writes it: the pages each child copied are what the learner reads.
    assert LEARN_RUNS == 2
    learned, base, _ = _learned_from((range(0, 8), range(4, 12)))
    # Pages 4-7 were written by both runs; 0-3 and 8-11 by one each; 12-15 by neither.
    assert learned == {base + page * PAGE for page in range(4, 8)}


@pytest.mark.skipif(not _pagemap_readable(), reason="no readable /proc/self/pagemap here")
def test_what_a_ready_spare_already_has_private_is_not_sent() -> None:
    # A spare's own pre-fault wrote 5-6: of the runs' common 4-7, those are left out.
    learned, base, _ = _learned_from((range(0, 8), range(4, 12)), spare_writes=range(5, 7))
    assert learned == {base + 4 * PAGE, base + 7 * PAGE}


@pytest.mark.skipif(not _pagemap_readable(), reason="no readable /proc/self/pagemap here")
def test_a_learner_sends_at_most_its_own_cap() -> None:
    # Pages 2-9 were written by both runs (and more elsewhere): a learner capped at 3
    # pages sends 3, none the runs did not both write.
    learned, base, total = _learned_from((range(0, 10), range(2, 12)), max_pages=3)
    assert total == 3
    assert learned <= {base + page * PAGE for page in range(2, 10)}


def test_at_most_max_pages_are_sent() -> None:
    pages = {0x100000 + i * PAGE for i in range(MAX_PAGES + 500)}
    assert sum(count for _, count in to_ranges(pages)) == MAX_PAGES


def test_a_learner_that_cannot_read_a_pagemap_stops_learning() -> None:
    learner = PrefaultLearner()
    learner.learn(2**22 + 7)  # no such process
    assert not learner.learning and learner.ranges == [] and learner.take() is None
    assert not learner.needs_baseline
    spare_first = PrefaultLearner()
    spare_first.baseline(2**22 + 7)
    assert not spare_first.learning and not spare_first.needs_baseline


def test_populate_faults_in_writable_ranges_and_skips_what_is_not_mapped() -> None:
    region = mmap.mmap(-1, 8 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = _address(region)
    if _pagemap_readable():
        assert not {base + i * PAGE for i in range(8)} & private_pages(os.getpid())  # type: ignore[operator]
    # Address 0 is never mapped: refused by the kernel, skipped, no crash.
    assert populate([(0, 4), (base, 8), (base + 1, 1)]) == 8
    if _pagemap_readable():
        assert {base + i * PAGE for i in range(8)} <= private_pages(os.getpid())  # type: ignore[operator]
    assert region[: 8 * PAGE] == bytes(8 * PAGE)  # populated, not changed
    assert populate([(base, MAX_POPULATE_PAGES + 8)]) <= MAX_POPULATE_PAGES
    region.close()


def _minor_faults(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[7])
    except (OSError, ValueError, IndexError):
        return None


async def _faults_of_a_warm_run(runtime: TypeScriptRuntime | PythonRuntime) -> int:
    """The minor faults the worker of one warm ``return 1`` run took, from its ready
    state to the end of its run (read before the pool kills it)."""
    pool = runtime._pool
    assert pool is not None
    run = make_runner(runtime)
    with anyio.fail_after(30):
        await runtime.wait_ready()
        # Past the spares' own pre-fault: asleep, waiting for a run frame (a fixed pause
        # was not always enough with other tests' processes on both cores).
        while not all(asleep(pid) for pid in runtime.processes().idle_pids):  # noqa: ASYNC110
            await anyio.sleep(0.01)  # (a state of another process: no event to wait on)
    before = {pid: _minor_faults(pid) for pid in runtime.processes().idle_pids}
    seen: list[int] = []
    release = pool.release

    def reading(worker: Any, finished: bool = False) -> None:
        start, now = before.get(worker.pid), _minor_faults(worker.pid)
        if start is not None and now is not None:
            seen.append(now - start)
        release(worker, finished)

    pool.release = reading  # type: ignore[method-assign]
    try:
        assert ok(await run("return 1")) == 1
        for _ in range(100):  # the release comes on the loop's next turn
            if seen:
                break
            await anyio.sleep(0.01)
    finally:
        pool.release = release  # type: ignore[method-assign]
    assert len(seen) == 1, seen
    return seen[0]


@pytest.mark.anyio
@pytest.mark.skipif(not _pagemap_readable(), reason="no readable /proc/self/pagemap here")
@pytest.mark.parametrize("runtime", [PythonRuntime, TypeScriptRuntime])
async def test_spares_take_the_learned_faults_before_their_run(
    runtime: type[PythonRuntime | TypeScriptRuntime],
) -> None:
    async with runtime(Limits(pool_size=1)) as rt:
        server = rt._pool._server  # type: ignore[union-attr]
        assert server is not None
        # The spares forked from the request that carried the learned ranges on (the
        # server keeps them for every later fork).
        with_ranges: set[int] = set()
        fork = server.fork

        sent: list[bool] = []

        async def forking(max_frame_bytes: int, prefault: Any = None) -> Any:
            if prefault:
                sent.append(True)
            carried = bool(sent)  # decided at the request, not when its answer comes
            pid, sock = await fork(max_frame_bytes, prefault)
            if carried:
                with_ranges.add(pid)
            return pid, sock

        server.fork = forking  # type: ignore[method-assign]
        learner = server.learner
        assert learner is not None
        # The first spare, idle and past its own pre-fault, is read as the baseline (the
        # back-to-back runs below leave their spares no idle moment for it).
        with anyio.fail_after(30):
            while learner.needs_baseline:  # noqa: ASYNC110 - read by the pool's own poll
                await anyio.sleep(0.01)
        unlearned = await _faults_of_a_warm_run(rt)
        run = make_runner(rt)
        for _ in range(LEARN_RUNS):
            assert ok(await run("return 1")) == 1
        await anyio.lowlevel.checkpoint()  # the deferred release, which learns
        assert not learner.learning and learner.ranges
        # Each learned page is one of every spare's private memory: the runtime's cap.
        assert sum(count for _, count in learner.ranges) <= runtime._prefault_pages
        # Spares forked before the ranges were learned are used up first (how many there
        # are depends on when refills started, so on the machine's load).
        for _ in range(5):
            with anyio.fail_after(30):
                await rt.wait_ready()
            if set(rt.processes().idle_pids) <= with_ranges:
                break
            assert ok(await run("return 1")) == 1
        assert set(rt.processes().idle_pids) <= with_ranges
        # The mechanism, read off a spare before its run: every learned page is already
        # its own (present, exclusively mapped).
        with anyio.fail_after(30):
            await rt.wait_ready()
            while not all(asleep(pid) for pid in rt.processes().idle_pids):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        spare = rt.processes().idle_pids[0]
        pages = {start + i * PAGE for start, count in learner.ranges for i in range(count)}
        assert pages <= (private_pages(spare) or set())
        learned = await _faults_of_a_warm_run(rt)
    # Measured here: TypeScript 92-148 faults before, 3-10 after; Python 54-67 and 15-31
    # (its cap, 48 pages, leaves some; a run also reads file pages a fork does not map).
    # In about one TypeScript fork server in six, the runs of that server do not write
    # the same heap pages each time: the two learning runs share ~95 pages (not ~136) and
    # a later run still takes 27-63 of its 80-114 faults. So the effect is asserted as a
    # reduction there, and the mechanism above page by page.
    if runtime is TypeScriptRuntime:
        assert learned < unlearned, (learned, unlearned)
    else:
        assert learned < unlearned * 3 / 4, (learned, unlearned)


def test_python_spares_learn_fewer_pages_than_typescript_ones() -> None:
    # A Python spare is within ~0.2 MB of its 3.5 MB private-memory target: its cap keeps
    # what it learns to 48 pages, QuickJS's spares (~2.9 MB) take up to MAX_PAGES.
    assert PythonRuntime._prefault_pages == 48
    assert TypeScriptRuntime._prefault_pages == MAX_PAGES


def test_a_process_with_too_many_mappings_is_not_read() -> None:
    # A program that maps thousands of regions must not make the host parse them all:
    # the learner gives up on it (and learns nothing from that server).
    import codemode.sandbox.host._prefault as prefault

    def many_mappings() -> object:
        # Alternating protections: adjacent mappings that differ never merge into one.
        return [
            mmap.mmap(
                -1,
                PAGE,
                flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                prot=mmap.PROT_READ | (mmap.PROT_WRITE if i % 2 else 0),
            )
            for i in range(prefault._MAX_MAPPINGS + 100)
        ]

    pid = _child(many_mappings)
    try:
        assert private_pages(pid) is None
        learner = PrefaultLearner()
        learner.learn(pid)
        assert not learner.learning and learner.take() is None
    finally:
        _end(pid)


def test_a_process_with_too_many_writable_pages_is_not_read() -> None:
    # Five writable mappings of 250 MiB each (never touched, so nothing is used), kept
    # apart by a read-only last page each (adjacent ones would merge into one mapping,
    # which is skipped whole as too big): 1.2 GiB to scan, over the 1 GiB the learner
    # reads.
    import codemode.sandbox.host._prefault as prefault

    size = 250 << 20

    def big_mappings() -> object:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        keep = []
        for _ in range(5):
            region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            assert libc.mprotect(_address(region) + size - PAGE, PAGE, mmap.PROT_READ) == 0
            keep.append(region)
        return keep

    pid = _child(big_mappings)
    try:
        assert 5 * size // PAGE > prefault._MAX_SCANNED_PAGES
        assert private_pages(pid) is None
    finally:
        _end(pid)


@pytest.mark.skipif(not _pagemap_readable(), reason="no readable /proc/self/pagemap here")
def test_reading_a_pagemap_does_not_take_a_megabyte_at_its_peak() -> None:
    # The host reads workers' pagemaps during other runs: a megabyte buffered up front
    # for the maps file showed in the peak of a run measured meanwhile. A small fresh
    # interpreter stands for a worker (a fork of this test process has its large heap).
    import subprocess
    import sys
    import tracemalloc

    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", "import os, signal; os.write(1, b'x'); signal.pause()"],
        stdout=subprocess.PIPE,
    )
    pid = child.pid
    try:
        assert child.stdout is not None and child.stdout.read(1) == b"x"
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            assert private_pages(pid) is not None
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert peak < 512 * 1024, peak
