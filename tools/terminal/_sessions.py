"""``TerminalManager``: owns every terminal session and persistent shell of a host.

Sessions run in the manager's task group (``async with TerminalManager() as terminals:``)
and never outlive it: leaving the block kills every session's whole process tree and waits
until each is reaped. Each process tree also belongs to ``tools.kill_all_processes()`` (and
so to ``atexit``) through the containment launcher it runs behind.

Sessions are private to the scope that opened them: another scope's session id is answered
exactly like an id that never existed. Persistent ``bash`` shells (one per owning scope) are
kept apart from the terminal sessions and are not listed by ``terminal_list``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc

from .._config import ensure_private_dir, runtime_dir
from .._errors import TerminalError
from ._pty import PtySession

__all__ = ["DEFAULT_BACKENDS", "Backend", "TerminalManager", "TerminalSession"]


@dataclass(frozen=True)
class Backend:
    """A terminal backend type: the program to run and the variables it gets."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


# A dumb terminal keeps programs' output free of cursor movement and colour; the prompt is
# fixed so hosts and tests see the same screen whatever the user's rc files say.
_TTY_ENV = {"TERM": "dumb", "PS1": "$ ", "PS2": "> ", "HISTFILE": ""}
DEFAULT_BACKENDS: dict[str, Backend] = {
    "shell": Backend(("bash", "--norc", "--noprofile", "-i"), _TTY_ENV),
    "python": Backend(("python3", "-i", "-q"), {"TERM": "dumb"}),
}


class TerminalSession:
    """One owner's terminal: its id, name, backend type and PTY."""

    def __init__(
        self, session_id: str, name: str | None, kind: str, owner: object, pty: PtySession
    ) -> None:
        self.id = session_id
        self.name = name
        self.type = kind
        self.owner = owner
        self.pty = pty
        self.closing = False
        # One send at a time (foreground or background): each owns the screen it reads.
        self.lock = anyio.Lock()
        self.busy_with: str | None = None  # the background send's job id, while it runs

    def snapshot(self) -> dict[str, Any]:
        """The public session value."""
        out: dict[str, Any] = {"sessionId": self.id}
        if self.name is not None:
            out["name"] = self.name
        out["type"] = self.type
        if self.pty.pid is not None:
            out["pid"] = self.pty.pid
        out["status"] = self.pty.status
        return out


class _Shell:
    """An owner's persistent-bash slot: the lock that serializes its calls, and its shell."""

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.lock = anyio.Lock()
        self.pty: PtySession | None = None


class TerminalManager:
    """Owns terminal sessions and persistent shells for the lifetime of an ``async with``.

    - ``backends``: terminal types by name (default ``shell``: ``bash -i`` without rc files,
      ``python``: ``python3 -i``).
    - ``idle_ms``: output silence after which a send returns ``inferred_idle``.
    - ``send_timeout_ms`` / ``background_timeout_ms``: how long a foreground / background
      send waits at most (``timeout``); ``startup_timeout_ms`` bounds ``terminal_open``'s
      wait for the first prompt.
    - ``scrollback_chars``: retained output per session (oldest lines dropped first);
      ``read_max_lines`` caps ``terminal_read``'s ``count``.
    - ``max_sessions_per_agent``: live terminal sessions one scope may hold.
    """

    def __init__(
        self,
        *,
        backends: Mapping[str, Backend] | None = None,
        idle_ms: int = 1500,
        send_timeout_ms: int = 30_000,
        background_timeout_ms: int = 600_000,
        startup_timeout_ms: int = 10_000,
        scrollback_chars: int = 2_000_000,
        read_max_lines: int = 2000,
        max_sessions_per_agent: int = 10,
        work_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        for label, value in (
            ("idle_ms", idle_ms),
            ("send_timeout_ms", send_timeout_ms),
            ("background_timeout_ms", background_timeout_ms),
            ("startup_timeout_ms", startup_timeout_ms),
            ("scrollback_chars", scrollback_chars),
            ("read_max_lines", read_max_lines),
            ("max_sessions_per_agent", max_sessions_per_agent),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{label} must be a positive integer")
        self.backends = dict(DEFAULT_BACKENDS if backends is None else backends)
        self.idle_ms = idle_ms
        self.send_timeout_ms = send_timeout_ms
        self.background_timeout_ms = background_timeout_ms
        self.startup_timeout_ms = startup_timeout_ms
        self.scrollback_chars = scrollback_chars
        self.read_max_lines = read_max_lines
        self.max_sessions_per_agent = max_sessions_per_agent
        self._own_dir = work_dir is None
        # Private scratch space (command files of the persistent shells), outside any
        # workspace.
        self.work_dir = os.path.abspath(os.fspath(work_dir or runtime_dir("terminals")))
        # id(owner) -> (owner, kept alive so its id stays unique; its sessions by id)
        self._sessions: dict[int, tuple[object, dict[str, TerminalSession]]] = {}
        self._counters: dict[int, int] = {}
        self._shells: dict[int, _Shell] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._closed = False

    async def __aenter__(self) -> Self:
        ensure_private_dir(self.work_dir)
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._close(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Kill every session and shell, wait until each is reaped; idempotent (call it
        from the task that entered the manager, like leaving ``async with``)."""
        await self._close(None, None, None)

    async def _close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            ptys = self.all_ptys()
            self.kill_now()
            for pty in ptys:
                await pty.finished.wait()
        group, self._group = self._group, None
        try:
            if group is not None:
                return await group.__aexit__(exc_type, exc, tb)
            return None
        finally:
            if self._own_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def all_ptys(self) -> list[PtySession]:
        """Every live PTY of this manager (terminal sessions and persistent shells)."""
        ptys = [s.pty for _o, sessions in self._sessions.values() for s in sessions.values()]
        ptys += [shell.pty for shell in self._shells.values() if shell.pty is not None]
        return ptys

    def kill_now(self) -> None:
        """Kill every session's and shell's process tree at once (synchronous)."""
        for pty in self.all_ptys():
            pty.kill()

    # -- spawning ----------------------------------------------------------------------

    async def spawn(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str]) -> PtySession:
        """Start ``argv`` on a fresh PTY in this manager's task group."""
        group = self._group
        if group is None or self._closed:
            raise TerminalError(
                "terminals unavailable: the terminal manager is not running",
                "TERMINAL_MANAGER_CLOSED",
            )
        pty = PtySession(argv, cwd=cwd, env=env, scrollback_chars=self.scrollback_chars)
        await pty.start(group)
        return pty

    # -- terminal sessions ------------------------------------------------------------

    async def open(
        self, owner: object, kind: str, name: str | None, *, cwd: str, env: Mapping[str, str]
    ) -> TerminalSession:
        """Open a terminal of backend type ``kind`` owned by ``owner``."""
        backend = self.backends.get(kind)
        if backend is None:
            known = ", ".join(sorted(self.backends)) or "(none)"
            raise TerminalError(
                f'unknown terminal type "{kind}"; registered types: {known}',
                "TERMINAL_UNKNOWN_TYPE",
            )
        entry = self._sessions.setdefault(id(owner), (owner, {}))
        live = sum(1 for s in entry[1].values() if not s.closing)
        if live >= self.max_sessions_per_agent:
            raise TerminalError(
                "terminal session limit reached for this owner "
                f"(limit: {self.max_sessions_per_agent}); close an unneeded session with "
                "terminal_close, then retry",
                "TERMINAL_LIMIT_REACHED",
            )
        pty = await self.spawn(backend.argv, cwd=cwd, env={**env, **backend.env})
        number = self._counters.get(id(owner), 0) + 1
        self._counters[id(owner)] = number
        session = TerminalSession(f"terminal-{number}", name, kind, owner, pty)
        entry[1][session.id] = session
        return session

    def sessions(self, owner: object) -> list[TerminalSession]:
        """The owner's sessions, in opening order."""
        entry = self._sessions.get(id(owner))
        return list(entry[1].values()) if entry is not None else []

    def lookup(self, owner: object, session_id: str) -> TerminalSession:
        """The owner's session ``session_id``; another owner's id is unknown, like a new one."""
        entry = self._sessions.get(id(owner))
        session = entry[1].get(session_id) if entry is not None else None
        if session is None:
            raise TerminalError(
                f"unknown terminal session {session_id}", "TERMINAL_UNKNOWN_SESSION"
            )
        return session

    async def close_session(self, session: TerminalSession) -> bool:
        """Kill the session's tree and forget it; ``False`` when already closing."""
        if session.closing:
            return False
        session.closing = True
        try:
            await session.pty.close()
        finally:
            entry = self._sessions.get(id(session.owner))
            if entry is not None:
                entry[1].pop(session.id, None)
        return True

    # -- persistent shells ------------------------------------------------------------

    def shell_slot(self, owner: object) -> _Shell:
        """The owner's persistent-shell slot (created on first use)."""
        slot = self._shells.get(id(owner))
        if slot is None:
            slot = self._shells[id(owner)] = _Shell(owner)
        return slot
