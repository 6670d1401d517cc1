"""Listeners: registration-time validation, waterfall order, scope filtering, disposers."""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_support import call, echo_tool, error_text

from codemode.engine import Allow, Deny, ToolExecutionSuccess, ToolRuntime, text

WATERFALLS = ["tools/pre-execute", "tools/execute", "tools/post-execute", "tools/code-dispatch-log"]


def test_unknown_event_is_rejected_at_registration() -> None:
    rt = ToolRuntime()
    with pytest.raises(ValueError) as excinfo:
        rt.on("tools/pre-exec", lambda: None)
    assert str(excinfo.value).startswith('unknown event "tools/pre-exec" (known: ')
    with pytest.raises(ValueError):
        rt.scope("agent").on("tool/result", lambda: None)


@pytest.mark.parametrize("event", WATERFALLS)
def test_waterfall_listeners_must_be_async(event: str) -> None:
    rt = ToolRuntime()

    def sync_listener(*_args: Any) -> Any:
        return None

    with pytest.raises(TypeError) as excinfo:
        rt.on(event, sync_listener)
    message = str(excinfo.value)
    assert event in message and "sync_listener" in message
    with pytest.raises(TypeError):
        rt.on(event, "not callable")  # type: ignore[arg-type]


def test_async_callable_objects_and_sync_observers_are_accepted() -> None:
    class Wrapper:
        async def __call__(self, exec_: Any, next_: Any) -> Any:
            return await next_()

    rt = ToolRuntime()
    rt.on("tools/execute", Wrapper())
    rt.on("tools/result", lambda _e, _r: None)
    rt.on("tools/change", lambda: None)

    async def observer(_e: Any, _r: Any) -> None:
        return None

    rt.on("tools/result", observer)


@pytest.mark.anyio
async def test_first_registered_is_outermost_and_prepend_goes_outside() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    order: list[str] = []

    def wrapper(label: str) -> Any:
        async def wrap(_exec: Any, next_: Any) -> Any:
            order.append(f">{label}")
            result = await next_()
            order.append(f"<{label}")
            return result

        return wrap

    rt.on("tools/execute", wrapper("a"))
    rt.on("tools/execute", wrapper("b"))
    rt.on("tools/execute", wrapper("p1"), prepend=True)
    rt.on("tools/execute", wrapper("p2"), prepend=True)
    await rt.execute(call())
    assert order == [">p2", ">p1", ">a", ">b", "<b", "<a", "<p1", "<p2"]


@pytest.mark.anyio
async def test_global_and_scoped_listeners_interleave_in_registration_order() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    preset = rt.scope("preset")
    agent = rt.scope("agent", parent=preset)
    order: list[str] = []

    def pre(label: str) -> Any:
        async def listener(_exec: Any, next_: Any) -> Any:
            order.append(label)
            return await next_()

        return listener

    rt.on("tools/pre-execute", pre("global-1"))
    agent.on("tools/pre-execute", pre("agent"))
    preset.on("tools/pre-execute", pre("preset"))
    rt.on("tools/pre-execute", pre("global-2"))
    await rt.execute(call(agent=agent))
    # Exact-scope dispatch: the preset's listener does not hear its child agent's calls.
    assert order == ["global-1", "agent", "global-2"]
    order.clear()
    await rt.execute(call(agent=preset))
    assert order == ["global-1", "preset", "global-2"]
    order.clear()
    await rt.execute(call())
    assert order == ["global-1", "global-2"]


@pytest.mark.anyio
async def test_a_listener_that_does_not_call_next_short_circuits_the_inner_chain() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    inner: list[str] = []

    async def outer(_exec: Any, _next: Any) -> Any:
        return Deny("outer decided")

    async def never(_exec: Any, next_: Any) -> Any:
        inner.append("ran")
        return await next_()

    rt.on("tools/pre-execute", outer)
    rt.on("tools/pre-execute", never)
    result = await rt.execute(call())
    assert error_text(result)[0] == "outer decided"
    assert inner == []


@pytest.mark.anyio
async def test_an_outer_listener_may_override_an_inner_decision() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())

    async def outer(_exec: Any, next_: Any) -> Any:
        decision = await next_()
        assert decision == Deny("inner")
        return Allow()

    async def inner(_exec: Any, _next: Any) -> Any:
        return Deny("inner")

    rt.on("tools/pre-execute", outer)
    rt.on("tools/pre-execute", inner)
    result = await rt.execute(call())
    assert isinstance(result, ToolExecutionSuccess)


@pytest.mark.anyio
async def test_listener_disposers_are_exact_and_idempotent() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    seen: list[str] = []

    async def first(_exec: Any, next_: Any) -> Any:
        seen.append("first")
        return await next_()

    async def second(_exec: Any, next_: Any) -> Any:
        seen.append("second")
        return await next_()

    off_first = rt.on("tools/pre-execute", first)
    rt.on("tools/pre-execute", second)
    off_first()
    off_first()
    await rt.execute(call())
    assert seen == ["second"]
    # The same function registered twice gets two entries, each with its own disposer.
    off_a = rt.on("tools/pre-execute", first)
    rt.on("tools/pre-execute", first)
    off_a()
    seen.clear()
    await rt.execute(call())
    assert seen == ["second", "first"]


@pytest.mark.anyio
async def test_scoped_waterfalls_never_see_agent_less_calls() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    agent = rt.scope("agent")

    async def block(_exec: Any, _result: Any, _next: Any) -> Any:
        from codemode.engine import Block

        return Block([text("agent policy")])

    agent.on("tools/post-execute", block)
    assert not (await rt.execute(call())).is_error
    assert error_text(await rt.execute(call(agent=agent)))[0] == "agent policy"


@pytest.mark.anyio
async def test_listeners_registered_during_a_call_apply_to_later_calls() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    late: list[str] = []

    async def late_listener(_exec: Any, next_: Any) -> Any:
        late.append("late")
        return await next_()

    async def registering(_exec: Any, next_: Any) -> Any:
        if not late:
            rt.on("tools/pre-execute", late_listener)
        return await next_()

    rt.on("tools/pre-execute", registering)
    await rt.execute(call())
    assert late == []
    await rt.execute(call())
    assert late == ["late"]
