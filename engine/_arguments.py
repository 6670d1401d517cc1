"""A model's tool-call argument string that is not JSON: the error that says so, and where.

``parse_arguments`` keeps such a string as the raw string (the reference behaviour: the
call then fails ``INVALID_ARGS``); ``invalid_json_message`` is what that failure says, so
that a model learns what it got wrong: the parser's complaint, its line and column, and
an excerpt ending just past that position.
"""

from __future__ import annotations

import json
from typing import Any

from ._errors import ToolArgsError

__all__ = ["UnparsedArguments", "invalid_json_message", "refuse_unparsed"]


class UnparsedArguments(str):
    """A model's argument string that did not parse as JSON, kept as the raw string.

    A ``str`` (what the reference passes on); the subclass only tells ``refuse_unparsed``
    that this string is the model's text, not a JSON string value the text decoded to.
    """

    __slots__ = ()


# The excerpt ends this many characters after the parser's position (enough to show the
# token it stumbled on) and shows at most _EXCERPT characters before that.
_AFTER = 8
_EXCERPT = 60
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)} | {10: "\\n", 13: "\\r", 9: "\\t"}


def _reject_constant(name: str) -> Any:
    # The engine's parser refuses NaN/Infinity too: they are not JSON.
    raise ValueError(f"{name} is not valid JSON")


def _excerpt(raw: str, position: int) -> str:
    end = min(len(raw), max(position, 0) + _AFTER)
    start = max(0, end - _EXCERPT)
    body = raw[start:end].translate(_ESCAPES)
    return ("…" if start > 0 else "") + body + ("…" if end < len(raw) else "")


def invalid_json_message(raw: str) -> str | None:
    """``None`` when ``raw`` is an empty string (no arguments) or parses as JSON; else the
    error a model should read: the parser's complaint, its line and column, and an excerpt
    of ``raw`` ending just past that position (control characters escaped, cut with
    ``…``)."""
    if raw == "":
        return None
    try:
        json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return (
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno}: {_excerpt(raw, exc.pos)}"
        )
    except RecursionError:
        return f"arguments are not valid JSON: nested too deeply: {_excerpt(raw, _EXCERPT)}"
    except ValueError as exc:  # NaN, Infinity, -Infinity
        word = str(exc).split(" ", 1)[0]
        return f"arguments are not valid JSON: {exc}: {_excerpt(raw, raw.find(word) + 1)}"
    return None


def refuse_unparsed(args: Any) -> None:
    """Raise ``ToolArgsError`` (``INVALID_ARGS``) with ``invalid_json_message`` when
    ``args`` is the string ``parse_arguments`` kept because it did not parse; any other
    value passes (its schema judges it)."""
    if type(args) is UnparsedArguments:
        message = invalid_json_message(args)
        if message is not None:
            raise ToolArgsError(message, [message])
