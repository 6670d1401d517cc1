"""Terminals: persistent PTY sessions (``terminal_*``) and the persistent ``bash`` variant.

Layout:

- ``_pty``: ``PtySession``, one program on a fresh pseudo-terminal behind the containment
  launcher of ``tools/shell`` (its own cgroup, a subreaper, death with the host), with a
  bounded scrollback and the wait logic (``stdin_read`` detected from ``/proc``: the
  foreground process group blocked reading the terminal with no typed input unread;
  ``inferred_idle`` on output silence; ``timeout``; ``session_exit``).
- ``_sessions``: ``TerminalManager``, the ``async with`` owner of every session and
  persistent shell (leaving it kills them all; ``tools.kill_all_processes()`` and ``atexit``
  reach them too), with the backend types (``shell``, ``python``) and per-scope ownership.
- ``_tools``: ``build_terminal_tools``, the six ``terminal_*`` tools.
- ``_persistent``: ``build_persistent_bash``, the ``dsh-tool-bash-persistent`` ``bash``.

Failures are ``TerminalError``s with stable codes: ``TERMINAL_NO_AGENT``,
``TERMINAL_INVALID_ARGS``, ``TERMINAL_INVALID_CWD``, ``TERMINAL_UNKNOWN_TYPE``,
``TERMINAL_UNKNOWN_SESSION``, ``TERMINAL_LIMIT_REACHED``, ``TERMINAL_SESSION_EXITED``,
``TERMINAL_EXITED`` (a write to a terminal that went away), ``TERMINAL_SIGNAL_REJECTED``,
``TERMINAL_NO_FOREGROUND``, ``TERMINAL_SIGNAL_FAILED``, ``TERMINAL_SPAWN_FAILED``,
``TERMINAL_SHELL_INIT_FAILED``, ``TERMINAL_JOBS_UNAVAILABLE``, ``TERMINAL_MANAGER_CLOSED``
(plus ``FS_*`` codes for a ``cwd`` outside the workspace and ``ABORTED``).
"""

from __future__ import annotations

from ._persistent import build_persistent_bash
from ._pty import PtySession, clean_terminal_text
from ._sessions import DEFAULT_BACKENDS, Backend, TerminalManager, TerminalSession
from ._tools import build_terminal_tools

__all__ = [
    "Backend",
    "DEFAULT_BACKENDS",
    "PtySession",
    "TerminalManager",
    "TerminalSession",
    "build_persistent_bash",
    "build_terminal_tools",
    "clean_terminal_text",
]
