"""Tool-call argument strings a model sent that are not JSON: say so, and where.

The engine's ``run_tool_calls`` keeps an argument string that does not parse as the raw
string, and the tool's schema then refuses it as ``"arguments" must be an object``, which
tells the model nothing about its mistake. The agent loop checks each call's string itself
(``invalid_json_message``) and a ``tools/execute`` wrapper on the runtime
(``install_invalid_json_wrapper``) fails exactly those calls with ``INVALID_ARGS`` and
``arguments are not valid JSON: Expecting ',' delimiter at line 1 column 17:
{"file_path":"a" "limit"…``, before the body runs. The call still goes through the pipeline
(its audit events, cards and observers), and the turn carries on: the model reads the
error and sends the call again.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codemode.engine import ToolArgsError

if TYPE_CHECKING:
    from codemode.engine import ToolRuntime

__all__ = ["invalid_json_message", "install_invalid_json_wrapper"]

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


# Runtimes that already carry the wrapper (one wrapper serves every agent on a runtime).
_INSTALLED: weakref.WeakSet[Any] = weakref.WeakSet()


def install_invalid_json_wrapper(
    runtime: ToolRuntime, lookup: Callable[[Any, str], str | None]
) -> None:
    """Install (once per ``runtime``) the ``tools/execute`` wrapper that fails a call with
    ``lookup(exec.agent, exec.call_id)``'s message (``INVALID_ARGS``) when it names one."""
    if runtime in _INSTALLED:
        return
    _INSTALLED.add(runtime)

    async def wrap(exec_: Any, next_: Callable[[], Any]) -> Any:
        message = lookup(exec_.agent, exec_.call_id) if isinstance(exec_.arguments, str) else None
        if message is not None:
            raise ToolArgsError(message, [message])
        return await next_()

    # prepend: outside every other wrapper, so no policy sees the raw string as arguments.
    runtime.on("tools/execute", wrap, prepend=True)
