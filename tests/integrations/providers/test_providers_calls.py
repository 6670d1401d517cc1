"""Provider tool-call messages -> ModelToolCall, and results -> provider result shapes.

Messages are written in each provider's documented JSON shape and fed both as plain
dicts and as the SDK's own pydantic objects built from that JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from providers_support import check_sdk_type

from codemode.engine import (
    AbortController,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolSchema,
    text,
)
from codemode.engine.scheduling import ModelToolCall
from codemode.integrations.providers import (
    anthropic_calls,
    anthropic_results,
    content_text,
    execution_inputs,
    openai_chat_calls,
    openai_chat_results,
    openai_responses_calls,
    openai_responses_results,
)

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "t", "arguments": ""},
                    },
                ],
            },
        }
    ],
}

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "gpt-test",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "add",
            "arguments": '{"a": 1, "b": 2}',
            "status": "completed",
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "and", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_b",
            "name": "t",
            "arguments": "",
            "status": "completed",
        },
    ],
}

ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
    "content": [
        {"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 1, "b": 2}},
        {"type": "tool_use", "id": "toolu_b", "name": "t", "input": {}},
    ],
}


def _sdk_chat() -> Any:
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(CHAT)


def _sdk_response() -> Any:
    from openai.types.responses import Response

    return Response.model_validate(RESPONSE)


def _sdk_anthropic() -> Any:
    from anthropic.types import Message

    return Message.model_validate(ANTHROPIC)


def _args(calls: list[ModelToolCall]) -> list[tuple[str, str, Any]]:
    return [(c.call_id, c.name, json.loads(c.arguments or "{}")) for c in calls]


EXPECTED = [("call_a", "add", {"a": 1, "b": 2}), ("call_b", "t", {})]


def test_chat_calls_from_dicts_and_sdk_objects() -> None:
    message = CHAT["choices"][0]["message"]  # type: ignore[index]
    sdk = _sdk_chat()
    for source in (CHAT, CHAT["choices"][0], message, sdk, sdk.choices[0], sdk.choices[0].message):  # type: ignore[index]
        calls = openai_chat_calls(source)
        assert _args(calls) == EXPECTED
    # The raw argument text is passed through untouched (run_tool_calls parses it).
    assert openai_chat_calls(message)[0].arguments == '{"a": 1, "b": 2}'
    assert openai_chat_calls({"role": "assistant", "content": "hi"}) == []


def test_responses_calls_skip_other_output_items() -> None:
    for source in (RESPONSE, RESPONSE["output"], _sdk_response(), _sdk_response().output):
        assert _args(openai_responses_calls(source)) == [
            ("call_a", "add", {"a": 1, "b": 2}),
            ("call_b", "t", {}),
        ]


def test_anthropic_calls_from_dicts_and_sdk_objects() -> None:
    for source in (ANTHROPIC, ANTHROPIC["content"], _sdk_anthropic(), _sdk_anthropic().content):
        calls = anthropic_calls(source)
        assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
            ("toolu_a", "add", {"a": 1, "b": 2}),
            ("toolu_b", "t", {}),
        ]


@pytest.mark.parametrize(
    ("reader", "message", "error"),
    [
        (
            openai_chat_calls,
            {"role": "assistant", "tool_calls": [{"type": "function"}]},
            'has no "function"',
        ),
        (
            openai_chat_calls,
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]},
            'only "function" tool calls are supported',
        ),
        (openai_chat_calls, {"choices": []}, "has no choices"),
        (openai_chat_calls, "hello", "must be an object"),
        (
            openai_responses_calls,
            {"output": [{"type": "function_call", "name": "x"}]},
            'output\\[0\\] has no "call_id"',
        ),
        (openai_responses_calls, {"id": "r"}, "with an output list"),
        (
            anthropic_calls,
            {"content": [{"type": "tool_use", "name": "x"}]},
            'content\\[0\\] has no "id"',
        ),
        (anthropic_calls, 3, "with a content list"),
    ],
)
def test_malformed_messages_are_refused_clearly(reader: Any, message: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        reader(message)


STRICT_TOOL = ToolSchema(
    "find",
    "d",
    {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["q"],
    },
)


def test_strict_nulls_are_stripped_only_for_strictly_exported_tools() -> None:
    raw = '{"q": "x", "limit": null}'
    chat = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "find", "arguments": raw}},
            {"id": "c2", "type": "function", "function": {"name": "other", "arguments": raw}},
            {"id": "c3", "type": "function", "function": {"name": "find", "arguments": "{bad"}},
        ],
    }
    calls = openai_chat_calls(chat, strict_schemas=[STRICT_TOOL])
    assert json.loads(calls[0].arguments) == {"q": "x"}
    assert calls[1].arguments == raw  # not exported strictly: untouched
    assert calls[2].arguments == "{bad"  # invalid JSON: left for run_tool_calls to report
    assert openai_chat_calls(chat)[0].arguments == raw
    output = [{"type": "function_call", "call_id": "c1", "name": "find", "arguments": raw}]
    assert json.loads(
        openai_responses_calls(output, strict_schemas=[STRICT_TOOL])[0].arguments
    ) == {"q": "x"}
    # Nothing stripped: the model's exact text is kept.
    kept = '{"q": "x",   "limit": 2}'
    output[0]["arguments"] = kept
    assert openai_responses_calls(output, strict_schemas=[STRICT_TOOL])[0].arguments == kept


def test_execution_inputs_parse_like_run_tool_calls() -> None:
    signal = AbortController().signal
    calls = [
        ModelToolCall("a", "add", '{"a": 1}'),
        ModelToolCall("b", "t", ""),
        ModelToolCall("c", "t", "{nope"),
    ]
    inputs = execution_inputs(calls, signal=signal)
    assert [(i.call_id, i.name, i.arguments) for i in inputs] == [
        ("a", "add", {"a": 1}),
        ("b", "t", {}),
        ("c", "t", "{nope"),
    ]
    assert all(i.signal is signal and i.agent is None for i in inputs)


OK = ToolExecutionSuccess(value=3, content=[text("3"), text("done")])
FAILED = ToolExecutionFailure(
    error=ToolFailure("boom", ToolErrorInfo("ToolArgsError", "INVALID_ARGS")),
    content=[text("invalid arguments: boom")],
)
IMAGE = ToolExecutionSuccess(
    value=None,
    content=[text("an image"), {"type": "image", "attachment": {"attachmentId": "a1"}}],
)
CALLS = [
    ModelToolCall("c1", "add", "{}"),
    ModelToolCall("c2", "t", "{}"),
    ModelToolCall("c3", "i", "{}"),
]
RESULTS = [OK, FAILED, IMAGE]


def test_rendered_content_is_the_result_text() -> None:
    assert content_text(OK) == "3\ndone"
    assert content_text(FAILED) == "invalid arguments: boom"
    # A non-text block is described, never dropped.
    assert (
        content_text(IMAGE)
        == 'an image\n[image block: {"attachment": {"attachmentId": "a1"}, "type": "image"}]'
    )


def test_chat_result_messages() -> None:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolMessageParam

    messages = openai_chat_results(CALLS, RESULTS)
    assert messages == [
        {"role": "tool", "tool_call_id": "c1", "content": "3\ndone"},
        {"role": "tool", "tool_call_id": "c2", "content": "invalid arguments: boom"},
        {"role": "tool", "tool_call_id": "c3", "content": content_text(IMAGE)},
    ]
    for m in messages:
        check_sdk_type(ChatCompletionToolMessageParam, m)
        pydantic.TypeAdapter(ChatCompletionMessageParam).validate_python(m)


def test_responses_result_items() -> None:
    from openai.types.responses import ResponseInputItemParam
    from openai.types.responses.response_input_item_param import FunctionCallOutput

    items = openai_responses_results(CALLS, RESULTS)
    assert items[1] == {
        "type": "function_call_output",
        "call_id": "c2",
        "output": "invalid arguments: boom",
    }
    for item in items:
        check_sdk_type(FunctionCallOutput, item)
        pydantic.TypeAdapter(ResponseInputItemParam).validate_python(item)


def test_anthropic_result_blocks() -> None:
    from anthropic.types import MessageParam, ToolResultBlockParam

    blocks = anthropic_results(CALLS, RESULTS)
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": [{"type": "text", "text": "3"}, {"type": "text", "text": "done"}],
        "is_error": False,
    }
    assert blocks[1]["is_error"] is True
    for block in blocks:
        check_sdk_type(ToolResultBlockParam, block)
    pydantic.TypeAdapter(MessageParam).validate_python({"role": "user", "content": blocks})


def test_calls_and_results_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 tool calls but 1 results"):
        openai_chat_results(CALLS[:2], RESULTS[:1])


WITH_CONTEXT = ToolExecutionSuccess(
    value="ok",
    content=[text("ok")],
    additional_contexts=[
        {"role": "user", "content": [text("note from the tool")], "source": {"kind": "plugin"}},
        {
            "role": "user",
            "content": [text("an image"), {"type": "image", "attachment": {"attachmentId": "i"}}],
        },
    ],
)
CONTEXT_TEXTS = [
    "note from the tool",
    'an image\n[image block: {"attachment": {"attachmentId": "i"}, "type": "image"}]',
]


def test_additional_contexts_follow_the_results_in_each_provider_shape() -> None:
    from anthropic.types import MessageParam
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam

    calls = [ModelToolCall("c1", "t", "{}"), ModelToolCall("c2", "t", "{}")]
    results = [WITH_CONTEXT, OK]
    chat = openai_chat_results(calls, results)
    assert [m["role"] for m in chat] == ["tool", "tool", "user", "user"]
    assert [m["content"] for m in chat[2:]] == CONTEXT_TEXTS
    for m in chat:
        pydantic.TypeAdapter(ChatCompletionMessageParam).validate_python(m)
    assert len(openai_chat_results(calls, results, contexts=False)) == 2

    items = openai_responses_results(calls, results)
    assert [i["type"] for i in items] == ["function_call_output"] * 2 + ["message"] * 2
    assert items[2] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": CONTEXT_TEXTS[0]}],
    }
    for item in items:
        pydantic.TypeAdapter(ResponseInputItemParam).validate_python(item)

    blocks = anthropic_results(calls, results)
    assert [b["type"] for b in blocks] == ["tool_result", "tool_result", "text", "text"]
    assert [b["text"] for b in blocks[2:]] == CONTEXT_TEXTS
    pydantic.TypeAdapter(MessageParam).validate_python({"role": "user", "content": blocks})
    assert len(anthropic_results(calls, results, contexts=False)) == 2
