"""Golden tool lists for each provider, and the SDKs' own types accept what we emit.

The golden files are committed JSON under ``golden/``; regenerate them deliberately with
``CODEMODE_UPDATE_GOLDEN=1`` (and review the diff) after an intended change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pydantic
import pytest
from providers_support import catalog_runtime, check_sdk_type

from codemode.engine import ToolSchema
from codemode.integrations.providers import (
    anthropic_tools,
    openai_chat_tools,
    openai_responses_tools,
)

GOLDEN = Path(__file__).parent / "golden"


def _golden(name: str, value: Any) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("CODEMODE_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}"
    assert json.loads(path.read_text(encoding="utf-8")) == value


def _schemas() -> list[ToolSchema]:
    return catalog_runtime().schemas()


@pytest.mark.parametrize("strict", [False, True])
def test_chat_completions_tools(strict: bool) -> None:
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolUnionParam

    tools = openai_chat_tools(_schemas(), strict=strict)
    _golden(f"openai_chat_tools{'_strict' if strict else ''}", tools)
    for tool in tools:
        check_sdk_type(ChatCompletionFunctionToolParam, tool)
        pydantic.TypeAdapter(ChatCompletionToolUnionParam).validate_python(tool)
        assert tool["function"]["strict"] is strict


@pytest.mark.parametrize("strict", [False, True])
def test_responses_tools(strict: bool) -> None:
    from openai.types.responses import FunctionToolParam, ToolParam

    tools = openai_responses_tools(_schemas(), strict=strict)
    _golden(f"openai_responses_tools{'_strict' if strict else ''}", tools)
    for tool in tools:
        check_sdk_type(FunctionToolParam, tool)
        pydantic.TypeAdapter(ToolParam).validate_python(tool)
        # Explicit even when false: the Responses API defaults an absent strict to true.
        assert tool["strict"] is strict


def test_anthropic_tools() -> None:
    from anthropic.types import ToolParam, ToolUnionParam

    tools = anthropic_tools(_schemas())
    _golden("anthropic_tools", tools)
    for tool in tools:
        check_sdk_type(ToolParam, tool)
        pydantic.TypeAdapter(ToolUnionParam).validate_python(tool)
        assert tool["input_schema"]["type"] == "object"


def test_the_exports_carry_the_runtime_schemas_unchanged_when_not_strict() -> None:
    schemas = _schemas()
    chat = openai_chat_tools(schemas)
    responses = openai_responses_tools(schemas)
    anthropic = anthropic_tools(schemas)
    for s, c, r, a in zip(schemas, chat, responses, anthropic, strict=True):
        assert c["function"]["parameters"] == r["parameters"] == a["input_schema"] == s.parameters
        assert c["function"]["name"] == r["name"] == a["name"] == s.name
        assert c["function"]["description"] == r["description"] == a["description"]


def test_names_the_providers_reject_are_refused_together() -> None:
    odd = [
        ToolSchema("get note", "d", {"type": "object"}),
        ToolSchema("ok_name-1", "d", {"type": "object"}),
        ToolSchema("x" * 65, "d", {"type": "object"}),
    ]
    for export in (openai_chat_tools, openai_responses_tools, anthropic_tools):
        with pytest.raises(ValueError, match=r"\^\[A-Za-z0-9_-\]\{1,64\}\$") as info:
            export(odd)
        assert '"get note"' in str(info.value)
        assert "ok_name-1" not in str(info.value)
        assert "x" * 65 in str(info.value)


def test_strict_refusal_names_the_tool() -> None:
    bad = [ToolSchema("t", "d", {"type": "object", "properties": {"a": {}}})]
    from codemode.engine import JsonSchemaError

    with pytest.raises(JsonSchemaError, match=r"t\.parameters\.properties\.a: a schema without"):
        openai_chat_tools(bad, strict=True)
    assert openai_chat_tools(bad)[0]["function"]["parameters"]["properties"] == {"a": {}}
