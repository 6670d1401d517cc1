"""The Python guest's direct exchange: a tool call awaited while nothing else in the
worker can run is sent and answered off the event loop (``_Run.caller``'s ``now``,
``WorkerBridge.wait_now``); anything else (a gather, a task, a timer, a ready callback)
goes through the loop as before.

The guest runs in this process against a host thread on a socketpair (the real
``_Run``, bridge, selector and frames), so the loop's selector can be counted.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from typing import Any

import anyio
import msgspec
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.python import _guest
from codemode.sandbox.worker._bridge import SpinningSelector, WorkerBridge
from codemode.sandbox.worker._frames import (
    BindingSpec,
    ErrorClassSpec,
    FrameBuffer,
    ResultFrame,
    RunFrame,
    encode_frame,
)


class _CountingSelector(SpinningSelector):
    def __init__(self) -> None:
        super().__init__()
        self.blocking_selects = 0

    def select(self, timeout: float | None = None) -> Any:
        if timeout is None or timeout > 0:
            self.blocking_selects += 1
        return super().select(timeout)


class _CountingBridge(WorkerBridge):
    def __init__(self, sock: socket.socket, max_frame_bytes: int) -> None:
        super().__init__(sock, max_frame_bytes)
        self.direct_waits = 0
        self.frames_per_write: list[int] = []

    def send_raw(self, data: bytes | bytearray) -> None:
        frames, view = 0, memoryview(data)
        while view:
            frames += 1
            view = view[4 + int.from_bytes(view[:4], "big") :]
        self.frames_per_write.append(frames)
        super().send_raw(data)

    def wait_now(self) -> None:
        self.direct_waits += 1
        super().wait_now()


def _host(sock: socket.socket, seen: list[dict[str, Any]], done: list[Any]) -> None:
    """Answer every call with its arguments (``fail`` fails), until ``done``."""
    buffer = FrameBuffer(1 << 20)
    decoder = msgspec.json.Decoder()
    while True:
        frames = buffer.receive(sock, lambda s: s.recv(1 << 16))
        if frames is None:
            return
        out = bytearray()
        for payload in frames:
            frame = decoder.decode(bytes(payload))
            if frame["type"] == "call":
                seen.append(frame)
                if frame["name"] == "fail":
                    reply = ResultFrame(id=frame["id"], ok=False, message="nope", code="E1")
                else:
                    reply = ResultFrame(id=frame["id"], ok=True, value=frame["args"])
                out += encode_frame(reply)
            elif frame["type"] == "done":
                done.append(frame)
                return
        if out:
            sock.sendall(out)


def _run(
    program: str, writes: list[int] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], int, int]:
    """Run ``program`` in an in-process guest: its done frame, the calls the host saw, how
    many times the loop waited in its selector and how many direct waits there were
    (``writes``, when given, gets the number of frames of each write the worker made)."""
    worker, host = socket.socketpair()
    seen: list[dict[str, Any]] = []
    done: list[Any] = []
    thread = threading.Thread(target=_host, args=(host, seen, done), daemon=True)
    thread.start()
    selector = _CountingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        frame = RunFrame(
            guest="python",
            program=program,
            bindings=[
                BindingSpec(
                    global_name="tools",
                    names=["echo", "fail"],
                    error_class=ErrorClassSpec(
                        name="ToolCallError", member_name_property="toolName"
                    ),
                )
            ],
            max_output_bytes=1 << 20,
            max_frame_bytes=1 << 20,
            max_sub_calls=10_000,
        )
        _guest._process_settings()
        bridge = _CountingBridge(worker, 1 << 20)
        _guest._Run(frame, bridge, loop).execute()
        thread.join(10)
        if writes is not None:
            writes += bridge.frames_per_write
    finally:
        loop.close()
        worker.close()
        host.close()
    assert done, "the guest sent no done frame"
    return done[0], seen, selector.blocking_selects, bridge.direct_waits


def test_sequential_awaited_calls_never_block_in_the_loop() -> None:
    done, seen, blocked, direct = _run(
        "out = []\nfor i in range(50):\n    r = await tools.echo({'i': i})\n"
        "    out.append(r['i'])\nreturn out\n"
    )
    assert done["value"] == list(range(50))
    assert [call["args"]["i"] for call in seen] == list(range(50))
    assert blocked == 0
    assert direct == 50


def test_a_failed_call_raises_the_binding_error_on_the_direct_path() -> None:
    done, _, blocked, direct = _run(
        "try:\n    await tools.fail({})\nexcept ToolCallError as e:\n"
        "    return [e.toolName, e.code, str(e)]\n"
    )
    assert done["value"] == ["fail", "E1", "nope"]
    assert (blocked, direct) == (0, 1)


def test_a_gather_goes_through_the_loop_and_sends_its_calls_in_doubling_chunks() -> None:
    # The first 16 calls leave as soon as they are made (the host starts them while the
    # gather makes the rest), then 32, the rest at the end of the loop iteration: three
    # writes for 100 calls, not one per call (a host wake-up each), nor one at the end
    # (the first call waiting for the hundredth). A gather of up to 16 is one write.
    for count, expected in ((100, [16, 32, 52]), (16, [16]), (5, [5])):
        writes: list[int] = []
        done, seen, _, direct = _run(
            "import asyncio\n"
            f"rs = await asyncio.gather(*[tools.echo({{'i': i}}) for i in range({count})])\n"
            "return [r['i'] for r in rs]\n",
            writes,
        )
        assert done["value"] == list(range(count))
        assert [call["args"]["i"] for call in seen] == list(range(count))
        assert direct == 0
        assert writes[: len(expected)] == expected


def test_a_task_that_is_ready_runs_while_a_call_is_out() -> None:
    # The background task is ready when the first call is awaited: that call goes
    # through the loop, so the task runs before the call's result is handed back.
    done, _, _, direct = _run(
        "import asyncio\norder = []\n"
        "async def bg():\n    order.append('bg')\n"
        "t = asyncio.create_task(bg())\n"
        "await tools.echo({})\norder.append('after call')\nawait t\nreturn order\n"
    )
    assert done["value"] == ["bg", "after call"]
    assert direct == 0


def test_a_pending_timer_keeps_calls_on_the_loop_so_it_still_fires() -> None:
    # A sleeping task's timer must fire on time while calls are out: with a timer
    # scheduled, awaited calls take the loop path.
    done, _, _, direct = _run(
        "import asyncio\nticks = []\n"
        "async def ticker():\n    for i in range(3):\n"
        "        await asyncio.sleep(0.001)\n        ticks.append(i)\n"
        "t = asyncio.create_task(ticker())\nawait asyncio.sleep(0)\n"
        "n = 0\nwhile not t.done():\n    await tools.echo({})\n    n += 1\n"
        "return [ticks, n > 0]\n"
    )
    assert done["value"] == [[0, 1, 2], True]
    # Every call was made while the ticker slept (its timer pending) or was ready.
    assert direct == 0


# -- the reader registered before the run frame (``WorkerBridge.listen``) -----------------


def test_a_result_read_before_attach_waits_for_it() -> None:
    worker, host = socket.socketpair()
    loop = asyncio.SelectorEventLoop(SpinningSelector())
    try:
        bridge = WorkerBridge(worker, 1 << 20)
        bridge.listen(loop)
        bridge.listen(loop)  # idempotent: one reader
        host.sendall(encode_frame(ResultFrame(id=7, ok=True, value="early")))
        loop.run_until_complete(asyncio.sleep(0.05))  # the reader runs, nobody attached
        seen: list[Any] = []
        bridge.attach(loop, seen.append)
        assert [(f.id, f.value) for f in seen] == [(7, "early")]
        host.sendall(encode_frame(ResultFrame(id=8, ok=True, value="late")))
        loop.run_until_complete(asyncio.sleep(0.05))
        assert [f.id for f in seen] == [7, 8]
        assert worker.getblocking()  # reads pass MSG_DONTWAIT; the socket stays blocking
    finally:
        loop.close()
        worker.close()
        host.close()


def _epoll_targets(pid: int) -> list[str]:
    """What the epoll instances of process ``pid`` watch (the fds' link targets)."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as handle:
                for line in handle:
                    if line.startswith("tfd:"):
                        out.append(os.readlink(f"/proc/{pid}/fd/{int(line.split()[1])}"))
        except OSError:
            continue
    return out


@pytest.mark.anyio
async def test_an_idle_python_worker_already_watches_its_bridge() -> None:
    async with PythonRuntime(Limits(pool_size=1)) as runtime:
        await runtime.wait_ready()
        (pid,) = runtime.processes().idle_pids
        # The loop's own self-pipe, and the bridge: registered before any run frame (a
        # worker reports ready before it pre-faults and listens: give it a moment).
        sockets = 0
        with anyio.move_on_after(5):
            while sockets < 2:
                sockets = sum(t.startswith("socket:") for t in _epoll_targets(pid))
                await anyio.sleep(0.01)
        assert sockets == 2
        result = await runtime.run(
            CodeRunRequest(
                program="r = await tools.echo({'a': 1})\nreturn r",
                bindings=bindings(),
                signal=AbortController().signal,
            )
        )
        assert ok(result) == {"a": 1}
