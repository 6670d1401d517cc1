"""The tool registry: layers, visibility, restrictions, guards and presentation modes.

Visibility of a scope (``view``), in this order:
1. the inherited set: the global layer, then each ancestor layer from farthest to
   nearest (a nearer layer shadows a farther one, keeping the first position);
2. every restriction on the scope's chain must admit an inherited name;
3. the scope's own registrations are added unfiltered and shadow inherited names;
4. ``run_code`` is appended last when the scope's effective mode is not ``native``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._scope import Layer, Scope
from ._types import ToolDefinition, ToolOutput
from .schema import assert_supported_json_schema

if TYPE_CHECKING:
    from ._hooks import HookRegistry

__all__ = ["MODES", "RUN_CODE_NAME", "Registry"]

_log = logging.getLogger("engine.registry")

RUN_CODE_NAME = "run_code"
MODES = ("native", "code", "both")

Disposer = Callable[[], None]


class Registry:
    """Layers and the view resolver of one ``ToolRuntime``."""

    def __init__(
        self,
        hooks: HookRegistry,
        default_mode: str,
        run_code: Callable[[], ToolDefinition],
    ) -> None:
        self._hooks = hooks
        # Views are cached per scope and invalidated by a version bumped on every layer
        # mutation (all of them go through ``_apply``); run_code is re-checked per read
        # because the code runtime (and so its language flavour) can be swapped.
        self._version = 0
        self._global_view: tuple[int, object, dict[str, ToolDefinition]] | None = None
        self.global_layer = Layer()
        self.default_mode = default_mode
        self._run_code = run_code

    # ----------------------------------------------------------------- changes

    def _apply(self, do: Callable[[], Disposer], notify: bool = True) -> Disposer:
        """Apply a layer mutation, emit ``tools/change`` (rolling back if a listener
        raises) and return an idempotent exact disposer."""
        undo_inner = do()
        self._version += 1

        def undo() -> None:
            undo_inner()
            self._version += 1

        if notify:
            try:
                self._hooks.emit_change()
            except BaseException:
                undo()
                raise
        done = False

        def dispose() -> None:
            nonlocal done
            if done:
                return
            done = True
            undo()
            if notify:
                try:
                    self._hooks.emit_change()
                except Exception:
                    _log.warning("tools/change listener failed on disposal", exc_info=True)

        return dispose

    def _layer(self, scope: Scope | None) -> Layer:
        return self.global_layer if scope is None else scope._layer

    # ------------------------------------------------------------ registration

    def register(self, definition: ToolDefinition, scope: Scope | None) -> Disposer:
        """Register ``definition`` into the global layer or ``scope``'s layer."""
        if not isinstance(definition, ToolDefinition):
            raise TypeError(
                f"register() expects a ToolDefinition (use define_tool), got "
                f"{type(definition).__name__}"
            )
        name = definition.name
        if not isinstance(name, str) or not name:
            raise TypeError("tool name must be a non-empty string")
        output = definition.output
        if (
            not isinstance(output, ToolOutput)
            or not callable(output.render)
            or (output.presentation_meta is not None and not callable(output.presentation_meta))
        ):
            raise TypeError(
                f'tool "{name}" must declare output {{ schema, render, presentationMeta? }}'
            )
        # Only the output schema is enforced here: raw definitions
        # (MCP, dynamic) may carry richer parameter schemas the model reads but the
        # registry does not validate.
        assert_supported_json_schema(output.schema)
        if not isinstance(definition.parameters, Mapping):
            raise TypeError(f'tool "{name}" parameters must be a JSON Schema object')
        timeout = definition.timeout_ms
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise TypeError(f'tool "{name}" timeout_ms must be a positive finite number')
        if not callable(definition.execute):
            raise TypeError(f'tool "{name}" execute must be an async callable')
        if name == RUN_CODE_NAME:
            raise ValueError(
                f'tool name "{RUN_CODE_NAME}" is reserved for the Code Mode presentation '
                "transport and cannot be registered or shadowed"
            )
        layer = self._layer(scope)
        if name in layer.tools:
            if scope is None:
                raise ValueError(
                    f'tool "{name}" is already registered (for a per-agent variant, register '
                    "through that agent's `Scope.register` instead)"
                )
            raise ValueError(f'tool "{name}" is already registered in this scope')

        def do() -> Disposer:
            layer.tools[name] = definition

            def undo() -> None:
                if layer.tools.get(name) is definition:
                    del layer.tools[name]

            return undo

        return self._apply(do)

    def guard(self, fn: Callable[[Any], str | None], scope: Scope | None) -> Disposer:
        """Add a monotonic guard (no ``tools/change``)."""
        if not callable(fn):
            raise TypeError(f"guard {fn!r} is not callable")
        layer = self._layer(scope)

        def do() -> Disposer:
            layer.guards.append(fn)

            def undo() -> None:
                for i, g in enumerate(layer.guards):
                    if g is fn:
                        del layer.guards[i]
                        return

            return undo

        return self._apply(do, notify=False)

    def restrict(
        self, scope: Scope, *, allow: Iterable[str] | None, deny: Iterable[str] | None
    ) -> Disposer:
        """Filter what ``scope`` inherits (allow-list and/or deny-list; unknown names are errors)."""
        if allow is None and deny is None:
            raise ValueError(
                "Scope.restrict() is a no-op: pass `allow` and/or `deny` (an empty filter "
                "is almost always a materialized-empty-config bug)"
            )
        for label, values in (("allow", allow), ("deny", deny)):
            if isinstance(values, str):
                raise TypeError(f"Scope.restrict() {label} must be a list of names, not a string")
        allow_list = None if allow is None else list(allow)
        deny_list = None if deny is None else list(deny)
        named = [*(allow_list or []), *(deny_list or [])]
        if RUN_CODE_NAME in named:
            raise ValueError(
                f"Scope.restrict() cannot name reserved Code Mode presentation transport "
                f'"{RUN_CODE_NAME}"; restrict end-capability tools instead'
            )
        known = set(self.inherited(scope))
        unknown = [n for n in named if n not in known]
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            listed = ", ".join(f'"{n}"' for n in unknown)
            known_text = ", ".join(sorted(known)) or "(none)"
            raise ValueError(
                f"Scope.restrict() names unknown global tool{plural} {listed}; "
                f"known global tools: {known_text}"
            )
        entry = (
            None if allow_list is None else frozenset(allow_list),
            None if deny_list is None else frozenset(deny_list),
        )
        layer = scope._layer

        def do() -> Disposer:
            layer.restrictions.append(entry)

            def undo() -> None:
                for i, r in enumerate(layer.restrictions):
                    if r is entry:
                        del layer.restrictions[i]
                        return

            return undo

        return self._apply(do)

    def present_as(self, scope: Scope, mode: str) -> Disposer:
        """Declare ``scope``'s presentation mode (one declaration per scope)."""
        if mode not in MODES:
            raise ValueError(f'unknown tool presentation mode "{mode}" (known: native, code, both)')
        layer = scope._layer
        if layer.mode is not None:
            raise ValueError(
                f'tools.presentAs("{mode}") conflicts with "{layer.mode}" already declared for '
                "this scope; one composition selects one presentation"
            )

        def do() -> Disposer:
            layer.mode = mode

            def undo() -> None:
                layer.mode = None

            return undo

        return self._apply(do)

    # ------------------------------------------------------------------- views

    def mode_for(self, scope: Scope | None) -> str:
        """Effective mode: the nearest declaring scope on the chain, else the default."""
        node = scope
        while node is not None:
            if node._layer.mode is not None:
                return node._layer.mode
            node = node.parent
        return self.default_mode

    def inherited(self, scope: Scope | None) -> dict[str, ToolDefinition]:
        """The global layer plus every ancestor layer (not the scope's own), unfiltered."""
        inherited = dict(self.global_layer.tools)
        if scope is not None:
            for layer_scope in scope.chain()[:-1]:
                inherited.update(layer_scope._layer.tools)
        return inherited

    def view(self, scope: Scope | None) -> dict[str, ToolDefinition]:
        """The tools ``scope`` sees, in presentation order (see module docstring).

        The returned dict is cached and shared: callers must not mutate it.
        """
        # A scope's view is cached on its layer (a scope belongs to one runtime, so one
        # registry): a weak-keyed dictionary look-up cost more than the rest of a hit.
        hit = self._global_view if scope is None else scope._layer.view
        if hit is not None and hit[0] == self._version:
            # Every mode declaration bumps the version, so the mode is the cached one:
            # only the run_code definition (the code runtime can be swapped) is checked.
            cached_run_code = hit[1]
            if cached_run_code is None or cached_run_code is self._run_code():
                return hit[2]
        run_code = self._run_code() if self.mode_for(scope) != "native" else None
        visible = self._compute_view(scope, run_code)
        entry = (self._version, run_code, visible)
        if scope is None:
            self._global_view = entry
        else:
            scope._layer.view = entry
        return visible

    def _compute_view(
        self, scope: Scope | None, run_code: ToolDefinition | None
    ) -> dict[str, ToolDefinition]:
        inherited = self.inherited(scope)
        chain_layers = [s._layer for s in scope.chain()] if scope is not None else []
        visible = {
            name: d
            for name, d in inherited.items()
            if all(layer.admits(name) for layer in chain_layers)
        }
        if scope is not None:
            visible.update(scope._layer.tools)
        if run_code is not None:
            visible[RUN_CODE_NAME] = run_code
        return visible

    def get(self, name: str, scope: Scope | None) -> ToolDefinition | None:
        """The definition ``scope`` resolves for ``name`` (None when not visible)."""
        return self.view(scope).get(name)

    def collapses(self, name: str, scope: Scope | None, nested: bool) -> bool:
        """Whether the ``code`` collapse denies a model-direct call naming ``name``."""
        return not nested and name != RUN_CODE_NAME and self.mode_for(scope) == "code"

    def resolve_execution(
        self, name: str, scope: Scope | None, nested: bool
    ) -> ToolDefinition | None:
        """The definition that may *execute* for a call (collapse applied)."""
        tool = self.get(name, scope)
        if tool is None or self.collapses(name, scope, nested):
            return None
        return tool

    def resolves_same(self, name: str, stamp: int) -> bool:
        """Whether a definition of ``name`` resolved at version ``stamp`` (``_version`` then)
        is the one a look-up returns now: nothing changed since (every change bumps the
        version), and it is not ``run_code``, whose definition follows the code runtime
        (see ``view``)."""
        return stamp == self._version and name != RUN_CODE_NAME

    def guard_reason(self, exec_: Any) -> str | None:
        """First denial from global guards, then the chain's guards (farthest first).

        Guards are iterated live (by index) so a guard registered by a guard runs in the
        same pass.
        """
        agent = exec_.agent
        if not self.global_layer.guards:
            # No guard anywhere on the chain (the common case): nothing to build a list
            # of layers for (and no guard to register another during the pass).
            node = agent
            while node is not None and not node._layer.guards:
                node = node.parent
            if node is None:
                return None
        layers = [self.global_layer]
        if agent is not None:
            layers += [s._layer for s in agent.chain()]
        for layer in layers:
            i = 0
            while i < len(layer.guards):
                reason = layer.guards[i](exec_)
                if reason is not None:
                    return str(reason)
                i += 1
        return None
