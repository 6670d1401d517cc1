"""Sub-calls started with ``SettlingBinding.begin`` (a runtime relaying from a read
callback): one outcome per call, after its settle event is durable, refusals raised at
once, commits in submission order, a failing callback contained."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from code_mode_support import ScriptedRuntime, echo_tool, run_code, sleep_tool

from codemode.engine import (
    BindingCallError,
    CodeRunRequest,
    CodeRunResult,
    MemorySessionLog,
    SettlingBinding,
    ToolRuntime,
)


def _rt(behavior: Any, cap: int = 10) -> ToolRuntime:
    return ToolRuntime(
        mode="code", max_parallel_sub_calls=cap, code_runtime=ScriptedRuntime(behavior)
    )


@pytest.mark.anyio
async def test_begin_settles_once_after_the_settle_event_is_logged() -> None:
    log = MemorySessionLog()
    seen: list[tuple[bool, Any, list[str]]] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        fn = request.bindings[0].functions["echo"]
        assert isinstance(fn, SettlingBinding)
        done = anyio.Event()

        def settle(ok: bool, payload: Any) -> None:
            # What the log holds when the runtime is told (and would reply to the guest).
            seen.append((ok, payload, [e["type"] for e in log.events]))
            done.set()

        fn.begin({"value": "a"}, settle)
        await done.wait()
        return CodeRunResult(value=seen[0][1])

    rt = _rt(behavior)
    rt.register(echo_tool("echo", parallel=True))
    result = await run_code(rt, agent=rt.scope("s", session=log))
    assert result.value["result"] == "echo:a"
    assert len(seen) == 1
    ok, payload, types = seen[0]
    assert ok is True and payload == "echo:a"
    assert types[-2:] == ["tool/code-dispatch-start", "tool/code-dispatch"]


@pytest.mark.anyio
async def test_begin_refuses_a_call_without_arguments_by_raising() -> None:
    calls: list[Any] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        fn = request.bindings[0].functions["echo"]
        assert isinstance(fn, SettlingBinding)
        with pytest.raises(BindingCallError, match="tool arguments must be lossless JSON"):
            fn.begin(msgspec.UNSET, lambda ok, payload: calls.append((ok, payload)))
        with pytest.raises(BindingCallError, match="lossless JSON"):
            fn.begin({"value": float("nan")}, lambda ok, payload: calls.append((ok, payload)))
        await anyio.sleep(0.01)
        return CodeRunResult(value="refused")

    rt = _rt(behavior)
    rt.register(echo_tool("echo", parallel=True))
    result = await run_code(rt, agent=rt.scope("s", session=MemorySessionLog()))
    assert result.value["result"] == "refused"
    assert calls == []  # a refusal is the raise: settle is never called for it


@pytest.mark.anyio
async def test_begun_calls_settle_in_submission_order_and_errors_carry_the_code() -> None:
    order: list[Any] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        functions = request.bindings[0].functions
        nap, echo = functions["nap"], functions["echo"]
        assert isinstance(nap, SettlingBinding) and isinstance(echo, SettlingBinding)
        done = anyio.Event()

        def settle(ok: bool, payload: Any) -> None:
            order.append(payload if ok else (type(payload).__name__, payload.code))
            if len(order) == 4:
                done.set()

        nap.begin({"id": "slow", "ms": 30}, settle)
        nap.begin({"id": "fast"}, settle)
        echo.begin({"value": 1}, settle)  # invalid arguments: a failed call, in order
        nap.begin({"id": "last"}, settle)
        await done.wait()
        return CodeRunResult(value=len(order))

    rt = _rt(behavior)
    rt.register(sleep_tool("nap"))
    rt.register(echo_tool("echo", parallel=True))
    result = await run_code(rt, agent=rt.scope("s", session=MemorySessionLog()))
    assert result.value["result"] == 4
    assert order == ["slow", "fast", ("BindingCallError", "INVALID_ARGS"), "last"]


@pytest.mark.anyio
async def test_a_failing_settle_callback_is_logged_and_the_lane_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    got: list[Any] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        fn = request.bindings[0].functions["echo"]
        assert isinstance(fn, SettlingBinding)
        done = anyio.Event()

        def broken(ok: bool, payload: Any) -> None:
            raise RuntimeError("runtime bug")

        def settle(ok: bool, payload: Any) -> None:
            got.append(payload)
            done.set()

        fn.begin({"value": "a"}, broken)
        fn.begin({"value": "b"}, settle)
        await done.wait()
        return CodeRunResult(value=got[0])

    rt = _rt(behavior)
    rt.register(echo_tool("echo", parallel=True))
    with caplog.at_level(logging.ERROR, logger="engine.code_mode"):
        result = await run_code(rt, agent=rt.scope("s", session=MemorySessionLog()))
    assert result.value["result"] == "echo:b"
    assert "settle callback failed for echo" in caplog.text


@pytest.mark.anyio
async def test_a_call_still_queued_when_the_run_ends_settles_as_abandoned() -> None:
    outcomes: list[tuple[bool, Any]] = []
    holder: list[Any] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        nap = request.bindings[0].functions["nap"]
        assert isinstance(nap, SettlingBinding)
        nap.begin({"id": "a", "ms": 50}, lambda ok, p: outcomes.append((ok, p)))
        nap.begin({"id": "b"}, lambda ok, p: outcomes.append((ok, p)))
        holder.append(nap)
        return CodeRunResult(value="early")

    rt = _rt(behavior, cap=1)
    rt.register(sleep_tool("nap"))
    result = await run_code(rt, agent=rt.scope("s", session=MemorySessionLog()))
    assert result.value["result"] == "early"
    # Both were told, once each, that the run is over; neither value was handed out.
    assert len(outcomes) == 2
    for ok, payload in outcomes:
        assert ok is False and isinstance(payload, BindingCallError)
        assert "run_code run is over" in payload.message
    with pytest.raises(BindingCallError, match="not dispatched"):
        holder[0].begin({"id": "c"}, lambda ok, p: outcomes.append((ok, p)))


# -- started from a loop callback (how a sandbox runtime relays a frame it read) ------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_begin_from_a_loop_callback_answers_a_call_that_never_waits_at_once() -> None:
    import asyncio

    log = MemorySessionLog()
    answered: list[tuple[bool, Any]] = []
    inside: list[int] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        fn = request.bindings[0].functions["echo"]
        assert isinstance(fn, SettlingBinding)
        loop = asyncio.get_running_loop()
        done = anyio.Event()

        def settle(ok: bool, payload: Any) -> None:
            answered.append((ok, payload))
            if len(answered) == 3:
                done.set()

        def read_callback(i: int) -> None:
            fn.begin({"value": str(i)}, settle)
            # The body never waits: started, run, committed and answered right here.
            inside.append(len(answered))

        for i in range(3):
            loop.call_soon(read_callback, i)
        await done.wait()
        return CodeRunResult(value=[p for _, p in answered])

    rt = _rt(behavior)
    rt.register(echo_tool("echo", parallel=True))
    result = await run_code(rt, agent=rt.scope("s", session=log))
    assert result.value["result"] == ["echo:0", "echo:1", "echo:2"]
    assert inside == [1, 2, 3]
    types = [e["type"] for e in log.events if e["type"].startswith("tool/code-dispatch")]
    assert types == ["tool/code-dispatch-start", "tool/code-dispatch"] * 3


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_begin_from_a_loop_callback_runs_a_waiting_body_as_a_real_task() -> None:
    import asyncio

    answered: list[tuple[bool, Any]] = []
    seen_task: list[bool] = []

    async def body(args: Any, ctx: Any) -> Any:
        # A cancel scope entered before the first wait and left after it: only valid
        # when the whole body runs in one task.
        seen_task.append(asyncio.current_task() is not None)
        with anyio.fail_after(5):
            await anyio.sleep(0.01)
        return "slept:" + args["value"]

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        fn = request.bindings[0].functions["echo"]
        assert isinstance(fn, SettlingBinding)
        done = anyio.Event()

        def settle(ok: bool, payload: Any) -> None:
            answered.append((ok, payload))
            done.set()

        asyncio.get_running_loop().call_soon(fn.begin, {"value": "a"}, settle)
        await anyio.lowlevel.checkpoint()
        assert answered == []  # still sleeping
        await done.wait()
        return CodeRunResult(value=answered[0][1])

    rt = _rt(behavior)
    rt.register(echo_tool("echo", parallel=True, body=body))
    result = await run_code(rt, agent=rt.scope("s", session=MemorySessionLog()))
    assert result.value["result"] == "slept:a"
    assert seen_task == [True]
