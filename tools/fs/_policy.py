"""The read-before-write policy (``FsObservationPolicy``).

The file tools record what each scope has seen — a file's version after ``read``, ``view``,
``write`` or ``edit``, or its absence — and refuse a ``write``/``edit`` (or a
``str_replace_editor`` ``str_replace``/``insert``) of an existing file the calling scope has
not read, or that changed on disk since it did. Scopes are keyed by identity
(``exec.agent``); agent-less calls share one bucket per policy.

The check runs inside the tool body, on the version of the very descriptor the tool is about
to replace (not on a second walk of the path in a pre-execute hook, which a concurrent
rename could make disagree with the write), and fails with a coded ``FsError``
(``FS_NOT_OBSERVED``, ``FS_STALE_VERSION``, ``FS_NOT_FOUND``).

Wire it by passing the same instance to ``default_tools(..., fs_policy=policy)`` (the tools
record observations into it and lend it their workspace) and calling ``install(rt)``, which
switches enforcement on until its disposer runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._errors import FsError
from ._io import FileVersion
from ._paths import Workspace

if TYPE_CHECKING:
    from codemode.engine import ToolRuntime

__all__ = ["FsObservationPolicy"]

_REMEDY_READ = " — read the file, then retry"
_REMEDY_REREAD = " — re-read the file, then retry"

Intent = Literal["write", "edit", "editor"]


@dataclass(frozen=True, slots=True)
class _Observation:
    version: FileVersion | None  # None: the scope saw the file absent


class FsObservationPolicy:
    """Denies blind overwrites and stale edits; see the module docstring for wiring."""

    def __init__(self) -> None:
        # Keyed by scope identity. Scopes cannot be weakly referenced (slotted), so the
        # policy keeps its scopes' observations for as long as the policy itself lives.
        self._by_scope: dict[int, tuple[object, dict[str, _Observation]]] = {}
        self._agentless: dict[str, _Observation] = {}
        self._workspace: Workspace | None = None
        self._installed = 0

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

    def install(self, rt: ToolRuntime | None = None) -> Callable[[], None]:
        """Switch enforcement on (for every tool built with this policy); returns the
        disposer that switches it off again. ``rt`` is accepted for symmetry with other
        policies: the tools enforce in their bodies, so nothing is registered on it."""
        self._installed += 1
        disposed = False

        def dispose() -> None:
            nonlocal disposed
            if not disposed:
                disposed = True
                self._installed -= 1

        return dispose

    @property
    def enforcing(self) -> bool:
        """Whether an ``install`` is in force."""
        return self._installed > 0

    def check(
        self,
        intent: Intent,
        agent: object | None,
        key: str,
        display: str,
        current: FileVersion | None,
    ) -> None:
        """Raise the coded refusal for replacing ``key`` (now at ``current``), if any."""
        if not self.enforcing:
            return
        seen = self._bucket(agent).get(key)
        path = display
        if intent == "write":
            if current is None:
                if seen is not None and seen.version is not None:
                    raise FsError(
                        f'cannot write "{path}": file no longer exists{_REMEDY_REREAD}',
                        "FS_STALE_VERSION",
                    )
                return
            if seen is None or seen.version is None:
                raise FsError(
                    f'cannot overwrite existing "{path}" without reading it first{_REMEDY_READ}',
                    "FS_NOT_OBSERVED",
                )
            if seen.version != current:
                raise FsError(
                    f'cannot write "{path}": file changed since it was read{_REMEDY_REREAD}',
                    "FS_STALE_VERSION",
                )
            return
        suffix_read = _REMEDY_READ if intent == "edit" else ""
        changed = (
            f'cannot edit "{path}": file changed since it was read{_REMEDY_REREAD}'
            if intent == "edit"
            else f'cannot write "{path}": file changed since it was read'
        )
        if current is None:
            if seen is None:
                raise FsError(
                    f'edit requires reading "{path}" first{suffix_read}', "FS_NOT_OBSERVED"
                )
            if seen.version is None:
                raise FsError(f'cannot edit "{path}": not found', "FS_NOT_FOUND")
            raise FsError(changed, "FS_STALE_VERSION")
        if seen is None or seen.version is None:
            raise FsError(f'edit requires reading "{path}" first{suffix_read}', "FS_NOT_OBSERVED")
        if seen.version != current:
            raise FsError(changed, "FS_STALE_VERSION")
