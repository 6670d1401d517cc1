"""Stage 9-10: materialisation, finalize_content exactly once, tools/result observers."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from pipeline_support import call, echo_tool, error_text, recorder

from codemode.engine import (
    AbortController,
    Accept,
    Block,
    Deny,
    HarnessError,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolOutput,
    ToolRuntime,
    text,
)

LOSSY_RESULT = "tool result must be losslessly JSON-serializable"


class Finalizer:
    def __init__(self, returns: Any = None, raises: BaseException | None = None) -> None:
        self.calls: list[tuple[Any, Any]] = []
        self.returns = returns
        self.raises = raises

    def __call__(self, exec_: Any, result: Any) -> Any:
        self.calls.append((exec_, result))
        if self.raises is not None:
            raise self.raises
        return self.returns


async def _raise(_a: Any, _e: Any) -> Any:
    raise RuntimeError("body failed")


def _pre(decision: Any) -> Any:
    async def pre(_exec: Any, _next: Any) -> Any:
        if isinstance(decision, BaseException):
            raise decision
        return decision

    return pre


def _post(decision: Any) -> Any:
    async def post(_exec: Any, _result: Any, _next: Any) -> Any:
        if isinstance(decision, BaseException):
            raise decision
        return decision

    return post


async def _outcome(setup: str, finalizer: Finalizer) -> Any:
    rt = ToolRuntime()
    body = _raise if setup == "body-raises" else None
    rt.register(echo_tool(body=body, finalize_content=finalizer))
    controller = AbortController()
    arguments: Any = {"value": "hi"}
    if setup == "pre-aborted":
        controller.abort("x")
    elif setup == "lossy-args":
        arguments = {"value": math.nan}
    elif setup == "deny":
        rt.on("tools/pre-execute", _pre(Deny("no")))
    elif setup == "pre-throws":
        rt.on("tools/pre-execute", _pre(RuntimeError("pre failed")))
    elif setup == "wrapper-throws":
        rt.on("tools/execute", _pre(RuntimeError("wrapper failed")))
    elif setup == "post-throws":
        rt.on("tools/post-execute", _post(RuntimeError("post failed")))
    elif setup == "block":
        rt.on("tools/post-execute", _post(Block([text("blocked")])))
    elif setup == "abort-in-body":

        async def aborting(_a: Any, _e: Any) -> Any:
            controller.abort("stop")
            return "late"

        rt.register(echo_tool("other", body=aborting, finalize_content=finalizer))
        return await rt.execute(call("other", signal=controller.signal))
    return await rt.execute(call(arguments=arguments, signal=controller.signal))


SETUPS = [
    "success",
    "body-raises",
    "pre-aborted",
    "lossy-args",
    "deny",
    "pre-throws",
    "wrapper-throws",
    "post-throws",
    "block",
    "abort-in-body",
]


@pytest.mark.anyio
@pytest.mark.parametrize("setup", SETUPS)
async def test_finalize_content_runs_exactly_once_for_every_outcome(setup: str) -> None:
    finalizer = Finalizer()
    result = await _outcome(setup, finalizer)
    assert len(finalizer.calls) == 1
    exec_, seen = finalizer.calls[0]
    # Returning None keeps the content; the finalizer saw the materialised outcome.
    assert seen == result
    assert list(seen.content) == list(result.content)
    assert exec_.name in ("echo", "other")


@pytest.mark.anyio
@pytest.mark.parametrize("setup", ["success", "body-raises", "deny", "block"])
async def test_finalize_content_replaces_only_the_content(setup: str) -> None:
    finalizer = Finalizer(returns=[text("finalized")])
    baseline = await _outcome(setup, Finalizer())
    result = await _outcome(setup, finalizer)
    assert result.content == [text("finalized")]
    assert result.is_error is baseline.is_error
    if isinstance(result, ToolExecutionSuccess):
        assert result.value == baseline.value
    else:
        assert result.error == baseline.error


@pytest.mark.anyio
async def test_throwing_finalizer_becomes_the_error_and_is_not_rerun() -> None:
    class FinalizeError(HarnessError):
        pass

    finalizer = Finalizer(raises=FinalizeError("finalizer broke", "FINALIZE"))
    rt = ToolRuntime()
    rt.register(echo_tool(finalize_content=finalizer))
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result) == (
        "finalizer broke",
        "FinalizeError",
        "FINALIZE",
        "Error: finalizer broke",
    )
    assert len(finalizer.calls) == 1
    assert rec.results[0][1] is result


@pytest.mark.anyio
async def test_finalizer_returning_lossy_content_is_a_materialisation_error() -> None:
    finalizer = Finalizer(returns=[{"type": "text", "text": math.nan}])
    rt = ToolRuntime()
    rt.register(echo_tool(finalize_content=finalizer))
    result = await rt.execute(call())
    assert error_text(result) == (LOSSY_RESULT, None, None, f"Error: {LOSSY_RESULT}")
    assert len(finalizer.calls) == 1


@pytest.mark.anyio
async def test_finalizer_returning_a_string_is_not_split_into_blocks() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool(finalize_content=Finalizer(returns="abc")))
    result = await rt.execute(call())
    assert error_text(result)[0] == LOSSY_RESULT


@pytest.mark.anyio
async def test_finalizer_is_captured_when_the_call_starts() -> None:
    rt = ToolRuntime()
    original = Finalizer(returns=[text("original finalizer")])
    replacement = Finalizer(returns=[text("replacement finalizer")])
    dispose = rt.register(echo_tool(finalize_content=original))

    async def swap(_exec: Any, next_: Any) -> Any:
        dispose()
        rt.register(echo_tool(finalize_content=replacement))
        return await next_()

    rt.on("tools/pre-execute", swap)
    result = await rt.execute(call())
    assert result.content == [text("original finalizer")]
    assert replacement.calls == []


@pytest.mark.anyio
async def test_unknown_tool_has_no_finalizer() -> None:
    rt = ToolRuntime()
    result = await rt.execute(call("ghost"))
    assert result.content == [text('Error: unknown tool "ghost"')]


# --- result materialisation -----------------------------------------------------------------


@pytest.mark.anyio
async def test_lossy_wrapper_failure_content_is_replaced_by_a_materialisation_error() -> None:
    rt = ToolRuntime()

    async def lossy(_exec: Any, _next: Any) -> Any:
        return ToolExecutionFailure(
            error=ToolFailure("x"), content=[{"type": "text", "text": math.nan}]
        )

    rt.register(echo_tool())
    rt.on("tools/execute", lossy)
    result = await rt.execute(call())
    assert error_text(result) == (LOSSY_RESULT, None, None, f"Error: {LOSSY_RESULT}")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "decision",
    [
        Accept(content=[{"type": "text", "text": -0.0}]),
        Accept(additional_contexts=({"role": "user", "content": [(1, 2)]},)),
        Accept(content="not a block list"),
    ],
    ids=["content", "contexts", "string-content"],
)
async def test_lossy_post_execute_replacement_is_a_materialisation_error(decision: Any) -> None:
    rt = ToolRuntime()
    finalizer = Finalizer()
    rt.register(echo_tool(finalize_content=finalizer))
    rt.on("tools/post-execute", _post(decision))
    result = await rt.execute(call())
    assert error_text(result)[0] == LOSSY_RESULT
    # The finalizer still ran exactly once, on the materialisation error.
    assert len(finalizer.calls) == 1
    assert finalizer.calls[0][1].error.message == LOSSY_RESULT


@pytest.mark.anyio
async def test_final_result_is_deep_frozen() -> None:
    rt = ToolRuntime()

    async def body(_a: Any, exec_: Any) -> Any:
        exec_.defer_context({"role": "user", "content": [text("c")]})
        return {"list": [1]}

    rt.register(
        echo_tool(
            body=body,
            output=ToolOutput(schema={"type": "json"}, render=lambda _a, v: [text("r")]),
        )
    )
    result = await rt.execute(call())
    for mutate in (
        lambda: result.value["list"].append(2),
        lambda: result.content.append(text("x")),
        lambda: result.content[0].update(text="x"),
        lambda: result.additional_contexts[0]["content"].append(text("x")),
    ):
        with pytest.raises(TypeError):
            mutate()
    with pytest.raises(AttributeError):
        result.value = 1  # type: ignore[misc]


# --- tools/result observers ------------------------------------------------------------------


@pytest.mark.anyio
async def test_observers_get_the_frozen_exec_and_the_returned_result() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    seen: list[Any] = []

    def sync(exec_: Any, result: Any) -> None:
        seen.append(("sync", exec_, result, exec_.frozen))
        with pytest.raises(AttributeError):
            exec_.signal = AbortController().signal

    async def asynchronous(exec_: Any, result: Any) -> None:
        seen.append(("async", exec_, result, exec_.frozen))

    rt.on("tools/result", sync)
    rt.on("tools/result", asynchronous)
    result = await rt.execute(call())
    assert [s[0] for s in seen] == ["sync", "async"]
    assert all(s[2] is result for s in seen)
    assert seen[0][1] is seen[1][1]
    assert all(s[3] is True for s in seen)


@pytest.mark.anyio
async def test_observer_failures_are_contained_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    ran: list[str] = []

    def broken(_exec: Any, _result: Any) -> None:
        raise RuntimeError("observer boom")

    async def broken_async(_exec: Any, _result: Any) -> None:
        raise ValueError("async observer boom")

    def healthy(_exec: Any, _result: Any) -> None:
        ran.append("healthy")

    rt.on("tools/result", broken)
    rt.on("tools/result", broken_async)
    rt.on("tools/result", healthy)
    with caplog.at_level(logging.WARNING):
        result = await rt.execute(call(call_id="c9"))
    assert result.value == "hi"  # type: ignore[union-attr]
    assert ran == ["healthy"]
    messages = [r.getMessage() for r in caplog.records]
    assert 'tool "echo" (c9): tools/result observer failed: observer boom' in messages
    assert 'tool "echo" (c9): tools/result observer failed: async observer boom' in messages


@pytest.mark.anyio
async def test_scoped_observers_see_only_their_agents_results() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    agent = rt.scope("agent")
    child = rt.scope("child", parent=agent)
    other = rt.scope("other")
    seen: list[Any] = []
    agent.on("tools/result", lambda e, _r: seen.append(e.agent))
    await rt.execute(call())
    await rt.execute(call(agent=other))
    await rt.execute(call(agent=agent))
    await rt.execute(call(agent=child))
    # Exact-scope dispatch: a child scope is an agent of its own.
    assert seen == [agent]


@pytest.mark.anyio
async def test_exactly_one_result_event_per_call_even_when_everything_fails() -> None:
    rt = ToolRuntime()
    rec = recorder(rt)
    rt.register(echo_tool(body=_raise, finalize_content=Finalizer(raises=RuntimeError("f"))))
    rt.on("tools/post-execute", _post(RuntimeError("post")))
    result = await rt.execute(call())
    assert error_text(result)[0] == "f"
    assert rec.count("result") == 1
