"""Workspace confinement: every path a tool touches resolves inside one directory.

A path is checked twice: lexically (``..`` and absolute paths must stay under the root) and
after following symbolic links (a link inside the workspace must not lead out of it). The
display path — what values and messages show — is the lexical absolute path, like the
reference's ``resolve(cwd, file_path)``; file operations use the link-resolved real path.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from ._errors import FsError
from ._text import js_json

__all__ = ["Resolved", "Workspace", "is_within"]


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


class Workspace:
    """One workspace directory and the rules for resolving paths against it."""

    __slots__ = ("_readable", "_roots", "root")

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        given = os.path.abspath(os.fspath(directory))
        real = os.path.realpath(given)
        if not os.path.isdir(real):
            raise ValueError(f"workspace {given!r} is not a directory")
        self.root: str = real
        """The canonical (link-resolved) absolute workspace directory."""
        # A workspace reached through a link (e.g. /tmp -> /private/tmp) accepts both spellings.
        self._roots: tuple[str, ...] = (real,) if given == real else (real, given)
        self._readable: tuple[str, ...] = ()

    def allow_reads_under(self, directory: str) -> None:
        """Let reads and searches (never writes) reach a runtime-owned ``directory`` — the
        spill and job-output directories whose paths results report."""
        real = os.path.realpath(os.path.abspath(directory))
        if real not in self._readable:
            self._readable = (*self._readable, real)

    def resolve(self, raw: str, *, write: bool = False) -> Resolved:
        """Resolve ``raw`` (relative to the workspace, or absolute) or raise ``FsError``.

        Reads may also reach the runtime-owned directories of ``allow_reads_under``.
        """
        if "\x00" in raw:
            raise ValueError(f"invalid path {js_json(raw)}: contains a NUL character")
        joined = raw if os.path.isabs(raw) else os.path.join(self.root, raw)
        display = posixpath.normpath(joined) if os.sep == "/" else os.path.normpath(joined)
        if display.startswith("//"):
            display = "/" + display.lstrip("/")
        root = next((r for r in self._roots if is_within(display, r)), None)
        if root is None and not write:
            extra = next((r for r in self._readable if is_within(display, r)), None)
            if extra is not None:
                real = os.path.realpath(display)
                if is_within(real, extra):
                    return Resolved(display=display, real=real)
        if root is None:
            raise FsError(
                f'cannot access "{raw}": the path is outside the workspace {self.root}',
                "FS_OUTSIDE_WORKSPACE",
            )
        if root != self.root:
            display = self.root + display[len(root) :]
        real = os.path.realpath(display)
        if not is_within(real, self.root):
            raise FsError(
                f'cannot access "{raw}": a symbolic link leads outside the workspace {self.root}',
                "FS_OUTSIDE_WORKSPACE",
            )
        return Resolved(display=display, real=real)

    def relative(self, path: str) -> str:
        """``path`` made workspace-relative when absolute and inside, else unchanged."""
        if os.path.isabs(path):
            for root in self._roots:
                if is_within(path, root):
                    rel = os.path.relpath(path, root)
                    return rel
        return path

    def path(self) -> Path:
        """The workspace root as a ``Path``."""
        return Path(self.root)
