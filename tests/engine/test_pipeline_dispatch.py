"""Stage 7: the tools/execute waterfall, signal fusion, body re-resolution, normalisation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pipeline_support import ABORTED, BEFORE, call, ctx, echo_tool, error_text, raw_tool, recorder

from codemode.engine import (
    AbortController,
    AbortSignal,
    Accept,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolOutput,
    ToolRuntime,
    text,
)
from codemode.engine._pipeline import Dispatch

# --- signal replacement and fusion -----------------------------------------------------


@pytest.mark.anyio
async def test_wrapper_signal_is_fused_with_the_caller_signal_for_the_body() -> None:
    rt = ToolRuntime()
    caller = AbortController()
    wrapper = AbortController()
    seen: dict[str, Any] = {}

    async def body(_args: Any, exec_: Any) -> Any:
        sig = exec_.signal
        seen["body_signal"] = sig
        assert sig is not caller.signal and sig is not wrapper.signal
        assert not sig.aborted
        caller.abort("caller stop")
        seen["fused_after_caller_abort"] = sig.aborted
        seen["reason"] = sig.reason
        seen["wrapper_after_caller_abort"] = wrapper.signal.aborted
        return "done"

    async def wrap(exec_: Any, next_: Any) -> Any:
        original = exec_.signal
        seen["original_is_caller"] = original is caller.signal
        exec_.signal = wrapper.signal
        try:
            result = await next_()
            seen["restored_to_wrapper"] = exec_.signal is wrapper.signal
            return result
        finally:
            exec_.signal = original

    rt.register(echo_tool(body=body))
    rt.on("tools/execute", wrap)
    result = await rt.execute(call(signal=caller.signal))
    assert seen == {
        "original_is_caller": True,
        "body_signal": seen["body_signal"],
        "fused_after_caller_abort": True,
        "reason": "caller stop",
        "wrapper_after_caller_abort": False,
        "restored_to_wrapper": True,
    }
    # The caller aborted while the body ran: its success became ABORTED.
    assert error_text(result) == (*ABORTED, "Error: tool call aborted")


@pytest.mark.anyio
async def test_wrapper_abort_reaches_the_body_but_never_the_caller() -> None:
    rt = ToolRuntime()
    caller = AbortController()
    wrapper = AbortController()
    observed: list[Any] = []

    async def body(_args: Any, exec_: Any) -> Any:
        wrapper.abort("wrapper deadline")
        observed.append((exec_.signal.aborted, exec_.signal.reason))
        return "finished anyway"

    async def wrap(exec_: Any, next_: Any) -> Any:
        exec_.signal = wrapper.signal
        return await next_()

    rt.register(echo_tool(body=body))
    rt.on("tools/execute", wrap)
    rec = recorder(rt)
    result = await rt.execute(call(signal=caller.signal))
    assert observed == [(True, "wrapper deadline")]
    assert caller.signal.aborted is False
    # The fused signal was aborted when the body returned a success.
    assert error_text(result)[:3] == ABORTED
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_body_can_wait_on_the_fused_signal() -> None:
    rt = ToolRuntime()
    caller = AbortController()

    async def body(_args: Any, exec_: Any) -> Any:
        await exec_.signal.wait()
        return "woke"

    async def wrap(exec_: Any, next_: Any) -> Any:
        exec_.signal = AbortController().signal
        return await next_()

    rt.register(echo_tool(body=body))
    rt.on("tools/execute", wrap)

    async def stop() -> None:
        await anyio.sleep(0.01)
        caller.abort("stop")

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
        with anyio.fail_after(2):
            result = await rt.execute(call(signal=caller.signal))
    assert error_text(result)[:3] == ABORTED


@pytest.mark.anyio
async def test_already_aborted_wrapper_signal_means_no_body_call() -> None:
    rt = ToolRuntime()
    bodies: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        bodies.append(args)
        return "x"

    async def wrap(exec_: Any, next_: Any) -> Any:
        exec_.signal = AbortSignal.aborted_with("pre-expired")
        return await next_()

    rt.register(echo_tool(body=body))
    rt.on("tools/execute", wrap)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result)[:3] == BEFORE
    assert bodies == []
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_wrapper_may_only_replace_the_signal_with_a_signal() -> None:
    rt = ToolRuntime()

    async def wrap(exec_: Any, next_: Any) -> Any:
        exec_.signal = "not a signal"
        return await next_()

    rt.register(echo_tool())
    rt.on("tools/execute", wrap)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result)[:3] == ("ToolExecution.signal must be an AbortSignal", None, None)
    # A throwing wrapper is a final result: post-execute is skipped (the recorder's
    # tools/execute listener is inside the failing wrapper and never runs).
    assert rec.events == ["pre", "result"]


# --- short-circuit and normalisation ------------------------------------------------------


def _meta_tool(body: Any = None) -> Any:
    return echo_tool(
        body=body,
        output=ToolOutput(
            schema={"type": "string"},
            render=lambda _a, v: [text(f"rendered:{v}")],
            presentation_meta=lambda _a, v: {"len": len(v)},
        ),
    )


@pytest.mark.anyio
async def test_short_circuit_success_is_revalidated_and_rerendered() -> None:
    rt = ToolRuntime()
    bodies: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        bodies.append(args)
        return "from body"

    async def cached(_exec: Any, _next: Any) -> Any:
        return ToolExecutionSuccess(
            value="cached",
            content=[text("wrapper content is ignored")],
            meta={"ignored": True},
            additional_contexts=(ctx("wrapper"),),
        )

    rt.register(_meta_tool(body))
    rt.on("tools/execute", cached)
    result = await rt.execute(call())
    assert isinstance(result, ToolExecutionSuccess)
    assert bodies == []
    assert result.value == "cached"
    assert result.content == [text("rendered:cached")]
    assert result.meta == {"len": 6}
    assert list(result.additional_contexts) == [ctx("wrapper")]


@pytest.mark.anyio
async def test_short_circuit_with_an_invalid_value_is_invalid_tool_output() -> None:
    rt = ToolRuntime()

    async def cached(_exec: Any, _next: Any) -> Any:
        return ToolExecutionSuccess(value=42, content=[text("42")])

    rt.register(echo_tool())
    rt.on("tools/execute", cached)
    rec = recorder(rt)
    result = await rt.execute(call())
    message = 'tool "echo" returned invalid output: "value" must be a string'
    assert error_text(result) == (
        message,
        "ToolOutputError",
        "INVALID_TOOL_OUTPUT",
        f"Error: {message}",
    )
    # Normalisation failures are final (the wrapper boundary threw).
    assert rec.events == ["pre", "result"]


@pytest.mark.anyio
async def test_wrapper_error_result_is_reshaped_keeping_every_field() -> None:
    rt = ToolRuntime()

    async def fail(_exec: Any, _next: Any) -> Any:
        return ToolExecutionFailure(
            error=ToolFailure("rate limited", ToolErrorInfo("RateLimit", "RATE_LIMITED")),
            content=[text("slow down")],
            meta={"retry": 3},
            additional_contexts=(ctx("limit"),),
        )

    rt.register(echo_tool())
    rt.on("tools/execute", fail)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert result.to_json() == {
        "isError": True,
        "error": {"message": "rate limited", "info": {"name": "RateLimit", "code": "RATE_LIMITED"}},
        "content": [text("slow down")],
        "meta": {"retry": 3},
        "additionalContexts": [ctx("limit")],
    }
    assert rec.events == ["pre", "post", "result"]


@pytest.mark.anyio
async def test_wrapper_rewriting_a_canonical_success_is_revalidated() -> None:
    rt = ToolRuntime()

    async def rewrite(_exec: Any, next_: Any) -> Any:
        result = await next_()
        return ToolExecutionSuccess(
            value=result.value.upper(), content=[text("ignored")], additional_contexts=()
        )

    rt.register(_meta_tool())
    rt.on("tools/execute", rewrite)
    result = await rt.execute(call())
    assert result.value == "HI"  # type: ignore[union-attr]
    assert result.content == [text("rendered:HI")]
    assert result.meta == {"len": 2}


@pytest.mark.anyio
async def test_a_result_cached_from_another_dispatch_is_revalidated_for_this_tool() -> None:
    rt = ToolRuntime()
    cache: list[Any] = []

    async def replay(_exec: Any, next_: Any) -> Any:
        if cache:
            return cache[0]
        result = await next_()
        cache.append(result)
        return result

    async def number(_args: Any, _exec: Any) -> Any:
        return 7

    rt.register(echo_tool())
    rt.register(raw_tool("num", body=number, schema={"type": "integer"}))
    rt.on("tools/execute", replay)
    first = await rt.execute(call())
    assert first.value == "hi"  # type: ignore[union-attr]
    second = await rt.execute(call("num", arguments={}))
    assert error_text(second)[:3] == (
        'tool "num" returned invalid output: "value" must be an integer',
        "ToolOutputError",
        "INVALID_TOOL_OUTPUT",
    )


@pytest.mark.anyio
async def test_throwing_wrapper_is_final_and_skips_post_execute() -> None:
    rt = ToolRuntime()
    finalized: list[Any] = []

    async def boom(_exec: Any, next_: Any) -> Any:
        await next_()
        raise RuntimeError("wrapper bug")

    rt.register(echo_tool(finalize_content=lambda _e, r: finalized.append(r)))
    rt.on("tools/execute", boom)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result) == ("wrapper bug", None, None, "Error: wrapper bug")
    assert rec.events == ["pre", "execute", "result"]
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_wrapper_returning_a_non_result_is_a_final_error() -> None:
    rt = ToolRuntime()

    async def bad(_exec: Any, _next: Any) -> Any:
        return {"isError": False, "value": "hi"}

    rt.register(echo_tool())
    rt.on("tools/execute", bad)
    result = await rt.execute(call())
    assert error_text(result)[0] == (
        "tools/execute returned dict; expected a ToolExecutionSuccess or ToolExecutionFailure"
    )


@pytest.mark.anyio
async def test_a_retrying_wrapper_may_call_next_twice() -> None:
    rt = ToolRuntime()
    attempts: list[int] = []

    async def flaky(_args: Any, _exec: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("transient")
        return "second try"

    async def retry(_exec: Any, next_: Any) -> Any:
        result = await next_()
        if result.is_error:
            result = await next_()
        return result

    rt.register(echo_tool(body=flaky))
    rt.on("tools/execute", retry)
    result = await rt.execute(call())
    assert result.value == "second try"  # type: ignore[union-attr]
    assert len(attempts) == 2


@pytest.mark.anyio
async def test_a_signal_the_body_sets_does_not_outlive_the_body() -> None:
    rt = ToolRuntime()
    caller = AbortController()
    own = AbortController()
    seen: dict[str, Any] = {}

    async def body(_args: Any, exec_: Any) -> Any:
        seen["body"] = exec_.signal
        exec_.signal = own.signal
        return "x"

    async def post(exec_: Any, _result: Any, next_: Any) -> Any:
        seen["post"] = exec_.signal
        return await next_()

    rt.register(echo_tool(body=body))
    rt.on("tools/post-execute", post)
    result = await rt.execute(call(signal=caller.signal))
    assert not result.is_error
    # No wrapper: the body ran with the caller's signal itself, and after it the
    # execution's signal is the caller's again.
    assert seen["body"] is caller.signal
    assert seen["post"] is caller.signal


# --- body re-resolution -------------------------------------------------------------------


@pytest.mark.anyio
async def test_tool_unregistered_before_dispatch_is_unknown_tool() -> None:
    rt = ToolRuntime()
    bodies: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        bodies.append(args)
        return "x"

    dispose = rt.register(echo_tool(body=body))

    async def unregister(_exec: Any, next_: Any) -> Any:
        dispose()
        return await next_()

    rt.on("tools/execute", unregister)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result) == (
        'unknown tool "echo"',
        "ToolNotFoundError",
        "UNKNOWN_TOOL",
        'Error: unknown tool "echo"',
    )
    assert bodies == []
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_body_is_the_definition_registered_at_dispatch_time() -> None:
    rt = ToolRuntime()

    async def old(_a: Any, _e: Any) -> Any:
        return "old"

    async def new(_a: Any, _e: Any) -> Any:
        return "new"

    holder = {"dispose": rt.register(echo_tool(body=old))}

    async def swap(_exec: Any, next_: Any) -> Any:
        holder["dispose"]()
        rt.register(echo_tool(body=new))
        return await next_()

    rt.on("tools/pre-execute", swap)
    result = await rt.execute(call())
    assert result.value == "new"  # type: ignore[union-attr]


async def _old(_a: Any, _e: Any) -> Any:
    return "old"


async def _new(_a: Any, _e: Any) -> Any:
    return "new"


@pytest.mark.anyio
async def test_a_swap_between_the_phases_runs_the_new_body_with_no_listener() -> None:
    # No listener, so stage 1's definition is reused at stage 7 while the registry's
    # version holds: a swap in between (a scheduler's other call) must still be seen.
    rt = ToolRuntime()
    dispose = rt.register(echo_tool(body=_old))
    pipeline = rt.pipeline
    kept = pipeline.prepare_now(call(call_id="kept"))
    swapped = pipeline.prepare_now(call(call_id="swapped"))
    assert isinstance(kept, Dispatch) and isinstance(swapped, Dispatch)
    first = pipeline.commit_now(await pipeline.run(kept))
    dispose()
    rt.register(echo_tool(body=_new))
    second = pipeline.commit_now(await pipeline.run(swapped))
    assert first is not None and first.value == "old"  # type: ignore[union-attr]
    assert second is not None and second.value == "new"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_resolution_hint_from_an_older_registry_version_is_ignored() -> None:
    rt = ToolRuntime()
    dispose = rt.register(echo_tool(body=_old))
    nested = call(parent=object())
    mode, tool, stamp = rt.classify(nested)
    assert mode == "exclusive"  # echo_tool declares no classifier
    assert tool is not None
    dispose()
    rt.register(echo_tool(body=_new))
    # Stage 1 looks the definition up again (the hint's version is past), and so does
    # stage 7: the body and the output validation are the new definition's.
    gate = rt.pipeline.prepare_now(nested, (tool, stamp))
    assert isinstance(gate, Dispatch)
    assert gate.exec._tool is not tool
    result = rt.pipeline.commit_now(await rt.pipeline.run(gate))
    assert result is not None and result.value == "new"  # type: ignore[union-attr]
    # At the current version the hint is taken as it is.
    _mode, tool, stamp = rt.classify(nested)
    gate = rt.pipeline.prepare_now(nested, (tool, stamp))
    assert isinstance(gate, Dispatch) and gate.exec._tool is tool


@pytest.mark.anyio
async def test_unknown_tool_traverses_every_policy_stage() -> None:
    rt = ToolRuntime()
    rec = recorder(rt)
    result = await rt.execute(call("ghost"))
    assert error_text(result)[:3] == ('unknown tool "ghost"', "ToolNotFoundError", "UNKNOWN_TOOL")
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_unknown_tool_then_caller_abort_keeps_the_error() -> None:
    rt = ToolRuntime()
    controller = AbortController()

    async def abort(_exec: Any, next_: Any) -> Any:
        result = await next_()
        controller.abort("late")
        return result

    rt.on("tools/execute", abort)
    result = await rt.execute(call("ghost", signal=controller.signal))
    assert error_text(result)[0] == 'unknown tool "ghost"'


# --- cancellation after dispatch ------------------------------------------------------------


@pytest.mark.anyio
async def test_success_after_caller_abort_becomes_aborted_and_keeps_contexts() -> None:
    rt = ToolRuntime()
    controller = AbortController()

    async def body(_args: Any, exec_: Any) -> Any:
        exec_.defer_context(ctx("deferred"))
        controller.abort("stop")
        return "done"

    rt.register(echo_tool(body=body))
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ABORTED
    assert list(result.additional_contexts) == [ctx("deferred")]


@pytest.mark.anyio
async def test_short_circuit_success_after_caller_abort_is_aborted_before_dispatch() -> None:
    rt = ToolRuntime()
    controller = AbortController()

    async def cached(_exec: Any, _next: Any) -> Any:
        controller.abort("stop")
        return ToolExecutionSuccess(value="cached", content=[], additional_contexts=(ctx("c"),))

    rt.register(echo_tool())
    rt.on("tools/execute", cached)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == BEFORE
    assert list(result.additional_contexts) == [ctx("c")]


@pytest.mark.anyio
async def test_errors_are_never_replaced_by_cancellation() -> None:
    rt = ToolRuntime()
    controller = AbortController()

    async def body(_args: Any, _exec: Any) -> Any:
        controller.abort("stop")
        raise RuntimeError("tool's own failure")

    rt.register(echo_tool(body=body))
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ("tool's own failure", None, None)


# --- contexts and conclude_turn -------------------------------------------------------------


@pytest.mark.anyio
async def test_deferred_contexts_come_first_then_result_then_post_execute_contexts() -> None:
    rt = ToolRuntime()

    async def body(_args: Any, exec_: Any) -> Any:
        exec_.defer_context(ctx("deferred-1"))
        exec_.defer_context(ctx("deferred-2"))
        return "v"

    async def wrap(_exec: Any, next_: Any) -> Any:
        result = await next_()
        return ToolExecutionSuccess(
            value=result.value, content=result.content, additional_contexts=(ctx("wrapper"),)
        )

    async def post(_exec: Any, _result: Any, next_: Any) -> Any:
        await next_()
        return Accept(additional_contexts=(ctx("post"),))

    rt.register(echo_tool(body=body))
    rt.on("tools/execute", wrap)
    rt.on("tools/post-execute", post)
    result = await rt.execute(call())
    assert [c["source"]["plugin"] for c in result.additional_contexts] == [
        "deferred-1",
        "deferred-2",
        "wrapper",
        "post",
    ]
    assert result.to_json()["additionalContexts"][0] == ctx("deferred-1")


@pytest.mark.anyio
async def test_deferred_contexts_survive_a_body_failure() -> None:
    rt = ToolRuntime()

    async def body(_args: Any, exec_: Any) -> Any:
        exec_.defer_context(ctx("kept"))
        raise RuntimeError("failed")

    rt.register(echo_tool(body=body))
    result = await rt.execute(call())
    assert error_text(result)[0] == "failed"
    assert list(result.additional_contexts) == [ctx("kept")]


@pytest.mark.anyio
async def test_conclude_turn_marks_only_a_success() -> None:
    rt = ToolRuntime()
    held: list[Any] = []

    async def body(args: Any, exec_: Any) -> Any:
        exec_.conclude_turn()
        held.append(exec_)
        if args["value"] == "fail":
            raise RuntimeError("no")
        return args["value"]

    rt.register(echo_tool(body=body))
    ok = await rt.execute(call())
    assert ok.concludes_turn is True
    assert ok.to_json()["concludesTurn"] is True
    failed = await rt.execute(call(arguments={"value": "fail"}))
    assert failed.concludes_turn is False
    assert "concludesTurn" not in failed.to_json()
    plain = ToolRuntime()
    plain.register(echo_tool())
    quiet = await plain.execute(call())
    assert quiet.concludes_turn is False
    assert "concludesTurn" not in quiet.to_json() and "meta" not in quiet.to_json()
    # Deferring after the call settled is misuse.
    with pytest.raises(RuntimeError):
        held[0].defer_context(ctx("late"))
