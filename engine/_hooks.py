"""Event listeners: waterfalls (middleware chains), result observers and change emits.

Waterfall semantics: listeners run in registration order and the first registered is
the outermost; ``prepend=True`` inserts a listener outside the existing ones. Each
listener receives ``next`` (an async callable with no arguments) and returns what the
chain decided; the innermost ``next`` is the emitter's default.

Scope filtering: a listener registered on a ``Scope``
sees only calls whose agent *is* that scope — not its child scopes, which are agents of
their own (a preset's registrations, restrictions, guards and mode reach its agents
through the layer chain; its listeners do not). Agent-less calls reach only global
listeners. ``tools/change`` is unfiltered.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._scope import Scope

__all__ = ["EVENTS", "HookRegistry"]

_log = logging.getLogger("engine.hooks")

WATERFALLS = frozenset(
    {"tools/pre-execute", "tools/execute", "tools/post-execute", "tools/code-dispatch-log"}
)
EVENTS = WATERFALLS | {"tools/result", "tools/change"}


class _Entry:
    __slots__ = ("listener", "owner")

    def __init__(self, listener: Callable[..., Any], owner: Scope | None) -> None:
        self.listener = listener
        self.owner = owner


def _is_async_callable(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - want the bound method
    return call is not None and inspect.iscoroutinefunction(call)


def listener_name(fn: object) -> str:
    """A readable name for a listener in error messages."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class HookRegistry:
    """All listeners of one ``ToolRuntime``, global and scoped."""

    def __init__(self) -> None:
        self._entries: dict[str, list[_Entry]] = {event: [] for event in EVENTS}

    def on(
        self,
        event: str,
        listener: Callable[..., Any],
        *,
        owner: Scope | None,
        prepend: bool = False,
    ) -> Callable[[], None]:
        """Register ``listener``; return its exact disposer. Validated here, not at call time."""
        if event not in EVENTS:
            known = ", ".join(sorted(EVENTS))
            raise ValueError(f'unknown event "{event}" (known: {known})')
        if not callable(listener):
            raise TypeError(f"{event} listener {listener!r} is not callable")
        if event in WATERFALLS and not _is_async_callable(listener):
            raise TypeError(
                f"{event} listener {listener_name(listener)} must be an async function "
                "(async def listener(..., next))"
            )
        entry = _Entry(listener, owner)
        entries = self._entries[event]
        if prepend:
            entries.insert(0, entry)
        else:
            entries.append(entry)

        def dispose() -> None:
            try:
                entries.remove(entry)
            except ValueError:
                pass

        return dispose

    def has(self, event: str) -> bool:
        """Whether any listener (global or scoped) is registered for ``event``."""
        return bool(self._entries[event])

    def listeners(self, event: str, agent: Scope | None) -> list[Callable[..., Any]]:
        """The listeners of ``event`` that apply to a call made by ``agent`` (in order)."""
        entries = self._entries[event]
        if not entries:
            return []
        if event == "tools/change":
            return [e.listener for e in entries]
        if agent is None:
            return [e.listener for e in entries if e.owner is None]
        return [e.listener for e in entries if e.owner is None or e.owner is agent]

    async def waterfall(
        self,
        event: str,
        agent: Scope | None,
        args: tuple[Any, ...],
        default: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Run ``event``'s chain for ``agent`` with ``args``; innermost ``next`` is ``default``."""
        chain = self.listeners(event, agent)
        if not chain:
            return await default()

        async def call(index: int) -> Any:
            if index >= len(chain):
                return await default()
            listener = chain[index]

            async def next_() -> Any:
                # A second next() re-runs the inner chain, which is what a retrying
                # wrapper wants; it is allowed deliberately.
                return await call(index + 1)

            return await listener(*args, next_)

        return await call(0)

    async def notify_result(self, agent: Scope | None, exec_: Any, result: Any) -> None:
        """Run ``tools/result`` observers; their failures are logged, never raised."""
        for listener in self.listeners("tools/result", agent):
            try:
                returned = listener(exec_, result)
                if inspect.isawaitable(returned):
                    await returned
            except Exception as exc:
                _log.warning(
                    'tool "%s" (%s): tools/result observer failed: %s',
                    exec_.name,
                    exec_.call_id,
                    exc,
                )

    def emit_change(self) -> None:
        """Emit ``tools/change`` to every listener; a throwing listener raises (for rollback)."""
        for listener in list(self._entries["tools/change"]):
            listener.listener()
