"""Session logs: the durable, append-only record of a scope's tool events.

An event is a lossless JSON dict with a non-empty string ``"type"`` (``"tool/call"``,
``"tool/result"``, ``"tool/code-dispatch-start"``, ``"tool/code-dispatch"``, ...) and
camelCase fields. ``append`` returns the event's sequence number: **0 for the first
event**, then 1, 2, ... in append order. A ``tool/result`` cites its ``tool/call`` by that
number. Call and settle events also carry the tool's presentation cards (``callCard``,
``resultCard``) when it declares them, so a log can be replayed as cards (``codemode log``).

Both logs store a detached, deep-frozen snapshot of each event, so a caller mutating its
dict afterwards cannot rewrite history, and both return those frozen dicts from
``events``. An invalid event raises ``TypeError``/``ValueError`` and nothing is written.

Retention is bounded: a top-level field (``arguments``, ``content``, ``message``, ...)
whose compact JSON exceeds ``max_inline_bytes`` (default 64 KiB) is stored as a marker
``{"truncated": true, "bytes": <size>, "sha256": <hex of the JSON bytes>, "preview":
<the JSON text's first bytes>}`` and the event gains ``"truncatedFields": [<names>]``,
so a session of 2,000 calls with 1 MB arguments keeps kilobytes per call, not
gigabytes; ``type`` is never truncated. ``max_inline_bytes=None`` keeps everything.

``append`` never yields to the event loop: validation, the write and the sequence number
happen in one synchronous step. That is what makes "append order" well defined when many
tasks append at once (no await between taking a number and writing it), and a SQLite WAL
append of one small row is fast enough to do on the loop. A lock also makes both logs safe
to share between threads.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import sqlite3
import sys
import threading
import urllib.parse
import weakref
from types import TracebackType
from typing import Any, Literal, Protocol, Self, cast, runtime_checkable

import msgspec

from .json import (
    FrozenDict,
    FrozenList,
    LosslessJsonError,
    dumps_compact,
    encode_bytes,
    sealed,
    snapshot,
)

__all__ = ["MemorySessionLog", "SessionLog", "SqliteSessionLog"]


@runtime_checkable
class SessionLog(Protocol):
    """Where a scope's durable events go.

    ``await append(event)`` validates and stores one event and returns its sequence
    number (0-based, in append order). ``events`` is the list of stored events in append
    order. ``close()`` releases resources; appending afterwards raises ``RuntimeError``.
    """

    async def append(self, event: dict[str, Any]) -> int:
        """Store ``event`` and return its 0-based sequence number."""
        ...

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every stored event, in append order."""
        ...

    def close(self) -> None:
        """Release resources; idempotent."""
        ...


def _validate(event: object) -> dict[str, Any]:
    """A frozen snapshot of ``event``, or ``TypeError``/``ValueError`` saying what is wrong."""
    frozen: dict[str, Any]
    if type(event) is FrozenDict and getattr(event, "_sealed", False) is True:
        frozen = event  # what ``snapshot`` returns for it (the engine's own events)
    else:
        if not isinstance(event, dict):
            raise TypeError(f"session event must be a dict, got {type(event).__name__}")
        try:
            frozen = snapshot(event, label="event")
        except LosslessJsonError as exc:
            raise TypeError(f"session event is not lossless JSON: {exc}") from exc
    if "type" not in frozen:
        raise ValueError('session event needs a "type" key')
    kind = frozen["type"]
    if not isinstance(kind, str):
        raise TypeError(f'session event "type" must be a string, got {type(kind).__name__}')
    if not kind:
        raise ValueError('session event "type" must be a non-empty string')
    return frozen


_encoder = msgspec.json.Encoder()
_msgspec_encode = _encoder.encode
_decoder = msgspec.json.Decoder()

DEFAULT_MAX_INLINE_BYTES = 64 * 1024
# Preview kept of a truncated field (at most the inline cap): enough to recognise it.
_PREVIEW_BYTES = 1024
_FROZEN = (FrozenDict, FrozenList)


def _check_max_inline(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_inline_bytes must be a positive integer or None, got {value!r}")
    return value


def _elided(body: bytes, cap: int) -> dict[str, Any]:
    return _marker(len(body), hashlib.sha256(body).hexdigest(), body, cap)


def _marker(size: int, digest: str, head: bytes, cap: int) -> dict[str, Any]:
    preview = head[: min(_PREVIEW_BYTES, cap)].decode("utf-8", "ignore")
    return sealed({"truncated": True, "bytes": size, "sha256": digest, "preview": preview})


class _Bound:
    """The retention bound of one log: ``cap`` bytes per field, with the marker of the
    last elided value remembered (a sub-call's start and settle events carry the same
    arguments object, so it is encoded and hashed once, not twice)."""

    __slots__ = ("_last", "cap")

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        # A weak reference: the memo must not keep a 64 MB argument alive.
        self._last: tuple[weakref.ref[Any], dict[str, Any]] | None = None

    def body_if_small(self, frozen: dict[str, Any]) -> bytes | None:
        """The event's encoding, unless a field is known to be over the cap.

        One encode of a whole small event (the common case) settles ``apply`` with a
        length check instead of a Python pass that encodes field by field (about a fifth
        of a code-mode sub-call's cost in the engine). A field already measured or
        memoised as big skips it: its bytes would be encoded twice.
        """
        cap = self.cap
        if cap is None:
            return None
        last = self._last
        elided = None if last is None else last[0]()
        for value in frozen.values():
            if type(value) in _FROZEN:
                if value is elided:
                    return None
                known = getattr(value, "_digest", None)
                if known is not None and known[0] > cap:
                    return None
        try:
            return _msgspec_encode(frozen)  # the common case, without two wrapper calls
        except (RecursionError, UnicodeEncodeError):
            return _encode_bytes(frozen)

    def apply(self, frozen: dict[str, Any], body: bytes | None = None) -> dict[str, Any]:
        """``frozen`` with every top-level field over the cap replaced by a marker.

        ``body``, the event's encoding when the caller has one, settles the common case
        (an event within the cap) with one length check.
        """
        cap = self.cap
        if cap is None or (body is not None and len(body) <= cap):
            return frozen
        out: dict[str, Any] | None = None
        names: list[str] = []
        for key, value in frozen.items():
            if key == "type" or not isinstance(value, (str, dict, list)):
                continue
            if isinstance(value, str) and 6 * len(value) + 2 <= cap:
                continue  # even fully escaped (\\u0000 per character) it fits
            last = self._last
            known = getattr(value, "_digest", None) if type(value) in _FROZEN else None
            if last is not None and last[0]() is value:
                marker = last[1]
            elif known is not None:
                # Measured and hashed where its JSON bytes were at hand (off the loop).
                size, digest, head = known
                if size <= cap:
                    continue
                marker = _marker(size, digest, head, cap)
            else:
                data = _encode_bytes(value)
                if len(data) <= cap:
                    continue
                marker = _elided(data, cap)
                if isinstance(value, (FrozenDict, FrozenList)):
                    self._last = (weakref.ref(value), marker)
            if out is None:
                out = dict(frozen)
            out[key] = marker
            names.append(key)
        if out is None:
            return frozen
        out["truncatedFields"] = snapshot(names)
        return sealed(out)


def _encode_bytes(value: Any) -> bytes:
    """Compact JSON of a lossless value, as UTF-8 bytes."""
    try:
        # Deeply nested events (5,000 levels are legal arguments) exceed msgspec's
        # recursion guard; encode_bytes then writes them iteratively, the same bytes.
        return encode_bytes(value)
    except UnicodeEncodeError:
        # A lone surrogate is valid in a Python str (and a JS string) but not in UTF-8.
        # JSON can still carry it as a \\uXXXX escape, as JS's JSON.stringify writes it,
        # so the event is stored losslessly instead of being refused.
        try:
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        except RecursionError:  # deep as well: the engine's writer escapes them too
            text = dumps_compact(value)
        return text.encode("utf-8")


def _encode(event: dict[str, Any], data: bytes | None = None) -> str:
    """The stored text of ``event`` (``data``: its ``_encode_bytes`` when already made)."""
    if data is None:
        data = _encode_bytes(event)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # a deep event holding a lone surrogate
        return json.dumps(event, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def _decode(body: str | bytes) -> Any:
    try:
        return _decoder.decode(body)
    except RecursionError:
        # The C parsers guard depth with the interpreter's recursion limit; a deep event
        # needs a higher one for the duration of this parse only.
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * len(body) + 1000))
        try:
            return json.loads(body)
        finally:
            sys.setrecursionlimit(limit)
    except msgspec.DecodeError:
        # Rows written by the escape fallback above; msgspec rejects lone-surrogate escapes.
        return json.loads(body)


class _ClosingLog(abc.ABC):
    """``with log:`` closes the log on exit."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class MemorySessionLog(_ClosingLog):
    """A session log kept in memory (tests, ephemeral agents).

    ``max_inline_bytes``: fields larger than this are kept as a preview, byte size and
    sha256 (see the module docstring); ``None`` keeps everything.

    With a bound, an event is kept as its compact JSON bytes (the encoding the bound
    measures it by) until ``events`` is first read, then as the frozen dict decoded from
    them: a host that appends thousands of sub-call events and never reads them holds one
    bytes object per event, which the cycle collector never scans, instead of a tree of
    frozen containers it rescans on every full collection (measured: ~6 µs and a fifth of
    the engine's cost per code-mode sub-call, 20,000 calls into one log).
    """

    def __init__(self, *, max_inline_bytes: int | None = DEFAULT_MAX_INLINE_BYTES) -> None:
        self.max_inline_bytes = _check_max_inline(max_inline_bytes)
        self._bound = _Bound(self.max_inline_bytes)
        # Frozen dicts up to ``_thawed``, then bytes (or frozen dicts, with no bound).
        self._events: list[dict[str, Any] | bytes] = []
        self._thawed = 0
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"<MemorySessionLog events={len(self._events)}{' closed' if self._closed else ''}>"

    async def append(self, event: dict[str, Any]) -> int:
        """Validate and store ``event``; return its 0-based sequence number."""
        return self.append_now(event)

    def append_encoded(self, body: bytes) -> int | None:
        """Engine-internal: store an event the engine encoded itself, as ``append_now``
        would store it, or ``None`` (nothing stored) when it is over the retention bound
        (then the caller appends it as a dict, whose fields are bounded one by one).

        ``body`` must be the compact JSON of a lossless event with a non-empty string
        ``type``, exactly the bytes ``append_now`` would encode for it: the
        sub-dispatch driver's per-call events, built as ``msgspec`` structs (a dict, its
        validation and the bound's pass cost more than the rest of a sub-call's
        bookkeeping).
        """
        cap = self._bound.cap
        if cap is not None and len(body) > cap:
            return None
        with self._lock:
            if self._closed:
                raise RuntimeError("session log is closed")
            # Bytes whatever the bound: ``events`` decodes them in place, like any other.
            self._events.append(body)
            return len(self._events) - 1

    def append_now(self, event: dict[str, Any]) -> int:
        """``append`` without the coroutine: this log never waits."""
        # The lossless snapshot is the whole check: every lossless value encodes (deep
        # and lone-surrogate events take _encode's fallbacks), so a memory log accepts
        # exactly what a SQLite log accepts. The one encode is for the retention bound.
        frozen = _validate(event)
        with self._lock:  # the bound's memo is shared state
            bound = self._bound
            body = bound.body_if_small(frozen)
            kept = bound.apply(frozen, body)
            if self._closed:
                raise RuntimeError("session log is closed")
            stored: dict[str, Any] | bytes
            if bound.cap is None:
                stored = kept  # everything kept: no encode of what may be huge
            elif body is not None and kept is frozen:
                stored = body
            else:
                stored = _encode_bytes(kept)  # fields replaced by their markers
            self._events.append(stored)
            return len(self._events) - 1

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every stored event (deep-frozen dicts), in append order. Readable after close."""
        with self._lock:
            events = self._events
            # Decoded once, in place: a reader that polls (the agent loop, each step)
            # decodes each event once, not once per read.
            for i in range(self._thawed, len(events)):
                item = events[i]
                if type(item) is bytes:
                    events[i] = snapshot(_decode(item), label="event")
            self._thawed = len(events)
            return cast("list[dict[str, Any]]", list(events))

    def close(self) -> None:
        """Refuse further appends; the stored events stay readable."""
        with self._lock:
            self._closed = True


_SCHEMA_VERSION = 1


def _rollback(conn: sqlite3.Connection) -> None:
    # Only when a transaction is still open: a failed COMMIT may already have ended it,
    # and a second error here would hide the first.
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class SqliteSessionLog(_ClosingLog):
    """A session log in a SQLite file (WAL mode), readable again after a restart.

    Each event is one row ``(seq, type, body)`` where ``body`` is the event's compact
    camelCase JSON text. Opening an existing file continues its sequence. The sequence
    number is taken inside the writing transaction, so two logs (or two processes) on the
    same file still get distinct, gap-free numbers.

    ``synchronous`` is SQLite's setting: ``"NORMAL"`` (the default) survives a process
    crash, which is what WAL guarantees at that level; ``"FULL"`` also survives power
    loss at the cost of an fsync per event. ``max_inline_bytes`` bounds each field as in
    ``MemorySessionLog``. If another connection holds the write lock,
    ``append`` waits up to 5 s (SQLite's busy timeout) on the calling thread; with one
    writer per file, as the engine uses it, that never happens.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        max_inline_bytes: int | None = DEFAULT_MAX_INLINE_BYTES,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f'synchronous must be "NORMAL" or "FULL", got {synchronous!r}')
        self.max_inline_bytes = _check_max_inline(max_inline_bytes)
        self._bound = _Bound(self.max_inline_bytes)
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        # isolation_level=None: no implicit transactions; each append runs its own
        # BEGIN IMMEDIATE ... COMMIT. check_same_thread=False: the lock serialises use.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self._setup(conn, synchronous)
        except sqlite3.DatabaseError as exc:
            conn.close()
            # Not SQLite at all (or corrupt): say so instead of SQLite's bare message.
            raise ValueError(f"{self.path} is not a session log: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    @staticmethod
    def _setup(conn: sqlite3.Connection, synchronous: str) -> None:
        conn.execute("PRAGMA busy_timeout = 5000")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not enable WAL mode (journal_mode={mode})")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS events ("
                    " seq INTEGER PRIMARY KEY,"
                    " type TEXT NOT NULL,"
                    " body TEXT NOT NULL)"
                )
                conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            elif version != _SCHEMA_VERSION:
                raise ValueError(
                    f"unsupported session log format version {version} "
                    f"(this build reads version {_SCHEMA_VERSION})"
                )
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """The events of an existing session file, opened read-only (nothing is written).

        Unlike the constructor, which creates a missing file and its table, this raises
        ``FileNotFoundError`` for a missing file and ``ValueError`` for a file that is not
        a session log of this format (not SQLite, no ``events`` table, another version),
        so a reader such as ``codemode log`` never turns a mistyped path into a new log.
        """
        target = os.fspath(path)
        if not os.path.isfile(target):
            raise FileNotFoundError(f"no such session file: {target}")
        uri = "file:" + urllib.parse.quote(os.path.abspath(target)) + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise ValueError(f"{target} cannot be opened as a session log: {exc}") from None
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
            ).fetchone()
            if version != _SCHEMA_VERSION or has_table is None:
                raise ValueError(
                    f"{target} is not a session log (format version {version}, "
                    f"{'an' if has_table else 'no'} events table; this build reads "
                    f"version {_SCHEMA_VERSION})"
                )
            rows = conn.execute("SELECT body FROM events ORDER BY seq").fetchall()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{target} is not a session log: {exc}") from None
        finally:
            conn.close()
        return [snapshot(_decode(body), label="event") for (body,) in rows]

    def __repr__(self) -> str:
        state = " closed" if self._conn is None else ""
        return f"<SqliteSessionLog {self.path!r}{state}>"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("session log is closed")
        return self._conn

    async def append(self, event: dict[str, Any]) -> int:
        """Validate and durably store ``event``; return its 0-based sequence number."""
        return self.append_now(event)

    def append_now(self, event: dict[str, Any]) -> int:
        """``append`` without the coroutine (a local SQLite write; see the class notes)."""
        frozen = _validate(event)
        data = _encode_bytes(frozen)
        with self._lock:
            bounded = self._bound.apply(frozen, data)
            if bounded is not frozen:
                frozen, data = bounded, _encode_bytes(bounded)
            body = _encode(frozen, data)
            kind: str = frozen["type"]
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                (seq,) = conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM events").fetchone()
                conn.execute(
                    "INSERT INTO events (seq, type, body) VALUES (?, ?, ?)", (seq, kind, body)
                )
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        return int(seq)

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every stored event (deep-frozen dicts) read back from the file, in append order."""
        with self._lock:
            rows = self._connection().execute("SELECT body FROM events ORDER BY seq").fetchall()
        return [snapshot(_decode(body), label="event") for (body,) in rows]

    def close(self) -> None:
        """Close the database; idempotent. Appending or reading afterwards raises."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
