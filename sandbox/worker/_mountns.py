"""An empty, private filesystem root for workers (mount namespace + chroot).

Split so that a worker's share of the cost is two cheap syscalls:

- once, in the fork server (``make_private_root``), which already sits in a mount
  namespace of its own (``_boundary.isolate_server`` unshares ``CLONE_NEWNS`` together
  with the network namespace): make every mount private, so nothing propagates back
  to the host, and mount an empty, read-only ``tmpfs`` on the server's work directory.
  The host never sees that mount (it lives only in the server's namespace), and being
  read-only and empty, nothing can be planted in it;
- per worker (``enter_root``), while it still has ``CAP_SYS_CHROOT``: ``chroot(".")``
  into that directory (the worker changes into it through the server's descriptor, so no
  path is resolved again) and ``chdir("/")``. The worker then drops to ``nobody`` and installs
  seccomp (which refuses ``chroot``, ``mount``, ``unshare``, ``setns``, ``open_by_handle_at``),
  it holds no directory descriptor from outside (the worker closes every inherited one
  but the bridge) and there is no ``/proc`` to walk through another process's ``root``
  link, so the host filesystem is unreachable: not readable, not listable, not even
  ``stat``-able.

``pivot_root`` into a fresh per-worker namespace would cost an ``unshare(CLONE_NEWNS)``
(a copy of the whole mount table) plus a lazy unmount per fork, for no extra guarantee
against a process that can neither ``chroot`` nor see ``/proc``.

Only the stdlib is imported: this runs in the fork server and its children.
"""

from __future__ import annotations

import ctypes
import errno
import os

__all__ = ["enter_root", "make_private_root", "release_root"]

_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_NOEXEC = 0x8
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_MNT_DETACH = 0x2
_UMOUNT_NOFOLLOW = 0x8


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what} failed ({errno.errorcode.get(err, str(err))})")


def make_private_root(path: str) -> None:
    """Mount an empty read-only tmpfs on ``path`` (an existing empty directory).

    The caller must already be in a mount namespace of its own; raises ``OSError``.
    """
    libc = _libc()
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    options = b"mode=0555,size=4k,nr_inodes=1"
    _check(
        libc.mount(b"codemode-root", os.fsencode(path), b"tmpfs", flags, options),
        "mounting the empty root",
    )


def release_root(path: str) -> None:
    """Unmount what ``make_private_root`` mounted (so the directory can be removed).

    Not following a symlink: the path may have been replaced since (workers never use it).
    """
    _libc().umount2(os.fsencode(path), _MNT_DETACH | _UMOUNT_NOFOLLOW)


def enter_root() -> None:
    """Make the working directory this process's root (needs CAP_SYS_CHROOT)."""
    os.chroot(".")
    os.chdir("/")
