"""``TimeoutPolicy``: a ``tools/execute`` wrapper honouring each tool's ``timeout_ms``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._errors import ToolTimeoutError
from .._results import error_result
from .._signals import AbortController, AbortSignal
from .._types import ToolExecutionResult
from ..json import js_number

if TYPE_CHECKING:
    from .._execution import ToolDispatchExecution
    from .._runtime import ToolRuntime

__all__ = ["TimeoutPolicy"]


class TimeoutPolicy:
    """Cooperative per-tool deadlines.

    For a tool that declares ``timeout_ms`` the wrapper derives a deadline signal from
    ``exec.signal``, swaps it onto ``exec`` for ``next()`` and restores the caller's signal
    afterwards (post-execute sees the caller's). If *its own* timer fired first, the
    result is replaced by ``TOOL_TIMEOUT`` (``tool call timed out after <ms>ms``); if the
    caller aborted first, the registry's ``ABORTED`` stands. Never a hard kill: the body
    is awaited until it reaches quiescence.
    """

    def install(self, runtime: ToolRuntime) -> Callable[[], None]:
        """Install the wrapper globally; returns its disposer."""

        async def wrap(
            exec_: ToolDispatchExecution, next_: Callable[[], Any]
        ) -> ToolExecutionResult:
            # The definition the pipeline resolved for this call when it prepared it.
            tool = exec_._tool
            timeout_ms = tool.timeout_ms if tool is not None else None
            if timeout_ms is None:
                return await next_()  # type: ignore[no-any-return]
            caller = exec_.signal
            deadline = AbortController()
            fired = False

            async def timer() -> None:
                nonlocal fired
                await anyio.sleep(timeout_ms / 1000)
                if not caller.aborted:
                    fired = True
                    deadline.abort(ToolTimeoutError(_message(timeout_ms)))

            # ``linked``, not ``any``: the caller's signal may outlive thousands of calls,
            # and each would leave a listener on it until it aborts.
            exec_.signal, unlink = AbortSignal.linked([caller, deadline.signal])
            failure: Exception | None = None
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(timer)
                    try:
                        result = await next_()
                    except Exception as exc:
                        # Re-raised outside the task group: raised inside it, an inner
                        # wrapper's error would reach the pipeline as an ExceptionGroup
                        # ("unhandled errors in a TaskGroup") instead of its own message.
                        failure = exc
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                unlink()
                exec_.signal = caller
            if failure is not None:
                raise failure
            if fired:
                return error_result(ToolTimeoutError(_message(timeout_ms)))
            return result  # type: ignore[no-any-return]

        return runtime.on("tools/execute", wrap)


def _message(timeout_ms: float) -> str:
    return f"tool call timed out after {js_number(timeout_ms)}ms"
