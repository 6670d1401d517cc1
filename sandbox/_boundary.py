"""The process boundary of a worker: namespaces, rlimits, credentials, seccomp.

RestrictedPython is a guard layer; this module is the boundary. It runs inside the
fork server (``isolate_server``, once) and inside each freshly forked worker
(``prepare`` before the guest's event loop exists, ``lock_down`` right after), so it
imports only the stdlib. Every layer that cannot be applied is reported as a *note*
(``ReadyFrame.notes``) instead of failing the worker, so a host without root still runs
programs and says which layers are missing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource

import msgspec

from ._seccomp import SeccompUnavailable, install_filter

__all__ = ["BoundarySpec", "isolate_server", "lock_down", "prepare"]

_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_NOBODY = 65534


class BoundarySpec(msgspec.Struct, frozen=True, rename="camel"):
    """What to enforce in one worker (sent with each fork request)."""

    memory_bytes: int
    cpu_seconds: int
    open_files: int = 64
    seccomp: bool = True
    drop_privileges: bool = True


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _errno_text() -> str:
    err = ctypes.get_errno()
    return errno.errorcode.get(err, str(err))


def isolate_server() -> list[str]:
    """Give the fork server (and so every worker) a private, empty network namespace.

    As root: ``unshare(CLONE_NEWNET | CLONE_NEWIPC)``. Otherwise try an unprivileged user
    namespace mapping only the current ids. Returns notes for whatever did not apply.
    """
    libc = _libc()
    if os.geteuid() == 0:
        if libc.unshare(_CLONE_NEWNET | _CLONE_NEWIPC) == 0:
            return []
        return [f"network namespace unavailable: unshare failed ({_errno_text()})"]
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return [
            "network namespace unavailable: not root and user namespaces are disabled "
            f"({_errno_text()}); workers share the host network stack (seccomp still "
            "denies new sockets)"
        ]
    try:
        for path, text in (
            ("/proc/self/setgroups", "deny"),
            ("/proc/self/uid_map", f"{uid} {uid} 1"),
            ("/proc/self/gid_map", f"{gid} {gid} 1"),
        ):
            with open(path, "w") as handle:
                handle.write(text)
    except OSError as exc:
        return [f"user namespace id mapping failed: {exc}"]
    return []


def prepare(workdir: str) -> None:
    """Empty environment, stdio on /dev/null, working directory ``workdir``."""
    os.environ.clear()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
    os.chdir(workdir)


def lock_down(spec: BoundarySpec, parent_pid: int) -> list[str]:
    """Apply rlimits, drop privileges and install seccomp; return notes for gaps.

    Order matters: limits are set (soft == hard) while we may still raise them, then
    credentials are dropped (which also clears the parent-death signal, so it is set
    afterwards), and seccomp comes last because it forbids ``prctl`` and ``setrlimit``.
    """
    notes: list[str] = []
    limits = [
        (resource.RLIMIT_AS, spec.memory_bytes),
        (resource.RLIMIT_CPU, spec.cpu_seconds),
        (resource.RLIMIT_NOFILE, spec.open_files),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError) as exc:
            notes.append(f"rlimit {which} not applied: {exc}")
    if spec.drop_privileges and os.geteuid() == 0:
        try:
            os.setgroups([])
            os.setresgid(_NOBODY, _NOBODY, _NOBODY)
            os.setresuid(_NOBODY, _NOBODY, _NOBODY)
            # Threads count against the (per-user) process limit; the guests need none.
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        except OSError as exc:
            notes.append(f"privilege drop failed: {exc}")
    elif spec.drop_privileges:
        notes.append("privilege drop skipped: not running as root")
    libc = _libc()
    if libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
        notes.append(f"parent-death signal unavailable ({_errno_text()})")
    if os.getppid() != parent_pid:
        # The fork server died before the death signal was armed.
        os._exit(70)
    if spec.seccomp:
        try:
            install_filter(os.getpid())
        except SeccompUnavailable as exc:
            notes.append(str(exc))
    else:
        notes.append("seccomp disabled by configuration")
    return notes
