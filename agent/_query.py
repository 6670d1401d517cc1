"""The session-query tools: ``session_search``, ``session_event_search``,
``session_trace``, ``session_event_trace`` and ``session_event_read``.

``build_session_query_tools(store)`` binds them to a ``SessionStore`` (see ``_store`` for
sources, availability, surfaces, event times, relationships and the literal query
rules). Every value is a ``string``, the render text itself. A tool needs a calling
``Agent`` (``agent_for(ctx.agent)``), which it attaches to the store (so its session is
known and live). Only sessions whose workspace (resolved real path) equals the caller's are
visible, plus the caller's own; the caller's running step (every event from the first one
of its turn and step on) is never a "prior" event.

Renderings (``{i}`` counts from 1; a title is one line of at most 200 chars, ``(untitled)``
when empty; ``{event}`` is ``seq {s} | {type} | {surface} | {ISO}``; snippets are one line
of at most 240 UTF-16 units, summaries 160; ``↵`` is a newline):

* ``session_search`` (``timeoutMs`` 30000; at most 100 sessions, each with its best
  match: the best BM25 score, a tie going to a ``current`` message, then to the earlier
  event; sessions ordered by that score): ``No prior session matches found.`` or ``Session search results ({n}):`` then
  per hit ``↵↵{i}. Session {id} — {title}↵   Created: {ISO}↵   Parent: {root|id|[outside
  workspace]}↵   Availability: {live, persisted|unavailable}↵   Best match: {event}↵
  Snippet: {snippet}``, and when capped ``↵↵Result cap reached. Narrow the query or add
  filters to find additional matches.``
* ``session_event_search`` (at most 100 events, best first): ``Session {id} — {title}↵``
  then ``No prior event matches found.`` or ``Event search results ({n}):`` and per hit
  ``↵↵{i}. {event}↵   Snippet: {snippet}``, plus the cap sentence as above.
* ``session_trace``: the session's header block (``Session``, ``Created``, ``Parent``,
  ``Availability`` as in a search hit, without a number), then ``Ancestors:`` (nearest
  first) and ``Descendants:`` (a tree, two spaces per level, oldest first), each a list of
  ``- Session {id} — {title} (Created: {ISO}; Availability: {..})`` lines or ``none``. A
  parent in another workspace ends the ancestors with ``- [outside workspace]``; one the
  store does not know with ``- Session {id} — [not in the session store]``. At most 500
  descendants (then ``- … {k} more descendant sessions``).
* ``session_event_trace``: ``Session {id} — {title}↵Event: {event}↵Replacements:`` then
  ``- replaces {event}`` / ``- replaced by {event}`` lines or `` none``, then
  ``Relationships:`` with ``- {label} {event}`` lines (``cites``/``cited by``,
  ``requested by``/``requests``, ``answers``/``answered by``, ``dispatched by``/
  ``dispatches``, ``settles``/``settled by``) or `` none``; an event cited but absent is
  ``- {label} seq {s} | [missing event]``.
* ``session_event_read``: ``Session {id} — {title}↵Event: {event}↵`` and the stored event
  as JSON (2-space indent) in a ``json`` fence (longer than any backtick run inside);
  then, for ``before``/``after`` when given, ``Before:``/``After:`` with ``- {event} |
  {summary}`` lines or `` none``.

Argument rules the schema cannot express: the query is non-blank, at most 1000 chars and
32 words, with at least one letter or digit; times are ISO 8601 with a zone (``Z`` or an
offset; a bare date or local time is refused); a range's lower bound is not above its upper
bound; ``seq`` is non-negative; ``before``/``after`` are 0..50; an id list has at most 500
entries. An empty list filter is no filter. ``session_ids``/``parent_session_ids`` entries
that are not visible simply match nothing; a single-session tool given an id that is not
visible fails (the same message for unknown and foreign ids, so it reveals nothing).

Codes (``SessionQueryError``): ``SESSION_QUERY_NO_AGENT`` (no calling agent session),
``SESSION_QUERY_INVALID_QUERY``, ``SESSION_QUERY_INVALID_TIME``,
``SESSION_QUERY_INVALID_ARGUMENT`` (ranges, counts, list sizes),
``SESSION_QUERY_SESSION_NOT_FOUND`` (unknown or in another workspace),
``SESSION_QUERY_EVENT_NOT_FOUND`` (no such seq, or the calling step's own),
``SESSION_QUERY_UNAVAILABLE`` (the full event needs a file that is gone or unreadable),
``SESSION_QUERY_INDEX_ERROR`` (the index failed, or the query was cancelled).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from codemode.engine import ToolDefinition, ToolOutput, text
from codemode.engine.json import dumps_pretty
from codemode.tools import define_catalog_tool

from ._errors import SessionQueryError
from ._loop import Agent, agent_for
from ._store import (
    EventRow,
    SessionRecord,
    SessionStore,
    Viewer,
    parse_time,
    single_line,
)

__all__ = ["CAP_TEXT", "MAX_HITS", "build_session_query_tools", "fts_query"]

MAX_HITS = 100
CAP_TEXT = "Result cap reached. Narrow the query or add filters to find additional matches."
SNIPPET_CHARS = 240
SUMMARY_CHARS = 160
TITLE_CHARS = 200
MAX_QUERY_CHARS = 1000
MAX_QUERY_WORDS = 32
MAX_NEIGHBOURS = 50
MAX_LIST = 500
MAX_DESCENDANTS = 500
_PACKAGE = "@deepseek-ai/dsh-tool-session-query"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT64 = 2**63 - 1
_T = TypeVar("_T")


def fts_query(query: object) -> str:
    """The FTS5 expression matching ``query`` literally: each whitespace-separated word
    quoted (``"`` doubled) so no operator, column filter, prefix or phrase syntax in it
    takes effect; words are ANDed; punctuation-only words are dropped."""
    if not isinstance(query, str) or not query.strip():
        raise SessionQueryError("query must be a non-empty string", "SESSION_QUERY_INVALID_QUERY")
    if len(query) > MAX_QUERY_CHARS:
        raise SessionQueryError(
            f"query must be at most {MAX_QUERY_CHARS} characters (got {len(query)})",
            "SESSION_QUERY_INVALID_QUERY",
        )
    # Lone surrogates (legal in JSON strings) cannot be bound to SQLite: U+FFFD.
    query = _SURROGATE.sub("\ufffd", query)
    words = [w for w in _CONTROL.sub(" ", query).split() if any(ch.isalnum() for ch in w)]
    if not words:
        raise SessionQueryError(
            "query must contain a word with a letter or digit (punctuation alone is not "
            "searchable)",
            "SESSION_QUERY_INVALID_QUERY",
        )
    if len(words) > MAX_QUERY_WORDS:
        raise SessionQueryError(
            f"query must have at most {MAX_QUERY_WORDS} words (got {len(words)})",
            "SESSION_QUERY_INVALID_QUERY",
        )
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


# ----------------------------------------------------------------------------- shared


def _caller(ctx: Any, tool: str) -> Agent:
    agent = agent_for(getattr(ctx, "agent", None))
    if agent is None:
        raise SessionQueryError(
            f"{tool} requires a calling agent session", "SESSION_QUERY_NO_AGENT"
        )
    return agent


async def _off_loop(fn: Callable[[threading.Event], _T]) -> _T:
    """``fn(cancel)`` in a worker thread (SQLite work must not stall the event loop); a
    cancelled call (the caller's abort, the 30 s timeout) sets ``cancel``, which
    interrupts the running query."""
    cancel = threading.Event()
    try:
        return await anyio.to_thread.run_sync(fn, cancel, abandon_on_cancel=True)
    except BaseException:
        cancel.set()
        raise


def _list(args: Any, name: str) -> list[str]:
    values = args.get(name) or []
    if len(values) > MAX_LIST:
        raise SessionQueryError(
            f"{name} must list at most {MAX_LIST} entries (got {len(values)})",
            "SESSION_QUERY_INVALID_ARGUMENT",
        )
    return list(dict.fromkeys(_SURROGATE.sub("\ufffd", v) for v in values))


def _range(args: Any, low: str, high: str, *, time: bool) -> tuple[Any, Any]:
    lo, hi = args.get(low), args.get(high)
    if time:
        lo = None if lo is None else parse_time(lo, low)
        hi = None if hi is None else parse_time(hi, high)
    else:  # SQLite integers are 64-bit; a bound past that range is the range's end
        lo = None if lo is None else max(-_INT64, min(_INT64, lo))
        hi = None if hi is None else max(-_INT64, min(_INT64, hi))
    if lo is not None and hi is not None and lo > hi:
        raise SessionQueryError(f"{low} must not be after {high}", "SESSION_QUERY_INVALID_ARGUMENT")
    return lo, hi


def _seq(args: Any, name: str) -> int:
    value: int = args[name]
    if value < 0:
        raise SessionQueryError(
            f"{name} must be a non-negative integer", "SESSION_QUERY_INVALID_ARGUMENT"
        )
    return value


def _count(args: Any, name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if not 0 <= value <= MAX_NEIGHBOURS:
        raise SessionQueryError(
            f"{name} must be between 0 and {MAX_NEIGHBOURS} (got {value})",
            "SESSION_QUERY_INVALID_ARGUMENT",
        )
    result: int = value
    return result


def _title(record: SessionRecord) -> str:
    return single_line(record.title, TITLE_CHARS) or "(untitled)"


def _sid(session_id: str) -> str:
    # Ids and types come from session files: one line each, whatever a file holds.
    return single_line(session_id, TITLE_CHARS)


def _header(record: SessionRecord) -> str:
    return f"Session {_sid(record.id)} — {_title(record)}"


def _event(row: EventRow) -> str:
    kind = single_line(row.type, TITLE_CHARS)
    return f"seq {row.seq} | {kind} | {row.surface} | {row.at or 'unknown'}"


def _availability(record: SessionRecord) -> str:
    return ", ".join(record.availability)


def _parent(store: SessionStore, viewer: Viewer, record: SessionRecord) -> str:
    if record.parent_id is None:
        return "root"
    parent = store.known(record.parent_id)
    if parent is not None and not viewer.sees(parent):
        return "[outside workspace]"
    return _sid(record.parent_id)


def _details(store: SessionStore, viewer: Viewer, record: SessionRecord) -> list[str]:
    return [
        f"   Created: {_created(record) or record.created_at or 'unknown'}",
        f"   Parent: {_parent(store, viewer, record)}",
        f"   Availability: {_availability(record)}",
    ]


def _created(record: SessionRecord) -> str | None:
    if not record.created_at:
        return None
    try:
        return parse_time(record.created_at, "createdAt")
    except SessionQueryError:
        return None


def _text_tool(
    name: str,
    execute: Callable[[Any, Any], Any],
    title: Callable[[Any], str],
    kind: str,
    **options: Any,
) -> ToolDefinition:
    return define_catalog_tool(
        name,
        package=_PACKAGE,
        output=ToolOutput(schema={"type": "string"}, render=lambda args, value: [text(value)]),
        execute=execute,
        present_call=lambda args: {"card": "generic", "title": title(args), "kind": kind},
        **options,
    )


def _short(value: object) -> str:
    return single_line(str(value), 80)


# ------------------------------------------------------------------------------ tools


def build_session_query_tools(store: SessionStore) -> list[ToolDefinition]:
    """The five session-query tools over ``store``."""

    async def session_search(args: Any, ctx: Any) -> str:
        agent = _caller(ctx, "session_search")
        match = fts_query(args["query"])
        wanted = set(_list(args, "session_ids"))
        parents = set(_list(args, "parent_session_ids"))
        roots = bool(args.get("include_root_sessions"))
        availability = set(_list(args, "availability"))
        created_from, created_to = _range(args, "created_at_from", "created_at_to", time=True)
        seq_from, seq_to = _range(args, "event_seq_from", "event_seq_to", time=False)
        time_from, time_to = _range(args, "event_time_from", "event_time_to", time=True)
        types = _list(args, "event_types")
        surfaces = _list(args, "event_surfaces")

        def run(cancel: threading.Event) -> str:
            viewer = store.viewer(agent)
            visible = store.visible(viewer)

            def keep(r: SessionRecord) -> bool:
                if wanted and r.id not in wanted:
                    return False
                if (parents or roots) and not (
                    (r.parent_id is None and roots) or (r.parent_id in parents)
                ):
                    return False
                if availability and not availability & set(r.availability):
                    return False
                if created_from is not None or created_to is not None:
                    created = _created(r)
                    if created is None:
                        return False
                    if created_from is not None and created < created_from:
                        return False
                    if created_to is not None and created > created_to:
                        return False
                return True

            candidates = [r.id for r in visible.values() if keep(r)]
            hits = store.search(
                viewer,
                match,
                candidates,
                seq_from=seq_from,
                seq_to=seq_to,
                time_from=time_from,
                time_to=time_to,
                types=types,
                surfaces=surfaces,
                per_session=True,
                limit=MAX_HITS + 1,
                cancel=cancel,
            )
            if not hits:
                return "No prior session matches found."
            lines = [f"Session search results ({min(len(hits), MAX_HITS)}):"]
            for i, hit in enumerate(hits[:MAX_HITS], 1):
                record = visible[hit.event.session_id]
                lines += [
                    "",
                    f"{i}. {_header(record)}",
                    *_details(store, viewer, record),
                    f"   Best match: {_event(hit.event)}",
                    f"   Snippet: {single_line(hit.snippet, SNIPPET_CHARS)}",
                ]
            if len(hits) > MAX_HITS:
                lines += ["", CAP_TEXT]
            return "\n".join(lines)

        return await _off_loop(run)

    async def session_event_search(args: Any, ctx: Any) -> str:
        agent = _caller(ctx, "session_event_search")
        match = fts_query(args["query"])
        seq_from, seq_to = _range(args, "seq_from", "seq_to", time=False)
        time_from, time_to = _range(args, "time_from", "time_to", time=True)
        types = _list(args, "event_types")
        surfaces = _list(args, "surfaces")

        def run(cancel: threading.Event) -> str:
            viewer = store.viewer(agent)
            record = store.session(viewer, args.get("session_id"))
            hits = store.search(
                viewer,
                match,
                [record.id],
                seq_from=seq_from,
                seq_to=seq_to,
                time_from=time_from,
                time_to=time_to,
                types=types,
                surfaces=surfaces,
                per_session=False,
                limit=MAX_HITS + 1,
                cancel=cancel,
            )
            lines = [_header(record)]
            if not hits:
                return "\n".join([*lines, "No prior event matches found."])
            lines.append(f"Event search results ({min(len(hits), MAX_HITS)}):")
            for i, hit in enumerate(hits[:MAX_HITS], 1):
                lines += [
                    "",
                    f"{i}. {_event(hit.event)}",
                    f"   Snippet: {single_line(hit.snippet, SNIPPET_CHARS)}",
                ]
            if len(hits) > MAX_HITS:
                lines += ["", CAP_TEXT]
            return "\n".join(lines)

        return await _off_loop(run)

    async def session_trace(args: Any, ctx: Any) -> str:
        agent = _caller(ctx, "session_trace")

        def run(cancel: threading.Event) -> str:
            viewer = store.viewer(agent)
            record = store.session(viewer, args.get("session_id"))
            visible = store.visible(viewer)

            def entry(r: SessionRecord, depth: int = 0) -> str:
                return (
                    f"{'  ' * depth}- {_header(r)} "
                    f"(Created: {_created(r) or r.created_at or 'unknown'}; "
                    f"Availability: {_availability(r)})"
                )

            ancestors: list[str] = []
            seen = {record.id}
            parent = record.parent_id
            while parent is not None:
                known = store.known(parent)
                if parent in seen:
                    ancestors.append(f"- Session {_short(parent)} — [lineage cycle]")
                    break
                if known is None:
                    ancestors.append(f"- Session {_short(parent)} — [not in the session store]")
                    break
                if not viewer.sees(known):
                    ancestors.append("- [outside workspace]")
                    break
                seen.add(parent)
                ancestors.append(entry(known))
                parent = known.parent_id
            children: dict[str, list[SessionRecord]] = {}
            for r in visible.values():
                if r.parent_id is not None:
                    children.setdefault(r.parent_id, []).append(r)
            descendants: list[str] = []
            omitted = 0
            stack: list[tuple[SessionRecord, int]] = [
                (c, 0) for c in reversed(sorted(children.get(record.id, []), key=_order))
            ]
            placed = {record.id}
            while stack:
                child, depth = stack.pop()
                if child.id in placed:
                    continue
                placed.add(child.id)
                if len(descendants) >= MAX_DESCENDANTS:
                    omitted += 1
                    continue
                descendants.append(entry(child, depth))
                kids = sorted(children.get(child.id, []), key=_order)
                stack += [(c, depth + 1) for c in reversed(kids)]
            if omitted:
                descendants.append(f"- … {omitted} more descendant sessions")
            lines = [_header(record), *_details(store, viewer, record)]
            lines += ["Ancestors:", *ancestors] if ancestors else ["Ancestors: none"]
            lines += ["Descendants:", *descendants] if descendants else ["Descendants: none"]
            return "\n".join(lines)

        return await _off_loop(run)

    async def session_event_trace(args: Any, ctx: Any) -> str:
        agent = _caller(ctx, "session_event_trace")
        seq = _seq(args, "seq")

        def run(cancel: threading.Event) -> str:
            viewer = store.viewer(agent)
            record = store.session(viewer, args.get("session_id"))
            row = store.event(viewer, record.id, seq)
            replacements: list[str] = []
            relationships: list[str] = []
            for link in store.links(viewer, record.id, seq):
                target = (
                    _event(link.event)
                    if link.event is not None
                    else f"seq {link.seq} | [missing event]"
                )
                (replacements if link.replacement else relationships).append(
                    f"- {link.label} {target}"
                )
            lines = [_header(record), f"Event: {_event(row)}"]
            lines += ["Replacements:", *replacements] if replacements else ["Replacements: none"]
            lines += (
                ["Relationships:", *relationships] if relationships else ["Relationships: none"]
            )
            return "\n".join(lines)

        return await _off_loop(run)

    async def session_event_read(args: Any, ctx: Any) -> str:
        agent = _caller(ctx, "session_event_read")
        seq = _seq(args, "seq")
        before, after = _count(args, "before"), _count(args, "after")

        def run(cancel: threading.Event) -> str:
            viewer = store.viewer(agent)
            record = store.session(viewer, args.get("session_id"))
            row = store.event(viewer, record.id, seq)
            value = store.full_event(record, seq)
            body = value if isinstance(value, str) else dumps_pretty(value, 2)
            longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
            fence = "`" * max(3, longest + 1)
            lines = [_header(record), f"Event: {_event(row)}", f"{fence}json", body, fence]
            head, tail = store.neighbours(viewer, record.id, seq, before or 0, after or 0)
            for label, count, rows in (("Before", before, head), ("After", after, tail)):
                if count is None:
                    continue
                if not rows:
                    lines.append(f"{label}: none")
                    continue
                lines.append(f"{label}:")
                lines += [
                    f"- {_event(r)} | {single_line(r.text, SUMMARY_CHARS) or '(no text)'}"
                    for r in rows
                ]
            return "\n".join(lines)

        return await _off_loop(run)

    def safe(args: Any) -> bool:
        return True

    return [
        _text_tool(
            "session_search",
            session_search,
            lambda a: f"Search sessions: {_short(a['query'])}",
            "search",
            timeout_ms=30_000,
        ),
        _text_tool(
            "session_event_search",
            session_event_search,
            lambda a: f"Search session events: {_short(a['query'])}",
            "search",
        ),
        _text_tool(
            "session_trace",
            session_trace,
            lambda a: f"Trace session {_short(a.get('session_id') or 'current')}",
            "read",
            is_concurrency_safe=safe,
        ),
        _text_tool(
            "session_event_trace",
            session_event_trace,
            lambda a: (
                f"Trace event {a['seq']} of session {_short(a.get('session_id') or 'current')}"
            ),
            "read",
            is_concurrency_safe=safe,
        ),
        _text_tool(
            "session_event_read",
            session_event_read,
            lambda a: (
                f"Read event {a['seq']} of session {_short(a.get('session_id') or 'current')}"
            ),
            "read",
            is_concurrency_safe=safe,
        ),
    ]


def _order(record: SessionRecord) -> tuple[str, str]:
    return (record.created_at, record.id)
