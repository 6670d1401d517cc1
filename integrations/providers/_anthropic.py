"""Anthropic: tool definitions, ``tool_use`` blocks and ``tool_result`` blocks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from codemode.engine import ToolExecutionResult, ToolSchema
from codemode.engine.scheduling import ModelToolCall

from ._common import check_names, context_texts, field, pair, plain, text_blocks

__all__ = ["anthropic_calls", "anthropic_results", "anthropic_tools"]


def anthropic_tools(schemas: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """Messages API ``tools``: ``{name, description, input_schema}`` per schema."""
    check_names(schemas, "Anthropic")
    return [
        {"name": s.name, "description": s.description, "input_schema": dict(s.parameters)}
        for s in schemas
    ]


def anthropic_calls(message: Any) -> list[ModelToolCall]:
    """The ``ModelToolCall``s of an assistant message (or its ``content`` list).

    Blocks of type ``tool_use`` give ``id``, ``name`` and ``input`` (already an object;
    re-encoded as the raw JSON ``run_tool_calls`` parses); text and thinking blocks
    are skipped.
    """
    data = plain(message)
    blocks = data.get("content") if isinstance(data, dict) else data
    if not isinstance(blocks, list):
        raise ValueError("a message must be an object with a content list, or that list")
    calls: list[ModelToolCall] = []
    for i, raw in enumerate(blocks):
        block = plain(raw)
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        what = f"content[{i}]"
        arguments = block.get("input", {})
        calls.append(
            ModelToolCall(
                call_id=field(block, "id", what),
                name=field(block, "name", what),
                arguments=json.dumps(arguments, ensure_ascii=False, separators=(",", ":")),
            )
        )
    return calls


def anthropic_results(
    calls: Sequence[ModelToolCall],
    results: Sequence[ToolExecutionResult],
    *,
    contexts: bool = True,
) -> list[dict[str, Any]]:
    """One ``{"type": "tool_result", "tool_use_id", "content", "is_error"}`` block per call.

    ``content`` is the runtime's rendered content as text blocks. With ``contexts``, a
    text block per additional context the results carry follows the tool results (the
    Messages API wants tool results first). Send them all in one user message after the
    assistant's turn: ``{"role": "user", "content": blocks}``.
    """
    blocks: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": call.call_id,
            "content": text_blocks(result),
            "is_error": result.is_error,
        }
        for call, result in pair(calls, results)
    ]
    if contexts:
        blocks.extend({"type": "text", "text": t} for t in context_texts(results))
    return blocks
