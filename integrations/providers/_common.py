"""What the provider adapters share: reading SDK objects or dicts, names, result text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from codemode.engine import AbortSignal, Scope, ToolExecutionInput, ToolExecutionResult, ToolSchema
from codemode.engine.scheduling import ModelToolCall, parse_arguments

from ._strict import strip_strict_nulls

__all__ = [
    "check_names",
    "content_text",
    "context_texts",
    "execution_inputs",
    "field",
    "plain",
    "restore_arguments",
    "text_blocks",
]

# OpenAI's and Anthropic's documented tool-name rule.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def plain(obj: Any) -> Any:
    """A dict/list view of a provider object: SDK pydantic models are dumped (JSON mode),
    dicts and lists are returned as they are."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, (dict, list)):
        return dump(mode="json")
    return obj


def field(obj: Any, key: str, what: str) -> Any:
    """``obj[key]`` of a dict-shaped provider message, or a clear ``ValueError``."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{what} must be an object, got {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        raise ValueError(f'{what} has no "{key}"')
    return obj[key]


def check_names(schemas: Sequence[ToolSchema], provider: str) -> None:
    """Refuse tool names the provider rejects (``^[A-Za-z0-9_-]{1,64}$``), all at once."""
    bad = [s.name for s in schemas if not _NAME.fullmatch(s.name)]
    if bad:
        listed = ", ".join(json.dumps(n) for n in bad)
        raise ValueError(
            f"{provider} tool names must match ^[A-Za-z0-9_-]{{1,64}}$; not valid: {listed}"
        )


def restore_arguments(
    name: str, raw: str, strict_schemas: Mapping[str, Mapping[str, Any]] | None
) -> str:
    """The raw JSON arguments of a call, with strict-mode nulls stripped when ``name`` was
    exported in strict mode (``strict_schemas``: tool name -> original parameters).

    The raw text is kept byte for byte unless a null was actually stripped; invalid JSON
    is kept as it is, for ``run_tool_calls`` to report.
    """
    if not strict_schemas or name not in strict_schemas:
        return raw
    parsed = parse_arguments(raw)
    if isinstance(parsed, str):
        return raw
    restored = strip_strict_nulls(strict_schemas[name], parsed)
    if restored == parsed:
        return raw
    return json.dumps(restored, ensure_ascii=False, separators=(",", ":"))


def strict_map(
    strict_schemas: Iterable[ToolSchema] | None,
) -> dict[str, Mapping[str, Any]] | None:
    """Tool name -> original parameters, from the schemas that were exported strictly."""
    if strict_schemas is None:
        return None
    return {s.name: s.parameters for s in strict_schemas}


def execution_inputs(
    calls: Sequence[ModelToolCall], *, signal: AbortSignal, agent: Scope | None = None
) -> list[ToolExecutionInput]:
    """``ToolExecutionInput``s for ``ToolRuntime.execute``, one per call, in order.

    Arguments are parsed the way ``run_tool_calls`` parses them (``""`` -> ``{}``; invalid
    JSON stays a string, which the pipeline reports as invalid arguments).
    """
    return [
        ToolExecutionInput(
            call_id=c.call_id,
            name=c.name,
            arguments=parse_arguments(c.arguments),
            signal=signal,
            agent=agent,
        )
        for c in calls
    ]


def _block_text(block: Any) -> str:
    if isinstance(block, Mapping) and block.get("type") == "text":
        value = block.get("text")
        if isinstance(value, str):
            return value
    # Non-text content (an image attachment, say) has no place in a text-only tool
    # message: it is described, never dropped silently.
    kind = block.get("type", "content") if isinstance(block, Mapping) else "content"
    body = json.dumps(block, ensure_ascii=False, sort_keys=True, default=str)
    return f"[{kind} block: {body}]"


def content_text(result: ToolExecutionResult) -> str:
    """The result's rendered content as one string (text blocks joined by newlines)."""
    return "\n".join(_block_text(b) for b in result.content)


def text_blocks(result: ToolExecutionResult) -> list[dict[str, str]]:
    """The result's rendered content as ``{"type": "text", "text": ...}`` blocks."""
    return [{"type": "text", "text": _block_text(b)} for b in result.content]


def context_texts(results: Sequence[ToolExecutionResult]) -> list[str]:
    """The text of each additional context the results carry, in order.

    A tool (or ``run_code``, forwarding a sub-call's image or context) may attach user
    messages to its result (``additional_contexts``: ``{"role": "user", "content":
    [blocks], ...}``) that belong in the conversation right after the tool results.
    """
    texts: list[str] = []
    for result in results:
        for context in result.additional_contexts:
            blocks = context.get("content", ()) if isinstance(context, Mapping) else ()
            if isinstance(blocks, str):
                texts.append(blocks)
            else:
                texts.append("\n".join(_block_text(b) for b in blocks))
    return texts


def pair(
    calls: Sequence[ModelToolCall], results: Sequence[ToolExecutionResult]
) -> list[tuple[ModelToolCall, ToolExecutionResult]]:
    """Calls and results side by side (``run_tool_calls`` returns them in model order)."""
    if len(calls) != len(results):
        raise ValueError(f"{len(calls)} tool calls but {len(results)} results")
    return list(zip(calls, results, strict=True))
