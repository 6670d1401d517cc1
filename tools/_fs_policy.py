"""The read-before-write policy (the seed's fs-observation policy).

The file tools record what each scope has seen — a file's version after ``read``, ``view``,
``write`` or ``edit``, or its absence — and this policy, a ``tools/pre-execute`` listener,
refuses a ``write``/``edit`` (or a ``str_replace_editor`` ``str_replace``/``insert``) of an
existing file the calling scope has not read, or that changed on disk since it did. Scopes are
keyed by identity (``exec.agent``); agent-less calls share one bucket per policy.

Wire it by passing the same instance to ``default_tools(..., fs_policy=policy)`` (the tools
record observations into it and lend it their workspace) and installing it on the runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from engine import Deny

from ._errors import FsError
from ._fsio import FileVersion, file_version
from ._paths import Workspace

if TYPE_CHECKING:
    from engine import ToolRuntime

__all__ = ["FsObservationPolicy"]

_log = logging.getLogger("tools.fs_policy")

_REMEDY_READ = " — read the file, then retry"
_REMEDY_REREAD = " — re-read the file, then retry"


@dataclass(frozen=True, slots=True)
class _Observation:
    version: FileVersion | None  # None: the scope saw the file absent


class FsObservationPolicy:
    """Denies blind overwrites and stale edits; see the module docstring for wiring.

    ``install(rt)`` registers the pre-execute listener and returns its disposer.
    """

    def __init__(self) -> None:
        # Keyed by scope identity. Scopes cannot be weakly referenced (slotted), so the
        # policy keeps its scopes' observations for as long as the policy itself lives.
        self._by_scope: dict[int, tuple[object, dict[str, _Observation]]] = {}
        self._agentless: dict[str, _Observation] = {}
        self._workspace: Workspace | None = None
        self._warned = False

    # -- recording (called by the tools) -------------------------------------------------

    def bind(self, workspace: Workspace) -> None:
        """Attach the workspace paths are resolved against (done by ``default_tools``)."""
        if self._workspace is not None and self._workspace.root != workspace.root:
            raise ValueError(
                "an FsObservationPolicy serves one workspace; "
                f"already bound to {self._workspace.root}"
            )
        self._workspace = workspace

    def _bucket(self, agent: object | None) -> dict[str, _Observation]:
        if agent is None:
            return self._agentless
        entry = self._by_scope.get(id(agent))
        if entry is None or entry[0] is not agent:
            entry = (agent, {})
            self._by_scope[id(agent)] = entry
        return entry[1]

    def observe_present(self, agent: object | None, real: str, version: FileVersion) -> None:
        """Record that ``agent`` saw ``real`` at ``version``."""
        self._bucket(agent)[real] = _Observation(version)

    def observe_absent(self, agent: object | None, real: str) -> None:
        """Record that ``agent`` saw ``real`` missing."""
        self._bucket(agent)[real] = _Observation(None)

    # -- enforcement ---------------------------------------------------------------------

    def install(self, rt: ToolRuntime) -> Callable[[], None]:
        """Register the ``tools/pre-execute`` listener on ``rt``; returns its disposer."""

        async def pre_execute(exec: Any, next: Callable[[], Awaitable[Any]]) -> Any:
            reason = await self.check(exec.name, exec.arguments, exec.agent)
            if reason is not None:
                return Deny(reason)
            return await next()

        dispose: Callable[[], None] = rt.on("tools/pre-execute", pre_execute)
        return dispose

    async def check(self, name: str, arguments: object, agent: object | None) -> str | None:
        """The denial reason for this call, or ``None`` to let it through."""
        workspace = self._workspace
        if workspace is None:
            if not self._warned:
                self._warned = True
                _log.warning(
                    "FsObservationPolicy is installed but no tools record into it; pass it "
                    "to tools.default_tools(..., fs_policy=policy)"
                )
            return None
        if not isinstance(arguments, Mapping):
            return None
        if name == "write":
            kind = "write"
        elif name == "edit":
            kind = "edit"
        elif name == "str_replace_editor" and arguments.get("command") in ("str_replace", "insert"):
            kind = "editor"
        else:
            return None
        raw = arguments.get("path" if kind == "editor" else "file_path")
        if not isinstance(raw, str) or not raw.strip():
            return None  # the tool reports bad arguments itself
        try:
            resolved = workspace.resolve(raw)
        except (FsError, ValueError):
            return None  # ... and confinement errors
        current = await anyio.to_thread.run_sync(file_version, resolved.real)
        seen = self._bucket(agent).get(resolved.real)
        path = resolved.display
        if kind == "write":
            if current is None:
                if seen is not None and seen.version is not None:
                    return f'cannot write "{path}": file no longer exists{_REMEDY_REREAD}'
                return None
            if seen is None or seen.version is None:
                return f'cannot overwrite existing "{path}" without reading it first{_REMEDY_READ}'
            if seen.version != current:
                return f'cannot write "{path}": file changed since it was read{_REMEDY_REREAD}'
            return None
        suffix_read = _REMEDY_READ if kind == "edit" else ""
        suffix_reread = _REMEDY_REREAD if kind == "edit" else ""
        changed = (
            f'cannot edit "{path}": file changed since it was read{suffix_reread}'
            if kind == "edit"
            else f'cannot write "{path}": file changed since it was read'
        )
        if current is None:
            if seen is None:
                return f'edit requires reading "{path}" first{suffix_read}'
            if seen.version is None:
                return f'cannot edit "{path}": not found'
            return changed
        if seen is None or seen.version is None:
            return f'edit requires reading "{path}" first{suffix_read}'
        if seen.version != current:
            return changed
        return None
