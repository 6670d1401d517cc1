"""Stages 8-10: tools/post-execute, output validation, finalize_content, tools/result."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pipeline_support import ABORTED, BEFORE, call, ctx, echo_tool, error_text, recorder

from codemode.engine import (
    AbortController,
    Accept,
    Block,
    ToolDefinition,
    ToolExecutionSuccess,
    ToolOutput,
    ToolRuntime,
    text,
)


def _labels(result: Any) -> list[str]:
    return [c["source"]["plugin"] for c in result.additional_contexts]


def _deciding(decision: Any) -> Any:
    async def post(_exec: Any, _result: Any, _next: Any) -> Any:
        return decision

    return post


def _meta_echo(body: Any = None, **kwargs: Any) -> Any:
    return echo_tool(
        body=body,
        output=ToolOutput(
            schema={"type": "string"},
            render=lambda _a, v: [text(f"<{v}>")],
            presentation_meta=lambda _a, v: {"chars": len(v)},
        ),
        **kwargs,
    )


async def _deferring(_args: Any, exec_: Any) -> Any:
    exec_.defer_context(ctx("deferred"))
    return "value"


# --- accept --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_accept_content_replaces_content_only() -> None:
    rt = ToolRuntime()
    rt.register(_meta_echo(_deferring))
    rt.on("tools/post-execute", _deciding(Accept(content=[text("replaced")])))
    result = await rt.execute(call())
    assert isinstance(result, ToolExecutionSuccess)
    assert (result.value, result.content, result.meta) == (
        "value",
        [text("replaced")],
        {"chars": 5},
    )
    assert _labels(result) == ["deferred"]


@pytest.mark.anyio
async def test_accept_value_is_revalidated_and_rerendered() -> None:
    rt = ToolRuntime()
    rt.register(_meta_echo(_deferring))
    rt.on(
        "tools/post-execute",
        _deciding(Accept(value="replacement", additional_contexts=(ctx("decision"),))),
    )
    result = await rt.execute(call())
    assert (result.value, result.content, result.meta) == (  # type: ignore[union-attr]
        "replacement",
        [text("<replacement>")],
        {"chars": 11},
    )
    assert _labels(result) == ["deferred", "decision"]


@pytest.mark.anyio
async def test_accept_value_failing_the_schema_is_invalid_tool_output() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    rt.on("tools/post-execute", _deciding(Accept(value=["not", "a", "string"])))
    result = await rt.execute(call())
    assert error_text(result)[:3] == (
        'tool "echo" returned invalid output: "value" must be a string',
        "ToolOutputError",
        "INVALID_TOOL_OUTPUT",
    )


@pytest.mark.anyio
async def test_accept_replacing_both_value_and_content_is_an_error() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    rt.on("tools/post-execute", _deciding(Accept(value="v", content=[text("c")])))
    result = await rt.execute(call())
    message = "tools/post-execute accept decision cannot replace both value and content"
    assert error_text(result) == (message, None, None, f"Error: {message}")


@pytest.mark.anyio
async def test_value_replacement_of_a_failed_result_is_an_error() -> None:
    rt = ToolRuntime()

    async def body(_a: Any, _e: Any) -> Any:
        raise RuntimeError("body failed")

    rt.register(echo_tool(body=body))
    rt.on("tools/post-execute", _deciding(Accept(value="rescued")))
    result = await rt.execute(call())
    assert error_text(result)[:3] == (
        "tools/post-execute cannot replace the value of a failed result",
        None,
        None,
    )


@pytest.mark.anyio
async def test_accept_content_on_a_failure_keeps_the_error() -> None:
    rt = ToolRuntime()

    async def body(_a: Any, _e: Any) -> Any:
        raise RuntimeError("body failed")

    rt.register(echo_tool(body=body))
    rt.on("tools/post-execute", _deciding(Accept(content=[text("softened")])))
    result = await rt.execute(call())
    assert error_text(result) == ("body failed", None, None, "softened")


# --- block ----------------------------------------------------------------------------------


FEEDBACK_MESSAGES = [
    ([text("line one"), text("line two")], "line one\nline two"),
    (
        [text("look:"), {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
        "look:\n[image content]",
    ),
    ([], "tool result blocked by post-execute policy"),
    ([text("")], "tool result blocked by post-execute policy"),
    ([{"type": "resource", "uri": "x"}], "[resource content]"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("feedback", "message"), FEEDBACK_MESSAGES)
async def test_block_message_derives_from_the_feedback(feedback: list[Any], message: str) -> None:
    rt = ToolRuntime()
    rt.register(echo_tool(body=_deferring))
    rt.on("tools/post-execute", _deciding(Block(feedback)))
    result = await rt.execute(call())
    assert result.to_json() == {
        "isError": True,
        "error": {"message": message},
        "content": feedback,
    }


@pytest.mark.anyio
async def test_block_keeps_only_its_own_contexts() -> None:
    rt = ToolRuntime()

    async def wrap(_exec: Any, next_: Any) -> Any:
        result = await next_()
        return ToolExecutionSuccess(
            value=result.value, content=[], additional_contexts=(ctx("wrapper"),)
        )

    rt.register(echo_tool(body=_deferring))
    rt.on("tools/execute", wrap)
    rt.on(
        "tools/post-execute",
        _deciding(Block([text("nope")], additional_contexts=(ctx("block"),))),
    )
    result = await rt.execute(call())
    assert error_text(result) == ("nope", None, None, "nope")
    assert _labels(result) == ["block"]


@pytest.mark.anyio
async def test_throwing_post_execute_listener_is_an_error_result() -> None:
    rt = ToolRuntime()
    finalized: list[Any] = []
    rt.register(echo_tool(finalize_content=lambda _e, r: finalized.append(r)))

    async def boom(_exec: Any, _result: Any, _next: Any) -> Any:
        raise ValueError("post policy crashed")

    rt.on("tools/post-execute", boom)
    result = await rt.execute(call())
    assert error_text(result)[:3] == ("post policy crashed", None, None)
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_invalid_post_decision_is_an_error_result() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    rt.on("tools/post-execute", _deciding(None))
    result = await rt.execute(call())
    assert error_text(result)[0] == (
        "tools/post-execute returned None; expected Accept(...) or Block(...)"
    )


@pytest.mark.anyio
async def test_post_execute_sees_a_frozen_result() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    seen: list[Any] = []

    async def inspect(_exec: Any, result: Any, next_: Any) -> Any:
        seen.append(result)
        with pytest.raises(TypeError):
            result.content.append(text("x"))
        with pytest.raises(TypeError):
            result.content[0]["text"] = "x"
        with pytest.raises(AttributeError):
            result.value = "x"
        return await next_()

    rt.on("tools/post-execute", inspect)
    result = await rt.execute(call())
    assert result.content == [text("hi")]
    assert seen[0].value == "hi"


@pytest.mark.anyio
async def test_cancel_rule_applies_after_post_execute() -> None:
    rt = ToolRuntime()
    controller = AbortController()

    async def abort(_exec: Any, _result: Any, next_: Any) -> Any:
        controller.abort("late")
        return await next_()

    rt.register(echo_tool(body=_deferring))
    rt.on("tools/post-execute", abort)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ABORTED
    assert _labels(result) == ["deferred"]

    async def short_circuit(_exec: Any, _next: Any) -> Any:
        return ToolExecutionSuccess(value="cached", content=[])

    rt.on("tools/execute", short_circuit)
    controller = AbortController()
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == BEFORE


@pytest.mark.anyio
async def test_post_execute_block_after_cancellation_keeps_the_block() -> None:
    rt = ToolRuntime()
    controller = AbortController()

    async def block(_exec: Any, _result: Any, _next: Any) -> Any:
        controller.abort("late")
        return Block([text("blocked")])

    rt.register(echo_tool())
    rt.on("tools/post-execute", block)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ("blocked", None, None)


@pytest.mark.anyio
async def test_waterfall_order_first_registered_outermost_prepend_outside() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    order: list[str] = []

    def pre(label: str) -> Any:
        async def listener(_exec: Any, next_: Any) -> Any:
            order.append(f"pre>{label}")
            decision = await next_()
            order.append(f"pre<{label}")
            return decision

        return listener

    def post(label: str) -> Any:
        async def listener(_exec: Any, _result: Any, next_: Any) -> Any:
            order.append(f"post>{label}")
            decision = await next_()
            order.append(f"post<{label}")
            return decision

        return listener

    for label in ("a", "b"):
        rt.on("tools/pre-execute", pre(label))
        rt.on("tools/post-execute", post(label))
    rt.on("tools/pre-execute", pre("outer"), prepend=True)
    rt.on("tools/post-execute", post("outer"), prepend=True)
    await rt.execute(call())
    assert order == [
        "pre>outer", "pre>a", "pre>b", "pre<b", "pre<a", "pre<outer",
        "post>outer", "post>a", "post>b", "post<b", "post<a", "post<outer",
    ]  # fmt: skip


@pytest.mark.anyio
async def test_outer_post_listener_overrides_an_inner_block() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())

    async def outer(_exec: Any, _result: Any, next_: Any) -> Any:
        inner = await next_()
        assert isinstance(inner, Block)
        return Accept()

    rt.on("tools/post-execute", outer)
    rt.on("tools/post-execute", _deciding(Block([text("inner says no")])))
    result = await rt.execute(call())
    assert result.value == "hi"  # type: ignore[union-attr]


# --- output validation ---------------------------------------------------------------------


def _returning(value: Any, **output: Any) -> Any:
    async def body(_a: Any, _e: Any) -> Any:
        return value

    out = {"schema": {"type": "string"}, "render": lambda _a, v: [text(str(v))]} | output
    return ToolDefinition(
        name="out",
        description="Returns a fixed value.",
        parameters={"type": "object"},
        output=ToolOutput(**out),
        execute=body,
    )


class _Hostile(int):
    def __float__(self) -> float:
        raise ValueError("hostile number")


def _boom(*_a: Any) -> Any:
    raise RuntimeError("kaboom")


OUTPUT_CASES = {
    "lossy": (_returning(math.nan), "value is not lossless JSON"),
    "tuple": (_returning(("a",)), "value is not lossless JSON"),
    "snapshot-failed": (_returning(_Hostile(1)), "value snapshot failed: hostile number"),
    "schema": (_returning(3), '"value" must be a string'),
    "nested": (
        _returning(
            {"a": {"b": 1}, "tags": ["x", 2]},
            schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "a": {
                        "type": "object",
                        "properties": {"b": {"type": "string"}, "c": {}},
                        "required": ["b", "c"],
                    },
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        ),
        'missing required property "value.a.c"; "value.a.b" must be a string; '
        '"value.tags[1]" must be a string',
    ),
    "render-throws": (_returning("x", render=_boom), "output.render failed: kaboom"),
    "render-lossy": (
        _returning("x", render=lambda _a, _v: [{"type": "text", "text": math.inf}]),
        "output.render returned non-lossless JSON",
    ),
    "render-not-a-list": (
        _returning("x", render=lambda _a, _v: {"type": "text", "text": "x"}),
        "output.render returned non-lossless JSON",
    ),
    "meta-throws": (
        _returning("x", presentation_meta=_boom),
        "output.presentationMeta failed: kaboom",
    ),
    "meta-lossy": (
        _returning("x", presentation_meta=lambda _a, _v: {1, 2}),
        "output.presentationMeta returned non-lossless JSON",
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "violation"), list(OUTPUT_CASES.values()), ids=list(OUTPUT_CASES))
async def test_invalid_output_messages(tool: Any, violation: str) -> None:
    rt = ToolRuntime()
    rt.register(tool)
    rec = recorder(rt)
    result = await rt.execute(call("out"))
    message = f'tool "out" returned invalid output: {violation}'
    assert error_text(result) == (
        message,
        "ToolOutputError",
        "INVALID_TOOL_OUTPUT",
        f"Error: {message}",
    )
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_presentation_meta_only_for_top_level_calls() -> None:
    rt = ToolRuntime()
    calls: list[Any] = []

    def meta(args: Any, value: Any) -> Any:
        calls.append((args, value))
        return {"v": value}

    rt.register(_returning("x", presentation_meta=meta))
    top = await rt.execute(call("out"))
    assert top.meta == {"v": "x"}
    assert top.to_json()["meta"] == {"v": "x"}
    nested = await rt.execute(call("out", parent=object()))
    assert nested.meta is None
    assert "meta" not in nested.to_json()
    assert calls == [({"value": "hi"}, "x")]

    # A throwing projector is harmless for nested calls (it is never run).
    rt2 = ToolRuntime()
    rt2.register(_returning("x", presentation_meta=_boom))
    assert not (await rt2.execute(call("out", parent=object()))).is_error


@pytest.mark.anyio
async def test_render_receives_frozen_arguments_and_value() -> None:
    rt = ToolRuntime()
    seen: list[Any] = []

    def render(args: Any, value: Any) -> Any:
        seen.append((args, value))
        with pytest.raises(TypeError):
            value["k"] = 1
        return (text("tuple of blocks is fine"),)

    async def body(_a: Any, _e: Any) -> Any:
        return {"k": [1]}

    rt.register(
        echo_tool("t", body=body, output=ToolOutput(schema={"type": "json"}, render=render))
    )
    result = await rt.execute(call("t"))
    assert result.content == [text("tuple of blocks is fine")]
    assert seen == [({"value": "hi"}, {"k": [1]})]


@pytest.mark.anyio
async def test_value_replacement_is_validated_against_the_definition_that_ran() -> None:
    # The call carries the definition it resolved: a body that unregisters its own tool
    # still gets a post-execute value replacement validated and rendered by that tool.
    rt = ToolRuntime()
    holder: dict[str, Any] = {}

    async def body(_args: Any, _exec: Any) -> Any:
        holder["dispose"]()
        return "first"

    holder["dispose"] = rt.register(_meta_echo(body=body))
    rt.on("tools/post-execute", _deciding(Accept(value="second")))
    result = await rt.execute(call())
    assert isinstance(result, ToolExecutionSuccess)
    assert (result.value, list(result.content), result.meta) == (
        "second",
        [text("<second>")],
        {"chars": 6},
    )
    assert rt.get("echo") is None
