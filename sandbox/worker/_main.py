"""What a worker process does between ``fork()`` and ``_exit()``.

The fork server is the worker's template: by the time it forks, it has imported and
warmed the guests, built the state a run starts from (``Guest.prepare_template``),
entered the empty private root, dropped to ``nobody`` and set the address-space, file
size and core limits (``_boundary.lock_down_server``). So a worker only does what
cannot be inherited:

1. Drop everything inherited from the fork server except the bridge socket; new session
   (so the supervisor can kill the whole process group); stdio on /dev/null. (The
   environment is already empty: the server cleared its own.)
2. Renew the event loop inherited from the server (``WorkerLoop``): its own selector and
   self-pipe (a socketpair, which seccomp forbids later).
3. Lock down its own half (``_boundary.lock_down_worker``): CPU, open-file and process
   limits, parent-death signal, Landlock, seccomp; report ``ready``. From here on no
   host file is reachable.
4. Pre-fault what a run will write (``Guest.prefault``: copy-on-write faults taken while
   idle, not during the run; then the pages the host saw earlier runs of this server's
   workers write, ``populate``), wait for the ``run`` frame, hand it to the guest
   module it names, and exit.

The worker is generic: the guest kind comes from the ``run`` frame and must be one of
the guest modules the fork server was started with.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # the C half of ``signal``
import ctypes
import errno
import os
import select
import signal
import socket
from typing import NoReturn

from . import _boundary
from ._bridge import WorkerBridge, WorkerLoop
from ._frames import DoneFrame, ErrorSpec, ReadyFrame
from ._guest import Guest

__all__ = ["worker_main"]

_MAX_FD = 1 << 20

# madvise(2) advice (Linux 5.14): fault the range in writable now, as a write to each
# page would: a copy-on-write page shared with the fork server is copied here.
_MADV_POPULATE_WRITE = 23
_PAGE = os.sysconf("SC_PAGE_SIZE")
# At most this many pages (16 MiB) are populated, whatever the host asks.
MAX_POPULATE_PAGES = 4096
_libc = ctypes.CDLL(None, use_errno=True)
_madvise = _libc.madvise
_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_madvise.restype = ctypes.c_int


def populate(ranges: list[tuple[int, int]], sock: socket.socket | None = None) -> int:
    """Fault in, writable, the page ranges (start address, page count) the host learned
    that runs write (``host/_prefault``): taken while the worker idles, their
    copy-on-write copies (~3 µs each here) are off the next run's latency.

    The worker's layout is its fork server's, so the addresses hold for every worker of
    one server. A range that is no longer mapped (or not writable) is skipped: the
    kernel refuses it (``ENOMEM``/``EFAULT``) instead of faulting. Stops when a run
    frame is waiting on ``sock``, or on a kernel without the advice. Returns the pages
    populated.
    """
    done = 0
    for start, pages in ranges:
        if done >= MAX_POPULATE_PAGES or (sock is not None and _pending(sock)):
            break
        pages = min(pages, MAX_POPULATE_PAGES - done)
        if start % _PAGE or pages <= 0:
            continue
        if _madvise(start, pages * _PAGE, _MADV_POPULATE_WRITE) == 0:
            done += pages
        elif ctypes.get_errno() == errno.EINVAL:
            break  # before Linux 5.14: no such advice
    return done


def _pending(sock: socket.socket) -> bool:
    """Whether data (the run frame, or the host's hang-up) waits on ``sock``."""
    return bool(select.select([sock], [], [], 0)[0])


def worker_main(
    bridge_fd: int,
    spec: _boundary.BoundarySpec,
    server: _boundary.ServerLockDown,
    null_fd: int,
    parent_pid: int,
    guests: dict[str, str],
    modules: dict[str, Guest],
    loop: WorkerLoop,
    max_frame_bytes: int,
    prefault: list[tuple[int, int]] | None = None,
) -> NoReturn:
    """Run one worker to completion; never returns (``os._exit``).

    ``guests`` maps a run frame's guest kind to its module's name; ``modules`` holds those
    modules, loaded and checked by the server (``load_guest``); ``loop`` is the server's
    never-run template loop, renewed here (``WorkerLoop``).
    """
    code = 0
    bridge: WorkerBridge | None = None
    try:
        signal.set_wakeup_fd(-1)
        # The C function, not ``signal.signal``: its wrapper converts the old handler to
        # an enum member, Python code whose writes to pages shared with the server cost
        # every worker private memory (see ``_forkserver._raw_fork``).
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        for fd in (0, 1, 2):
            os.dup2(null_fd, fd)
        os.closerange(3, bridge_fd)
        os.closerange(bridge_fd + 1, _MAX_FD)
        os.setsid()
        sock = socket.socket(fileno=bridge_fd)
        # Polls briefly before it sleeps while a binding result is due (``Spin``).
        loop.renew()
        notes = _boundary.lock_down_worker(spec, parent_pid, server)
        bridge = WorkerBridge(sock, max_frame_bytes)
        bridge.send(ReadyFrame(pid=os.getpid(), notes=notes))
        # A cap below what the worker already maps would leave it unable to allocate at
        # an arbitrary point of the run (or, for a run that allocates nothing, never
        # enforced at all): the run is refused as a worker-exit, whatever it does.
        too_small = _boundary.address_space_refusal(spec, server)
        for module in modules.values() if too_small is None else ():
            # Pre-faulting is for a worker that idles until its run: one whose run frame
            # is already here (a checkout that waited for it) starts the run at once.
            if _pending(sock):
                break
            module.prefault(loop)
        if too_small is None and prefault:
            populate(prefault, sock)
        if too_small is None and all(getattr(m, "EARLY_READER", False) for m in modules.values()):
            bridge.listen(loop)  # off the run's path (``Guest.EARLY_READER``)
        run = bridge.read_run()
        if run is not None:
            bridge.adopt(run)
            guest_module = guests.get(run.guest)
            if too_small is not None:
                bridge.send(DoneFrame(error=ErrorSpec("worker-exit", too_small)))
            elif guest_module is None:
                error = ErrorSpec("exception", f'unknown guest "{run.guest}"')
                bridge.send(DoneFrame(error=error))
            else:
                modules[guest_module].serve(run, bridge, loop)
            bridge.linger()
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
