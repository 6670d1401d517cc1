"""AbortController / AbortSignal: cooperative cancellation as in the seed."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from codemode.engine import AbortController, AbortError, AbortSignal


def test_a_fresh_signal_is_live() -> None:
    controller = AbortController()
    signal = controller.signal
    assert signal.aborted is False
    assert signal.reason is None
    assert controller.signal is signal


def test_abort_is_idempotent_and_the_first_reason_wins() -> None:
    controller = AbortController()
    controller.abort("first")
    controller.abort("second")
    assert controller.signal.aborted is True
    assert controller.signal.reason == "first"
    default = AbortController()
    default.abort()
    assert default.signal.aborted is True
    assert default.signal.reason is not None


def test_any_reason_object_is_kept() -> None:
    reason = RuntimeError("deadline")
    controller = AbortController()
    controller.abort(reason)
    assert controller.signal.reason is reason


def test_listeners_fire_once_and_late_listeners_fire_immediately() -> None:
    controller = AbortController()
    calls: list[Any] = []
    controller.signal.add_listener(lambda s: calls.append(("early", s.reason)))
    dispose = controller.signal.add_listener(lambda s: calls.append(("disposed", s.reason)))
    dispose()
    controller.abort("go")
    controller.abort("again")
    controller.signal.add_listener(lambda s: calls.append(("late", s.reason)))
    assert calls == [("early", "go"), ("late", "go")]


def test_listener_failures_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    controller = AbortController()
    calls: list[str] = []

    def broken(_s: AbortSignal) -> None:
        raise RuntimeError("listener bug")

    controller.signal.add_listener(broken)
    controller.signal.add_listener(lambda _s: calls.append("after"))
    with caplog.at_level(logging.WARNING):
        controller.abort("x")  # never raises into the aborter
    assert calls == ["after"]
    assert any("abort listener raised" in r.getMessage() for r in caplog.records)


def test_any_aborts_with_the_first_source_reason() -> None:
    a, b = AbortController(), AbortController()
    fused = AbortSignal.any([a.signal, b.signal])
    assert fused.aborted is False
    b.abort("b first")
    a.abort("a later")
    assert (fused.aborted, fused.reason) == (True, "b first")
    pre = AbortSignal.any([AbortController().signal, AbortSignal.aborted_with("already")])
    assert (pre.aborted, pre.reason) == (True, "already")
    assert AbortSignal.any([]).aborted is False


def test_aborted_with_and_throw_if_aborted() -> None:
    signal = AbortSignal.aborted_with("why")
    assert (signal.aborted, signal.reason) == (True, "why")
    with pytest.raises(AbortError) as excinfo:
        signal.throw_if_aborted()
    assert str(excinfo.value) == "why"
    AbortController().signal.throw_if_aborted()  # live: no raise


@pytest.mark.anyio
async def test_wait_returns_when_aborted() -> None:
    controller = AbortController()

    async def later() -> None:
        await anyio.sleep(0.01)
        controller.abort("done")

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(later)
            await controller.signal.wait()
    assert controller.signal.reason == "done"
    with anyio.fail_after(1):
        await controller.signal.wait()  # already aborted: immediate


@pytest.mark.anyio
async def test_wait_can_be_cancelled_without_leaking_listeners() -> None:
    controller = AbortController()
    with anyio.move_on_after(0.01):
        await controller.signal.wait()
    fired: list[str] = []
    controller.signal.add_listener(lambda _s: fired.append("x"))
    controller.abort()
    assert fired == ["x"]
