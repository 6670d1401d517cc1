"""The worker's poll-before-sleep for binding results (``Spin``, ``SpinningSelector``,
``WorkerBridge.wait_payloads(spin=True)``): when it polls, how long, what it learns, and
the allowance that bounds what a run can burn polling."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from typing import Any

import anyio
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.sandbox.host._supervisor import poll_allowance_s
from codemode.sandbox.worker import _bridge as worker_bridge
from codemode.sandbox.worker._bridge import Spin, SpinningSelector, WorkerBridge
from codemode.sandbox.worker._frames import ResultFrame, RunFrame, encode_frame


def test_the_window_follows_recent_waits_and_stops_when_they_are_slow() -> None:
    spin = Spin()
    assert spin.window(None) == 0.0  # until a result frame says the host allows it
    spin.allowed = True
    assert spin.window(None) == Spin.MAX_WINDOW_S  # optimistic first wait
    assert spin.window(0.0001) == 0.0001  # never past the caller's timeout
    for _ in range(20):
        spin.record(40e-6, 40e-6)
    assert 79e-6 < spin.window(None) < 90e-6  # about twice the typical wait
    for _ in range(20):
        spin.record(0.010, 0.0)  # a slow tool: sleeping costs nothing next to it
    assert spin.window(None) == 0.0
    for _ in range(30):
        spin.record(50e-6, 0.0)  # fast again: it polls again
    assert spin.window(None) > 0


def test_the_allowance_bounds_what_a_run_polls() -> None:
    spin = Spin()
    spin.allowed = True
    spent = 0.0
    for _ in range(10_000):
        window = spin.window(None)
        spent += window
        spin.record(window, window)  # every wait polls its whole window
    assert spent <= Spin.ALLOWANCE_S + Spin.MAX_WINDOW_S
    assert spin.window(None) == 0.0


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def test_the_selector_polls_only_while_a_result_is_due() -> None:
    a, b = _pair()
    selector = SpinningSelector()
    selector.register(a, selectors.EVENT_READ)
    try:
        due = [False]
        selector.waiting = lambda: due[0]
        # Nothing due: a timed wait is a plain sleep, the allowance untouched.
        assert selector.select(0.002) == []
        assert selector.spin.left == Spin.ALLOWANCE_S
        # A result due, but the host did not allow polling: a plain sleep too.
        due[0] = True
        timer = threading.Timer(0.0001, b.send, (b"x",))
        timer.start()
        assert selector.select(None)
        timer.join()
        assert a.recv(1) == b"x"
        assert selector.spin.left == Spin.ALLOWANCE_S
        # Allowed, a result due and on its way: found by polling, the wait learned. (The
        # sleep above was learned as well: on a loaded machine it can take long enough
        # to close the window, so this wait starts from the optimistic average again.)
        selector.spin.allowed = True
        selector.spin.typical = Spin.MAX_WINDOW_S / 2
        timer = threading.Timer(0.0001, b.send, (b"x",))
        timer.start()
        ready = selector.select(None)
        timer.join()
        assert [key.fileobj for key, _ in ready] == [a]
        assert selector.spin.left < Spin.ALLOWANCE_S
        assert selector.spin.typical != Spin.MAX_WINDOW_S / 2
    finally:
        selector.close()
        a.close()
        b.close()


def test_wait_payloads_polls_then_sleeps_for_a_late_result() -> None:
    a, b = _pair()
    bridge = WorkerBridge(a, 1 << 20)
    bridge.spin.allowed = True
    try:
        frame = bytes(encode_frame(ResultFrame(id=1, ok=True, value=7)))
        timer = threading.Timer(0.02, b.send, (frame,))
        # Read before the timer starts: its 20 ms run from its start, and a clock read
        # after it came up to 0.2 ms late under load (a wait measured as 19.8 ms).
        started = time.perf_counter()
        timer.start()
        payloads = bridge.wait_payloads(None, spin=True)
        waited = time.perf_counter() - started
        timer.join()
        assert payloads is not None and len(payloads) == 1
        assert waited >= 0.02
        # It polled (the allowance shrank), then slept until the result came: one poll
        # window is 0.3 ms and the result came 20 ms later. (How much of the allowance
        # went is not asserted: a descheduled worker overshoots its window.)
        assert bridge.spin.left < Spin.ALLOWANCE_S
        # A timed wait with nothing arriving returns [] and learns nothing.
        before = bridge.spin.typical
        assert bridge.wait_payloads(0.001, spin=True) == []
        assert bridge.spin.typical == before
    finally:
        a.close()
        b.close()


def test_a_result_the_polling_saw_is_read_without_another_poll(monkeypatch: Any) -> None:
    # The TypeScript worker's wait per sub-call: its polling found the result, so the
    # next system call is the read (a blocking poll to be told again cost one more).
    polls: list[int] = []

    class Counting:
        def __init__(self) -> None:
            self._poller = real_poll()

        def register(self, fd: int, mask: int) -> None:
            self._poller.register(fd, mask)

        def poll(self, timeout: int = -1) -> list[tuple[int, int]]:
            polls.append(timeout)
            return self._poller.poll(timeout)

    real_poll = worker_bridge.select.poll
    monkeypatch.setattr(worker_bridge.select, "poll", Counting)
    a, b = _pair()
    bridge = WorkerBridge(a, 1 << 20)
    bridge.spin.allowed = True
    try:
        b.send(bytes(encode_frame(ResultFrame(id=1, ok=True, value=7))))
        payloads = bridge.wait_payloads(None, spin=True)
        assert payloads is not None and len(payloads) == 1
        assert polls == [0]
        # Without polling (not allowed), one blocking poll as before.
        bridge.spin.allowed = False
        polls.clear()
        b.send(bytes(encode_frame(ResultFrame(id=2, ok=True, value=8))))
        payloads = bridge.wait_payloads(None, spin=True)
        assert payloads is not None and len(payloads) == 1
        assert polls == [-1]
    finally:
        a.close()
        b.close()


@pytest.mark.anyio
@pytest.mark.parametrize("runtime_class", [PythonRuntime, TypeScriptRuntime])
async def test_awaiting_slow_bindings_does_not_spend_the_compute_budget(runtime_class: Any) -> None:
    # 40 waits of 25 ms (1 s of waiting) under a 250 ms compute budget: the worker polls a
    # window or two, then sleeps through every wait.
    async def slow(args: Any) -> Any:
        await anyio.sleep(0.025)
        return args["i"]

    python = runtime_class is PythonRuntime
    program = (
        "total = 0\nfor i in range(40):\n    total += await tools.slow({'i': i})\nreturn total"
        if python
        else "let total = 0\nfor (let i = 0; i < 40; i++) total += await tools.slow({i})\n"
        "return total"
    )
    async with runtime_class(Limits(max_compute_ms=250, max_wall_ms=30_000)) as runtime:
        request = CodeRunRequest(program, bindings({"slow": slow}), AbortController().signal)
        assert ok(await runtime.run(request)) == sum(range(40))


_PROBE = """
import select
from codemode.sandbox.worker._frames import CallFrame, ResultFrame, decode_frame
from codemode.sandbox.worker._frames import WorkerInbound
import msgspec
decoder = msgspec.json.Decoder(WorkerInbound)
bridge.send(CallFrame(id=1, global_name="tools", name="hold", args={}))
seen = []
while not seen:
    payloads = bridge.wait_payloads(10)
    for payload in payloads or []:
        frame = decode_frame(decoder, payload)
        if isinstance(frame, ResultFrame):
            seen.append(frame.poll)
result = seen[0]
"""


@pytest.mark.anyio
async def test_the_host_allows_polling_only_while_it_serves_one_run() -> None:
    guests = {
        "python": "codemode.sandbox.python._guest",
        "raw": "codemode.sandbox.worker._raw_guest",
    }
    release = anyio.Event()
    entered = anyio.Event()

    async def hold(args: Any) -> Any:
        entered.set()
        await release.wait()
        return 1

    async def quick(args: Any) -> Any:
        return 1

    limits = Limits(max_compute_ms=5_000, max_wall_ms=20_000, pool_size=2)
    async with PythonRuntime(limits, _guests=guests) as runtime:

        async def probe(fn: Any) -> Any:
            request = CodeRunRequest(_PROBE, bindings({"hold": fn}), AbortController().signal)
            with anyio.fail_after(30):
                return ok(await runtime._run_guest(request, "raw"))

        assert await probe(quick) is True  # alone: the worker may poll
        async with anyio.create_task_group() as tg:
            tg.start_soon(probe, hold)  # a second run, held open by its binding
            with anyio.fail_after(30):
                await entered.wait()
            assert await probe(quick) is False  # two runs share the host: no polling
            release.set()


def test_a_run_polls_at_most_a_share_of_its_compute_budget() -> None:
    # The default 60 s budget: the whole allowance; a 0.5 s one: 5% of it.
    assert poll_allowance_s(Limits()) == Spin.ALLOWANCE_S == 1.0
    assert poll_allowance_s(Limits(max_compute_ms=500)) == pytest.approx(0.025)
    a, b = _pair()
    try:
        bridge = WorkerBridge(a, 1 << 20)
        for asked, left in ((0.025, 0.025), (5.0, Spin.ALLOWANCE_S), (-1.0, 0.0)):
            run = RunFrame(
                guest="python", program="", bindings=[], max_output_bytes=1,
                max_frame_bytes=1 << 16, max_sub_calls=1, poll_allowance_s=asked,
            )  # fmt: skip
            bridge.adopt(run)
            assert bridge.spin.left == left
            assert bridge.max_frame_bytes == 1 << 16
    finally:
        a.close()
        b.close()
