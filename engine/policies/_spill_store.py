"""Spill stores: where the spill policy keeps the full text of an oversized result.

``SpillStore`` is the seam (any backend: a directory, an object store, a database);
``LocalSpillStore`` writes one private file per spill under a directory and returns its
absolute path as the locator, which the model can ``read``/``grep`` back.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio.to_thread

from ._spill_preview import utf8_bytes

__all__ = ["LOCAL_RETRIEVAL_HINT", "LocalSpillStore", "SpillStore", "safe_file_name"]

LOCAL_RETRIEVAL_HINT = "Use read with offset/limit, or grep this path to search within it."

# A name longer than this is shortened (extension kept) so the whole filename, with its
# unique prefix, stays far below the common 255-byte filesystem limit.
_MAX_NAME_CHARS = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_FALLBACK_NAME = "spill.txt"
# A spill up to this size is written from the event loop: handing it to a worker thread
# and back cost more than the write (0.4 ms against ~0.1 ms for 21 KB here).
_INLINE_WRITE_BYTES = 64 << 10


@runtime_checkable
class SpillStore(Protocol):
    """Where spilled text goes. ``save`` returns a locator the model can use to get it back.

    ``retrieval_hint`` is the sentence appended to the spill notice, telling the model how
    to use the locator. ``label`` is ``"result"`` (a top-level result) or ``"dispatch"``
    (a code-mode sub-call's durable log copy); ``call_id`` names the call when known.
    """

    @property
    def retrieval_hint(self) -> str:
        """How the model retrieves spilled text through a locator."""
        ...

    async def save(
        self, text: str, *, suggested_name: str, label: str, call_id: str | None = None
    ) -> str:
        """Persist ``text`` in full and return its locator."""
        ...


def safe_file_name(suggested_name: str) -> str:
    """A filename derived from ``suggested_name`` that cannot leave its directory.

    Only the last path component is kept, runs of characters outside ``[A-Za-z0-9._-]``
    become ``_``, leading dots are removed (no hidden files, no ``..``), and long names are
    shortened keeping their extension. An empty result falls back to ``spill.txt``.
    """
    base = re.split(r"[\\/]", suggested_name)[-1]
    name = _UNSAFE.sub("_", base).lstrip(".")
    if not name:
        return _FALLBACK_NAME
    if len(name) > _MAX_NAME_CHARS:
        stem, dot, ext = name.rpartition(".")
        if dot and stem and len(ext) <= 16:
            name = stem[: _MAX_NAME_CHARS - len(ext) - 1] + "." + ext
        else:
            name = name[:_MAX_NAME_CHARS]
    return name


class LocalSpillStore:
    """Spills to private files in ``directory``; the locator is the file's absolute path.

    The directory is created on first use with mode ``0o700``. Each save writes a new
    file ``<random hex>-<sanitised suggested_name>`` with mode ``0o600``, opened
    exclusively and without following symlinks, so a planted file or link cannot
    redirect or expose the text. ``label`` and ``call_id`` are accepted for the protocol
    but not encoded in the name (the name holds no untrusted data beyond the sanitised
    suggestion). Text is written as UTF-8; lone surrogates become U+FFFD.
    """

    retrieval_hint: str = LOCAL_RETRIEVAL_HINT

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        # Resolved once so every locator is absolute and symlink-free, and the
        # containment check below compares like with like.
        self.directory: Path = Path(directory).expanduser().resolve()
        # Set once the directory was made or found; a directory removed later is made
        # again when a write finds it missing.
        self._ensured = False

    def __repr__(self) -> str:
        return f"LocalSpillStore({str(self.directory)!r})"

    async def save(
        self, text: str, *, suggested_name: str, label: str, call_id: str | None = None
    ) -> str:
        """Write ``text`` to a new file and return its absolute path.

        Raises ``OSError`` when the directory cannot be created or the file cannot be
        written (the spill policy treats any failure as "keep the original").
        """
        if not isinstance(text, str):
            raise TypeError(f"spill text must be a str, got {type(text).__name__}")
        data = utf8_bytes(text)
        name = safe_file_name(suggested_name)
        # A small spill is written here (``_INLINE_WRITE_BYTES``), a bigger one in a
        # worker thread; spills are independent files, so their order does not matter.
        if len(data) <= _INLINE_WRITE_BYTES:
            return str(self._write(name, data))
        path = await anyio.to_thread.run_sync(self._write, name, data)
        return str(path)

    def _ensure_directory(self) -> None:
        try:
            self.directory.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            if not self.directory.is_dir():
                raise NotADirectoryError(
                    f"spill directory {str(self.directory)!r} exists and is not a directory"
                ) from None
            self._ensured = True
            return
        # mkdir's mode is filtered by the umask; make the new directory private regardless.
        os.chmod(self.directory, 0o700)
        self._ensured = True

    def _write(self, name: str, data: bytes) -> Path:
        if not self._ensured:
            self._ensure_directory()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        for _attempt in range(8):
            path = self.directory / f"{secrets.token_hex(8)}-{name}"
            # Defence in depth: the sanitiser already guarantees a bare filename.
            if path.parent != self.directory:
                raise ValueError(f"spill file name {name!r} escapes the spill directory")
            try:
                fd = os.open(path, flags, 0o600)
            except FileExistsError:
                continue
            except (FileNotFoundError, NotADirectoryError):
                # The directory went away (or was replaced) since it was made: make it
                # again, with the same checks, and retry once.
                if not self._ensured:
                    raise
                self._ensured = False
                self._ensure_directory()
                fd = os.open(path, flags, 0o600)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            except BaseException:
                path.unlink(missing_ok=True)
                raise
            return path
        raise FileExistsError(f"could not find a free spill file name for {name!r}")
