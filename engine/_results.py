"""Result factories, output validation and materialisation for the pipeline.

``_pipeline`` holds the stages; everything here is a pure function of its arguments:
the canonical failure shapes (``error_result``, the two abort results, a gate denial),
``success_result`` (snapshot, validate against the output schema, render, project) and
``materialize`` (the sealed durable projection every committed result goes through).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import AbortError, HarnessError, ToolOutputError
from ._execution import ToolExecution
from ._types import (
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionResult,
    ToolExecutionSuccess,
    ToolFailure,
)
from .json import FrozenList, LosslessJsonError, snapshot
from .schema import validate_json_schema_value

__all__ = [
    "aborted_before_dispatch_result",
    "aborted_result",
    "denial_result",
    "error_message",
    "error_result",
    "feedback_message",
    "materialize",
    "success_result",
]


def error_message(error: object) -> str:
    """The failure message of an arbitrary raised value (total: never raises)."""
    try:
        if isinstance(error, HarnessError):
            return error.message
        if isinstance(error, BaseException):
            text = str(error)
            if isinstance(error, KeyError) and len(error.args) == 1:
                text = str(error.args[0])
            return text or type(error).__name__
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        return str(error)
    except Exception:
        return "<unprintable thrown value>"


def _error_info(error: object) -> ToolErrorInfo | None:
    if isinstance(error, HarnessError):
        return ToolErrorInfo(type(error).__name__, error.code, error.kind)
    return None


def error_result(
    error: object, additional_contexts: Sequence[Mapping[str, Any]] = ()
) -> ToolExecutionFailure:
    """The canonical failure for a raised value: ``Error: <message>`` content."""
    message = error_message(error)
    return ToolExecutionFailure(
        error=ToolFailure(message, _error_info(error)),
        content=[{"type": "text", "text": f"Error: {message}"}],
        additional_contexts=tuple(additional_contexts),
    )


def denial_result(reason: str) -> ToolExecutionFailure:
    """A gate denial: the reason is both the message and the ``Error:`` text."""
    return ToolExecutionFailure(
        error=ToolFailure(reason), content=[{"type": "text", "text": f"Error: {reason}"}]
    )


def aborted_result(prior: ToolExecutionResult | None = None) -> ToolExecutionFailure:
    """``ABORTED``: cancellation superseded a success after the body was invoked."""
    return error_result(
        AbortError("tool call aborted", "ABORTED"),
        prior.additional_contexts if prior is not None else (),
    )


def aborted_before_dispatch_result(
    prior: ToolExecutionResult | None = None,
) -> ToolExecutionFailure:
    """``ABORTED_BEFORE_DISPATCH``: cancellation prevented the body."""
    return error_result(
        AbortError("tool call aborted before dispatch", "ABORTED_BEFORE_DISPATCH"),
        prior.additional_contexts if prior is not None else (),
    )


def feedback_message(content: Sequence[Mapping[str, Any]]) -> str:
    """The failure message of a post-execute ``Block``: its text blocks, joined."""
    parts = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{kind} content]")
    text = "\n".join(parts)
    return text if text else "tool result blocked by post-execute policy"


def materialize(result: ToolExecutionResult) -> ToolExecutionResult:
    """Snapshot + deep-freeze the durable projection of a result (raises on lossy data)."""
    content = result.content
    if (
        type(content) is FrozenList
        and content._sealed is True
        and result.meta is None
        and not result.additional_contexts
        and (isinstance(result, ToolExecutionSuccess) or type(result.error) is ToolFailure)
    ):
        # Already a sealed (immutable, lossless) projection: nothing to copy.
        return result
    if not isinstance(result.content, (list, tuple)):
        # ``list("abc")`` would silently become three "blocks"; content is a block list.
        raise TypeError("tool result must be losslessly JSON-serializable")
    try:
        content = snapshot(list(result.content), label="content")
        meta = None if result.meta is None else snapshot(result.meta, label="meta")
        contexts = tuple(
            snapshot(c, label="additionalContexts") for c in result.additional_contexts
        )
    except LosslessJsonError as exc:
        raise TypeError("tool result must be losslessly JSON-serializable") from exc
    if isinstance(result, ToolExecutionFailure):
        if not isinstance(result.error, ToolFailure) or not isinstance(result.error.message, str):
            raise TypeError("tool result must be losslessly JSON-serializable")
        return ToolExecutionFailure(
            error=result.error, content=content, meta=meta, additional_contexts=contexts
        )
    return ToolExecutionSuccess(
        value=result.value,
        content=content,
        meta=meta,
        additional_contexts=contexts,
        concludes_turn=bool(result.concludes_turn),
    )


def success_result(
    exec_: ToolExecution, tool: ToolDefinition, candidate: Any
) -> ToolExecutionSuccess:
    """Snapshot, validate, render and (top-level only) project a body value."""
    name = tool.name
    try:
        value = snapshot(candidate)
    except LosslessJsonError:
        raise ToolOutputError(
            f'tool "{name}" returned invalid output: value is not lossless JSON'
        ) from None
    except Exception as exc:  # e.g. RecursionError from a hostile object
        raise ToolOutputError(
            f'tool "{name}" returned invalid output: value snapshot failed: {error_message(exc)}'
        ) from None
    schema = tool.output.schema
    # ``{}`` (the DSL's ``json``) admits every JSON value, and ``value`` is a lossless
    # snapshot: nothing to validate (the validator's look-up and walk were a tenth of a
    # native call's own cost).
    if schema:
        violations = validate_json_schema_value(schema, value, "value")
        if violations:
            raise ToolOutputError(f'tool "{name}" returned invalid output: {"; ".join(violations)}')
    try:
        rendered = tool.output.render(exec_.arguments, value)
    except Exception as exc:
        raise ToolOutputError(
            f'tool "{name}" returned invalid output: output.render failed: {error_message(exc)}'
        ) from None
    content = _projection(name, "render", rendered)
    if not isinstance(content, list):
        raise ToolOutputError(
            f'tool "{name}" returned invalid output: output.render returned non-lossless JSON'
        )
    meta = None
    if exec_.parent is None and tool.output.presentation_meta is not None:
        try:
            projected = tool.output.presentation_meta(exec_.arguments, value)
        except Exception as exc:
            raise ToolOutputError(
                f'tool "{name}" returned invalid output: output.presentationMeta failed: '
                f"{error_message(exc)}"
            ) from None
        meta = _projection(name, "presentationMeta", projected)
    result = ToolExecutionSuccess(
        value=value, content=content, meta=meta, concludes_turn=exec_._concludes
    )
    return exec_._mark_canonical(result)  # type: ignore[return-value]


def _projection(name: str, projector: str, candidate: Any) -> Any:
    try:
        if isinstance(candidate, tuple):
            candidate = list(candidate)
        return snapshot(candidate)
    except LosslessJsonError:
        raise ToolOutputError(
            f'tool "{name}" returned invalid output: output.{projector} returned non-lossless JSON'
        ) from None
