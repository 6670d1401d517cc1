"""Landlock (Linux >= 5.13) through ctypes: deny a process every filesystem access.

The worker applies this as its last step before seccomp. With a ruleset that *handles*
every access right the running kernel knows and grants none, no path can be opened,
listed, executed, created or removed any more. Descriptors that are already open
(the bridge, stdio on ``/dev/null``) keep working: Landlock checks at open time.

What Landlock does not cover, and so what the mount-namespace root (``_mountns``) adds
on root hosts: ``stat``/``lstat``/``access``/``readlink`` still see host paths (a name's
existence, size, owner and times leak, never its content), and ``chdir`` works.

Newer ABIs add more with the same call: TCP ``bind``/``connect`` (ABI 4; seccomp
already refuses new sockets), device ioctls (ABI 5), and scoping (ABI 6): no signals
to, and no abstract unix sockets of, processes outside the worker's own domain.

Only the stdlib is imported: this runs in the fork server's children.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform
from typing import Any

__all__ = ["LandlockUnavailable", "abi_version", "deny_all", "prepare"]

# Syscall numbers are the same on x86_64 and aarch64 (asm-generic table).
_SYS_CREATE_RULESET = 444
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_PR_SET_NO_NEW_PRIVS = 38

# handled_access_fs bits by the ABI that introduced them (linux/landlock.h).
_FS_ABI1 = (1 << 13) - 1  # EXECUTE ... MAKE_SYM
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_ALL = (1 << 0) | (1 << 1)  # ABI 4: BIND_TCP, CONNECT_TCP
_SCOPE_ALL = (1 << 0) | (1 << 1)  # ABI 6: ABSTRACT_UNIX_SOCKET, SIGNAL

_SUPPORTED_ARCHES = ("x86_64", "aarch64")


class LandlockUnavailable(RuntimeError):
    """The kernel (or architecture) cannot apply a Landlock ruleset."""


class _RulesetAttr(ctypes.Structure):
    # The kernel reads only the prefix for the size we pass, so older ABIs get 8 or 16.
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


@functools.cache
def _libc() -> ctypes.CDLL:
    # One handle, made in the fork server (``prepare``): a dlopen in each fresh worker
    # costs more than the Landlock syscalls themselves.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _error(what: str) -> LandlockUnavailable:
    err = ctypes.get_errno()
    return LandlockUnavailable(f"{what} failed ({errno.errorcode.get(err, str(err))})")


@functools.cache
def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is absent or disabled."""
    if platform.machine() not in _SUPPORTED_ARCHES:
        return 0
    libc = _libc()
    version = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )  # fmt: skip
    return max(0, int(version))


def prepare() -> None:
    """Look up the ABI and the libc entry points ahead of the fork (in the fork server)."""
    libc = _libc()
    for name in ("prctl", "syscall", "close"):
        getattr(libc, name)
    if abi_version() > 0:
        _arguments(abi_version())


@functools.cache
def _attr_for(abi: int) -> tuple[_RulesetAttr, int]:
    fs = _FS_ABI1
    if abi >= 2:
        fs |= _FS_REFER
    if abi >= 3:
        fs |= _FS_TRUNCATE
    if abi >= 5:
        fs |= _FS_IOCTL_DEV
    attr = _RulesetAttr(handled_access_fs=fs)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_ALL
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ALL
        size = 24
    return attr, size


def deny_all() -> int:
    """Restrict the calling (single-threaded) process: no filesystem access at all.

    Sets ``no_new_privs`` first (Landlock requires it of an unprivileged process; seccomp
    sets it again later). Returns the ABI version applied; raises
    ``LandlockUnavailable`` when the kernel refuses.
    """
    abi = abi_version()
    if abi <= 0:
        raise LandlockUnavailable("Landlock is not available in this kernel")
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _error("prctl(PR_SET_NO_NEW_PRIVS)")
    create, restrict, no_flags = _arguments(abi)
    fd = libc.syscall(*create)
    if fd < 0:
        raise _error("landlock_create_ruleset")
    try:
        if libc.syscall(restrict, ctypes.c_int(fd), no_flags):
            raise _error("landlock_restrict_self")
    finally:
        libc.close(ctypes.c_int(fd))
    return abi


@functools.cache
def _arguments(abi: int) -> tuple[tuple[Any, ...], Any, Any]:
    """The syscalls' constant arguments as ctypes objects, made once in the fork server
    (``prepare``): making them in each worker ran ctypes code that wrote to pages it
    shares with the server. The syscalls only read them."""
    attr, size = _attr_for(abi)
    no_flags = ctypes.c_uint32(0)
    create = (
        ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), no_flags,
    )  # fmt: skip
    return create, ctypes.c_long(_SYS_RESTRICT_SELF), no_flags
