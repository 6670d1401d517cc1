"""The fork server: a pre-imported interpreter that forks workers on request.

Started once per pool (``python -I -B -X utf8 -c ...``, empty environment). It imports the
guest modules (RestrictedPython, msgspec, the allowed stdlib modules) and warms their lazy
paths (after the fork, workers can no longer read a module from disk), moves itself into
private network and mount namespaces with an empty read-only root for its workers and
has them born in a PID namespace of their own (``_boundary.isolate_server``), freezes
the GC so forked workers share its pages, and then serves a control socket:

::

    host -> server   fork{seq, maxFrameBytes, prefault?}  + one fd (SCM_RIGHTS): the
                     worker's end of a fresh socketpair (``prefault``: page ranges
                     this and later workers fault in while idle)
    server -> host   hello{pid, notes}       once, when ready
                     forked{seq, pid} | fork-failed{seq, message}
                     exited{pid, status, maxrssKb}   for every reaped worker

It is single-threaded (forking is safe) and runs no event loop. When the control socket
closes, it kills every worker still alive, reaps them, removes its empty work directory
and exits; a parent-death signal covers the host dying without closing the socket.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import select
import signal
import socket
import sys
from typing import Any

import msgspec

from ._boundary import (
    BoundarySpec,
    Isolation,
    ServerLockDown,
    apply_limits,
    isolate_server,
    lock_down_server,
    remove_workdir,
)
from ._bridge import WorkerLoop
from ._frames import FrameBuffer, encode_frame
from ._guest import Guest, load_guest
from ._main import worker_main

__all__ = ["Exited", "ForkFailed", "ForkRequest", "Forked", "Hello", "ServerConfig", "main"]

_CONTROL_FRAME_BYTES = 1 << 20


def _raw_fork() -> Any:
    """libc's ``fork`` called with the GIL held, or ``None`` where that is not safe.

    ``os.fork`` runs the interpreter's at-fork handlers in the child (``threading``'s,
    ``logging``'s, ``random``'s), Python code that writes to objects the child shares
    with the server: about half a megabyte of copy-on-write pages in every worker before
    it does anything (a worker forked this way starts at ~0.55 MB of private memory, one
    forked by ``os.fork`` at ~1.05 MB). The server is single-threaded and forks only
    between frames, so none of what those handlers reset (locks held by another thread,
    the thread registry) can be in use; the one handler that matters to a worker,
    ``random``'s re-seed, is done by ``_after_raw_fork``. glibc's own ``fork`` still
    resets the C library's state. ``PyDLL`` keeps the GIL across the call, so the child
    resumes as the same (only) thread.
    """
    if sys.implementation.name != "cpython" or sys.platform != "linux":
        return None
    try:
        fork = ctypes.PyDLL(None, use_errno=True).fork
    except (OSError, AttributeError):
        return None
    fork.restype = ctypes.c_int
    fork.argtypes = ()
    return fork


def _after_raw_fork() -> None:
    """In a child of ``_raw_fork``: what the skipped at-fork handlers did that a worker
    needs: a fresh ``random`` state (else every worker's programs would draw the same
    numbers as their siblings)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()


class ServerConfig(msgspec.Struct, frozen=True, rename="camel"):
    """Start-up configuration (passed as a JSON command-line argument).

    ``boundary`` is fixed for the server's life: the server applies the inheritable
    half of it to itself before it forks anything (see ``_boundary.lock_down_server``).
    """

    ctrl_fd: int
    guests: dict[str, str]
    boundary: BoundarySpec
    # The empty directory that becomes the workers' root, made by the host (which
    # removes it if the server dies before it could).
    workdir: str
    preload: list[str] = msgspec.field(default_factory=list)
    # Per guest module: what its ``prepare_template`` needs to prepare a run ahead of
    # time (the TypeScript guest builds its QuickJS context with the runtime's limits).
    warm_options: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


class ForkRequest(msgspec.Struct, frozen=True, tag="fork", tag_field="type", rename="camel"):
    """Fork one worker bound to the fd sent alongside this frame."""

    seq: int
    max_frame_bytes: int
    # Page ranges (start address, page count) every worker forked from now on faults in
    # while it idles (``_main.populate``); None keeps the last ones sent, [] drops them.
    prefault: list[tuple[int, int]] | None = None


class Hello(msgspec.Struct, frozen=True, tag="hello", tag_field="type", rename="camel"):
    """The server is ready; ``notes`` are degraded layers (e.g. no network namespace)."""

    pid: int
    notes: list[str] = msgspec.field(default_factory=list)


class Forked(msgspec.Struct, frozen=True, tag="forked", tag_field="type", rename="camel"):
    """Worker for request ``seq`` has pid ``pid``."""

    seq: int
    pid: int


class ForkFailed(msgspec.Struct, frozen=True, tag="fork-failed", tag_field="type", rename="camel"):
    """Request ``seq`` could not be served."""

    seq: int
    message: str


class Exited(msgspec.Struct, frozen=True, tag="exited", tag_field="type", rename="camel"):
    """A worker was reaped: raw wait status and peak resident set size."""

    pid: int
    status: int
    maxrss_kb: int = 0


ServerOutbound = Hello | Forked | ForkFailed | Exited


def main(config_json: str) -> None:
    """Entry point of the fork-server process."""
    # Interrupts are the host's to handle: it tears the pool down by closing the control
    # socket. Ignoring SIGINT also keeps a stray ``kill -INT`` from printing a traceback;
    # workers inherit the disposition (they never see a terminal either way).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Workers inherit an empty environment (the host starts the server with none; this
    # makes sure), so none of them need clear it.
    os.environ.clear()
    config = msgspec.json.decode(config_json, type=ServerConfig)
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        sys.exit(0)
    ctrl = socket.socket(fileno=config.ctrl_fd)
    ctrl.setblocking(True)
    for name in config.preload:
        load_guest(name).warm()
    workdir = config.workdir
    os.chmod(workdir, 0o555)
    isolation = isolate_server(workdir)
    # The server enters its root through this descriptor, never by path: what it (and
    # so every worker) chroots into is the directory (or tmpfs) set up here, whatever
    # happens to the path later.
    root_fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    os.fchdir(root_fd)
    os.close(root_fd)
    # Workers put their stdio on this descriptor: there is no /dev/null in the root.
    null_fd = os.open(os.devnull, os.O_RDWR)
    notes = list(isolation.notes)
    notes += apply_limits(config.boundary, server=True)
    # What every worker inherits, built once (the TypeScript guest sizes its QuickJS
    # heap from the run's memory cap less what the server maps): this loop is only for
    # the build (the workers' own is the never-run ``WorkerLoop`` below).
    loop = asyncio.new_event_loop()
    # Loaded and checked against the protocol here, once: a runtime protocol's
    # ``isinstance`` in each worker took ~0.1 ms and wrote to shared pages.
    modules = {name: load_guest(name) for name in sorted(set(config.guests.values()))}
    for name, module in modules.items():
        module.prepare_template(loop, config.warm_options.get(name))
    loop.close()
    # From here on the server is the template of its workers: in its private root, as
    # nobody. Nothing after this reads a host file.
    locked = lock_down_server(config.boundary, parent, isolation.private_root)
    notes += locked.notes
    # Every worker's loop (``WorkerLoop``): built here, never run here.
    template = WorkerLoop()
    # Freeze without a full collection first: collecting took 10-15 ms of every cold
    # start, and what it would free is shared with the workers, never touched (frozen
    # objects are invisible to their collector) and gone with the server.
    gc.freeze()
    _Server(ctrl, config, modules, template, workdir, null_fd, isolation, locked, notes).serve()


class _Server:
    def __init__(
        self,
        ctrl: socket.socket,
        config: ServerConfig,
        modules: dict[str, Guest],
        template: WorkerLoop,
        workdir: str,
        null_fd: int,
        isolation: Isolation,
        locked: ServerLockDown,
        notes: list[str],
    ):
        self.ctrl = ctrl
        self.config = config
        self.modules = modules
        self.template = template
        self.workdir = workdir
        self.null_fd = null_fd
        self.locked = locked
        self.notes = notes
        self.private_root = isolation.private_root
        # The PID namespace's init (0 without one) is reaped like a worker, but its
        # death ends the server: no worker can be forked into a namespace without it.
        self.init_pid = isolation.init_pid
        self.init_fd = isolation.init_fd
        self.has_init = bool(isolation.init_pid)
        self.children: set[int] = {self.init_pid} if self.init_pid else set()
        self.fds: list[int] = []
        self.buffer = FrameBuffer(_CONTROL_FRAME_BYTES)
        self.decoder = msgspec.json.Decoder(ForkRequest)
        self.prefault: list[tuple[int, int]] = []
        # Only while the server has no thread but its own (it never starts one).
        self.raw_fork = _raw_fork() if _single_threaded() else None

    def send(self, frame: msgspec.Struct) -> None:
        self.ctrl.sendall(encode_frame(frame))

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        poller = select.poll()
        poller.register(self.ctrl.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        try:
            self.send(Hello(pid=os.getpid(), notes=self.notes))
            while True:
                for fd, _events in poller.poll():
                    if fd == wake_r:
                        _drain(wake_r)
                        self.reap(block=False)
                        if self.has_init and not self.init_pid:
                            return  # the init died (reaped): no more forks possible
                    elif not self.receive():
                        return
        except OSError:
            return
        finally:
            self.shutdown()

    def receive(self) -> bool:
        data, fds, _flags, _addr = socket.recv_fds(self.ctrl, 65536, 16)
        self.fds.extend(fds)
        if not data:
            return False
        for payload in self.buffer.feed(data):
            try:
                request = self.decoder.decode(payload)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                self.send(ForkFailed(seq=-1, message=f"bad control frame: {exc}"))
                continue
            if not self.fds:
                self.send(ForkFailed(seq=request.seq, message="fork request without a socket"))
                continue
            self.fork(request, self.fds.pop(0))
        return True

    def _fork(self) -> int:
        raw = self.raw_fork
        if raw is None:
            return os.fork()
        pid: int = raw()
        if pid < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        if pid == 0:
            _after_raw_fork()
        return pid

    def fork(self, request: ForkRequest, fd: int) -> None:
        if request.prefault is not None:
            self.prefault = request.prefault
        try:
            pid = self._fork()
        except OSError as exc:
            os.close(fd)
            self.send(ForkFailed(seq=request.seq, message=f"fork failed: {exc}"))
            return
        if pid == 0:
            try:
                worker_main(
                    fd,
                    self.config.boundary,
                    self.locked,
                    self.null_fd,
                    # 0 inside a PID namespace (the server is outside it); a worker
                    # orphaned early sees its init (1) instead and exits.
                    os.getppid(),
                    self.config.guests,
                    self.modules,
                    self.template,
                    request.max_frame_bytes,
                    self.prefault,
                )
            finally:
                os._exit(70)
        os.close(fd)
        self.children.add(pid)
        self.send(Forked(seq=request.seq, pid=pid))

    def reap(self, *, block: bool) -> None:
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            if pid == self.init_pid:
                self.init_pid = 0
            elif not block:
                self.send(Exited(pid=pid, status=status, maxrss_kb=int(usage.ru_maxrss)))

    def shutdown(self) -> None:
        if self.init_fd >= 0:
            os.close(self.init_fd)  # the init exits, and the kernel kills every worker
        for pid in list(self.children):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                    break
                except OSError:
                    continue
        self.reap(block=True)
        for fd in self.fds:
            os.close(fd)
        os.close(self.null_fd)
        # Usually refused here (the server is chrooted and unprivileged by now); the
        # PID namespace's init, still privileged, does it when the server is gone.
        try:
            remove_workdir(self.workdir, self.private_root)
        except OSError:
            pass


def _single_threaded() -> bool:
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass
