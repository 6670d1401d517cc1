"""Host-side memory hygiene (``sandbox/host/_memory``): reads through a reused scratch
buffer hand out independent bytes, and the pool gives freed C heap back every so many
runs."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from sandbox_helpers import make_runner, ok

from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.host import _memory

pytestmark = pytest.mark.anyio


def test_reads_through_the_scratch_are_independent_copies() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"first")
        first = _memory.recv(b)
        a.sendall(b"2nd")
        second = _memory.recv(b)
        # The scratch was overwritten by the second read; the first result was not.
        assert (first, second) == (b"first", b"2nd")
        assert type(first) is bytes
        a.close()
        assert _memory.recv(b) == b""


def test_each_thread_reads_through_its_own_scratch() -> None:
    scratches: list[object] = []

    def read_once() -> None:
        a, b = socket.socketpair()
        with a, b:
            a.sendall(b"x")
            assert _memory.recv(b) == b"x"
            scratches.append(_memory._local.scratch)

    threads = [threading.Thread(target=read_once) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(s) for s in scratches}) == 2


def test_a_large_message_arrives_whole_in_pieces() -> None:
    a, b = socket.socketpair()
    payload = bytes(range(256)) * 4096  # 1 MiB, more than one read
    received = bytearray()
    with a, b:

        def send() -> None:
            a.sendall(payload)
            a.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send)
        sender.start()
        while chunk := _memory.recv(b):
            assert len(chunk) <= _memory.RECV_BYTES
            received += chunk
        sender.join()
    assert received == payload


def test_the_trimmer_trims_once_every_n_runs() -> None:
    trimmer = _memory.HeapTrimmer(every=3)
    if not trimmer.available:
        pytest.fail("this test host's libc is glibc: malloc_trim must be found")
    for _ in range(7):
        trimmer.run_ended()
    assert trimmer.trims == 2


async def test_the_pool_trims_the_heap_as_runs_end() -> None:
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        trimmer = rt._pool.trimmer
        every = trimmer._every
        for i in range(every):
            with anyio.fail_after(30):
                assert ok(await run(f"return {i}")) == i
        # A completed run's worker is released on the loop's turn after its result
        # returns (the kill is off the result's path).
        await anyio.lowlevel.checkpoint()
        assert trimmer.trims == 1


@pytest.mark.parametrize("text", ["x" * 5_000_000, "é€" * 1_000_000])
async def test_a_big_argument_arrives_with_the_size_and_digest_of_its_json(
    runtime: PythonRuntime, text: str
) -> None:
    # Over 4 MiB: decoded in a thread straight from the frame's buffer, and hashed
    # meanwhile in another: what the session log's retention bound reads, without
    # encoding the value again.
    seen: list[Any] = []

    async def take(args: Any) -> Any:
        seen.append(args)
        return len(args["blob"])

    program = f"return await tools.take({{'blob': {text!r}, 'n': [1, 2]}})"
    assert ok(await make_runner(runtime)(program, tools={"take": take})) == len(text)
    (args,) = seen
    body = json.dumps({"blob": text, "n": [1, 2]}, separators=(",", ":"), ensure_ascii=False)
    data = body.encode()
    assert args._digest == (len(data), hashlib.sha256(data).hexdigest(), data[:4096])
    assert args == {"blob": text, "n": [1, 2]}


@pytest.mark.parametrize(
    ("value", "in_thread"),
    [
        # A few big scalars up to 4 MiB decode at about memcpy speed: on the loop.
        ("'x' * 1_000_000", False),
        ("['é' * 500_000, 'y' * 1_000_000, 7]", False),
        # Bigger, or many members (a decode msgspec cannot cut short): in a thread.
        ("'x' * 5_000_000", True),
        ("list(range(30_000))", True),
    ],
)
async def test_big_payloads_of_few_members_are_decoded_on_the_loop(
    value: str, in_thread: bool
) -> None:
    seen: list[Any] = []

    async def take(args: Any) -> Any:
        seen.append(args["v"])
        return 1

    limits = Limits(max_compute_ms=10_000, max_wall_ms=30_000, pool_size=1)
    async with PythonRuntime(limits) as rt:
        program = f"v = {value}\nreturn [await tools.take({{'v': v}}), v]"
        got = ok(await make_runner(rt)(program, tools={"take": take}))
        assert got == [1, seen[0]]
        # The call frame, and the done frame echoing the value.
        assert rt.stats.thread_decodes == (2 if in_thread else 0)


def test_heavy_decodes_run_with_short_gil_slices_and_restore_the_interval() -> None:
    from codemode.sandbox.host._bridge import _ShortSlices

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        _ShortSlices.enter()
        _ShortSlices.enter()  # two decodes at once
        assert sys.getswitchinterval() == pytest.approx(_ShortSlices.INTERVAL_S)
        _ShortSlices.exit()
        assert sys.getswitchinterval() == pytest.approx(_ShortSlices.INTERVAL_S)
        _ShortSlices.exit()
        assert sys.getswitchinterval() == pytest.approx(0.005)
        # An interval changed by someone else meanwhile is theirs: left as they set it.
        _ShortSlices.enter()
        sys.setswitchinterval(0.002)
        _ShortSlices.exit()
        assert sys.getswitchinterval() == pytest.approx(0.002)
        # One already shorter is not lengthened, nor touched on the way out.
        sys.setswitchinterval(0.0005)
        _ShortSlices.enter()
        assert sys.getswitchinterval() == pytest.approx(0.0005)
        _ShortSlices.exit()
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)


async def test_a_heavy_decode_leaves_the_switch_interval_as_it_found_it() -> None:
    before = sys.getswitchinterval()

    async def take(args: Any) -> Any:
        # Called on the loop after the decode thread ended.
        return sys.getswitchinterval()

    limits = Limits(max_compute_ms=10_000, max_wall_ms=30_000, pool_size=1)
    async with PythonRuntime(limits) as rt:
        program = "return await tools.take({'v': list(range(30_000))})"
        assert ok(await make_runner(rt)(program, tools={"take": take})) == pytest.approx(before)
        assert rt.stats.thread_decodes == 1
    assert sys.getswitchinterval() == pytest.approx(before)
