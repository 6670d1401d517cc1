"""Agent scopes: one registry layer per agent, chained to presets and the global layer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._runtime import ToolRuntime
    from ._session import SessionLog
    from ._types import ToolDefinition

__all__ = ["Layer", "Scope"]

Disposer = Callable[[], None]


class Layer:
    """One scope's contribution: tools, restrictions, guards and a presentation mode."""

    __slots__ = ("guards", "mode", "restrictions", "tools", "view")

    def __init__(self) -> None:
        self.tools: dict[str, ToolDefinition] = {}
        self.restrictions: list[tuple[frozenset[str] | None, frozenset[str] | None]] = []
        self.guards: list[Callable[[Any], str | None]] = []
        self.mode: str | None = None
        # The registry's cached view of this layer's scope: ``(version, run_code, view)``.
        self.view: tuple[int, object, dict[str, ToolDefinition]] | None = None

    def admits(self, name: str) -> bool:
        """Whether every restriction of this layer admits the inherited tool ``name``."""
        for allow, deny in self.restrictions:
            if allow is not None and name not in allow:
                return False
            if deny is not None and name in deny:
                return False
        return True


class Scope:
    """An agent scope of a ``ToolRuntime`` (create with ``rt.scope(name, parent=...)``).

    Registrations, guards, listeners, restrictions and ``present_as`` made through a
    scope apply to that scope and every scope parented under it. ``session`` receives
    this scope's durable events.
    """

    __slots__ = ("__weakref__", "_layer", "_runtime", "name", "parent", "session")

    def __init__(
        self,
        runtime: ToolRuntime,
        name: str,
        parent: Scope | None,
        session: SessionLog | None,
    ) -> None:
        self._runtime = runtime
        self._layer = Layer()
        self.name = name
        self.parent = parent
        self.session = session

    @property
    def runtime(self) -> ToolRuntime:
        """The runtime this scope belongs to."""
        return self._runtime

    def chain(self) -> list[Scope]:
        """This scope's chain, farthest ancestor first and this scope last."""
        out: list[Scope] = []
        node: Scope | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        out.reverse()
        return out

    def register(self, definition: ToolDefinition) -> Disposer:
        """Register a tool in this scope (shadows inherited ones); returns its disposer."""
        return self._runtime._registry.register(definition, self)

    def guard(self, fn: Callable[[Any], str | None]) -> Disposer:
        """Add a monotonic guard for calls of this scope (and scopes under it)."""
        return self._runtime._registry.guard(fn, self)

    def on(self, event: str, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Listen to ``event`` for calls made by exactly this scope (not its child scopes).

        Child scopes are agents of their own: they inherit tools, restrictions, guards and
        the presentation mode through the layer chain, but not listeners.
        """
        return self._runtime._hooks.on(event, listener, owner=self, prepend=prepend)

    def restrict(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Filter the tools this scope inherits (allow-list and/or deny-list)."""
        return self._runtime._registry.restrict(self, allow=allow, deny=deny)

    def present_as(self, mode: str) -> Disposer:
        """Present this scope's tools as ``"native" | "code" | "both"``."""
        return self._runtime._registry.present_as(self, mode)

    def __repr__(self) -> str:
        return f"<Scope {self.name!r}>"
