"""A private PID namespace for workers, so that no host process is visible to them.

``unshare(CLONE_NEWPID)`` does not move its caller: the fork server stays in the host's
PID namespace (so the pids it reports, and the host's ``kill``/``pidfd_open``/
``/proc/<pid>`` on them, are unchanged) while every child it forks afterwards is born in
the new namespace. Inside it a worker sees only itself and its sibling workers: its
own ``getpid()`` is small, ``getppid()`` is 0 (its parent is outside), and a host pid
names no process (``ESRCH``) for the calls seccomp still allows on foreign pids
(``getpgid``, ``getsid``, ``sched_getaffinity``, ``getpriority``, ``prlimit`` reads).

The first child becomes the namespace's PID 1, and when PID 1 exits the kernel kills
every process in the namespace and refuses further forks into it. So the server's first
fork is a dedicated, idle init (``start_init``): it holds the read end of a pipe whose
write end only the server keeps, and exits when that end closes (the server exited or
died, even by SIGKILL) — taking every worker with it. Being the one process certain to
outlive the server, it also runs the server's clean-up (``on_exit``: remove the work
directory), which a killed server cannot. The server treats the init's death as its
own.

Only the stdlib is imported: this runs in the fork server.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import NoReturn

__all__ = ["start_init"]

_MAX_FD = 1 << 20


def start_init(on_exit: Callable[[], None]) -> tuple[int, int]:
    """Fork the namespace's PID 1; return its (host) pid and the fd that keeps it alive.

    ``on_exit`` runs in the init once the server is gone. Must be the first fork after
    ``unshare(CLONE_NEWPID)``. Raises ``OSError``.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        _init(read_end, on_exit)
    os.close(read_end)
    return pid, write_end


def _init(read_end: int, on_exit: Callable[[], None]) -> NoReturn:
    # No parent-death signal: it would kill the init before ``on_exit``. The pipe is
    # as reliable: the kernel closes the server's end however the server ends.
    try:
        os.closerange(0, read_end)
        os.closerange(read_end + 1, _MAX_FD)
        # Orphaned workers are re-parented here; reap them without a handler.
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while os.read(read_end, 1):
            pass
        on_exit()
    finally:
        os._exit(0)
