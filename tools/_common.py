"""Small helpers shared by the tool modules: argument checks and result-card plumbing."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "BACKGROUND_VALUE_SCHEMA",
    "arg",
    "as_positive_int",
    "is_blank",
    "result_parts",
    "text_of",
]

#: The value of a call that started a background job (``bash`` and ``terminal_send`` with
#: ``run_in_background``): ``{kind: "background", jobId}``, collected with ``job_output``.
BACKGROUND_VALUE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kind": {"type": "string", "const": "background", "required": True},
        "jobId": {"type": "string", "required": True},
    },
}


def arg(args: Any, key: str) -> Any:
    """``args[key]`` or ``None`` (arguments arrive as a read-only mapping)."""
    if isinstance(args, Mapping):
        return args.get(key)
    return None


def is_blank(value: object) -> bool:
    """True unless ``value`` is a string with a non-whitespace character."""
    return not isinstance(value, str) or not value.strip()


def as_positive_int(value: object) -> int | None:
    """``value`` as an int when it is a positive integral JSON number, else ``None``.

    Mirrors ``Number.isInteger(v) && v > 0``: ``3.0`` counts, ``True`` does not.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value > 0:
        return int(value)
    return None


def result_parts(result: Any) -> tuple[Sequence[Any], bool, Any]:
    """``(content, is_error, meta)`` of a result handed to a ``present_result`` hook."""
    if isinstance(result, Mapping):
        return (
            result.get("content") or (),
            bool(result.get("isError", result.get("is_error", False))),
            result.get("meta"),
        )
    return (
        getattr(result, "content", ()) or (),
        bool(getattr(result, "is_error", False)),
        getattr(result, "meta", None),
    )


def text_of(content: Sequence[Any]) -> str | None:
    """The text of a one-text-block content list, else ``None``."""
    if len(content) != 1:
        return None
    block = content[0]
    if isinstance(block, Mapping) and block.get("type") == "text":
        value = block.get("text")
        return value if isinstance(value, str) else None
    return None
