"""What a worker process does between ``fork()`` and ``_exit()``.

1. Drop everything inherited from the fork server except the bridge socket; new session
   (so the supervisor can kill the whole process group); empty environment, stdio on
   /dev/null, cwd in an empty read-only directory.
2. Create the guest's event loop (it needs a socketpair, which seccomp forbids later).
3. Set the rlimits and run the guests' per-worker warm-up (trusted code: it runs no
   program, but may still read files, e.g. ``/proc/self/statm``).
4. Lock down: enter the empty private root, drop privileges, parent-death signal,
   Landlock, seccomp; report ``ready``. From here on no host file is reachable.
5. Wait for the ``run`` frame, hand it to the guest module it names, and exit.

The worker is generic: the guest kind comes from the ``run`` frame and must be one of
the guest modules the fork server was started with.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from typing import Any, NoReturn

from . import _boundary
from ._bridge import WorkerBridge
from ._frames import DoneFrame, ErrorSpec, ReadyFrame
from ._guest import load_guest

__all__ = ["worker_main"]

_MAX_FD = 1 << 20


def worker_main(
    bridge_fd: int,
    spec: _boundary.BoundarySpec,
    root_fd: int,
    private_root: bool,
    parent_pid: int,
    guests: dict[str, str],
    max_frame_bytes: int,
    warm_options: dict[str, dict[str, Any]] | None = None,
) -> NoReturn:
    """Run one worker to completion; never returns (``os._exit``)."""
    code = 0
    bridge: WorkerBridge | None = None
    try:
        # Into the server's empty directory (its private root, when it has one) by
        # descriptor, before that descriptor is closed with the rest.
        os.fchdir(root_fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.closerange(3, bridge_fd)
        os.closerange(bridge_fd + 1, _MAX_FD)
        os.setsid()
        _boundary.prepare()
        sock = socket.socket(fileno=bridge_fd)
        loop = asyncio.new_event_loop()
        notes = _boundary.apply_limits(spec)
        for module_name in sorted(set(guests.values())):
            load_guest(module_name).warm_worker(loop, (warm_options or {}).get(module_name))
        notes += _boundary.lock_down(spec, parent_pid, private_root)
        bridge = WorkerBridge(sock, max_frame_bytes)
        bridge.send(ReadyFrame(pid=os.getpid(), notes=notes))
        run = bridge.read_run()
        if run is not None:
            bridge.set_max_frame_bytes(run.max_frame_bytes)
            guest_module = guests.get(run.guest)
            if guest_module is None:
                error = ErrorSpec("exception", f'unknown guest "{run.guest}"')
                bridge.send(DoneFrame(error=error))
            else:
                load_guest(guest_module).serve(run, bridge, loop)
    except BaseException as exc:
        code = 70
        if bridge is not None:
            # A bug in the worker machinery, not in the program: say so, then exit.
            message = f"worker error: {type(exc).__name__}: {exc}"
            try:
                bridge.send(DoneFrame(error=ErrorSpec("worker-exit", message)))
            except BaseException:
                pass
    finally:
        os._exit(code)
