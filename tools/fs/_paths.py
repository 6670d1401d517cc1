"""Workspace confinement that neither ``..`` tricks nor a concurrent rename can get around.

A path is never normalised lexically before it is resolved: ``self/self/../../etc`` with
``self -> .`` means what the kernel means by it (the parent of the workspace), not what string
arithmetic says. Resolution happens *physically*, from a directory file descriptor of the
workspace root, and the tools then do their I/O on the descriptors resolution produced, so a
background process that swaps a file or directory for a symlink between "check" and "use"
has nothing to swap: there is no second walk of the path.

Two resolvers, one contract:

- ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` (Linux >= 5.6), used for opening
  existing objects: the kernel resolves every component beneath the root descriptor and
  fails with ``EXDEV`` instead of leaving it.
- a component-by-component walk with ``O_NOFOLLOW`` from the root descriptor, used where
  ``openat2`` is missing, for what it refuses that is still inside (an absolute symlink
  that names a path in the workspace), to produce precise errors, and for writes (which
  need the physical parent directory and may create missing parents). Symbolic links are
  read with ``readlinkat`` and spliced into the remaining components; ``..`` pops the
  stack of directory descriptors walked so far and may never pop the root.

``Handle`` is the result: an ``O_PATH`` descriptor of the object (if it exists), the
descriptor of its physical parent directory and its name there (for ``renameat``), its
``stat`` and its physical path (``real``: what policy keys and ripgrep use) next to the
``display`` path messages and values show (the absolute path as written, as
``path.resolve(cwd, file_path)`` gives it in Node).
"""

from __future__ import annotations

import ctypes
import errno
import os
import posixpath
import stat as stat_mod
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._errors import FsError
from .._text import js_json

__all__ = ["Handle", "Resolved", "Workspace", "is_within", "openat2_available"]

_MAX_LINKS = 40  # the kernel's MAXSYMLINKS
_MAX_RETRIES = 64  # a component that keeps changing type under us is a race, not a path
_PATH_FLAGS = os.O_PATH | os.O_CLOEXEC
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every architecture (unified syscall table)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
    except (OSError, AttributeError):  # pragma: no cover - no C library to call through
        return None
    return libc


_libc = _load_libc()


def _openat2(dirfd: int, path: str, flags: int) -> int:
    """``openat2(dirfd, path, {flags, 0, BENEATH | NO_MAGICLINKS})``; raises ``OSError``."""
    assert _libc is not None
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(
        _SYS_OPENAT2,
        ctypes.c_int(dirfd),
        os.fsencode(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


def _probe_openat2() -> bool:
    if _libc is None:
        return False
    try:
        root = os.open("/", _DIR_FLAGS)
    except OSError:
        return False
    try:
        os.close(_openat2(root, ".", _PATH_FLAGS))
        return True
    except OSError:  # ENOSYS (old kernel) or EPERM (a seccomp filter)
        return False
    finally:
        os.close(root)


_OPENAT2 = _probe_openat2()


def openat2_available() -> bool:
    """Whether opens go through ``openat2`` (else through the ``O_NOFOLLOW`` walk)."""
    return _OPENAT2


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (both absolute and normalised)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A path confined to the workspace: ``display`` for messages, ``real`` for I/O."""

    display: str
    real: str


class Handle:
    """A resolved path: descriptors of the object and its parent, and both spellings.

    ``fd`` is an ``O_PATH`` descriptor of the object (``-1`` when it does not exist);
    ``parent_fd``/``name`` locate its directory entry (``-1``/``""`` for a root itself).
    Close it (or use it as a context manager) to release the descriptors.
    """

    __slots__ = ("display", "fd", "name", "parent_fd", "real", "root", "st")

    def __init__(
        self,
        *,
        display: str,
        real: str,
        root: str,
        fd: int,
        st: os.stat_result | None,
        parent_fd: int,
        name: str,
    ) -> None:
        self.display = display
        self.real = real
        self.root = root
        self.fd = fd
        self.st = st
        self.parent_fd = parent_fd
        self.name = name

    @property
    def exists(self) -> bool:
        return self.st is not None

    def close(self) -> None:
        for fd in (self.fd, self.parent_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.parent_fd = -1

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Escape(Exception):
    """The walk left its root; ``via_link`` when a symbolic link took it there."""

    def __init__(self, via_link: bool) -> None:
        self.via_link = via_link


class _Missing(Exception):
    """A component does not exist; ``rest`` are the components not yet walked."""

    def __init__(self, rest: list[str]) -> None:
        self.rest = rest


class _NotDir(Exception):
    """A component other than the last is not a directory."""


class _Root:
    __slots__ = ("real", "spellings", "writable")

    def __init__(self, real: str, spellings: tuple[str, ...], writable: bool) -> None:
        self.real = real
        self.spellings = spellings
        self.writable = writable

    def open(self) -> int:
        try:
            return os.open(self.real, _DIR_FLAGS)
        except FileNotFoundError:
            # A runtime-owned directory that was never created: everything in it is missing.
            raise _Missing([]) from None

    def strip(self, absolute: str) -> str | None:
        """``absolute`` relative to this root when written under one of its spellings."""
        for spelling in self.spellings:
            if absolute == spelling:
                return ""
            if absolute.startswith(spelling + "/"):
                return absolute[len(spelling) + 1 :]
        return None


def _parts(rel: str) -> list[str]:
    # Only empty and "." components are dropped: they never change which object a path
    # names. (A trailing "/" or "/." after a non-directory, which the kernel refuses with
    # ENOTDIR, is accepted here as naming that file; it cannot reach anything else.)
    return [p for p in rel.split("/") if p and p != "."]


def _squash_slashes(raw: str) -> str:
    return "/" + raw.lstrip("/") if raw.startswith("//") else raw


Mode = Literal["open", "entry"]


def _walk(
    root: _Root, rel: str, mode: Mode, create_dirs: bool
) -> tuple[list[tuple[int, str]], str | None, os.stat_result | None, int]:
    """Walk ``rel`` from ``root`` without following any link the kernel would follow.

    Returns ``(stack, name, st, fd)``: the directory descriptors walked (``stack[0]`` is the
    root; the caller owns them), the final entry's name in ``stack[-1]`` (``None`` when the
    path names ``stack[-1]`` itself), its ``lstat`` (``None`` when missing, ``mode="entry"``
    only) and, for ``mode="open"``, an ``O_PATH`` descriptor of it (else ``-1``).
    Symbolic links are always resolved, the last one too; the entry returned is never one.
    """
    stack: list[tuple[int, str]] = [(root.open(), root.real)]
    queue = deque(_parts(rel))
    links = 0
    retries = 0
    via_link = False
    try:
        while queue:
            part = queue.popleft()
            if part == "..":
                if len(stack) == 1:
                    raise _Escape(via_link)
                os.close(stack.pop()[0])
                continue
            top_fd, top_real = stack[-1]
            last = not queue
            try:
                st = os.stat(part, dir_fd=top_fd, follow_symlinks=False)
            except FileNotFoundError:
                if last and mode == "entry":
                    return stack, part, None, -1
                if not last and create_dirs:
                    try:
                        os.mkdir(part, 0o777, dir_fd=top_fd)
                    except FileExistsError:
                        pass
                    queue.appendleft(part)
                    continue
                raise _Missing([part, *queue]) from None
            except NotADirectoryError:
                raise _NotDir() from None
            if stat_mod.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise FsError("too many levels of symbolic links", "FS_INVALID_PATH")
                try:
                    target = os.readlink(part, dir_fd=top_fd)
                except OSError:
                    retries = _bump(retries)  # replaced by a non-link since the stat
                    queue.appendleft(part)
                    continue
                via_link = True
                if target.startswith("/"):
                    inside = root.strip(_squash_slashes(target))
                    if inside is None:
                        raise _Escape(True)
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                    queue.extendleft(reversed(_parts(inside)))
                else:
                    queue.extendleft(reversed(_parts(target)))
                continue
            if last and mode == "entry":
                return stack, part, st, -1
            if not last and not stat_mod.S_ISDIR(st.st_mode):
                raise _NotDir()
            flags = _PATH_FLAGS | os.O_NOFOLLOW if last else _DIR_FLAGS
            try:
                fd = os.open(part, flags, dir_fd=top_fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    raise
                retries = _bump(retries)  # swapped since the lstat: look again
                queue.appendleft(part)
                continue
            opened = os.fstat(fd)
            if stat_mod.S_ISLNK(opened.st_mode):
                # O_PATH | O_NOFOLLOW opened a link swapped in since the lstat: look again.
                os.close(fd)
                retries = _bump(retries)
                queue.appendleft(part)
                continue
            if last:
                return stack, part, opened, fd
            stack.append((fd, posixpath.join(top_real, part)))
        return stack, None, None, -1
    except BaseException:
        for fd, _ in stack:
            os.close(fd)
        raise


def _bump(retries: int) -> int:
    if retries >= _MAX_RETRIES:
        raise FsError("the path kept changing while it was being resolved; retry", "FS_RACE")
    return retries + 1


class Workspace:
    """One workspace directory and the rules for resolving paths against it."""

    __slots__ = ("_readable", "_roots", "_workspace", "root")

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        given = os.path.abspath(os.fspath(directory))
        real = os.path.realpath(given)
        if not os.path.isdir(real):
            raise ValueError(f"workspace {given!r} is not a directory")
        self.root: str = real
        """The canonical (link-resolved) absolute workspace directory."""
        # A workspace reached through a link (e.g. /tmp -> /private/tmp) accepts both spellings.
        self._roots: tuple[str, ...] = (real,) if given == real else (real, given)
        self._workspace = _Root(real, self._roots, writable=True)
        self._readable: tuple[_Root, ...] = ()

    def allow_reads_under(self, directory: str) -> None:
        """Let reads and searches (never writes) reach a runtime-owned ``directory`` — the
        spill and job-output directories whose paths results report."""
        given = os.path.abspath(directory)
        real = os.path.realpath(given)
        if all(r.real != real for r in self._readable):
            spellings = (real,) if given == real else (real, given)
            self._readable = (*self._readable, _Root(real, spellings, writable=False))

    # -- locating ------------------------------------------------------------------------

    def _root_of(self, raw: str, write: bool) -> tuple[_Root, str, str]:
        """``(root, path relative to it, display path)`` for ``raw``, or an outside error."""
        if "\x00" in raw:
            raise FsError(
                f"invalid path {js_json(raw)}: contains a NUL character", "FS_INVALID_PATH"
            )
        absolute = _squash_slashes(raw) if raw.startswith("/") else posixpath.join(self.root, raw)
        # The display path is only a label (the path as written); nothing resolves it.
        display = _squash_slashes(posixpath.normpath(absolute))
        rel = self._workspace.strip(absolute)
        if rel is not None:
            spelling = next((r for r in self._roots if is_within(display, r)), None)
            if spelling is not None and spelling != self.root:
                display = self.root + display[len(spelling) :]
            return self._workspace, rel, display
        if not write:
            for extra in self._readable:
                rel = extra.strip(absolute)
                if rel is not None:
                    return extra, rel, display
        raise self._outside(raw, via_link=False)

    def _outside(self, raw: str, *, via_link: bool) -> FsError:
        why = "a symbolic link leads outside" if via_link else "the path is outside"
        return FsError(
            f'cannot access "{raw}": {why} the workspace {self.root}', "FS_OUTSIDE_WORKSPACE"
        )

    def _not_dir(self, display: str) -> FsError:
        return FsError(
            f'cannot resolve "{display}": a parent path segment is not a directory',
            "FS_NOT_FOUND",
        )

    def open(self, raw: str) -> Handle:
        """Open what ``raw`` names (links followed, confined) as an ``O_PATH`` handle.

        A missing path gives a handle with ``exists`` false (``fd == -1``).
        """
        root, rel, display = self._root_of(raw, write=False)
        if _OPENAT2:
            try:
                handle = self._open_beneath(root, rel, display)
            except _Missing:
                handle = None
            if handle is not None:
                return handle
        return self._open_walk(root, rel, display, raw)

    def _open_beneath(self, root: _Root, rel: str, display: str) -> Handle | None:
        """The ``openat2`` path; ``None`` defers to the walk (which also words the errors)."""
        root_fd = root.open()
        try:
            for _ in range(8):
                try:
                    fd = _openat2(root_fd, rel or ".", _PATH_FLAGS)
                except FileNotFoundError:
                    return None  # the walk tells "missing" from "a link leads out"
                except OSError as exc:
                    if exc.errno == errno.EAGAIN:
                        continue  # a rename raced the lookup; the kernel asks to retry
                    return None  # EXDEV (absolute link / escape), ELOOP, ENOTDIR, ...
                try:
                    real = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    os.close(fd)
                    return None  # no /proc: the walk knows the physical path
                if not is_within(real, root.real):
                    os.close(fd)
                    return None
                st = os.fstat(fd)
                return Handle(
                    display=display, real=real, root=root.real, fd=fd, st=st, parent_fd=-1, name=""
                )
            return None
        finally:
            os.close(root_fd)

    def _walk_mapped(
        self, root: _Root, rel: str, display: str, raw: str, mode: Mode, *, create_dirs: bool
    ) -> Handle | tuple[tuple[int, str], str | None, os.stat_result | None, int]:
        """``_walk`` with its outcomes in this class's terms: a missing path is a handle that
        does not exist, escapes and non-directories are the tools' errors. Otherwise the
        innermost directory (descriptor, real path) with ``_walk``'s name, stat and fd; the
        outer directories' descriptors are closed."""
        try:
            stack, name, st, fd = _walk(root, rel, mode, create_dirs=create_dirs)
        except _Escape as exc:
            raise self._outside(raw, via_link=exc.via_link) from None
        except _Missing:
            return Handle(
                display=display, real=display, root=root.real, fd=-1, st=None, parent_fd=-1, name=""
            )
        except _NotDir:
            raise self._not_dir(display) from None
        top = stack.pop()
        for other, _ in stack:
            os.close(other)
        return top, name, st, fd

    def _open_walk(self, root: _Root, rel: str, display: str, raw: str) -> Handle:
        walked = self._walk_mapped(root, rel, display, raw, "open", create_dirs=False)
        if isinstance(walked, Handle):
            return walked
        (top_fd, top_real), name, st, fd = walked
        if name is None:  # the path names a directory on the stack
            return Handle(
                display=display,
                real=top_real,
                root=root.real,
                fd=top_fd,
                st=os.fstat(top_fd),
                parent_fd=-1,
                name="",
            )
        return Handle(
            display=display,
            real=posixpath.join(top_real, name),
            root=root.real,
            fd=fd,
            st=st,
            parent_fd=top_fd,
            name=name,
        )

    def entry(self, raw: str, *, create_parents: bool) -> Handle:
        """The directory entry ``raw`` names, for replacing it: links followed (a link to an
        inside file is written through), parents created when asked, nothing opened.

        ``parent_fd`` is the physical parent directory, ``name`` the entry in it, ``st`` its
        ``lstat`` (``None`` when missing). The path must be inside the workspace proper.
        """
        root, rel, display = self._root_of(raw, write=True)
        walked = self._walk_mapped(root, rel, display, raw, "entry", create_dirs=create_parents)
        if isinstance(walked, Handle):
            return walked
        (parent_fd, parent_real), name, st, _fd = walked
        if name is None:
            return Handle(
                display=display,
                real=parent_real,
                root=root.real,
                fd=-1,
                st=os.fstat(parent_fd),
                parent_fd=parent_fd,
                name="",
            )
        return Handle(
            display=display,
            real=posixpath.join(parent_real, name),
            root=root.real,
            fd=-1,
            st=st,
            parent_fd=parent_fd,
            name=name,
        )

    def resolve(self, raw: str, *, write: bool = False) -> Resolved:
        """``raw`` resolved physically to ``(display, real)`` or ``FsError``; missing paths
        resolve too (``real`` then names where the object would be).

        For callers that hand a path to another program (bash's working directory);
        file tools use ``open``/``entry`` and do their I/O on the descriptors.
        """
        root, rel, display = self._root_of(raw, write=write)
        try:
            stack, name, _st, _fd = _walk(root, rel, "entry", create_dirs=False)
        except _Escape as exc:
            raise self._outside(raw, via_link=exc.via_link) from None
        except _Missing:
            return Resolved(display=display, real=display)
        except _NotDir:
            raise self._not_dir(display) from None
        for fd, _ in stack:
            os.close(fd)
        real = stack[-1][1] if name is None else posixpath.join(stack[-1][1], name)
        return Resolved(display=display, real=real)

    def relative(self, path: str) -> str:
        """``path`` made workspace-relative when absolute and inside, else unchanged."""
        if os.path.isabs(path):
            for root in self._roots:
                if is_within(path, root):
                    return os.path.relpath(path, root)
        return path

    def path(self) -> Path:
        """The workspace root as a ``Path``."""
        return Path(self.root)
