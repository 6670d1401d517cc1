"""The process boundary of a worker: namespaces, filesystem, rlimits, credentials, seccomp.

RestrictedPython is a guard layer; this module is the boundary. It runs inside the
fork server (``isolate_server``, once) and inside each freshly forked worker
(``prepare`` before the guest's event loop exists, ``apply_limits`` before the guest's
per-worker warm-up, ``lock_down`` right after it), so it imports only the stdlib. Every
layer that cannot be applied is reported as a *note* (``Hello.notes``,
``ReadyFrame.notes``) instead of failing the worker, so a host without root still runs
programs and says which layers are missing.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import resource

import msgspec

from . import _landlock, _mountns, _pidns
from ._seccomp import SeccompUnavailable, install_filter
from ._seccomp import prepare as _prepare_seccomp

__all__ = [
    "BoundarySpec",
    "Isolation",
    "apply_limits",
    "isolate_server",
    "ServerLockDown",
    "lock_down",
    "lock_down_server",
    "lock_down_worker",
    "WORKER_NICE",
    "prepare",
    "remove_workdir",
]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_NOBODY = 65534
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: How far below the server's scheduling priority every worker runs (``nice`` units):
#: at 10 a busy worker gets about a tenth of the CPU time of a nice-0 host thread it
#: competes with (CFS weights 110 vs 1024).
WORKER_NICE = 10


class BoundarySpec(msgspec.Struct, frozen=True, rename="camel"):
    """What to enforce in one worker (sent with each fork request)."""

    memory_bytes: int
    cpu_seconds: int
    open_files: int = 64
    seccomp: bool = True
    drop_privileges: bool = True


@functools.cache
def _libc() -> ctypes.CDLL:
    # Made once in the fork server and inherited: a dlopen per fresh worker is costly.
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("prctl", "unshare", "syscall"):
        getattr(libc, name)
    return libc


def _errno_text() -> str:
    err = ctypes.get_errno()
    return errno.errorcode.get(err, str(err))


class Isolation(msgspec.Struct, frozen=True):
    """What ``isolate_server`` achieved: degraded layers; whether workers can ``chroot``
    into the server's empty private root (``_mountns``); the PID namespace's init
    (``_pidns``: its pid and the fd keeping it alive) when workers get one."""

    notes: list[str]
    private_root: bool
    init_pid: int = 0
    init_fd: int = -1


def isolate_server(workdir: str) -> Isolation:
    """Move the fork server (and so every worker) into private namespaces.

    Network and IPC: a private, empty network namespace. Mounts: a mount namespace of
    its own in which ``workdir`` (an empty directory) becomes an empty read-only tmpfs,
    the root each worker enters (``_mountns``). As root this is one
    ``unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS)``; otherwise an unprivileged
    user namespace mapping only the current ids provides the same. Then a PID namespace
    for the workers (``_pidns``; the server itself stays in the host's). Returns notes
    for whatever did not apply.
    """
    _prepare_worker_lock_down()
    libc = _libc()
    notes: list[str] = []
    if os.geteuid() == 0:
        if libc.unshare(_CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWNS) == 0:
            return _private_root(workdir, notes)
        failure = _errno_text()
        if libc.unshare(_CLONE_NEWNET | _CLONE_NEWIPC) == 0:
            notes.append(f"mount namespace unavailable: unshare failed ({failure})")
            return Isolation(notes, private_root=False)
        return Isolation(
            [f"network and mount namespaces unavailable: unshare failed ({failure})"],
            private_root=False,
        )
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWNS) != 0:
        return Isolation(
            [
                "network, mount and pid namespaces unavailable: not root and user "
                f"namespaces are disabled ({_errno_text()}); workers share the host "
                "network stack (seccomp still denies new sockets), can probe which host "
                "pids exist, and have no private filesystem root"
            ],
            private_root=False,
        )
    try:
        for path, text in (
            ("/proc/self/setgroups", "deny"),
            ("/proc/self/uid_map", f"{uid} {uid} 1"),
            ("/proc/self/gid_map", f"{gid} {gid} 1"),
        ):
            with open(path, "w") as handle:
                handle.write(text)
    except OSError as exc:
        return Isolation([f"user namespace id mapping failed: {exc}"], private_root=False)
    return _private_root(workdir, notes)


def _prepare_worker_lock_down() -> None:
    """Do in the fork server, once, what every worker's ``lock_down`` would repeat."""
    _libc()
    _landlock.prepare()
    try:
        _prepare_seccomp()
    except SeccompUnavailable:
        pass  # each worker reports it when its own install fails


def _private_root(workdir: str, notes: list[str]) -> Isolation:
    private_root = True
    try:
        _mountns.make_private_root(workdir)
    except OSError as exc:
        notes.append(f"private filesystem root unavailable: {exc.strerror}")
        private_root = False
    if _libc().unshare(_CLONE_NEWPID) != 0:
        notes.append(
            f"pid namespace unavailable: unshare failed ({_errno_text()}); workers can "
            "probe which host pids exist (seccomp still denies signalling or tracing them)"
        )
        return Isolation(notes, private_root)
    try:
        init_pid, init_fd = _pidns.start_init(lambda: remove_workdir(workdir, private_root))
    except OSError as exc:
        notes.append(f"pid namespace unavailable: its init could not start ({exc})")
        return Isolation(notes, private_root)
    return Isolation(notes, private_root, init_pid, init_fd)


def remove_workdir(workdir: str, private_root: bool) -> None:
    """The fork server's clean-up, also run by its PID namespace's init (``_pidns``)
    once the server is gone, however it ended."""
    if private_root:
        _mountns.release_root(workdir)
    try:
        os.rmdir(workdir)
    except OSError:
        pass


def prepare() -> None:
    """Empty environment, stdio on /dev/null (the cwd is already the empty directory)."""
    os.environ.clear()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


def apply_limits(spec: BoundarySpec, *, server: bool = False) -> list[str]:
    """Set the rlimits (soft == hard, while they can still be raised); notes for gaps.

    Called before the guests' warm-up, so that what it prepares is sized against the
    same limits as the run (the TypeScript guest sizes its QuickJS heap from
    ``RLIMIT_AS``). In the fork server (``server``) only file size and core: address
    space, CPU time and open files are set in each worker (``lock_down_worker``). The
    server's own CPU time and descriptors would count against a worker's, and a memory
    cap below what the server maps must make each *worker* fail to start (reported
    as that run's ``worker-exit``), not the server, which would take every run with it.
    """
    notes: list[str] = []
    limits: list[tuple[int, int]] = []
    if not server:
        limits += [
            (resource.RLIMIT_AS, spec.memory_bytes),
            (resource.RLIMIT_CPU, spec.cpu_seconds),
            (resource.RLIMIT_NOFILE, spec.open_files),
        ]
    limits += [(resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_CORE, 0)]
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError) as exc:
            notes.append(f"rlimit {which} not applied: {exc}")
    return notes


def _mapped_bytes() -> int:
    """This process's address space (0 when ``/proc`` cannot say)."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def address_space_refusal(spec: BoundarySpec, server: ServerLockDown) -> str | None:
    """Why no run can start when the memory cap is below the address space a worker
    starts with (the fork server's, measured before it left ``/proc`` behind); else None."""
    if server.mapped_bytes > spec.memory_bytes:
        return (
            f"the memory cap ({spec.memory_bytes} bytes) is below what a worker maps at "
            f"start ({server.mapped_bytes} bytes)"
        )
    return None


class ServerLockDown(msgspec.Struct, frozen=True):
    """What ``lock_down_server`` achieved, for the per-worker half (``lock_down_worker``)."""

    notes: list[str]
    chrooted: bool
    #: Credentials were changed to ``nobody`` (root hosts): workers then also get
    #: ``RLIMIT_NPROC`` 0, which the server itself cannot have (it must fork).
    dropped: bool
    #: The server's address space once its template was built: what a worker starts
    #: with (``check_address_space``).
    mapped_bytes: int = 0


def lock_down_server(spec: BoundarySpec, parent_pid: int, private_root: bool) -> ServerLockDown:
    """The half of the lock-down every worker inherits, applied once in the fork server.

    After its warm-up the fork server becomes the template of its workers (a *zygote*):
    it enters the empty private root (``chroot`` through its working directory, the
    root descriptor), drops to ``nobody`` (or clears its capabilities inside its user
    namespace) and re-arms its parent-death signal, which the credential change
    cleared. A fresh worker then costs one ``fork`` plus ``lock_down_worker``, instead
    of a ``chroot`` and a credential change of its own. What only a worker may have
    (CPU and process limits the server would trip over, Landlock's per-process scope)
    is left to ``lock_down_worker``. Seccomp is split the same way: the server installs
    the whole program less what it still needs (``fork``, a worker's set-up), every
    worker adds a small filter refusing exactly that.
    """
    notes: list[str] = []
    mapped = _mapped_bytes()  # while /proc is still there
    chrooted = False
    if private_root:
        try:
            _mountns.enter_root()
            chrooted = True
        except OSError as exc:
            notes.append(f"private filesystem root not entered: chroot failed ({exc.strerror})")
    dropped = False
    if spec.drop_privileges and os.geteuid() == 0:
        try:
            os.setgroups([])
            os.setresgid(_NOBODY, _NOBODY, _NOBODY)
            os.setresuid(_NOBODY, _NOBODY, _NOBODY)
            dropped = True
        except OSError as exc:
            notes.append(f"privilege drop failed: {exc}")
    elif spec.drop_privileges:
        notes.append("privilege drop skipped: not running as root")
        # Inside the fork server's user namespace the worker holds every capability
        # there (over its own namespaces only); it needs none of them.
        notes.extend(_drop_capabilities())
    _arm_parent_death(parent_pid, notes)
    if spec.seccomp:
        try:
            # The server's variant (it must still fork, and set each worker up): every
            # worker inherits it and adds its own small filter on top.
            install_filter(0, "server")
        except SeccompUnavailable as exc:
            notes.append(str(exc))
    return ServerLockDown(notes, chrooted, dropped, mapped)


def lock_down_worker(spec: BoundarySpec, parent_pid: int, server: ServerLockDown) -> list[str]:
    """The per-worker half of the lock-down, in a worker forked from a locked-down server.

    Address space, CPU time and open files (see ``apply_limits``), no processes
    or threads (the server must fork), the parent-death signal (never inherited),
    a scheduling priority ``WORKER_NICE`` below the server's (the server itself stays at
    the host's, so forking a replacement is not delayed),
    Landlock (a nested domain per worker, so its signal and socket scope excludes its
    siblings) and the worker's seccomp filter last, because it refuses ``setrlimit`` and
    ``prctl``.
    """
    notes: list[str] = []
    limits = [
        (resource.RLIMIT_CPU, spec.cpu_seconds),
        (resource.RLIMIT_NOFILE, spec.open_files),
    ]
    # A cap below what the worker starts with is refused (``address_space_refusal``)
    # before any program runs; without the rlimit, that refusal can still be sent.
    if server.mapped_bytes <= spec.memory_bytes:
        limits.insert(0, (resource.RLIMIT_AS, spec.memory_bytes))
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError) as exc:
            notes.append(f"rlimit {which} not applied: {exc}")
    if server.dropped:
        try:
            # Threads count against the (per-user) process limit; the guests need none.
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        except (OSError, ValueError) as exc:
            notes.append(f"privilege drop failed: {exc}")
    _arm_parent_death(parent_pid, notes)
    try:
        # Below the host's priority: a program spinning (or a hostile conversion hook)
        # on a machine whose cores are all busy must not take CPU time from the host's
        # event loop, which serves every other run. Relative to the server's nice value,
        # so a host that is itself niced keeps its workers below it; the kernel clamps
        # at 19, and without CAP_SYS_NICE the worker can never lower it again.
        os.nice(WORKER_NICE)
    except OSError as exc:
        notes.append(f"worker priority not lowered: {exc}")
    notes.extend(_deny_filesystem(server.chrooted))
    if spec.seccomp:
        try:
            # With the server's program beneath it, the same refusals as the whole one.
            install_filter(os.getpid(), "worker")
        except SeccompUnavailable as exc:
            notes.append(str(exc))
    else:
        notes.append("seccomp disabled by configuration")
    return notes


def lock_down(spec: BoundarySpec, parent_pid: int, private_root: bool) -> list[str]:
    """Confine the filesystem, drop privileges and install seccomp; notes for gaps.

    Both halves in one process (``lock_down_server`` then ``lock_down_worker``), for a
    process that is not forked from a locked-down server. With ``private_root``, the
    working directory is the fork server's empty private root and becomes the root.
    Order matters: ``chroot`` needs the privilege that is dropped next; dropping
    credentials clears the parent-death signal, so that is set afterwards; Landlock is
    applied to the final credentials; seccomp comes last because it forbids ``chroot``,
    ``prctl`` and ``setrlimit``.
    """
    server = lock_down_server(spec, parent_pid, private_root)
    return server.notes + lock_down_worker(spec, parent_pid, server)


def _arm_parent_death(parent_pid: int, notes: list[str]) -> None:
    libc = _libc()
    if libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
        notes.append(f"parent-death signal unavailable ({_errno_text()})")
    if os.getppid() != parent_pid:
        # The parent died before the death signal was armed.
        os._exit(70)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_capabilities() -> list[str]:
    """Clear the effective, permitted and inheritable sets (``capset``); notes on failure."""
    nr = _SYS_CAPSET.get(platform.machine())
    if nr is None:
        return [f"capabilities not dropped: unsupported architecture {platform.machine()!r}"]
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()  # all zero: 64 capability bits in two 32-bit words
    if _libc().syscall(nr, ctypes.byref(header), ctypes.byref(data)) != 0:
        return [f"capabilities not dropped: capset failed ({_errno_text()})"]
    return []


def _deny_filesystem(chrooted: bool) -> list[str]:
    """Landlock on top of the private root (or instead of it); say what is missing."""
    try:
        _landlock.deny_all()
    except _landlock.LandlockUnavailable as exc:
        if chrooted:
            return [f"Landlock unavailable ({exc}); the empty private root alone hides host files"]
        return [
            f"filesystem isolation unavailable: no private root and no Landlock ({exc}); "
            f"a program that escapes the guards can read every file uid {os.geteuid()} may read"
        ]
    if chrooted:
        return []
    return [
        "no private filesystem root: Landlock denies opening, listing and running host "
        "files, but their metadata (stat, readlink) stays visible"
    ]
