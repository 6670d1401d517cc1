"""The session store: the session files the agent knows and a full-text index over them.

A ``SessionStore(folder)`` owns ``folder`` (created ``0700`` when missing): the CLI puts
new session files there (``*.db``), and the store keeps ``index.db`` (SQLite, WAL) and
``registry.jsonl`` next to them.

* **Sources.** Every ``*.db`` regular file in the folder (symlinks are skipped) whose log
  holds an ``agent/session`` record is a session; ``register(path, info)`` adds one living
  anywhere (the CLI calls it for every session it opens, ``--session``/``--resume`` files
  included) and ``attach(agent)`` registers the session an ``Agent`` drives and marks it
  *live* for as long as that ``Agent`` object exists (``detach`` ends that early). An
  attached agent whose log has no file (``MemorySessionLog``) is indexed from its events.
  A session id has one source: an explicit ``register`` wins; a folder file claiming an id
  another available file already holds is ignored (a copy).
* **Availability.** ``live`` (an attached ``Agent`` of this process drives it) and/or
  ``persisted`` (its file is a readable session log); otherwise ``unavailable`` (the file
  vanished or is not a session log). Liveness is per process: a session another process
  drives shows ``persisted`` only (no cross-process lock file: a stale lock after a crash
  would lie, and ``persisted`` is still true). Events already indexed stay searchable when
  a file becomes unavailable (rendered as such); reading a full event needs the file.
* **The index is a cache.** A session file is the truth. Indexing is incremental by
  ``seq``: the store remembers the last seq indexed and the SHA-256 of its row, reads only
  newer rows, and re-indexes a session from scratch when that row changed or vanished (the
  file was replaced). A file whose size and mtime (and its ``-wal``'s) did not change is not
  opened at all. An index of another version, or a corrupt one, is deleted and rebuilt
  (``registry.jsonl`` replays the registrations, the folder is rescanned).
* **Text.** Each event's searchable text is its string values (keys, ids, times, cards,
  timings and usage left out), at most ``MAX_EVENT_TEXT`` characters; FTS5 ``unicode61``
  (case- and diacritic-insensitive words). A user query is literal: every whitespace-
  separated word is quoted (``"`` doubled), so FTS5 operators, column filters, ``NEAR``,
  ``*``, ``^`` and quotes in it are plain text; the words must all occur (AND), and a word
  with punctuation matches as a phrase (``foo.bar`` = ``foo`` then ``bar``). Words of
  punctuation only are ignored.
* **Time.** An event's time is its ``at`` (ISO 8601 with a zone; the agent writes it on
  every ``agent/*`` event), ``createdAt`` for ``agent/session``; an event without one (the
  engine's tool events) takes the time of the event before it (its turn's latest), or the
  session's creation time. Stored as UTC with milliseconds.
* **Surfaces.** ``current``: an ``agent/message`` whose message is part of the conversation
  the agent rebuilds (role ``user``/``assistant``/``tool``). ``shadowed``: an event a later
  (or winning) record replaced: a ``todo/write`` or ``agent/goal`` followed by a newer one
  (the last one is the state), an ``agent/session`` after the first (the first is the
  session's record), and any event named by a later event's ``replacesEventSeqs`` (the hook
  for compaction, which the agent does not do today; a synthetic interrupted-tool answer is
  never written, so it is no event). ``log-only``: everything else (tool events, turn
  starts/ends, other records).
* **Relationships** (what ``session_event_trace`` lists), each from the later event to the
  earlier: ``replaces`` (see shadowed), ``cites`` (``sourceEventSeqs``: a ``tool/result``
  cites its ``tool/call``), ``requested by`` (a ``tool/call`` and the assistant message that
  asked for it), ``answers`` (a ``tool`` message and its ``tool/call``), ``dispatched by``
  (a ``tool/code-dispatch-start`` and its root ``tool/call``), ``settles`` (a
  ``tool/code-dispatch`` and its start event). Call ids resolve to the latest match before
  the event.

Store methods are synchronous and thread-safe (the tools run them in a worker thread);
``cancel`` (a ``threading.Event``) interrupts a running query.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
import sqlite3
import stat
import threading
import unicodedata
import urllib.parse
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ._errors import SessionQueryError
from ._session import SessionInfo

if TYPE_CHECKING:
    from ._loop import Agent

__all__ = [
    "INDEX_VERSION",
    "MAX_EVENT_TEXT",
    "EventHit",
    "EventLink",
    "EventRow",
    "SessionRecord",
    "SessionStore",
    "Viewer",
    "parse_time",
    "single_line",
]

INDEX_VERSION = 1
INDEX_NAME = "index.db"
REGISTRY_NAME = "registry.jsonl"
#: Characters of one event's text that are searchable (the rest is still read in full).
MAX_EVENT_TEXT = 200_000
_LOG_VERSION = 1  # SqliteSessionLog's format
_BATCH = 500
# Keys whose values are bookkeeping, not content: searching "2026" or "user" must not
# match every event.
_SKIP_KEYS = frozenset(
    {
        "type", "id", "callId", "toolCallId", "rootCallId", "parentCallId", "subCallId",
        "role", "source", "callCard", "resultCard", "timing", "sourceEventSeqs",
        "replacesEventSeqs", "usage", "meta", "truncatedFields", "sha256", "at",
        "createdAt", "parentId", "workspace", "origin", "isError",
    }
)  # fmt: skip
#: State records where the newest one is the state and every earlier one is replaced.
_LAST_WINS = ("todo/write", "agent/goal")
_SURROGATE = re.compile("[\ud800-\udfff]")
_MESSAGE_ROLES = ("user", "assistant", "tool")


class SessionRecord(msgspec.Struct, frozen=True):
    """A known session: its ``SessionInfo`` fields, its file (``None``: an in-memory log)
    and its ``availability`` (``("live", "persisted")``, ``("persisted",)``, ``("live",)``
    or ``("unavailable",)``)."""

    id: str
    title: str
    workspace: str | None
    parent_id: str | None
    created_at: str
    path: str | None
    availability: tuple[str, ...]
    workspace_real: str | None = None


class Viewer(msgspec.Struct, frozen=True):
    """Who asks: the calling session's id, its resolved workspace (``None``: unknown; then
    only its own session is visible) and ``cut``, the first seq of the calling step (that
    step's events are not "prior" events; ``None``: no step running)."""

    session_id: str
    workspace_real: str | None
    cut: int | None = None

    def sees(self, record: SessionRecord) -> bool:
        """Whether ``record`` is visible to this caller."""
        if record.id == self.session_id:
            return True
        return self.workspace_real is not None and record.workspace_real == self.workspace_real


class EventRow(msgspec.Struct, frozen=True):
    """One indexed event: ``seq``, ``type``, ``surface``, ``at`` and its searchable text."""

    session_id: str
    seq: int
    type: str
    surface: str
    at: str
    text: str = ""


class EventHit(msgspec.Struct, frozen=True):
    """A full-text match: the event and a raw snippet around the match."""

    event: EventRow
    snippet: str


class EventLink(msgspec.Struct, frozen=True):
    """A relationship: ``label`` read from the event traced (``cites``, ``cited by``, ...),
    the other event's ``seq`` and the event itself (``None``: not in the index)."""

    label: str
    seq: int
    event: EventRow | None
    replacement: bool


_INVERSE = {
    "replaces": "replaced by",
    "cites": "cited by",
    "requested by": "requests",
    "answers": "answered by",
    "dispatched by": "dispatches",
    "settles": "settled by",
}

_SCHEMA = [
    """CREATE TABLE sessions (
        sid TEXT PRIMARY KEY, path TEXT, title TEXT NOT NULL DEFAULT '',
        workspace TEXT, ws_real TEXT, parent_id TEXT, created_at TEXT NOT NULL DEFAULT '',
        info_src TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending', sig TEXT,
        indexed_seq INTEGER NOT NULL DEFAULT -1, tail_hash TEXT, last_at TEXT,
        state TEXT NOT NULL DEFAULT '{}', registered INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX sessions_parent ON sessions(parent_id)",
    "CREATE TABLE files (path TEXT PRIMARY KEY, sig TEXT, sid TEXT)",
    """CREATE TABLE events (
        rowid INTEGER PRIMARY KEY, sid TEXT NOT NULL, seq INTEGER NOT NULL,
        type TEXT NOT NULL, surface TEXT NOT NULL, at TEXT NOT NULL,
        turn INTEGER, step INTEGER, UNIQUE (sid, seq))""",
    "CREATE INDEX events_step ON events(sid, turn, step)",
    "CREATE TABLE calls (sid TEXT NOT NULL, call_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " seq INTEGER NOT NULL)",
    "CREATE INDEX calls_id ON calls(sid, call_id, kind, seq)",
    "CREATE TABLE links (sid TEXT NOT NULL, src INTEGER NOT NULL, kind TEXT NOT NULL,"
    " dst INTEGER NOT NULL)",
    "CREATE INDEX links_src ON links(sid, src)",
    "CREATE INDEX links_dst ON links(sid, dst)",
    "CREATE VIRTUAL TABLE events_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')",
]


# ----------------------------------------------------------------------------- helpers


def _iso_ms(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: object, name: str) -> str:
    """``value`` (a timezone-qualified ISO 8601 string) as UTC with milliseconds, or a
    ``SESSION_QUERY_INVALID_TIME`` error naming the argument ``name``."""
    example = "e.g. 2026-12-02T07:00:00Z or 2026-12-02T09:00:00+02:00"
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        raise SessionQueryError(
            f"{name} must be a timezone-qualified ISO 8601 time ({example})",
            "SESSION_QUERY_INVALID_TIME",
        )
    text = value.strip()
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise SessionQueryError(
            f"{name} is not an ISO 8601 time: {json.dumps(text)} ({example})",
            "SESSION_QUERY_INVALID_TIME",
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise SessionQueryError(
            f"{name} must name its timezone (Z or an offset such as +02:00): "
            f"{json.dumps(text)} ({example})",
            "SESSION_QUERY_INVALID_TIME",
        )
    try:
        return _iso_ms(moment)
    except (OverflowError, ValueError):
        raise SessionQueryError(
            f"{name} is out of range: {json.dumps(text)}", "SESSION_QUERY_INVALID_TIME"
        ) from None


def _event_time(value: object) -> str | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    try:
        return _iso_ms(moment)
    except (OverflowError, ValueError):
        return None


def _clean(text: str) -> str:
    """``text`` storable in SQLite: lone surrogates (legal in events) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _event_text(event: Any) -> str:
    """The searchable text of ``event``: its string values, iteratively, bounded."""
    parts: list[str] = []
    size = 0
    stack: list[Any] = [event]
    while stack and size < MAX_EVENT_TEXT:
        value = stack.pop()
        if isinstance(value, str):
            if value:
                parts.append(value)
                size += len(value) + 1
        elif isinstance(value, Mapping):
            stack.extend(reversed([v for k, v in value.items() if k not in _SKIP_KEYS]))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return _clean("\n".join(parts)[:MAX_EVENT_TEXT])


def _decode(body: str) -> Any:
    """A stored event body, or ``None`` when it is too deep for the parsers (an event of
    thousands of nested levels: it is then indexed by its raw text)."""
    try:
        return json.loads(body)
    except RecursionError:
        return None


def _sig(path: str) -> str | None:
    """Size and mtime of ``path`` and its ``-wal`` (``None``: not a regular file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    parts = [str(st.st_size), str(st.st_mtime_ns)]
    try:
        wal = os.stat(path + "-wal")
        parts += [str(wal.st_size), str(wal.st_mtime_ns)]
    except OSError:
        parts.append("-")
    return ":".join(parts)


def _hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


@contextlib.contextmanager
def _open_log(path: str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a session file; ``ValueError`` when it is not one."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise ValueError(f"cannot open {path}: {exc}") from None
    try:
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{path} is not a session log: {exc}") from None
        if version != _LOG_VERSION or table is None:
            raise ValueError(f"{path} is not a session log (format version {version})")
        yield conn
    finally:
        conn.close()


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _real(workspace: str | None) -> str | None:
    if not workspace:
        return None
    try:
        return os.path.realpath(workspace)
    except (OSError, ValueError):
        return None


def _info_of(event: Mapping[str, Any]) -> SessionInfo | None:
    body = {k: v for k, v in event.items() if k != "type"}
    try:
        info = msgspec.convert(body, SessionInfo)
    except msgspec.ValidationError:
        return None
    return info if info.id else None


def _corrupt(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in str(exc)


# ------------------------------------------------------------------------------ store


class SessionStore:
    """Session files and their full-text index under ``folder`` (see the module notes).

    ``register(path, info)`` and ``attach(agent)`` make sessions known; ``sessions()``
    lists them; ``refresh()`` indexes what is new. The session-query tools
    (``build_session_query_tools(store)``) call the query methods.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"cannot create the session store folder {self.folder}: {exc}"
            ) from None
        if not self.folder.is_dir():
            raise ValueError(f"session store folder {self.folder} is not a directory")
        self.index_path = str(self.folder / INDEX_NAME)
        self._registry = self.folder / REGISTRY_NAME
        self._lock = threading.RLock()
        self._live: dict[str, weakref.ref[Agent]] = {}
        self._open_index()

    def __repr__(self) -> str:
        return f"<SessionStore {str(self.folder)!r}>"

    # ------------------------------------------------------------------ the index

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.index_path, isolation_level=None, check_same_thread=False, timeout=10
        )
        conn.execute("PRAGMA busy_timeout = 10000")
        return conn

    def _open_index(self) -> None:
        with self._lock:
            try:
                self._init_index()
            except _Stale:
                self._rebuild()
            except sqlite3.DatabaseError as exc:
                if not _corrupt(exc):
                    # Locked for too long, unreadable, a full disk: not ours to delete.
                    raise ValueError(
                        f"cannot open the session index {self.index_path}: {exc}"
                    ) from None
                self._rebuild()

    def _init_index(self) -> None:
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                    if tables:
                        raise _Stale
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {INDEX_VERSION}")
                elif version != INDEX_VERSION:
                    raise _Stale
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def _rebuild(self) -> None:
        """Delete the index and make it again from the registry and the folder."""
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.index_path + suffix)
        self._init_index()
        try:
            lines = self._registry.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        entries: list[tuple[str, SessionInfo]] = []
        for line in lines:
            try:
                entry = json.loads(line)
                if isinstance(entry, dict) and isinstance(entry.get("forget"), str):
                    # A session forgotten after it was registered (``forget``).
                    entries = [(p, i) for p, i in entries if i.id != entry["forget"]]
                    continue
                info = msgspec.convert(entry["info"], SessionInfo)
                path = str(entry["path"])
            except (ValueError, KeyError, TypeError, msgspec.ValidationError):
                continue  # a torn or foreign line: the registry is best effort
            entries.append((path, info))
        for path, info in entries:
            self._register_row(path, info, remember=False)

    def _guarded(self, fn: Any, *args: Any) -> Any:
        """``fn(conn, *args)`` on a fresh connection; a corrupt index is rebuilt once."""
        for attempt in (0, 1):
            conn = self._connect()
            try:
                return fn(conn, *args)
            except sqlite3.DatabaseError as exc:
                if attempt == 0 and _corrupt(exc):
                    conn.close()
                    with self._lock:
                        self._rebuild()
                    continue
                if "interrupted" in str(exc):
                    raise SessionQueryError(
                        "session query cancelled", "SESSION_QUERY_INDEX_ERROR"
                    ) from None
                raise SessionQueryError(
                    f"the session index failed: {exc}", "SESSION_QUERY_INDEX_ERROR"
                ) from None
            finally:
                conn.close()
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------- registration

    def register(self, path: str | os.PathLike[str], info: SessionInfo) -> None:
        """Record that session ``info.id`` lives in the file ``path`` (anywhere). The
        file's own ``agent/session`` record, once written, wins over ``info``."""
        if not isinstance(info, SessionInfo) or not info.id:
            raise ValueError("SessionStore.register needs a SessionInfo with an id")
        with self._lock:
            self._register_row(os.path.realpath(os.fspath(path)), info, remember=True)

    def _register_row(self, path: str | None, info: SessionInfo, *, remember: bool) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT path, info_src FROM sessions WHERE sid = ?", (info.id,)
                ).fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO sessions (sid, path, title, workspace, ws_real, parent_id,"
                        " created_at, info_src, registered) VALUES (?, ?, ?, ?, ?, ?, ?, 'given', 1)",
                        (
                            info.id, path, _clean(info.title), info.workspace,
                            _real(info.workspace), info.parent_id, info.created_at,
                        ),
                    )  # fmt: skip
                else:
                    if row[0] != path:
                        _reset(conn, info.id)
                        conn.execute(
                            "UPDATE sessions SET path = ?, registered = 1 WHERE sid = ?",
                            (path, info.id),
                        )
                    if row[1] != "log":
                        conn.execute(
                            "UPDATE sessions SET title = ?, workspace = ?, ws_real = ?,"
                            " parent_id = ?, created_at = ?, registered = 1 WHERE sid = ?",
                            (
                                _clean(info.title), info.workspace, _real(info.workspace),
                                info.parent_id, info.created_at, info.id,
                            ),
                        )  # fmt: skip
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        self._guarded(run)
        if remember and path is not None:
            line = json.dumps({"path": path, "info": msgspec.to_builtins(info)})
            with contextlib.suppress(OSError), open(self._registry, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def attach(self, agent: Agent) -> None:
        """Register the session ``agent`` drives and mark it live while ``agent`` exists
        (idempotent; the session-query tools attach their caller themselves)."""
        with self._lock:
            ref = self._live.get(agent.info.id)
            if ref is not None and ref() is agent:
                return
            path = getattr(agent.scope.session, "path", None)
            if isinstance(path, str):
                self._register_row(os.path.realpath(path), agent.info, remember=True)
            else:
                self._register_row(None, agent.info, remember=False)
            self._live[agent.info.id] = weakref.ref(agent)

    def forget(self, session_id: str) -> None:
        """Drop session ``session_id`` from the index and the registry (its file is gone:
        the host removed a session that never reached the model)."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                _reset(conn, session_id)
                conn.execute("DELETE FROM files WHERE sid = ?", (session_id,))
                conn.execute("DELETE FROM sessions WHERE sid = ?", (session_id,))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        with self._lock:
            self._live.pop(session_id, None)
            self._guarded(run)
            line = json.dumps({"forget": session_id})
            with contextlib.suppress(OSError), open(self._registry, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def detach(self, agent: Agent) -> None:
        """The session ``agent`` drives is no longer live (its file stays known)."""
        with self._lock:
            ref = self._live.get(agent.info.id)
            if ref is not None and ref() in (agent, None):
                del self._live[agent.info.id]

    def _live_agent(self, sid: str) -> Agent | None:
        ref = self._live.get(sid)
        return None if ref is None else ref()

    # ------------------------------------------------------------------ listing

    def sessions(
        self, *, workspace: str | os.PathLike[str] | None = None, refresh: bool = True
    ) -> list[SessionRecord]:
        """Every known session (newest first; only those of ``workspace``, compared as
        resolved real paths, when given), after indexing what is new."""
        if refresh:
            self.refresh()
        if workspace is not None:
            wanted = _real(os.fspath(workspace))
            return [r for r in self.sessions(refresh=False) if r.workspace_real == wanted]
        rows = self._guarded(
            lambda conn: conn.execute(
                "SELECT sid, title, workspace, parent_id, created_at, path, status, ws_real"
                " FROM sessions WHERE info_src != 'pending' ORDER BY created_at DESC, sid"
            ).fetchall()
        )
        return [self._record(row) for row in rows]

    def _record(self, row: Sequence[Any]) -> SessionRecord:
        sid, title, workspace, parent, created, path, status, ws_real = row
        availability: list[str] = []
        if self._live_agent(sid) is not None:
            availability.append("live")
        if status == "persisted":
            availability.append("persisted")
        return SessionRecord(
            id=sid,
            title=title or "",
            workspace=workspace,
            parent_id=parent,
            created_at=created or "",
            path=path,
            availability=tuple(availability) or ("unavailable",),
            workspace_real=ws_real,
        )

    # ----------------------------------------------------------------- indexing

    def refresh(self, cancel: threading.Event | None = None) -> None:
        """Scan the folder for new session files and index every known session's new
        events (files that did not change are not opened)."""
        with self._lock:
            self._guarded(self._refresh, cancel)

    def _refresh(self, conn: sqlite3.Connection, cancel: threading.Event | None) -> None:
        self._scan(conn)
        rows = conn.execute("SELECT sid, path FROM sessions").fetchall()
        for sid, path in rows:
            if cancel is not None and cancel.is_set():
                raise SessionQueryError("session query cancelled", "SESSION_QUERY_INDEX_ERROR")
            if path is None:
                agent = self._live_agent(sid)
                if agent is not None:
                    self._sync_memory(conn, sid, agent)
            else:
                self._sync_file(conn, sid, path, cancel)

    def _scan(self, conn: sqlite3.Connection) -> None:
        try:
            entries = sorted(os.scandir(self.folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if not entry.name.endswith(".db") or entry.name == INDEX_NAME:
                continue
            try:
                if entry.is_symlink() or not entry.is_file():
                    continue
            except OSError:
                continue
            path = os.path.realpath(entry.path)
            sig = _sig(path)
            known = conn.execute("SELECT sig FROM files WHERE path = ?", (path,)).fetchone()
            if known is not None and known[0] == sig:
                continue
            info: SessionInfo | None = None
            with contextlib.suppress(ValueError, sqlite3.Error), _open_log(path) as log:
                row = log.execute(
                    "SELECT body FROM events WHERE type = 'agent/session' ORDER BY seq LIMIT 1"
                ).fetchone()
                event = _decode(row[0]) if row is not None else None
                if isinstance(event, dict):
                    info = _info_of(event)
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO files (path, sig, sid) VALUES (?, ?, ?)",
                    (path, sig, info.id if info else None),
                )
                if info is not None:
                    owner = conn.execute(
                        "SELECT path, status FROM sessions WHERE sid = ?", (info.id,)
                    ).fetchone()
                    if owner is None:
                        conn.execute(
                            "INSERT INTO sessions (sid, path, info_src) VALUES (?, ?, 'pending')",
                            (info.id, path),
                        )
                    elif owner[0] != path and (owner[0] is None or owner[1] == "unavailable"):
                        # The known file is gone: this one (a move, a restore) takes over.
                        _reset(conn, info.id)
                        conn.execute("UPDATE sessions SET path = ? WHERE sid = ?", (path, info.id))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _sync_file(
        self,
        conn: sqlite3.Connection,
        sid: str,
        path: str,
        cancel: threading.Event | None = None,
    ) -> None:
        sig = _sig(path)
        row = conn.execute(
            "SELECT sig, status, indexed_seq, tail_hash FROM sessions WHERE sid = ?", (sid,)
        ).fetchone()
        old_sig, status, indexed, tail_hash = row
        if sig is not None and sig == old_sig and status == "persisted":
            return
        if sig is None:
            self._set_status(conn, sid, "unavailable", None)
            return
        try:
            with _open_log(path) as log:
                if indexed >= 0:
                    tail = log.execute(
                        "SELECT body FROM events WHERE seq = ?", (indexed,)
                    ).fetchone()
                    if tail is None or _hash(tail[0]) != tail_hash:
                        conn.execute("BEGIN IMMEDIATE")
                        _reset(conn, sid)
                        conn.execute("COMMIT")
                        indexed = -1
                while True:
                    if cancel is not None and cancel.is_set():
                        # Batches already indexed are kept: the next refresh goes on.
                        raise SessionQueryError(
                            "session query cancelled", "SESSION_QUERY_INDEX_ERROR"
                        )
                    batch = log.execute(
                        "SELECT seq, type, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                        (indexed, _BATCH),
                    ).fetchall()
                    if not batch:
                        break
                    if not self._index_batch(conn, sid, batch):
                        self._set_status(conn, sid, "unavailable", sig)
                        return
                    indexed = batch[-1][0]
        except (ValueError, sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._set_status(conn, sid, "unavailable", None)
            return
        self._set_status(conn, sid, "persisted", sig)

    def _sync_memory(self, conn: sqlite3.Connection, sid: str, agent: Agent) -> None:
        (indexed,) = conn.execute(
            "SELECT indexed_seq FROM sessions WHERE sid = ?", (sid,)
        ).fetchone()
        log = agent.scope.session
        events = list(log.events) if log is not None else []
        fresh = [
            (seq, str(e.get("type")), json.dumps(e, ensure_ascii=False, separators=(",", ":")))
            for seq, e in enumerate(events)
            if seq > indexed
        ]
        for start in range(0, len(fresh), _BATCH):
            self._index_batch(conn, sid, fresh[start : start + _BATCH])
        self._set_status(conn, sid, "memory", None)

    @staticmethod
    def _set_status(conn: sqlite3.Connection, sid: str, status: str, sig: str | None) -> None:
        conn.execute("UPDATE sessions SET status = ?, sig = ? WHERE sid = ?", (status, sig, sid))

    def _index_batch(
        self, conn: sqlite3.Connection, sid: str, batch: Sequence[tuple[int, str, str]]
    ) -> bool:
        """Index ``batch`` (seq-ordered rows) in one transaction; ``False`` when the file
        now holds another session (its ``agent/session`` names another id)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT indexed_seq, last_at, state, created_at FROM sessions WHERE sid = ?",
                (sid,),
            ).fetchone()
            indexed, last_at, state_text, created = row
            state: dict[str, int] = json.loads(state_text)
            for seq, kind, body in batch:
                if seq <= indexed:
                    continue  # another process indexed it meanwhile
                event = _decode(body)
                if not isinstance(event, dict):
                    event = {"type": kind}
                    text = _clean(body[:MAX_EVENT_TEXT])
                else:
                    text = _event_text(event)
                if kind == "agent/session":
                    info = _info_of(event)
                    if "session" not in state:
                        if info is not None and info.id != sid:
                            conn.execute("ROLLBACK")
                            return False
                        state["session"] = seq
                        if info is not None:
                            created = info.created_at
                            conn.execute(
                                "UPDATE sessions SET title = ?, workspace = ?, ws_real = ?,"
                                " parent_id = ?, created_at = ?, info_src = 'log' WHERE sid = ?",
                                (
                                    _clean(info.title), info.workspace, _real(info.workspace),
                                    info.parent_id, info.created_at, sid,
                                ),
                            )  # fmt: skip
                at = _event_time(event.get("at"))
                if at is None and kind == "agent/session":
                    at = _event_time(event.get("createdAt"))
                if at is None:
                    at = last_at or _event_time(created) or ""
                last_at = at
                surface = self._surface(conn, sid, seq, kind, event, state)
                turn, step = _int(event.get("turn")), _int(event.get("step"))
                cur = conn.execute(
                    "INSERT INTO events (sid, seq, type, surface, at, turn, step)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (sid, seq, _clean(kind), surface, at, turn, step),
                )
                conn.execute(
                    "INSERT INTO events_fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, text)
                )
                self._link(conn, sid, seq, kind, event)
            last_body = batch[-1][2]
            conn.execute(
                "UPDATE sessions SET indexed_seq = ?, tail_hash = ?, last_at = ?, state = ?"
                " WHERE sid = ?",
                (batch[-1][0], _hash(last_body), last_at, json.dumps(state), sid),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return True

    @staticmethod
    def _surface(
        conn: sqlite3.Connection,
        sid: str,
        seq: int,
        kind: str,
        event: Mapping[str, Any],
        state: dict[str, int],
    ) -> str:
        if kind == "agent/message":
            message = event.get("message")
            if isinstance(message, Mapping) and message.get("role") in _MESSAGE_ROLES:
                return "current"
            return "log-only"
        if kind == "agent/session" and state.get("session") != seq:
            # A second record of the session: the first one is the session's.
            conn.execute(
                "INSERT INTO links (sid, src, kind, dst) VALUES (?, ?, 'replaces', ?)",
                (sid, state["session"], seq),
            )
            return "shadowed"
        if kind in _LAST_WINS:
            previous = state.get(kind)
            if previous is not None:
                conn.execute(
                    "UPDATE events SET surface = 'shadowed' WHERE sid = ? AND seq = ?",
                    (sid, previous),
                )
                conn.execute(
                    "INSERT INTO links (sid, src, kind, dst) VALUES (?, ?, 'replaces', ?)",
                    (sid, seq, previous),
                )
            state[kind] = seq
        return "log-only"

    @staticmethod
    def _link(
        conn: sqlite3.Connection, sid: str, seq: int, kind: str, event: Mapping[str, Any]
    ) -> None:
        links: list[tuple[str, int]] = []

        def latest(call_id: object, what: str) -> int | None:
            if not isinstance(call_id, str):
                return None
            row = conn.execute(
                "SELECT MAX(seq) FROM calls WHERE sid = ? AND call_id = ? AND kind = ? AND seq < ?",
                (sid, _clean(call_id), what, seq),
            ).fetchone()
            return _int(row[0]) if row else None

        def remember(call_id: object, what: str) -> None:
            if isinstance(call_id, str):
                conn.execute(
                    "INSERT INTO calls (sid, call_id, kind, seq) VALUES (?, ?, ?, ?)",
                    (sid, _clean(call_id), what, seq),
                )

        for field, label in (("sourceEventSeqs", "cites"), ("replacesEventSeqs", "replaces")):
            targets = event.get(field)
            if isinstance(targets, list):
                for target in targets[:1000]:
                    t = _int(target)
                    if t is not None and 0 <= t < seq:
                        links.append((label, t))
                        if label == "replaces":
                            conn.execute(
                                "UPDATE events SET surface = 'shadowed' WHERE sid = ? AND seq = ?",
                                (sid, t),
                            )
        if kind == "agent/message":
            message = event.get("message")
            if isinstance(message, Mapping):
                calls = message.get("toolCalls")
                if isinstance(calls, list):
                    for call in calls[:1000]:
                        if isinstance(call, Mapping):
                            remember(call.get("id"), "request")
                if message.get("role") == "tool":
                    target = latest(message.get("toolCallId"), "call")
                    if target is not None:
                        links.append(("answers", target))
        elif kind == "tool/call":
            remember(event.get("callId"), "call")
            target = latest(event.get("callId"), "request")
            if target is not None:
                links.append(("requested by", target))
        elif kind == "tool/code-dispatch-start":
            remember(event.get("subCallId"), "dispatch")
            target = latest(event.get("rootCallId"), "call")
            if target is not None:
                links.append(("dispatched by", target))
        elif kind == "tool/code-dispatch":
            target = latest(event.get("subCallId"), "dispatch")
            if target is not None:
                links.append(("settles", target))
        for label, target in dict.fromkeys(links):
            conn.execute(
                "INSERT INTO links (sid, src, kind, dst) VALUES (?, ?, ?, ?)",
                (sid, seq, label, target),
            )

    # ------------------------------------------------------------------ queries

    def viewer(self, agent: Agent) -> Viewer:
        """The ``Viewer`` of a calling ``agent`` (attached and indexed first)."""
        self.attach(agent)
        self.refresh()
        cut: int | None = None
        if agent.live:
            row = self._guarded(
                lambda conn: conn.execute(
                    "SELECT MIN(seq) FROM events WHERE sid = ? AND turn = ? AND step = ?",
                    (agent.info.id, agent.turn, agent.step),
                ).fetchone()
            )
            cut = _int(row[0]) if row else None
        return Viewer(agent.info.id, _real(agent.info.workspace), cut)

    def visible(self, viewer: Viewer) -> dict[str, SessionRecord]:
        """Every session ``viewer`` may see, by id."""
        return {r.id: r for r in self.sessions(refresh=False) if viewer.sees(r)}

    def session(self, viewer: Viewer, session_id: str | None) -> SessionRecord:
        """The visible session ``session_id`` (``None``: the caller's own)."""
        target = viewer.session_id if session_id is None else session_id
        found = self.visible(viewer).get(target)
        if found is None:
            raise SessionQueryError(
                f"session {json.dumps(target)} is not a session of this workspace "
                "(unknown, or it belongs to another workspace)",
                "SESSION_QUERY_SESSION_NOT_FOUND",
            )
        return found

    def known(self, session_id: str) -> SessionRecord | None:
        """Any known session by id, visible or not (for lineage labels only)."""
        rows = self._guarded(
            lambda conn: conn.execute(
                "SELECT sid, title, workspace, parent_id, created_at, path, status, ws_real"
                " FROM sessions WHERE sid = ? AND info_src != 'pending'",
                (session_id,),
            ).fetchall()
        )
        return self._record(rows[0]) if rows else None

    def search(
        self,
        viewer: Viewer,
        match: str,
        sessions: Sequence[str],
        *,
        seq_from: int | None = None,
        seq_to: int | None = None,
        time_from: str | None = None,
        time_to: str | None = None,
        types: Sequence[str] = (),
        surfaces: Sequence[str] = (),
        per_session: bool,
        limit: int,
        cancel: threading.Event | None = None,
    ) -> list[EventHit]:
        """Full-text matches of the FTS5 expression ``match`` among ``sessions``' events
        (the caller's own step left out), best first; ``per_session``: only each session's
        best. At most ``limit`` hits."""
        if not sessions:
            return []

        def run(conn: sqlite3.Connection) -> list[EventHit]:
            if cancel is not None:
                if cancel.is_set():
                    raise SessionQueryError("session query cancelled", "SESSION_QUERY_INDEX_ERROR")
                # Checked every 1000 SQLite VM steps: a cancelled call stops promptly.
                conn.set_progress_handler(lambda: 1 if cancel.is_set() else 0, 1000)
            conn.execute("CREATE TEMP TABLE wanted (sid TEXT PRIMARY KEY)")
            conn.executemany("INSERT OR IGNORE INTO wanted VALUES (?)", [(s,) for s in sessions])
            where = ["events_fts MATCH ?", "e.sid IN (SELECT sid FROM wanted)"]
            params: list[Any] = [match]
            if viewer.cut is not None:
                where.append("NOT (e.sid = ? AND e.seq >= ?)")
                params += [viewer.session_id, viewer.cut]
            for clause, value in (
                ("e.seq >= ?", seq_from),
                ("e.seq <= ?", seq_to),
                ("e.at >= ?", time_from),
                ("e.at <= ?", time_to),
            ):
                if value is not None:
                    where.append(clause)
                    params.append(value)
            for column, values in (("e.type", types), ("e.surface", surfaces)):
                if values:
                    where.append(f"{column} IN ({', '.join('?' * len(values))})")
                    params += list(values)
            base = (
                "SELECT e.rowid AS rid, e.sid AS sid, e.seq AS seq, bm25(events_fts) AS rank,"
                " CASE e.surface WHEN 'current' THEN 0 WHEN 'shadowed' THEN 1 ELSE 2 END"
                " AS prio FROM events_fts JOIN events e ON e.rowid = events_fts.rowid"
                f" WHERE {' AND '.join(where)}"
            )
            # MATERIALIZED: bm25() works only in the full-text query itself, so the
            # ranking below must not be flattened into it. Equal scores prefer a
            # conversation message, then the earlier event.
            if per_session:
                sql = (
                    f"WITH m AS MATERIALIZED ({base}), r AS (SELECT rid, rank, prio, seq,"
                    " ROW_NUMBER() OVER (PARTITION BY sid ORDER BY rank, prio, seq) AS n"
                    " FROM m) SELECT rid FROM r WHERE n = 1 ORDER BY rank, prio, seq LIMIT ?"
                )
            else:
                sql = (
                    f"WITH m AS MATERIALIZED ({base}) SELECT rid FROM m"
                    " ORDER BY rank, prio, seq LIMIT ?"
                )
            chosen = [r[0] for r in conn.execute(sql, [*params, limit]).fetchall()]
            if not chosen:
                return []
            marks = ", ".join("?" * len(chosen))
            rows = conn.execute(
                "SELECT e.rowid, e.sid, e.seq, e.type, e.surface, e.at,"
                " snippet(events_fts, 0, '', '', '…', 24)"
                " FROM events_fts JOIN events e ON e.rowid = events_fts.rowid"
                f" WHERE events_fts MATCH ? AND e.rowid IN ({marks})",
                [match, *chosen],
            ).fetchall()
            by_rid = {r[0]: r for r in rows}
            return [
                EventHit(EventRow(r[1], r[2], r[3], r[4], r[5]), r[6] or "")
                for r in (by_rid[rid] for rid in chosen if rid in by_rid)
            ]

        try:
            result: list[EventHit] = self._guarded(run)
        except SessionQueryError as exc:
            if "fts5" in exc.message or "syntax error" in exc.message:
                raise SessionQueryError(
                    f"the query could not be searched: {exc.message}",
                    "SESSION_QUERY_INVALID_QUERY",
                ) from None
            raise
        return result

    def event(self, viewer: Viewer, session_id: str, seq: int) -> EventRow:
        """Event ``seq`` of a visible session (not the caller's running step)."""
        # SQLite integers are 64-bit: a larger seq names no event (and cannot be bound).
        rows = self._events(session_id, "e.seq = ?", [seq]) if 0 <= seq < 2**63 else []
        if not rows:
            raise SessionQueryError(
                f"session {session_id} has no event seq {seq}", "SESSION_QUERY_EVENT_NOT_FOUND"
            )
        if viewer.cut is not None and session_id == viewer.session_id and seq >= viewer.cut:
            raise SessionQueryError(
                f"event seq {seq} belongs to the step performing this call "
                f"(prior events of this session end at seq {viewer.cut - 1})",
                "SESSION_QUERY_EVENT_NOT_FOUND",
            )
        return rows[0]

    def _events(
        self,
        session_id: str,
        clause: str,
        params: list[Any],
        *,
        descending: bool = False,
        limit: int = -1,
    ) -> list[EventRow]:
        order = "DESC" if descending else "ASC"
        rows = self._guarded(
            lambda conn: conn.execute(
                "SELECT e.sid, e.seq, e.type, e.surface, e.at, f.text FROM events e"
                " JOIN events_fts f ON f.rowid = e.rowid"
                f" WHERE e.sid = ? AND {clause} ORDER BY e.seq {order} LIMIT ?",
                [session_id, *params, limit],
            ).fetchall()
        )
        return [EventRow(*r) for r in rows]

    def neighbours(
        self, viewer: Viewer, session_id: str, seq: int, before: int, after: int
    ) -> tuple[list[EventRow], list[EventRow]]:
        """Up to ``before`` events preceding ``seq`` and ``after`` following it (never the
        caller's running step)."""
        end = viewer.cut if session_id == viewer.session_id and viewer.cut is not None else None
        head = (
            self._events(session_id, "e.seq < ?", [seq], descending=True, limit=before)
            if before > 0
            else []
        )
        clause, params = "e.seq > ?", [seq]
        if end is not None:
            clause, params = "e.seq > ? AND e.seq < ?", [seq, end]
        tail = self._events(session_id, clause, params, limit=after) if after > 0 else []
        return list(reversed(head)), tail

    def links(self, viewer: Viewer, session_id: str, seq: int) -> list[EventLink]:
        """Every direct relationship of event ``seq`` (see the module notes)."""
        limit = viewer.cut if session_id == viewer.session_id else None

        def run(conn: sqlite3.Connection) -> list[tuple[str, int, bool]]:
            out: list[tuple[str, int, bool]] = []
            for src, kind, dst in conn.execute(
                "SELECT src, kind, dst FROM links WHERE sid = ? AND (src = ? OR dst = ?)"
                " ORDER BY rowid",
                (session_id, seq, seq),
            ).fetchall():
                if src == seq:
                    out.append((kind, dst, kind == "replaces"))
                else:
                    out.append((_INVERSE.get(kind, kind), src, kind == "replaces"))
            return out

        found: list[tuple[str, int, bool]] = self._guarded(run)
        result: list[EventLink] = []
        for label, other, replacement in found:
            if limit is not None and other >= limit:
                continue
            rows = self._events(session_id, "e.seq = ?", [other])
            result.append(EventLink(label, other, rows[0] if rows else None, replacement))
        return result

    def full_event(self, record: SessionRecord, seq: int) -> Any:
        """Event ``seq`` as stored in its session's source (decoded JSON; a ``str`` of
        the stored text when it is too deep to decode)."""
        agent = self._live_agent(record.id)
        if record.path is None:
            log = agent.scope.session if agent is not None else None
            events = list(log.events) if log is not None else []
            if 0 <= seq < len(events):
                return events[seq]
            raise SessionQueryError(
                f"session {record.id} is unavailable: its in-memory log is gone",
                "SESSION_QUERY_UNAVAILABLE",
            )
        try:
            with _open_log(record.path) as log_conn:
                row = log_conn.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()
        except (ValueError, sqlite3.Error) as exc:
            raise SessionQueryError(
                f"session {record.id} is unavailable: {exc}", "SESSION_QUERY_UNAVAILABLE"
            ) from None
        if row is None:
            raise SessionQueryError(
                f"session {record.id} has no event seq {seq} in its file",
                "SESSION_QUERY_EVENT_NOT_FOUND",
            )
        value = _decode(row[0])
        return row[0] if value is None else value


class _Stale(Exception):
    """The index is of another version or fails its check: rebuild it."""


def _reset(conn: sqlite3.Connection, sid: str) -> None:
    """Forget every indexed event of ``sid`` (its file was replaced or moved)."""
    conn.execute(
        "DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE sid = ?)", (sid,)
    )
    for table in ("events", "calls", "links"):
        conn.execute(f"DELETE FROM {table} WHERE sid = ?", (sid,))
    conn.execute(
        "UPDATE sessions SET indexed_seq = -1, tail_hash = NULL, last_at = NULL, state = '{}',"
        " sig = NULL, status = 'pending' WHERE sid = ?",
        (sid,),
    )


def single_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs and control/format characters become one
    space) and at most ``limit`` UTF-16 units, cut with ``…``."""
    cleaned = "".join(
        " " if unicodedata.category(ch)[0] in ("C", "Z") and ch != " " else ch
        for ch in _clean(text)
    )
    line = " ".join(cleaned.split())
    if _utf16_len(line) <= limit:
        return line
    return _utf16_head(line, limit - 1).rstrip() + "…"


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def _utf16_head(s: str, units: int) -> str:
    count = 0
    for index, ch in enumerate(s):
        count += 2 if ord(ch) > 0xFFFF else 1
        if count > units:
            return s[:index]
    return s
