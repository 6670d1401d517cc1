"""OpenAI: function tools for Chat Completions and Responses, their calls and results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from codemode.engine import ToolExecutionResult, ToolSchema
from codemode.engine.scheduling import ModelToolCall

from ._common import (
    check_names,
    content_text,
    context_texts,
    field,
    pair,
    plain,
    restore_arguments,
    strict_map,
)
from ._strict import strict_parameters

__all__ = [
    "openai_chat_calls",
    "openai_chat_results",
    "openai_chat_tools",
    "openai_responses_calls",
    "openai_responses_results",
    "openai_responses_tools",
]


def _function(schema: ToolSchema, strict: bool) -> dict[str, Any]:
    parameters = (
        strict_parameters(schema.parameters, label=f"{schema.name}.parameters")
        if strict
        else dict(schema.parameters)
    )
    return {
        "name": schema.name,
        "description": schema.description,
        "parameters": parameters,
        # Always explicit: the Responses API treats an absent `strict` as true, which
        # would silently make every optional property of a non-strict schema required.
        "strict": strict,
    }


def openai_chat_tools(
    schemas: Sequence[ToolSchema], *, strict: bool = False
) -> list[dict[str, Any]]:
    """Chat Completions ``tools``: ``{"type": "function", "function": {name, description,
    parameters, strict}}`` per schema. ``strict=True`` exports ``strict_parameters``
    (pass the same ``schemas`` as ``strict_schemas`` when reading the calls back)."""
    check_names(schemas, "OpenAI")
    return [{"type": "function", "function": _function(s, strict)} for s in schemas]


def openai_responses_tools(
    schemas: Sequence[ToolSchema], *, strict: bool = False
) -> list[dict[str, Any]]:
    """Responses API ``tools``: flat ``{"type": "function", name, description, parameters,
    strict}`` per schema (``strict`` as for ``openai_chat_tools``)."""
    check_names(schemas, "OpenAI")
    return [{"type": "function", **_function(s, strict)} for s in schemas]


def _chat_message(obj: Any) -> Any:
    """The assistant message of a completion, a choice, or the message itself."""
    data = plain(obj)
    if isinstance(data, dict) and "choices" in data:
        choices = data["choices"]
        if not choices:
            raise ValueError("the chat completion has no choices")
        data = plain(choices[0])
    if isinstance(data, dict) and "message" in data and "role" not in data:
        data = plain(data["message"])
    return data


def openai_chat_calls(
    message: Any, *, strict_schemas: Iterable[ToolSchema] | None = None
) -> list[ModelToolCall]:
    """The ``ModelToolCall``s of a Chat Completions assistant message.

    ``message`` is the message (``choices[0].message``), its choice, or the whole
    completion, as a dict or the SDK object. Each ``tool_calls[*]`` entry gives
    ``id``, ``function.name`` and ``function.arguments`` (the raw JSON string). A
    message without tool calls gives ``[]``. ``strict_schemas`` (the schemas exported
    with ``strict=True``) strips strict mode's stand-in nulls from the arguments.
    """
    data = _chat_message(message)
    if not isinstance(data, dict):
        raise ValueError(f"a chat message must be an object, got {type(data).__name__}")
    strict = strict_map(strict_schemas)
    calls: list[ModelToolCall] = []
    for i, raw in enumerate(data.get("tool_calls") or ()):
        item = plain(raw)
        what = f"tool_calls[{i}]"
        kind = item.get("type", "function") if isinstance(item, dict) else None
        if kind != "function":
            raise ValueError(f'{what} has type {kind!r}; only "function" tool calls are supported')
        function = plain(field(item, "function", what))
        name = field(function, "name", f"{what}.function")
        arguments = function.get("arguments") or ""
        calls.append(
            ModelToolCall(
                call_id=field(item, "id", what),
                name=name,
                arguments=restore_arguments(name, arguments, strict),
            )
        )
    return calls


def openai_responses_calls(
    response: Any, *, strict_schemas: Iterable[ToolSchema] | None = None
) -> list[ModelToolCall]:
    """The ``ModelToolCall``s of a Responses API response (or its ``output`` list).

    Items of type ``function_call`` give ``call_id``, ``name`` and ``arguments``; other
    output items (messages, reasoning) are skipped. ``strict_schemas`` as for
    ``openai_chat_calls``.
    """
    data = plain(response)
    items = data.get("output") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError("a response must be an object with an output list, or that list")
    strict = strict_map(strict_schemas)
    calls: list[ModelToolCall] = []
    for i, raw in enumerate(items):
        item = plain(raw)
        if not isinstance(item, dict) or item.get("type") != "function_call":
            continue
        what = f"output[{i}]"
        name = field(item, "name", what)
        calls.append(
            ModelToolCall(
                call_id=field(item, "call_id", what),
                name=name,
                arguments=restore_arguments(name, item.get("arguments") or "", strict),
            )
        )
    return calls


def openai_chat_results(
    calls: Sequence[ModelToolCall],
    results: Sequence[ToolExecutionResult],
    *,
    contexts: bool = True,
) -> list[dict[str, Any]]:
    """One ``{"role": "tool", "tool_call_id", "content"}`` message per call, in order;
    ``content`` is the runtime's rendered content as text (failures included: the model
    reads the error). Then, with ``contexts``, one ``{"role": "user", "content"}``
    message per additional context the results carry (they follow the tool messages)."""
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": call.call_id, "content": content_text(result)}
        for call, result in pair(calls, results)
    ]
    if contexts:
        messages.extend({"role": "user", "content": t} for t in context_texts(results))
    return messages


def openai_responses_results(
    calls: Sequence[ModelToolCall],
    results: Sequence[ToolExecutionResult],
    *,
    contexts: bool = True,
) -> list[dict[str, Any]]:
    """One ``{"type": "function_call_output", "call_id", "output"}`` input item per call;
    then, with ``contexts``, one user message item per additional context."""
    items: list[dict[str, Any]] = [
        {"type": "function_call_output", "call_id": call.call_id, "output": content_text(result)}
        for call, result in pair(calls, results)
    ]
    if contexts:
        items.extend(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
            for t in context_texts(results)
        )
    return items
