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

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codemode.engine import ToolArgsError
from codemode.engine.scheduling import invalid_json_message

if TYPE_CHECKING:
    from codemode.engine import ToolRuntime

__all__ = ["invalid_json_message", "install_invalid_json_wrapper"]

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
