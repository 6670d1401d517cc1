"""Blocking filesystem helpers on resolved handles (run them in a worker thread).

Every read goes through the descriptor that resolution produced, reopened for reading only
once ``fstat`` said it is a regular file: FIFOs, sockets and device nodes are refused before
anything opens them for I/O (so nothing blocks on a FIFO and no driver sees an ``open``).
Every write goes to a temp file created with ``O_EXCL | O_NOFOLLOW`` *in the physical parent
directory's descriptor* and is renamed over the entry with ``renameat`` on that same
descriptor, so neither the data nor the temp file can land outside the workspace whatever
is swapped in meanwhile (a symlink swapped in at the final name is replaced, not followed).

``FileVersion`` is what the read-before-write policy compares: inode, size, mtime and — for
files up to 4 MiB — a content digest, because mtime granularity can hide a same-size rewrite
that lands within one clock tick.

Hard links: a regular file with more than one link may be another name of a file outside
the workspace (``ln /etc/shadow ws/x`` needs no symlink), and no path check can tell. The
file tools therefore refuse to read or replace such a file (``FS_HARDLINKED``) unless the
deployment sets ``ToolsConfig.allow_hardlinks``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat as stat_mod
from dataclasses import dataclass

from .._errors import FsError
from ._paths import Handle

__all__ = [
    "DIGEST_MAX_BYTES",
    "FileVersion",
    "check_regular",
    "create_entry",
    "decode_utf8",
    "digest",
    "open_entry",
    "open_readable",
    "read_fd",
    "replace_entry",
    "utf8_len",
    "version_of",
]

DIGEST_MAX_BYTES = 4 * 1024 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK


def _read_umask() -> int:
    # os.umask can only be read by setting it; do that once, at import, before any threads.
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _read_umask()


@dataclass(frozen=True, slots=True)
class FileVersion:
    """An observed file state; two equal versions mean "unchanged since observed"."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    digest: bytes | None


def digest(data: bytes) -> bytes:
    """The content digest stored in a ``FileVersion``."""
    return hashlib.blake2b(data, digest_size=16).digest()


def version_of(st: os.stat_result, content_digest: bytes | None) -> FileVersion:
    """A version from a stat result and (for small files) the digest of the bytes read."""
    small = st.st_size <= DIGEST_MAX_BYTES
    return FileVersion(
        st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, content_digest if small else None
    )


def utf8_len(s: str) -> int:
    """UTF-8 byte length of ``s`` without building the bytes for ASCII text."""
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def check_regular(st: os.stat_result, display: str, verb: str, *, allow_hardlinks: bool) -> None:
    """Refuse anything but a regular file with a single link; ``verb`` words the error."""
    if not stat_mod.S_ISREG(st.st_mode):
        raise FsError(f'cannot {verb} "{display}": not a regular file', "FS_NOT_REGULAR_FILE")
    if st.st_nlink > 1 and not allow_hardlinks:
        raise FsError(
            f'cannot {verb} "{display}": the file has {st.st_nlink} hard links and may be '
            "another name of a file outside the workspace",
            "FS_HARDLINKED",
        )


def open_readable(handle: Handle) -> int:
    """A read-only descriptor of the regular file ``handle`` holds (checked by the caller).

    Reopening the ``O_PATH`` descriptor through ``/proc/self/fd`` reaches the very inode
    that was resolved and checked; without ``/proc`` the entry is reopened from its parent
    descriptor with ``O_NOFOLLOW`` and must still be the same inode.
    """
    try:
        return os.open(f"/proc/self/fd/{handle.fd}", _READ_FLAGS)
    except FileNotFoundError:
        if handle.parent_fd < 0:
            raise
    fd = os.open(handle.name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=handle.parent_fd)
    st = os.fstat(fd)
    assert handle.st is not None
    if (st.st_dev, st.st_ino) != (handle.st.st_dev, handle.st.st_ino):
        os.close(fd)
        raise FsError(f'"{handle.display}" changed while it was being opened; retry', "FS_RACE")
    return fd


def read_fd(fd: int, limit: int | None = None) -> bytes:
    """All bytes of ``fd`` (at most ``limit`` + 1 when a limit is given).

    The first read asks for the file's size (plus one, to see growth): ``os.read`` allocates
    what it is asked for, so a fixed large chunk would cost that much for a tiny file.
    """
    expected = os.fstat(fd).st_size + 1
    if limit is not None:
        expected = min(expected, limit + 1)
    chunks: list[bytes] = []
    total = 0
    want = expected
    while True:
        if limit is not None:
            want = min(want, limit + 1 - total)
        if want <= 0:
            break
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = 1 << 16
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def decode_utf8(data: bytes) -> str:
    """Strict UTF-8 decoding that drops one leading BOM (a fatal ``TextDecoder``)."""
    text = data.decode("utf-8")
    return text[1:] if text.startswith("\ufeff") else text


def _write_temp(parent: int, data: bytes, mode: int) -> tuple[str, os.stat_result]:
    """A fresh temp file in the directory ``parent`` holding ``data`` with ``mode``: its
    name and stat. Created exclusively and without following links, so nothing raced in at
    the name is written through; removed again if writing fails."""
    tmp = f".codemode-{secrets.token_hex(8)}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=parent,
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            st = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise
    return tmp, st


def replace_entry(entry: Handle, data: bytes) -> os.stat_result:
    """Atomically make ``entry`` (parent descriptor + name) a regular file holding ``data``.

    The temp file is created in the parent's descriptor and renamed there; an existing file
    keeps its permission bits. Returns the stat of the written file.
    """
    parent = entry.parent_fd
    assert parent >= 0 and entry.name
    mode = stat_mod.S_IMODE(entry.st.st_mode) if entry.st is not None else 0o666 & ~_UMASK
    tmp, st = _write_temp(parent, data, mode)
    try:
        os.rename(tmp, entry.name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise
    return st


def open_entry(entry: Handle) -> tuple[int, os.stat_result]:
    """Open the existing regular file at ``entry`` for reading, from its parent descriptor.

    ``O_NOFOLLOW`` refuses a link swapped in at the name, and the descriptor must still be
    the inode that was checked; either way a race is reported, never followed.
    """
    assert entry.st is not None and entry.parent_fd >= 0
    try:
        fd = os.open(entry.name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=entry.parent_fd)
    except OSError as exc:
        raise FsError(
            f'"{entry.display}" changed while it was being opened; retry', "FS_RACE"
        ) from exc
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (entry.st.st_dev, entry.st.st_ino) or not stat_mod.S_ISREG(
        st.st_mode
    ):
        os.close(fd)
        raise FsError(f'"{entry.display}" changed while it was being opened; retry', "FS_RACE")
    return fd, st


def create_entry(entry: Handle, data: bytes) -> os.stat_result:
    """Create ``entry`` holding ``data`` only if nothing exists at its name
    (``FileExistsError`` otherwise): the temp file is hard-linked into place, which, unlike a
    rename, never replaces what appeared meanwhile."""
    parent = entry.parent_fd
    assert parent >= 0 and entry.name
    tmp, st = _write_temp(parent, data, 0o666 & ~_UMASK)
    try:
        os.link(tmp, entry.name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
    return st
