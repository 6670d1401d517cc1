"""A real ToolRuntime end to end, per provider: schema export -> a scripted tool-call
message -> run_tool_calls -> the provider's result messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from providers_support import catalog_runtime, check_sdk_type, seen

from codemode.engine import AbortController, ToolRuntime
from codemode.engine.scheduling import run_tool_calls
from codemode.integrations.providers import (
    anthropic_calls,
    anthropic_results,
    anthropic_tools,
    execution_inputs,
    openai_chat_calls,
    openai_chat_results,
    openai_chat_tools,
    openai_responses_calls,
    openai_responses_results,
    openai_responses_tools,
)

pytestmark = pytest.mark.anyio

# What a strict-mode model sends: every property present, null for "not given".
SEARCH_STRICT = {
    "query": "plan",
    "limit": 2,
    "tags": None,
    "filter": {"kind": "todo", "since": None},
}
SEARCH_GIVEN = {"query": "plan", "limit": 2, "filter": {"kind": "todo"}}


async def test_chat_completions_strict_round_trip() -> None:
    from openai.types.chat import ChatCompletion, ChatCompletionToolMessageParam

    rt = catalog_runtime()
    schemas = rt.schemas()
    tools = openai_chat_tools(schemas, strict=True)
    assert [t["function"]["name"] for t in tools] == ["search_notes", "add", "explode"]
    completion = ChatCompletion.model_validate(
        {
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
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "search_notes",
                                    "arguments": json.dumps(SEARCH_STRICT),
                                },
                            },
                            {
                                "id": "call_2",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 2, "b": 40}'},
                            },
                            {
                                "id": "call_3",
                                "type": "function",
                                "function": {"name": "explode", "arguments": '{"why": null}'},
                            },
                        ],
                    },
                }
            ],
        }
    )
    calls = openai_chat_calls(completion, strict_schemas=schemas)
    results = await run_tool_calls(rt, calls, signal=AbortController().signal)
    # The bodies saw the arguments the tools were written for: no stand-in nulls.
    assert seen["search_notes"] == [SEARCH_GIVEN]
    assert seen["explode"] == [{}]
    messages = openai_chat_results(calls, results)
    assert messages[0] == {"role": "tool", "tool_call_id": "call_1", "content": "plan-0\nplan-1"}
    assert messages[1] == {"role": "tool", "tool_call_id": "call_2", "content": "42"}
    assert messages[2]["tool_call_id"] == "call_3"
    assert "boom: no reason" in messages[2]["content"]
    assert [r.is_error for r in results] == [False, False, True]
    for m in messages:
        check_sdk_type(ChatCompletionToolMessageParam, m)


async def test_without_stripping_a_strict_null_is_an_argument_error() -> None:
    # The reason strip_strict_nulls exists: the runtime validates against the original.
    rt = catalog_runtime()
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "search_notes", "arguments": json.dumps(SEARCH_STRICT)},
            }
        ],
    }
    results = await run_tool_calls(rt, openai_chat_calls(message), signal=AbortController().signal)
    assert results[0].is_error
    assert '"tags" must be an array' in results[0].error.message
    assert "search_notes" not in seen


async def test_responses_round_trip() -> None:
    from openai.types.responses import Response
    from openai.types.responses.response_input_item_param import FunctionCallOutput

    rt = catalog_runtime()
    schemas = rt.schemas()
    openai_responses_tools(schemas, strict=True)
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": openai_responses_tools(schemas, strict=True),
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "search_notes",
                    "arguments": json.dumps(SEARCH_STRICT),
                    "status": "completed",
                },
                {
                    "type": "function_call",
                    "id": "fc_2",
                    "call_id": "call_2",
                    "name": "add",
                    "arguments": '{"a": 1, "b": "x"}',
                    "status": "completed",
                },
            ],
        }
    )
    calls = openai_responses_calls(response, strict_schemas=schemas)
    results = await run_tool_calls(rt, calls, signal=AbortController().signal)
    items = openai_responses_results(calls, results)
    assert items[0] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "plan-0\nplan-1",
    }
    assert items[1]["call_id"] == "call_2"
    assert '"b" must be a number' in items[1]["output"]
    for item in items:
        check_sdk_type(FunctionCallOutput, item)


async def test_anthropic_round_trip_and_rt_execute() -> None:
    from anthropic.types import Message, MessageParam, ToolParam

    rt = catalog_runtime()
    for tool in anthropic_tools(rt.schemas()):
        check_sdk_type(ToolParam, tool)
    message = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [
                {"type": "text", "text": "Looking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "search_notes",
                    "input": SEARCH_GIVEN,
                },
                {"type": "tool_use", "id": "toolu_2", "name": "explode", "input": {"why": 7}},
                {"type": "tool_use", "id": "toolu_3", "name": "missing", "input": {}},
            ],
        }
    )
    calls = anthropic_calls(message)
    results = await run_tool_calls(rt, calls, signal=AbortController().signal)
    blocks = anthropic_results(calls, results)
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "plan-0\nplan-1"}],
        "is_error": False,
    }
    assert blocks[1]["is_error"] is True
    assert "boom: 7" in blocks[1]["content"][0]["text"]
    assert blocks[2]["is_error"] is True
    assert 'unknown tool "missing"' in blocks[2]["content"][0]["text"]
    user: Any = {"role": "user", "content": blocks}
    check_sdk_type(MessageParam, user)

    # The same calls through rt.execute one by one give the same results.
    signal = AbortController().signal
    one_by_one = [await rt.execute(i) for i in execution_inputs(calls, signal=signal)]
    assert anthropic_results(calls, one_by_one) == blocks


async def test_the_builtin_tools_export_strictly_and_run_with_strict_nulls(tmp_path: Any) -> None:
    from codemode.engine.testing import InProcessRuntime
    from codemode.tools import default_tools

    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    rt = ToolRuntime(mode="both", code_runtime=InProcessRuntime())
    for tool in default_tools(tmp_path, accepts_images=True):
        rt.register(tool)
    schemas = rt.schemas()
    tools = openai_responses_tools(schemas, strict=True)  # refuses nothing in the catalogue
    assert {t["name"] for t in tools} >= {"read", "write", "edit", "grep", "bash", "run_code"}
    read = next(t for t in tools if t["name"] == "read")["parameters"]
    assert read["required"] == ["file_path", "offset", "limit"]
    output = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "read",
            "arguments": json.dumps({"file_path": "a.txt", "offset": 2, "limit": None}),
        }
    ]
    calls = openai_responses_calls(output, strict_schemas=schemas)
    assert json.loads(calls[0].arguments) == {"file_path": "a.txt", "offset": 2}
    (result,) = await run_tool_calls(rt, calls, signal=AbortController().signal)
    assert not result.is_error, result
    out = openai_responses_results(calls, [result])[0]["output"]
    assert "2: two\n3: three" in out and "1: one" not in out
