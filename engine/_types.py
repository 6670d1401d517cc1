"""Data of the tool pipeline: definitions, inputs, results and policy decisions.

Results, decisions and schemas are frozen ``msgspec.Struct``s. JSON that leaves the
process uses the seed's camelCase keys; Python attributes are snake_case.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

from ._signals import AbortSignal

if TYPE_CHECKING:
    from ._scope import Scope

__all__ = [
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "ContentBlock",
    "Deny",
    "JsonValue",
    "PostToolDecision",
    "PreToolDecision",
    "ToolDefinition",
    "ToolErrorInfo",
    "ToolExecutionFailure",
    "ToolExecutionInput",
    "ToolExecutionResult",
    "ToolExecutionSuccess",
    "ToolFailure",
    "ToolOutput",
    "ToolSchema",
    "text",
]

JsonValue = Any
ContentBlock = Mapping[str, Any]


def text(s: str) -> dict[str, Any]:
    """A text content block: ``{"type": "text", "text": s}``."""
    return {"type": "text", "text": s}


class ToolOutput(msgspec.Struct, frozen=True):
    """A tool's output contract: the value schema, the pure renderer, optional UI meta.

    ``render(args, value) -> list[ContentBlock]`` turns the canonical value into
    model-facing content. ``presentation_meta(args, value) -> JsonValue`` runs only for
    top-level calls and is persisted as the result's ``meta``.
    """

    schema: Mapping[str, Any]
    render: Callable[[Any, Any], Sequence[ContentBlock]]
    presentation_meta: Callable[[Any, Any], Any] | None = None


class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True):
    """A registered tool in raw form: ``parameters`` and ``output.schema`` are raw subset
    JSON Schema (checked at ``register``); no argument validation is applied.

    ``execute(args, ctx: ToolRunContext)`` returns the canonical JSON value.
    Use ``define_tool`` to author tools with the schema DSL and argument validation.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    output: ToolOutput
    execute: Callable[[Any, Any], Awaitable[Any]]
    is_concurrency_safe: Callable[[Any], Any] | None = None
    timeout_ms: int | float | None = None
    finalize_content: Callable[[Any, Any], Any] | None = None
    present_call: Callable[[Any], Any] | None = None
    present_result: Callable[[Any, Any], Any] | None = None


class ToolSchema(msgspec.Struct, frozen=True):
    """What the model sees for one tool: exactly ``name``, ``description``, ``parameters``."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The wire form (a plain dict)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolExecutionInput(msgspec.Struct, frozen=True):
    """What a caller passes to ``ToolRuntime.execute``.

    ``agent`` is the calling ``Scope`` (or ``None`` for an agent-less call); ``parent`` is
    the opaque token of an enclosing execution (set for code-mode sub-calls).
    ``queued_at`` is when the call was queued (``time.perf_counter()`` seconds): the
    native scheduler and the code-mode driver set it, so observers can tell the time a
    call waited for its turn (``ToolExecution.queued_at``) from the time it ran.
    """

    call_id: str
    name: str
    arguments: Any
    signal: AbortSignal
    agent: Scope | None = None
    root_call_id: str | None = None
    parent: object | None = None
    queued_at: float | None = None


class ToolErrorInfo(msgspec.Struct, frozen=True):
    """``{name, code}`` of a ``HarnessError`` failure, plus ``kind`` when it has one.

    ``kind`` is set for ``CODE_RUN_FAILED``: the ``ErrorKind`` of the failed run
    (``"syntax"``, ``"timeout"``, ``"forbidden"``, ...), so hosts need not parse messages.
    """

    name: str
    code: str
    kind: str | None = None

    def to_json(self) -> dict[str, str]:
        """Wire form (``kind`` omitted when absent)."""
        out = {"name": self.name, "code": self.code}
        if self.kind is not None:
            out["kind"] = self.kind
        return out


class ToolFailure(msgspec.Struct, frozen=True):
    """A failure's error: a message and, for ``HarnessError``s, ``info``."""

    message: str
    info: ToolErrorInfo | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form (``info`` omitted when absent)."""
        out: dict[str, Any] = {"message": self.message}
        if self.info is not None:
            out["info"] = self.info.to_json()
        return out


class ToolExecutionSuccess(msgspec.Struct, frozen=True, kw_only=True):
    """A successful result: the canonical ``value`` and its rendered ``content``."""

    is_error: ClassVar[Literal[False]] = False
    value: Any
    content: Sequence[ContentBlock]
    meta: Any = None
    additional_contexts: Sequence[Mapping[str, Any]] = ()
    concludes_turn: bool = False

    def to_json(self) -> dict[str, Any]:
        """Wire form (camelCase; absent keys omitted)."""
        out: dict[str, Any] = {"isError": False, "value": self.value, "content": self.content}
        if self.meta is not None:
            out["meta"] = self.meta
        if self.additional_contexts:
            out["additionalContexts"] = list(self.additional_contexts)
        if self.concludes_turn:
            out["concludesTurn"] = True
        return out


class ToolExecutionFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A failed result. Never carries a value or ``concludes_turn``."""

    is_error: ClassVar[Literal[True]] = True
    concludes_turn: ClassVar[bool] = False
    error: ToolFailure
    content: Sequence[ContentBlock]
    meta: Any = None
    additional_contexts: Sequence[Mapping[str, Any]] = ()

    def to_json(self) -> dict[str, Any]:
        """Wire form (camelCase; absent keys omitted)."""
        out: dict[str, Any] = {
            "isError": True,
            "error": self.error.to_json(),
            "content": self.content,
        }
        if self.meta is not None:
            out["meta"] = self.meta
        if self.additional_contexts:
            out["additionalContexts"] = list(self.additional_contexts)
        return out


ToolExecutionResult = ToolExecutionSuccess | ToolExecutionFailure


class Allow(msgspec.Struct, frozen=True):
    """Pre-execute decision: proceed."""


class Deny(msgspec.Struct, frozen=True):
    """Pre-execute decision: refuse with ``reason`` (becomes the failure message)."""

    reason: str


class Ask(msgspec.Struct, frozen=True):
    """Pre-execute decision: route through the approval service."""

    reason: str | None = None


PreToolDecision = Allow | Deny | Ask


class Accept(msgspec.Struct, frozen=True, kw_only=True):
    """Post-execute decision: keep the result, optionally replacing ``content`` *or* ``value``."""

    content: Any = msgspec.UNSET
    value: Any = msgspec.UNSET
    additional_contexts: Sequence[Mapping[str, Any]] = ()


class Block(msgspec.Struct, frozen=True):
    """Post-execute decision: turn the result into a failure whose content is ``feedback``."""

    feedback: Sequence[ContentBlock]
    additional_contexts: Sequence[Mapping[str, Any]] = ()


PostToolDecision = Accept | Block
