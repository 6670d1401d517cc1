"""The session-query tools over a real SessionStore, called by real agents.

Sessions are made by ``Agent``s talking to the scripted loopback model server (the real model
client, real SQLite session files); the querying agent calls the tools the way a model
does, and the tests read what the tool returned. Where exact times matter (time filters),
a session file is written with ``SqliteSessionLog`` in the agent's own event shapes with
fixed ``at`` values instead of the wall clock.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from codemode.agent import Agent, ModelClient, ModelConfig, RetryPolicy
from codemode.agent._errors import SessionQueryError
from codemode.agent._query import CAP_TEXT, build_session_query_tools, fts_query
from codemode.agent._session import SessionInfo, new_session_info
from codemode.agent._store import MAX_EVENT_TEXT, SessionStore, Viewer
from codemode.engine import (
    AbortController,
    MemorySessionLog,
    SqliteSessionLog,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.scheduling import ModelToolCall, run_tool_calls
from codemode.tools import catalog_entry
from tests.agent.model_server import Call, ModelServer, Reply

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_retries=0, base_delay=0.001, max_delay=0.01)
NAMES = [
    "session_search",
    "session_event_search",
    "session_trace",
    "session_event_trace",
    "session_event_read",
]


class Lab:
    """A store folder, two workspaces, and a runtime with the query tools plus ``echo``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.folder = tmp_path / "sessions"
        self.store = SessionStore(self.folder)
        self.ws_a = tmp_path / "ws-a"
        self.ws_b = tmp_path / "ws-b"
        self.ws_a.mkdir()
        self.ws_b.mkdir()
        self.rt = ToolRuntime(mode="native")
        for tool in build_session_query_tools(self.store):
            self.rt.register(tool)

        async def echo(args: Any, ctx: Any) -> Any:
            return args["text"]

        self.rt.register(
            define_tool(
                name="echo",
                description="Returns its text.",
                parameters={"text": {"type": "string", "required": True}},
                output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
                execute=echo,
            )
        )
        self.count = 0

    def info(self, ws: Path, title: str, parent: SessionInfo | None = None) -> SessionInfo:
        return new_session_info(
            title=title, workspace=str(ws), parent_id=parent.id if parent else None
        )

    async def run(
        self,
        info: SessionInfo,
        prompt: str,
        steps: Sequence[Sequence[tuple[str, dict[str, Any]]]] = (),
        *,
        final: str = "ok",
        path: Path | None = None,
        register: bool = True,
        max_inline_bytes: int | None = 64 * 1024,
    ) -> list[str]:
        """Run one turn of a real agent in session ``info``; the tool results in order."""
        self.count += 1
        path = path or self.folder / f"agent-{self.count}.db"
        script = []
        for n, step in enumerate(steps):
            calls = [
                Call(f"c{n}-{k}", name, [json.dumps(args)]) for k, (name, args) in enumerate(step)
            ]
            script.append(Reply(calls=calls))
        script.append(Reply(text=[final]))
        events: list[dict[str, Any]] = []
        with (
            ModelServer(script) as server,
            SqliteSessionLog(path, max_inline_bytes=max_inline_bytes) as log,
        ):
            async with ModelClient(
                ModelConfig(server.base_url, "scripted", retry=FAST), api_key="k"
            ) as client:
                agent = Agent(
                    self.rt,
                    self.rt.scope("agent", session=log),
                    client,
                    session=info,
                    on_event=events.append,
                )
                if register:
                    self.store.register(path, info)  # what the CLI does on open
                    self.store.attach(agent)
                outcome = await agent.run_turn(prompt)
                self.store.detach(agent)
        assert outcome.reason == "done", outcome
        return [e["content"] for e in events if e["type"] == "tool-result"]

    async def ask(self, *calls: tuple[str, dict[str, Any]], ws: Path | None = None) -> list[str]:
        """One querying session in ``ws`` (A by default) making ``calls`` in one step each."""
        info = self.info(ws or self.ws_a, "querier")
        return await self.run(info, "look things up", [[c] for c in calls])


def write_session(path: Path, info: SessionInfo, events: list[dict[str, Any]]) -> None:
    """A session file in the agent's event shapes (fixed times)."""
    with SqliteSessionLog(path) as log:
        log.append_now({"type": "agent/session", **_camel(info)})
        for event in events:
            log.append_now(event)


def _camel(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": info.title,
        "workspace": info.workspace,
        "parentId": info.parent_id,
        "createdAt": info.created_at,
    }


def _message(turn: int, step: int, at: str, role: str, content: str) -> dict[str, Any]:
    return {
        "type": "agent/message",
        "turn": turn,
        "step": step,
        "at": at,
        "message": {"role": role, "content": content},
    }


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


# ------------------------------------------------------------------------ definitions


def test_definitions_come_from_the_catalog(lab: Lab) -> None:
    tools = {t.name: t for t in build_session_query_tools(lab.store)}
    assert list(tools) == NAMES
    for name, tool in tools.items():
        entry = catalog_entry(name, "@deepseek-ai/dsh-tool-session-query")
        assert tool.description == entry["description"]
        assert json.loads(json.dumps(tool.parameters)) == entry["parameters"]
    assert tools["session_search"].timeout_ms == 30_000
    for name in ("session_trace", "session_event_trace", "session_event_read"):
        safe = tools[name].is_concurrency_safe
        assert safe is not None and safe({"seq": 1}) is True
    assert tools["session_search"].is_concurrency_safe is None
    assert tools["session_event_search"].is_concurrency_safe is None
    assert tools["session_event_search"].timeout_ms is None


async def test_a_call_without_an_agent_is_refused(lab: Lab) -> None:
    scope = lab.rt.scope("plain", session=MemorySessionLog())
    [result] = await run_tool_calls(
        lab.rt,
        [ModelToolCall("x", "session_search", '{"query": "a"}')],
        agent=scope,
        signal=AbortController().signal,
    )
    assert result.is_error
    assert result.content[0]["text"] == "Error: session_search requires a calling agent session"
    assert result.error.info is not None and result.error.info.code == "SESSION_QUERY_NO_AGENT"


# ---------------------------------------------------------------------------- search


async def test_search_sees_this_workspace_only_and_not_the_calling_step(lab: Lab) -> None:
    a1 = lab.info(lab.ws_a, "Deploy the walrus")
    await lab.run(a1, "deploy the walrus service", final="The walrus is deployed.")
    a2 = lab.info(lab.ws_a, "Walrus tests")
    await lab.run(a2, "fix tests", [[("echo", {"text": "walrus test fixed"})]])
    a3 = lab.info(lab.ws_a, "Audit", parent=a1)
    await lab.run(a3, "audit the walrus logs")
    b1 = lab.info(lab.ws_b, "Secret B title")
    await lab.run(b1, "the walrus secret of workspace b")

    q = lab.info(lab.ws_a, "querier")
    first, second = await lab.run(
        q,
        "look around",
        [[("session_search", {"query": "walrus"})], [("session_search", {"query": "walrus"})]],
    )
    assert first.startswith("Session search results (3):\n\n1. Session ")
    for info in (a1, a2, a3):
        assert f"Session {info.id} — {info.title}" in first
    assert b1.id not in first and "Secret B" not in first and "workspace b" not in first
    # The querier's own step (whose call arguments say "walrus") is not a prior event...
    assert q.id not in first
    # ...but in the next step the first call is history.
    assert "Session search results (4):" in second and f"Session {q.id} — querier" in second
    block = first.split("\n\n")[1:]
    a3_block = next(b for b in block if a3.id in b).splitlines()
    assert a3_block[1:4] == [
        f"   Created: {a3.created_at}",
        f"   Parent: {a1.id}",
        "   Availability: persisted",
    ]
    assert a3_block[4].startswith("   Best match: seq ")
    assert " | agent/" in a3_block[4]
    assert a3_block[5].startswith("   Snippet: ") and "walrus" in a3_block[5]
    q_block = next(b for b in second.split("\n\n") if q.id in b)
    assert "   Availability: live, persisted" in q_block
    assert "   Parent: root" in q_block


async def test_no_match_and_the_cap(lab: Lab) -> None:
    [none] = await lab.ask(("session_search", {"query": "nothing-here-zzz"}))
    assert none == "No prior session matches found."
    # 101 sessions with the word: at most 100 hits and the cap sentence.
    for n in range(101):
        info = lab.info(lab.ws_a, f"s{n}")
        info = SessionInfo(
            info.id, info.title, info.workspace, None, f"2026-01-01T00:00:{n % 60:02d}.000Z"
        )
        write_session(
            lab.folder / f"bulk-{n}.db", info, [_message(1, 0, info.created_at, "user", "capybara")]
        )
    [capped, events] = await lab.ask(
        ("session_search", {"query": "capybara"}),
        ("session_event_search", {"query": "look"}),
    )
    assert capped.startswith("Session search results (100):")
    assert capped.endswith("\n\n" + CAP_TEXT)
    assert capped.count(". Session ") == 100
    assert events.startswith("Session ")


async def test_every_session_filter(lab: Lab) -> None:
    def made(title: str, created: str, parent: SessionInfo | None = None) -> SessionInfo:
        base = lab.info(lab.ws_a, title, parent)
        return SessionInfo(base.id, title, base.workspace, base.parent_id, created)

    root = made("root one", "2026-03-01T10:00:00.000Z")
    child = made("child", "2026-03-02T10:00:00.000Z", root)
    other = made("root two", "2026-03-03T10:00:00.000Z")
    for info in (root, child, other):
        t = info.created_at
        write_session(
            lab.folder / f"{info.title}.db",
            info,
            [
                {
                    "type": "agent/turn-start",
                    "turn": 1,
                    "at": t,
                    "prompt": "start",
                    "origin": "user",
                },
                _message(1, 0, t, "user", "otter first"),
                _message(1, 1, t.replace("T10", "T11"), "assistant", "otter second"),
                {"type": "todo/write", "todos": [{"content": "otter todo", "status": "pending"}]},
                {"type": "todo/write", "todos": [{"content": "otter todo", "status": "completed"}]},
            ],
        )

    def ids(result: str) -> set[str]:
        return {i.id for i in (root, child, other) if f"Session {i.id} " in result}

    q = "otter"
    # Every call but the first is limited to the three: the querier's own earlier steps
    # hold "otter" in their call arguments, which are history too.
    three = [root.id, child.id, other.id]
    results = await lab.ask(
        ("session_search", {"query": q, "session_ids": [root.id, child.id]}),
        ("session_search", {"query": q, "session_ids": three, "created_at_from": "2026-03-02T10:00:00Z"}),
        ("session_search", {"query": q, "session_ids": three, "created_at_to": "2026-03-02T12:00:00+02:00"}),
        ("session_search", {"query": q, "session_ids": three, "parent_session_ids": [root.id]}),
        ("session_search", {"query": q, "session_ids": three, "include_root_sessions": True}),
        ("session_search", {"query": q, "session_ids": three, "parent_session_ids": [root.id], "include_root_sessions": True}),
        ("session_search", {"query": q, "session_ids": three, "availability": ["live"]}),
        ("session_search", {"query": q, "session_ids": three, "availability": ["persisted"]}),
        ("session_search", {"query": q, "session_ids": three, "event_seq_from": 3, "event_seq_to": 3}),
        ("session_search", {"query": q, "session_ids": three, "event_time_from": "2026-03-02T10:30:00Z", "event_time_to": "2026-03-02T11:30:00Z"}),
        ("session_search", {"query": q, "session_ids": three, "event_types": ["todo/write"]}),
        ("session_search", {"query": q, "session_ids": three, "event_surfaces": ["shadowed"]}),
        ("session_search", {"query": q, "session_ids": three, "event_surfaces": ["current"], "event_types": ["agent/message"]}),
        ("session_search", {"query": q, "session_ids": three, "created_at_from": "2026-03-02T10:00:00"}),
        ("session_search", {"query": q, "session_ids": three, "event_time_from": "2026-03-02"}),
        ("session_search", {"query": q, "session_ids": three, "event_seq_from": 5, "event_seq_to": 2}),
        ("session_search", {"query": q, "session_ids": three, "created_at_from": "yesterday"}),
    )  # fmt: skip
    everyone = {root.id, child.id, other.id}
    assert ids(results[0]) == {root.id, child.id}
    assert ids(results[1]) == {child.id, other.id}
    assert ids(results[2]) == {root.id, child.id}  # 12:00+02:00 is child's 10:00Z: inclusive
    assert ids(results[3]) == {child.id}
    assert ids(results[4]) == {root.id, other.id}
    assert ids(results[5]) == everyone
    assert results[6] == "No prior session matches found."  # none is driven by an agent
    assert ids(results[7]) == everyone
    assert ids(results[8]) == everyone and results[8].count("Best match: seq 3 |") == 3
    assert (
        ids(results[9]) == {child.id}
        and "seq 3 | agent/message | current | 2026-03-02T11:00:00.000Z" in results[9]
    )
    assert results[10].count("| todo/write |") == 3
    # The first todo was replaced by the second: shadowed; only the first matches.
    assert results[11].count("Best match: seq 4 | todo/write | shadowed |") == 3
    assert results[12].count("| agent/message | current |") == 3
    assert results[13] == (
        "Error: created_at_from must name its timezone (Z or an offset such as +02:00): "
        '"2026-03-02T10:00:00" (e.g. 2026-12-02T07:00:00Z or 2026-12-02T09:00:00+02:00)'
    )
    assert results[14].startswith("Error: event_time_from must name its timezone")
    assert results[15] == "Error: event_seq_from must not be after event_seq_to"
    assert results[16].startswith('Error: created_at_from is not an ISO 8601 time: "yesterday"')


async def test_hostile_queries_are_literal(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "zoo")
    write_session(
        lab.folder / "zoo.db",
        info,
        [
            _message(1, 0, "2026-01-01T00:00:00Z", "user", "walrus and penguin"),
            _message(1, 1, "2026-01-01T00:00:01Z", "assistant", "walruses everywhere"),
            _message(1, 2, "2026-01-01T00:00:02Z", "assistant", 'text: "NEAR" is a word here'),
        ],
    )
    queries = [
        "walrus OR zebra",  # OR is a word: nothing has "or zebra"
        "NEAR(walrus zebra)",
        "text:walrus",
        '"walrus',
        "walrus*",
        "^walrus",
        "-walrus",
        "{text}: walrus",
        "walrus AND",
        ")(",
        "wal\x00rus",
        'near"',
        "walrus penguin",
    ]
    only = [info.id]  # earlier steps of the querier hold the queries as call arguments
    results = await lab.ask(
        *[("session_search", {"query": q, "session_ids": only}) for q in queries]
    )
    assert results[0] == "No prior session matches found."
    assert results[1] == "No prior session matches found."
    assert results[2] == "No prior session matches found."
    assert "Snippet: walrus and penguin" in results[3]  # the quote is dropped as text
    assert "seq 1 |" in results[4]  # the literal word, not a prefix: not "walruses"
    assert "seq 1 |" in results[5] and "seq 1 |" in results[6]
    assert results[7] == "No prior session matches found."  # "text" does not occur with it
    assert "Snippet: walrus and penguin" in results[8]  # "and" is a word that occurs
    assert results[9].startswith("Error: query must contain a word with a letter or digit")
    assert results[10] == "No prior session matches found."  # NUL splits: "wal" "rus"
    assert "seq 3 |" in results[11]
    assert "seq 1 |" in results[12]
    assert fts_query('a "b" c:d') == '"a" """b""" "c:d"'
    [surrogate, big_seq, big_read] = await lab.ask(
        ("session_search", {"query": "\ud800 walrus", "event_types": ["\udfff"]}),
        ("session_search", {"query": "walrus", "session_ids": only, "event_seq_to": 10**30}),
        ("session_event_read", {"session_id": info.id, "seq": 10**30}),
    )
    assert surrogate == "No prior session matches found."
    assert "Session search results (1):" in big_seq
    assert big_read == f"Error: session {info.id} has no event seq {10**30}"
    [blank, long_q, many] = await lab.ask(
        ("session_search", {"query": "   "}),
        ("session_search", {"query": "x" * 1001}),
        ("session_search", {"query": " ".join(["w"] * 33)}),
    )
    assert blank == "Error: query must be a non-empty string"
    assert long_q == "Error: query must be at most 1000 characters (got 1001)"
    assert many == "Error: query must have at most 32 words (got 33)"


async def test_huge_events_give_bounded_single_line_snippets(lab: Lab) -> None:
    blob = (
        ("filler line\n" * 10_000)
        + "needle\tin\x1b[31m the\u2028hay "
        + ("x" * 100_000)
        + " tailword"
    )
    assert len(blob) > MAX_EVENT_TEXT
    info = lab.info(lab.ws_a, "huge")
    await lab.run(info, blob, max_inline_bytes=None)
    [found, events, tail, read] = await lab.ask(
        ("session_search", {"query": "needle"}),
        ("session_event_search", {"query": "filler", "session_id": info.id}),
        ("session_event_search", {"query": "tailword", "session_id": info.id}),
        ("session_event_read", {"session_id": info.id, "seq": 1}),
    )
    snippet = next(line for line in found.splitlines() if line.startswith("   Snippet: "))
    assert "needle in [31m the hay" in snippet
    assert len(snippet) <= len("   Snippet: ") + 240
    assert "\x1b" not in snippet and "\u2028" not in snippet and "\t" not in snippet
    assert all(len(line) <= 260 for line in events.splitlines())
    # Past MAX_EVENT_TEXT the text is not searchable, but the event reads in full.
    assert tail.endswith("No prior event matches found.")
    assert "tailword" in read and len(read) > len(blob)


# --------------------------------------------------------------------- availability


async def test_missing_and_corrupt_files_and_a_corrupt_index(lab: Lab) -> None:
    elsewhere = lab.tmp / "elsewhere"
    elsewhere.mkdir()
    gone = lab.info(lab.ws_a, "gone")
    await lab.run(gone, "the quokka was here", path=elsewhere / "gone.db")
    kept = lab.info(lab.ws_a, "kept")
    await lab.run(kept, "a quokka stays", path=elsewhere / "kept.db")
    (lab.folder / "junk.db").write_bytes(b"not sqlite at all" * 100)
    [before] = await lab.ask(("session_search", {"query": "quokka"}))
    assert "Session search results (2):" in before
    (elsewhere / "gone.db").unlink()
    [after, read, events] = await lab.ask(
        ("session_search", {"query": "quokka"}),
        ("session_event_read", {"session_id": gone.id, "seq": 1}),
        ("session_event_search", {"session_id": gone.id, "query": "quokka"}),
    )
    gone_block = next(b for b in after.split("\n\n") if gone.id in b)
    assert "   Availability: unavailable" in gone_block  # indexed text is still searchable
    assert read.startswith(f"Error: session {gone.id} is unavailable")
    assert "seq 1 | agent/turn-start" in events
    listed = {r.id: r.availability for r in lab.store.sessions()}
    assert listed[gone.id] == ("unavailable",) and listed[kept.id] == ("persisted",)
    # A session file overwritten with garbage is unavailable too.
    (elsewhere / "kept.db").write_bytes(b"garbage" * 1000)
    for suffix in ("-wal", "-shm"):
        (elsewhere / f"kept.db{suffix}").unlink(missing_ok=True)
    assert {r.id: r.availability for r in lab.store.sessions()}[kept.id] == ("unavailable",)
    # A corrupt index is rebuilt; registrations come back from the registry.
    lab.store = None  # type: ignore[assignment]
    for suffix in ("-wal", "-shm"):
        (lab.folder / f"index.db{suffix}").unlink(missing_ok=True)
    (lab.folder / "index.db").write_bytes(b"\x00garbage" * 4096)
    store = SessionStore(lab.folder)
    ids = {r.id for r in store.sessions()}
    assert {gone.id, kept.id} <= ids
    # An index of another version is rebuilt too.
    conn = sqlite3.connect(lab.folder / "index.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    assert {gone.id, kept.id} <= {r.id for r in SessionStore(lab.folder).sessions()}


async def test_incremental_indexing_and_replaced_files(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "grow")
    path = lab.folder / "grow.db"
    await lab.run(info, "first heron", path=path)
    [one] = await lab.ask(("session_search", {"query": "heron"}))
    assert "(1):" in one

    def indexed() -> list[tuple[int, str]]:
        conn = sqlite3.connect(lab.folder / "index.db")
        try:
            return conn.execute(
                "SELECT seq, type FROM events WHERE sid = ? ORDER BY seq", (info.id,)
            ).fetchall()
        finally:
            conn.close()

    first_rows = indexed()
    assert [t for _, t in first_rows] == [e["type"] for e in SqliteSessionLog.read(path)]
    # The same session continues (a resumed agent): only the new rows are added.
    with SqliteSessionLog(path) as log:
        log.append_now(_message(2, 0, "2026-12-02T00:00:00Z", "user", "second egret"))
    [two] = await lab.ask(("session_event_search", {"session_id": info.id, "query": "egret"}))
    assert f"seq {len(first_rows)} | agent/message | current |" in two
    rows = indexed()
    assert rows[: len(first_rows)] == first_rows and len(rows) == len(first_rows) + 1
    # The file is replaced by different content for the same session: re-indexed.
    path.unlink()
    write_session(path, info, [_message(1, 0, "2026-12-02T00:00:00Z", "user", "only a stork")])
    [heron, stork] = await lab.ask(
        ("session_event_search", {"session_id": info.id, "query": "heron"}),
        ("session_event_search", {"session_id": info.id, "query": "stork"}),
    )
    assert heron.endswith("No prior event matches found.")
    assert "seq 1 | agent/message | current |" in stork
    assert len(indexed()) == 2


async def test_a_memory_session_is_live_only(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "in memory")
    events: list[dict[str, Any]] = []
    script = [
        Reply(calls=[Call("m1", "echo", [json.dumps({"text": "ibis note"})])]),
        Reply(calls=[Call("m2", "session_search", ['{"query": "ibis"}'])]),
        Reply(text=["done"]),
    ]
    with ModelServer(script) as server:
        async with ModelClient(ModelConfig(server.base_url, "m", retry=FAST), api_key="k") as c:
            agent = Agent(
                lab.rt,
                lab.rt.scope("agent", session=MemorySessionLog()),
                c,
                session=info,
                on_event=events.append,
            )
            await agent.run_turn("remember")
    result = next(
        e["content"] for e in events if e["type"] == "tool-result" and "Session" in e["content"]
    )
    assert f"Session {info.id} — in memory" in result
    assert "   Availability: live" in result.splitlines()


# ------------------------------------------------------------ single-session tools


async def test_event_search_trace_and_read(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "tools")
    await lab.run(info, "call echo", [[("echo", {"text": "the marmot ```says``` hi"})]])
    events = SqliteSessionLog.read(lab.folder / "agent-1.db")
    kinds = [e["type"] for e in events]
    call, result, answer = (
        kinds.index("tool/call"),
        kinds.index("tool/result"),
        kinds.index("agent/message", kinds.index("tool/result")),
    )
    request = call - 1
    sid = info.id
    found, trace_call, trace_result, read, read_first = await lab.ask(
        ("session_event_search", {"session_id": sid, "query": "marmot", "surfaces": ["log-only"]}),
        ("session_event_trace", {"session_id": sid, "seq": call}),
        ("session_event_trace", {"session_id": sid, "seq": result}),
        ("session_event_read", {"session_id": sid, "seq": result, "before": 2, "after": 1}),
        ("session_event_read", {"session_id": sid, "seq": 0, "before": 3}),
    )
    header = f"Session {sid} — tools"
    lines = found.splitlines()
    assert lines[:2] == [header, "Event search results (2):"]
    assert {line.split(" | ")[1] for line in lines if line[:1].isdigit()} == {
        "tool/call",
        "tool/result",
    }
    t = trace_call.splitlines()
    assert t[0] == header and t[1].startswith(f"Event: seq {call} | tool/call | log-only | ")
    assert t[2] == "Replacements: none" and t[3] == "Relationships:"
    rel = t[4:]
    assert any(
        r.startswith(f"- requested by seq {request} | agent/message | current |") for r in rel
    )
    assert any(r.startswith(f"- cited by seq {result} | tool/result | log-only |") for r in rel)
    assert any(r.startswith(f"- answered by seq {answer} | agent/message | current |") for r in rel)
    assert f"- cites seq {call} | tool/call | log-only |" in trace_result
    r = read.split("\n")
    assert r[0] == header and r[1].startswith(f"Event: seq {result} | tool/result |")
    assert r[2] == "````json"  # longer than the ``` inside the event
    end = r.index("````", 3)
    assert json.loads("\n".join(r[3:end])) == json.loads(json.dumps(events[result]))
    assert "\n".join(r[3:end]) == json.dumps(events[result], indent=2, ensure_ascii=False)
    assert r[end + 1] == "Before:"
    assert r[end + 2].startswith(f"- seq {result - 2} | ") and r[end + 3].startswith(
        f"- seq {result - 1} | tool/call |"
    )
    assert r[end + 4] == "After:" and r[end + 5].startswith(
        f"- seq {result + 1} | agent/message | current |"
    )
    assert "marmot" in r[end + 5]
    assert read_first.endswith("\nBefore: none")
    assert "After" not in read_first


async def test_the_calling_step_is_not_readable_and_bad_arguments(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "self")
    own = await lab.run(
        info,
        "inspect yourself",
        [
            [("session_event_read", {"seq": 3})],  # seq 3: this step's assistant message
            [("session_event_read", {"seq": 3})],  # next step: it is history now
            [("session_event_read", {"seq": -1})],
            [("session_event_read", {"seq": 0, "after": 51})],
            [("session_event_trace", {"seq": 9999})],
            [("session_event_search", {"query": "inspect", "session_id": "ses-nope"})],
        ],
    )
    assert own[0] == (
        "Error: event seq 3 belongs to the step performing this call "
        "(prior events of this session end at seq 2)"
    )
    assert own[1].splitlines()[1].startswith("Event: seq 3 | agent/message | current |")
    assert own[2] == "Error: seq must be a non-negative integer"
    assert own[3] == "Error: after must be between 0 and 50 (got 51)"
    assert own[4] == f"Error: session {info.id} has no event seq 9999"
    assert own[5] == (
        'Error: session "ses-nope" is not a session of this workspace '
        "(unknown, or it belongs to another workspace)"
    )


async def test_another_workspace_is_invisible(lab: Lab) -> None:
    foreign = lab.info(lab.ws_b, "Foreign secret title")
    await lab.run(foreign, "secret plans")
    results = await lab.ask(
        ("session_event_read", {"session_id": foreign.id, "seq": 0}),
        ("session_trace", {"session_id": foreign.id}),
        ("session_event_search", {"session_id": foreign.id, "query": "secret"}),
        ("session_search", {"query": "secret", "session_ids": [foreign.id]}),
    )
    expected = (
        f'Error: session "{foreign.id}" is not a session of this workspace '
        "(unknown, or it belongs to another workspace)"
    )
    assert results[:3] == [expected] * 3
    assert results[3] == "No prior session matches found."
    assert all("Foreign" not in r for r in results)
    # A workspace reached through a symlink is the same workspace.
    link = lab.tmp / "ws-a-link"
    link.symlink_to(lab.ws_a)
    mine = lab.info(lab.ws_a, "mine")
    await lab.run(mine, "a gecko")
    [via_link] = await lab.ask(("session_search", {"query": "gecko"}), ws=link)
    assert f"Session {mine.id} — mine" in via_link


async def test_lineage(lab: Lab) -> None:
    outside = lab.info(lab.ws_b, "outside parent")
    await lab.run(outside, "elsewhere")
    top = lab.info(lab.ws_a, "top", parent=outside)
    await lab.run(top, "top work")
    mid = lab.info(lab.ws_a, "mid", parent=top)
    await lab.run(mid, "mid work")
    leaf1 = lab.info(lab.ws_a, "leaf one", parent=mid)
    await lab.run(leaf1, "leaf work")
    leaf2 = lab.info(lab.ws_a, "leaf two", parent=mid)
    await lab.run(leaf2, "leaf work")
    grand = lab.info(lab.ws_a, "grandchild", parent=leaf1)
    await lab.run(grand, "deep work")
    orphan = lab.info(lab.ws_a, "orphan", parent=SessionInfo(id="ses-unknown"))
    await lab.run(orphan, "lonely work")
    trace_mid, trace_top, trace_orphan, search_top = await lab.ask(
        ("session_trace", {"session_id": mid.id}),
        ("session_trace", {"session_id": top.id}),
        ("session_trace", {"session_id": orphan.id}),
        ("session_search", {"query": "top"}),
    )

    def entry(info: SessionInfo, depth: int = 0) -> str:
        return (
            f"{'  ' * depth}- Session {info.id} — {info.title} "
            f"(Created: {info.created_at}; Availability: persisted)"
        )

    assert trace_mid.splitlines() == [
        f"Session {mid.id} — mid",
        f"   Created: {mid.created_at}",
        f"   Parent: {top.id}",
        "   Availability: persisted",
        "Ancestors:",
        entry(top),
        "- [outside workspace]",
        "Descendants:",
        entry(leaf1),
        entry(grand, 1),
        entry(leaf2),
    ]
    assert "   Parent: [outside workspace]" in trace_top
    assert "outside parent" not in trace_top and outside.id not in trace_top
    assert trace_orphan.splitlines()[-3:] == [
        "Ancestors:",
        "- Session ses-unknown — [not in the session store]",
        "Descendants: none",
    ]
    assert "   Parent: [outside workspace]" in search_top


async def test_store_listing_and_registration(lab: Lab, tmp_path: Path) -> None:
    info = lab.info(lab.ws_a, "pending")
    path = tmp_path / "not-yet.db"
    SqliteSessionLog(path).close()  # opened by the CLI, no turn yet
    lab.store.register(path, info)
    [record] = [r for r in lab.store.sessions() if r.id == info.id]
    assert record.title == "pending" and record.availability == ("persisted",)
    assert record.path == str(path.resolve())
    with pytest.raises(ValueError, match="needs a SessionInfo"):
        lab.store.register(path, SessionInfo(id=""))
    assert (lab.folder / "registry.jsonl").read_text().count(info.id) == 1


async def test_replacements_and_duplicate_records(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "states")
    t = "2026-05-01T00:00:00.000Z"
    write_session(
        lab.folder / "states.db",
        info,
        [
            _message(1, 0, t, "user", "plan the heron survey"),  # 1
            {"type": "todo/write", "todos": [{"content": "count", "status": "pending"}]},  # 2
            {"type": "todo/write", "todos": [{"content": "count", "status": "completed"}]},  # 3
            {"type": "agent/session", **_camel(SessionInfo(id=info.id, title="impostor"))},  # 4
            {"type": "agent/summary", "at": t, "text": "heron summary", "replacesEventSeqs": [1]},
            {"type": "odd/event", "sourceEventSeqs": [99, -1, "x", 3]},  # 6: bad seqs ignored
        ],
    )
    sid = info.id
    old_todo, new_todo, dup, summary, odd, title = await lab.ask(
        ("session_event_trace", {"session_id": sid, "seq": 2}),
        ("session_event_trace", {"session_id": sid, "seq": 3}),
        ("session_event_trace", {"session_id": sid, "seq": 4}),
        ("session_event_trace", {"session_id": sid, "seq": 5}),
        ("session_event_trace", {"session_id": sid, "seq": 6}),
        ("session_trace", {"session_id": sid}),
    )
    at = f"| {t}"
    assert old_todo.splitlines()[1:] == [
        f"Event: seq 2 | todo/write | shadowed {at}",
        "Replacements:",
        f"- replaced by seq 3 | todo/write | log-only {at}",
        "Relationships: none",
    ]
    assert f"- replaces seq 2 | todo/write | shadowed {at}" in new_todo
    assert dup.splitlines()[1:3] == [
        f"Event: seq 4 | agent/session | shadowed {at}",
        "Replacements:",
    ]
    assert f"- replaced by seq 0 | agent/session | log-only | {info.created_at}" in dup
    assert f"- replaces seq 1 | agent/message | shadowed {at}" in summary
    assert odd.splitlines()[2:] == [
        "Replacements: none",
        "Relationships:",
        f"- cites seq 3 | todo/write | log-only {at}",
    ]
    assert title.splitlines()[0] == f"Session {sid} — states"  # the first record wins


async def test_parallel_reads_two_stores_and_cancellation(lab: Lab) -> None:
    info = lab.info(lab.ws_a, "shared")
    await lab.run(info, "a puffin", [[("echo", {"text": "puffin echo"})]])
    # The three safe tools run side by side in one step.
    both = await lab.run(
        lab.info(lab.ws_a, "reader"),
        "read in parallel",
        [
            [
                ("session_trace", {"session_id": info.id}),
                ("session_event_trace", {"session_id": info.id, "seq": 4}),
                ("session_event_read", {"session_id": info.id, "seq": 4}),
            ]
        ],
    )
    assert [r.splitlines()[0] for r in both] == [f"Session {info.id} — shared"] * 3
    # A second store on the same folder (another process) continues the same index.
    other = SessionStore(lab.folder)
    assert {r.id for r in other.sessions()} == {r.id for r in lab.store.sessions()}
    conn = sqlite3.connect(lab.folder / "index.db")
    try:
        dupes = conn.execute(
            "SELECT count(*) FROM (SELECT sid, seq FROM events GROUP BY sid, seq HAVING count(*) > 1)"
        ).fetchone()[0]
        fts = conn.execute("SELECT count(*) FROM events_fts").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        conn.close()
    assert dupes == 0 and fts == rows
    # A copy of a session file in the folder is not a second session.
    (lab.folder / "copy.db").write_bytes((lab.folder / "agent-1.db").read_bytes())
    assert [r.path for r in other.sessions() if r.id == info.id] == [
        str((lab.folder / "agent-1.db").resolve())
    ]
    # A symlink in the folder is not followed.
    elsewhere = lab.tmp / "far.db"
    write_session(elsewhere, lab.info(lab.ws_a, "far away"), [])
    (lab.folder / "far.db").symlink_to(elsewhere)
    assert "far away" not in {r.title for r in other.sessions()}
    assert {r.title for r in other.sessions(workspace=lab.ws_b)} == set()
    assert "shared" in {r.title for r in other.sessions(workspace=lab.ws_a)}
    # A cancelled query stops with a coded error instead of running on.
    cancel = threading.Event()
    cancel.set()
    viewer = Viewer(info.id, str(lab.ws_a.resolve()))
    with pytest.raises(SessionQueryError) as caught:
        other.search(
            viewer, fts_query("puffin"), [info.id], per_session=False, limit=5, cancel=cancel
        )
    assert caught.value.code == "SESSION_QUERY_INDEX_ERROR"
    assert caught.value.message == "session query cancelled"


async def test_hostile_session_records(lab: Lab) -> None:
    ws = str(lab.ws_a)
    t = "2026-06-01T00:00:00.000Z"
    one = SessionInfo("ses-cycle-1", "one", ws, "ses-cycle-2", t)
    two = SessionInfo("ses-cycle-2", "two", ws, "ses-cycle-1", t)
    evil = SessionInfo("ses-evil\n   Availability: live", "evil\ntitle\x1b[2J", ws, None, t)
    for info in (one, two, evil):
        write_session(lab.folder / f"{len(info.title)}-{info.title[:3]}.db", info, [
            {"type": "weird\ntype", "at": t, "text": "mongoose"},
        ])  # fmt: skip
    trace, found = await lab.ask(
        ("session_trace", {"session_id": one.id}),
        ("session_search", {"query": "mongoose", "session_ids": [evil.id]}),
    )
    assert trace.splitlines()[4:] == [
        "Ancestors:",
        f"- Session ses-cycle-2 — two (Created: {t}; Availability: persisted)",
        "- Session ses-cycle-1 — [lineage cycle]",
        "Descendants:",
        f"- Session ses-cycle-2 — two (Created: {t}; Availability: persisted)",
    ]
    assert found.splitlines()[2:5] == [
        "1. Session ses-evil Availability: live — evil title [2J",
        f"   Created: {t}",
        "   Parent: root",
    ]
    assert "   Best match: seq 1 | weird type | log-only |" in found
