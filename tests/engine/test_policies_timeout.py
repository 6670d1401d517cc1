"""TimeoutPolicy: a cooperative per-tool deadline (reference §2.8), with real short sleeps."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pipeline_support import ABORTED, call, echo_tool, error_text, raw_tool

from codemode.engine import AbortController, ToolRuntime, ToolTimeoutError
from codemode.engine.policies import TimeoutPolicy


def timed_out(ms: str) -> tuple[str, str, str, str]:
    message = f"tool call timed out after {ms}ms"
    return (message, "ToolTimeoutError", "TOOL_TIMEOUT", f"Error: {message}")


async def _wait_for_abort(_args: Any, exec_: Any) -> Any:
    with anyio.fail_after(5):
        await exec_.signal.wait()
    return "observed abort"


def _runtime(body: Any, timeout_ms: Any = 30) -> tuple[ToolRuntime, Any]:
    rt = ToolRuntime()
    rt.register(echo_tool(body=body, timeout_ms=timeout_ms))
    dispose = TimeoutPolicy().install(rt)
    return rt, dispose


@pytest.mark.anyio
async def test_deadline_replaces_the_result_with_tool_timeout() -> None:
    seen: list[Any] = []

    async def body(args: Any, exec_: Any) -> Any:
        await _wait_for_abort(args, exec_)
        seen.append(exec_.signal.reason)
        return "late success"

    rt, _ = _runtime(body, timeout_ms=30)
    result = await rt.execute(call())
    assert error_text(result) == timed_out("30")
    assert result.to_json()["error"]["info"] == {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}
    assert isinstance(seen[0], ToolTimeoutError)


@pytest.mark.anyio
async def test_an_uncooperative_body_is_awaited_then_timed_out() -> None:
    finished: list[str] = []

    async def stubborn(_args: Any, _exec: Any) -> Any:
        await anyio.sleep(0.08)
        finished.append("finished")
        return "done"

    rt, _ = _runtime(stubborn, timeout_ms=20)
    result = await rt.execute(call())
    assert finished == ["finished"]  # never a hard kill
    assert error_text(result) == timed_out("20")


@pytest.mark.anyio
async def test_a_fast_body_is_untouched() -> None:
    async def fast(_args: Any, _exec: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return "quick"

    rt, _ = _runtime(fast, timeout_ms=1000)
    with anyio.fail_after(1):
        result = await rt.execute(call())
    assert result.value == "quick"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_fractional_deadlines_render_like_javascript_numbers() -> None:
    rt, _ = _runtime(_wait_for_abort, timeout_ms=12.5)
    assert error_text(await rt.execute(call())) == timed_out("12.5")
    rt2, _ = _runtime(_wait_for_abort, timeout_ms=20.0)
    assert error_text(await rt2.execute(call())) == timed_out("20")


@pytest.mark.anyio
async def test_caller_abort_first_keeps_aborted() -> None:
    rt, _ = _runtime(_wait_for_abort, timeout_ms=200)
    controller = AbortController()

    async def stop() -> None:
        await anyio.sleep(0.01)
        controller.abort("user stop")

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
        result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ABORTED


@pytest.mark.anyio
async def test_caller_abort_after_an_unfinished_body_outlives_the_deadline_keeps_aborted() -> None:
    controller = AbortController()

    async def body(_args: Any, _exec: Any) -> Any:
        controller.abort("user stop")
        await anyio.sleep(0.06)  # the deadline passes while the caller is already gone
        return "done"

    rt, _ = _runtime(body, timeout_ms=20)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ABORTED


@pytest.mark.anyio
async def test_deadline_first_then_caller_abort_keeps_tool_timeout() -> None:
    controller = AbortController()

    async def body(args: Any, exec_: Any) -> Any:
        await _wait_for_abort(args, exec_)
        controller.abort("user stop, after the deadline")
        return "done"

    rt, _ = _runtime(body, timeout_ms=20)
    seen_in_post: list[Any] = []

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        seen_in_post.append((exec_.signal is controller.signal, result.error.info.code))
        return await next_()

    rt.on("tools/post-execute", post)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result) == timed_out("20")
    # Post-execute sees the caller's signal again, and the timeout already decided.
    assert seen_in_post == [(True, "TOOL_TIMEOUT")]


@pytest.mark.anyio
async def test_body_sees_a_derived_signal_and_post_execute_sees_the_callers() -> None:
    caller = AbortController()
    signals: dict[str, Any] = {}

    async def body(_args: Any, exec_: Any) -> Any:
        signals["body"] = exec_.signal
        return "ok"

    async def post(exec_: Any, _result: Any, next_: Any) -> Any:
        signals["post"] = exec_.signal
        return await next_()

    rt, _ = _runtime(body, timeout_ms=1000)
    rt.on("tools/post-execute", post)
    result = await rt.execute(call(signal=caller.signal))
    assert result.value == "ok"  # type: ignore[union-attr]
    assert signals["body"] is not caller.signal
    assert signals["post"] is caller.signal


@pytest.mark.anyio
async def test_tools_without_timeout_ms_are_untouched() -> None:
    caller = AbortController()
    seen: list[Any] = []

    async def slow(_args: Any, exec_: Any) -> Any:
        seen.append(exec_.signal)
        await anyio.sleep(0.05)
        return "slow but fine"

    rt = ToolRuntime()
    rt.register(echo_tool(body=slow))
    TimeoutPolicy().install(rt)
    result = await rt.execute(call(signal=caller.signal))
    assert result.value == "slow but fine"  # type: ignore[union-attr]
    assert seen == [caller.signal]
    unknown = await rt.execute(call("ghost"))
    assert error_text(unknown)[0] == 'unknown tool "ghost"'


@pytest.mark.anyio
async def test_disposing_the_policy_removes_the_deadline() -> None:
    async def slow(_args: Any, _exec: Any) -> Any:
        await anyio.sleep(0.05)
        return "finished"

    rt, dispose = _runtime(slow, timeout_ms=10)
    assert error_text(await rt.execute(call())) == timed_out("10")
    dispose()
    assert (await rt.execute(call())).value == "finished"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_deadlines_apply_to_nested_and_scoped_calls() -> None:
    rt = ToolRuntime()
    TimeoutPolicy().install(rt)
    agent = rt.scope("agent")
    agent.register(raw_tool("scoped", body=_wait_for_abort, timeout_ms=15))
    result = await rt.execute(call("scoped", agent=agent, parent=object()))
    assert error_text(result) == timed_out("15")


@pytest.mark.anyio
async def test_tool_errors_before_the_deadline_are_kept() -> None:
    async def failing(_args: Any, _exec: Any) -> Any:
        raise RuntimeError("own failure")

    rt, _ = _runtime(failing, timeout_ms=1000)
    assert error_text(await rt.execute(call()))[:3] == ("own failure", None, None)


@pytest.mark.anyio
async def test_an_inner_wrapper_failure_keeps_its_own_message() -> None:
    rt, _ = _runtime(_wait_for_abort, timeout_ms=1000)

    async def broken(_exec: Any, _next: Any) -> Any:
        raise RuntimeError("inner wrapper bug")

    rt.on("tools/execute", broken)  # registered after the policy: inside its deadline
    result = await rt.execute(call())
    assert error_text(result) == ("inner wrapper bug", None, None, "Error: inner wrapper bug")


@pytest.mark.anyio
async def test_calls_under_one_long_lived_signal_leave_no_listener_on_it() -> None:
    # A turn's signal outlives every call made under it; the timeout's derived signal and
    # the pipeline's wrapper signal must unhook from it when the call ends, or a long
    # session grows one listener per call.
    async def fast(_args: Any, exec_: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return "quick"

    rt, _ = _runtime(fast, timeout_ms=1000)
    turn = AbortController()
    for i in range(200):
        result = await rt.execute(call(call_id=f"c{i}", signal=turn.signal))
        assert result.value == "quick"  # type: ignore[union-attr]
    assert turn.signal._listeners == []
    turn.abort()  # and the signal still works afterwards
    aborted = await rt.execute(call(call_id="late", signal=turn.signal))
    assert aborted.is_error
