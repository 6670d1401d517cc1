"""Context and terminal forwarding from sub-calls to the outer ``run_code`` result, and
outer cancellation (reference §3.4 "Outer cancellation", §3.8, §3.9)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import msgspec
import pytest
from code_mode_support import ScriptedRuntime, code_rt, echo_tool, error_text, run_code

from codemode.engine import (
    AbortController,
    Accept,
    Block,
    CodeRunError,
    CodeRunRequest,
    CodeRunResult,
    MemorySessionLog,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.testing import ToolCallError

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
SOURCE = {"kind": "plugin", "plugin": "tools-code-mode"}


def context(label: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [text(label)],
        "source": {"kind": "plugin", "plugin": "test"},
    }


def image_tool(name: str = "shot") -> Any:
    async def body(args: Any, ctx: Any) -> Any:
        return "a screenshot"

    return define_tool(
        name=name,
        description="Returns an image.",
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v), IMAGE]),
        execute=body,
    )


# ------------------------------------------------------------------- contexts


@pytest.mark.anyio
async def test_image_bearing_success_is_attached_after_the_run() -> None:
    async def program(tools: Any, print: Any) -> Any:
        value = await tools.shot({})
        await tools.echo({"value": "no image"})
        return value

    rt, _ = code_rt(program)
    rt.register(image_tool())
    rt.register(echo_tool("echo"))
    result = await run_code(rt)
    assert result.value == {"logs": [], "result": "a screenshot"}
    assert list(result.additional_contexts) == [
        {"role": "user", "content": [text("a screenshot"), IMAGE], "source": SOURCE}
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["block", "strip", "fail"])
async def test_no_image_context_when_the_image_did_not_survive(policy: str) -> None:
    async def program(tools: Any, print: Any) -> Any:
        try:
            await tools.shot({})
        except ToolCallError as exc:
            return exc.message
        return "ok"

    rt, _ = code_rt(program)
    rt.register(image_tool())

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name != "shot":
            return await next_()
        if policy == "block":
            return Block([text("blocked")])
        if policy == "strip":
            return Accept(content=[text("image removed")])
        return Accept(value=42)  # fails output validation: an error result

    rt.on("tools/post-execute", post)
    result = await run_code(rt)
    assert list(result.additional_contexts) == []


@pytest.mark.anyio
async def test_sub_call_contexts_are_forwarded_in_submission_order() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        ctx.defer_context(context(f"deferred {args['value']}"))
        if args["value"] == "a":
            await anyio.sleep(0.02)  # finishes last, still forwarded first
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(tools.echo({"value": "a"}), tools.echo({"value": "b"}))

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True, body=body))

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        decision = await next_()
        if exec_.name == "echo":
            return Accept(additional_contexts=[context(f"post {exec_.call_id}")])
        return decision

    rt.on("tools/post-execute", post)
    result = await run_code(rt)
    assert result.value["result"] == ["a", "b"]
    assert list(result.additional_contexts) == [
        context("deferred a"),
        context("post call-1:code:1"),
        context("deferred b"),
        context("post call-1:code:2"),
    ]


@pytest.mark.anyio
async def test_outer_context_order_deferred_then_wrapper_then_post_execute() -> None:
    async def program(tools: Any, print: Any) -> Any:
        await tools.echo({"value": "x"})
        return "done"

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def post_sub(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "echo":
            return Accept(additional_contexts=[context("from sub-call")])
        return await next_()

    async def wrap(exec_: Any, next_: Any) -> Any:
        result = await next_()
        if exec_.name != "run_code":
            return result
        extra = (*result.additional_contexts, context("from wrapper"))
        return msgspec.structs.replace(result, additional_contexts=extra)

    async def post_outer(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "run_code":
            return Accept(additional_contexts=[context("from post-execute")])
        return await next_()

    rt.on("tools/post-execute", post_sub)
    rt.on("tools/execute", wrap)
    rt.on("tools/post-execute", post_outer)
    result = await run_code(rt)
    assert list(result.additional_contexts) == [
        context("from sub-call"),
        context("from wrapper"),
        context("from post-execute"),
    ]


@pytest.mark.anyio
async def test_contexts_are_kept_when_the_program_fails() -> None:
    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        await request.bindings[0].functions["shot"]({})
        return CodeRunResult(logs=[], error=CodeRunError("exception", "program failed later"))

    rt = ToolRuntime(mode="both", code_runtime=ScriptedRuntime(behavior))
    rt.register(image_tool())
    result = await run_code(rt)
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert list(result.additional_contexts) == [
        {"role": "user", "content": [text("a screenshot"), IMAGE], "source": SOURCE}
    ]


@pytest.mark.anyio
async def test_contexts_are_dropped_when_the_outer_post_execute_blocks() -> None:
    async def program(tools: Any, print: Any) -> Any:
        return await tools.shot({})

    rt, _ = code_rt(program)
    rt.register(image_tool())

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "run_code":
            return Block([text("no")], additional_contexts=[context("block's own")])
        return await next_()

    rt.on("tools/post-execute", post)
    result = await run_code(rt)
    assert result.is_error and result.error.message == "no"
    assert list(result.additional_contexts) == [context("block's own")]


# -------------------------------------------------------------- conclude turn


@pytest.mark.anyio
async def test_conclude_turn_is_forwarded_to_the_outer_success() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        ctx.conclude_turn()
        return "final answer"

    async def program(tools: Any, print: Any) -> Any:
        return await tools.finish({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("finish", body=body))
    result = await run_code(rt)
    assert result.concludes_turn is True
    assert result.to_json()["concludesTurn"] is True


@pytest.mark.anyio
async def test_a_policy_that_fails_the_nested_call_strips_conclude_turn() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        ctx.conclude_turn()
        return "final answer"

    async def program(tools: Any, print: Any) -> Any:
        try:
            await tools.finish({"value": "x"})
        except ToolCallError as exc:
            return f"recovered: {exc.message}"

    rt, _ = code_rt(program)
    rt.register(echo_tool("finish", body=body))

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "finish":
            return Block([text("not yet")])
        return await next_()

    rt.on("tools/post-execute", post)
    result = await run_code(rt)
    assert result.value["result"] == "recovered: not yet"
    assert result.concludes_turn is False
    assert "concludesTurn" not in result.to_json()


@pytest.mark.anyio
async def test_a_failed_run_never_concludes_the_turn() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        ctx.conclude_turn()
        return "x"

    async def program(tools: Any, print: Any) -> Any:
        await tools.finish({"value": "x"})
        raise RuntimeError("after the conclusion")

    rt, _ = code_rt(program)
    rt.register(echo_tool("finish", body=body))
    result = await run_code(rt)
    assert result.is_error and result.concludes_turn is False


# -------------------------------------------------------------- cancellation


@pytest.mark.anyio
async def test_outer_abort_honoured_by_the_runtime_is_code_run_failed_abort() -> None:
    controller = AbortController()
    reasons: list[Any] = []
    started = anyio.Event()

    async def slow(args: Any, ctx: Any) -> Any:
        started.set()
        await ctx.signal.wait()
        reasons.append(ctx.signal.reason)
        return "x"

    async def program(tools: Any, print: Any) -> Any:
        print("before")
        await asyncio.gather(tools.slow({"value": "first"}), tools.slow({"value": "queued"}))

    rt, _ = code_rt(program)
    calls: list[Any] = []
    rt.register(echo_tool("slow", body=slow, calls=calls))
    scope = rt.scope("agent", session=MemorySessionLog())
    results: list[Any] = []

    async def execute() -> None:
        results.append(await run_code(rt, agent=scope, signal=controller.signal))

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        with anyio.fail_after(2):
            await started.wait()
        controller.abort("user-cancel")
    (result,) = results
    assert result.error.message == "code run failed (abort): user-cancel\nCaptured output:\nbefore"
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert reasons == ["user-cancel"]
    assert calls == [{"value": "first"}]
    events = scope.session.events
    assert [(e["type"], e["subCallId"]) for e in events] == [
        ("tool/code-dispatch-start", "call-1:code:1"),
        ("tool/code-dispatch", "call-1:code:1"),
    ]
    assert events[1]["isError"] is True
    assert events[1]["content"] == [{"type": "text", "text": "Error: tool call aborted"}]


@pytest.mark.anyio
async def test_a_program_that_swallows_the_abort_and_returns_is_aborted() -> None:
    controller = AbortController()
    messages: list[str] = []

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        controller.abort("cancelled-mid-run")
        try:
            await request.bindings[0].functions["echo"]({"value": "x"})
        except Exception as exc:
            messages.append(str(exc))
        return CodeRunResult(logs=[], value="recovered")

    rt = ToolRuntime(mode="code", code_runtime=ScriptedRuntime(behavior))
    calls: list[Any] = []
    rt.register(echo_tool("echo", calls=calls))
    result = await run_code(rt, signal=controller.signal)
    assert messages == ["run_code run is over (cancelled-mid-run); echo not dispatched"]
    assert calls == []
    assert result.error.message == "tool call aborted"
    assert (result.error.info.name, result.error.info.code) == ("AbortError", "ABORTED")
    assert error_text(result) == "Error: tool call aborted"


@pytest.mark.anyio
async def test_an_in_flight_result_is_discarded_when_the_outer_call_aborts() -> None:
    controller = AbortController()
    messages: list[str] = []

    async def slow(args: Any, ctx: Any) -> Any:
        await ctx.signal.wait()
        return "x"

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        call = asyncio.ensure_future(request.bindings[0].functions["slow"]({"value": "x"}))
        await anyio.sleep(0.01)
        controller.abort("user-cancel")
        try:
            await call
        except Exception as exc:
            messages.append(str(exc))
        return CodeRunResult(logs=[], value="swallowed")

    rt = ToolRuntime(mode="code", code_runtime=ScriptedRuntime(behavior))
    rt.register(echo_tool("slow", body=slow))
    result = await run_code(rt, signal=controller.signal)
    assert messages == ["run_code run is over (user-cancel); slow result discarded"]
    assert result.error.info.code == "ABORTED"


@pytest.mark.anyio
async def test_pre_aborted_outer_call_never_reaches_the_runtime() -> None:
    controller = AbortController()
    controller.abort("too-late")
    rt, runtime = code_rt()
    calls: list[Any] = []
    rt.register(echo_tool("echo", calls=calls))
    result = await run_code(rt, signal=controller.signal)
    assert result.to_json() == {
        "isError": True,
        "error": {
            "message": "tool call aborted before dispatch",
            "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
        },
        "content": [{"type": "text", "text": "Error: tool call aborted before dispatch"}],
    }
    assert runtime.runs == 0 and calls == []


@pytest.mark.anyio
async def test_sub_call_signal_is_the_run_signal_fused_with_wrappers() -> None:
    seen: list[Any] = []

    async def body(args: Any, ctx: Any) -> Any:
        seen.append((ctx.signal.aborted, ctx.parent is not None))
        return "x"

    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", body=body))
    assert (await run_code(rt)).value["result"] == "x"
    assert seen == [(False, True)]
