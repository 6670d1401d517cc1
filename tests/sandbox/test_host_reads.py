"""The host's reads and writes on a worker's socket per sub-call: a short read ends the
drain (no read only to get ``EAGAIN``), and the one result a worker waits for leaves at
once instead of at the end of the loop iteration."""

from __future__ import annotations

import asyncio
import select
import socket
from typing import Any

import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.host import _memory
from codemode.sandbox.host._bridge import HostBridge
from codemode.sandbox.host._forkserver_client import ExitBox
from codemode.sandbox.host._pool import Worker
from codemode.sandbox.worker._frames import FrameBuffer, ResultFrame, encode_frame


def test_a_read_that_got_less_than_it_asked_for_is_short() -> None:
    a, b = socket.socketpair()
    try:
        buffer = FrameBuffer(1 << 20)
        buffer.read_size = 64
        frame = bytes(encode_frame(ResultFrame(id=1, ok=True, value="x")))
        b.send(frame)
        assert len(buffer.receive(a, lambda s: s.recv(64)) or []) == 1
        assert buffer.short
        b.send(b"\x00" * 64)  # exactly what one read asks for: more may be waiting
        buffer.receive(a, lambda s: s.recv(64))
        assert not buffer.short
        unknown = FrameBuffer(1 << 20)  # read_size 0: never known to be short
        b.send(frame)
        unknown.receive(a, lambda s: s.recv(64))
        assert not unknown.short
    finally:
        a.close()
        b.close()


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


@pytest.mark.anyio
async def test_the_one_awaited_result_leaves_before_the_loop_turns() -> None:
    host, worker = socket.socketpair()
    host.setblocking(False)
    try:
        bridge = HostBridge(Worker(0, host, ExitBox(), 1 << 20), 1 << 20, lambda *a: None)
        assert bridge.send(ResultFrame(id=1, ok=True, value=1))
        assert not _readable(worker)  # batched: leaves at the end of the iteration
        await asyncio.sleep(0)
        assert _readable(worker)
        worker.recv(1 << 16)
        assert bridge.send(ResultFrame(id=2, ok=True, value=2), now=True)
        assert _readable(worker)  # at once
        await asyncio.sleep(0)  # the scheduled poll finds nothing more to write
        data = worker.recv(1 << 16)
        assert data == bytes(encode_frame(ResultFrame(id=2, ok=True, value=2)))
    finally:
        host.close()
        worker.close()


@pytest.mark.anyio
async def test_a_sequential_call_costs_one_host_read(monkeypatch: Any) -> None:
    reads = {"data": 0, "empty": 0}
    real = _memory.recv

    def counting(sock: socket.socket) -> bytes:
        try:
            data = real(sock)
        except BlockingIOError:
            reads["empty"] += 1
            raise
        reads["data"] += 1
        return data

    monkeypatch.setattr(_memory, "recv", counting)
    calls = 200

    async def echo(args: Any) -> Any:
        return args

    async with PythonRuntime(Limits(pool_size=1)) as runtime:
        program = f"for i in range({calls}):\n    await tools.echo({{'i': i}})\nreturn 1"
        result = await runtime.run(
            CodeRunRequest(
                program=program,
                bindings=bindings({"echo": echo}),
                signal=AbortController().signal,
            )
        )
    assert ok(result) == 1
    assert reads["data"] >= calls
    # Before: every drain read once more to find the socket empty (one per call).
    assert reads["empty"] <= calls // 10
