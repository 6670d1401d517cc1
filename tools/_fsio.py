"""Blocking filesystem helpers shared by the file tools (run them in a worker thread).

``FileVersion`` is what the read-before-write policy compares: inode, size, mtime and — for
files up to 4 MiB — a content digest, because mtime granularity can hide a same-size rewrite
that lands within one clock tick.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat as stat_mod
import tempfile
from dataclasses import dataclass

from ._errors import FsError
from ._paths import Resolved

__all__ = [
    "DIGEST_MAX_BYTES",
    "FileVersion",
    "atomic_write",
    "decode_utf8",
    "digest",
    "file_version",
    "read_regular_file",
    "regular_stat",
    "stat_or_none",
    "version_of",
]

DIGEST_MAX_BYTES = 4 * 1024 * 1024


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


def stat_or_none(resolved: Resolved) -> os.stat_result | None:
    """``os.stat`` of the real path, ``None`` when missing; a file used as a directory in the
    middle of the path is the reference's "parent path segment" error."""
    try:
        return os.stat(resolved.real)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise FsError(
            f'cannot resolve "{resolved.display}": a parent path segment is not a directory',
            "FS_NOT_FOUND",
        ) from None


def file_version(real: str) -> FileVersion | None:
    """The current version of a regular file, or ``None`` when it is missing or not regular."""
    try:
        st = os.stat(real)
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    content_digest: bytes | None = None
    if st.st_size <= DIGEST_MAX_BYTES:
        try:
            with open(real, "rb") as fh:
                content_digest = digest(fh.read())
        except OSError:
            return None
    return version_of(st, content_digest)


def regular_stat(resolved: Resolved, verb: str) -> os.stat_result | None:
    """``stat_or_none`` that refuses anything but a regular file; ``verb`` words the error."""
    st = stat_or_none(resolved)
    if st is not None and not stat_mod.S_ISREG(st.st_mode):
        raise FsError(
            f'cannot {verb} "{resolved.display}": not a regular file', "FS_NOT_REGULAR_FILE"
        )
    return st


def read_regular_file(resolved: Resolved, verb: str) -> tuple[bytes, os.stat_result] | None:
    """Read a whole regular file; ``None`` when missing. ``verb`` words the errors."""
    st = regular_stat(resolved, verb)
    if st is None:
        return None
    try:
        with open(resolved.real, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    return data, st


def decode_utf8(data: bytes) -> str:
    """Strict UTF-8 decoding that drops one leading BOM (a fatal ``TextDecoder``)."""
    text = data.decode("utf-8")
    return text[1:] if text.startswith("\ufeff") else text


def atomic_write(real: str, data: bytes) -> os.stat_result:
    """Write ``data`` to ``real`` atomically (temp file + rename), creating parents.

    An existing file keeps its permission bits. Returns the stat of the written file.
    """
    directory = os.path.dirname(real)
    os.makedirs(directory, exist_ok=True)
    mode: int | None = None
    with contextlib.suppress(FileNotFoundError):
        mode = stat_mod.S_IMODE(os.stat(real).st_mode)
    fd, tmp = tempfile.mkstemp(prefix=".codemode-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is None:
            mode = 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return os.stat(real)
