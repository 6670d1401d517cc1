"""Session logs: memory and SQLite, validation, ordering, restart durability."""

from __future__ import annotations

import gc
import json
import math
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from codemode.engine._session import MemorySessionLog, SessionLog, SqliteSessionLog

LogFactory = Callable[..., MemorySessionLog | SqliteSessionLog]


@pytest.fixture(params=["memory", "sqlite"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogFactory]:
    opened: list[MemorySessionLog | SqliteSessionLog] = []

    def factory(**options: Any) -> MemorySessionLog | SqliteSessionLog:
        log: MemorySessionLog | SqliteSessionLog
        if request.param == "memory":
            log = MemorySessionLog(**options)
        else:
            log = SqliteSessionLog(tmp_path / f"session-{len(opened)}.db", **options)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()


def call_event(call_id: str, n: int = 0) -> dict[str, Any]:
    return {
        "type": "tool/call",
        "turn": 1,
        "step": 1,
        "callId": call_id,
        "name": "echo",
        "arguments": json.dumps({"value": n}),
    }


# --- basic contract ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_sequence_numbers_start_at_zero_and_events_keep_append_order(
    make_log: LogFactory,
) -> None:
    log = make_log()
    assert isinstance(log, SessionLog)
    assert log.events == []
    seqs = [await log.append(call_event(f"c{i}", i)) for i in range(3)]
    result = {"type": "tool/result", "turn": 1, "step": 1, "message": {"callSeq": seqs[0]}}
    seqs.append(await log.append(result))
    assert seqs == [0, 1, 2, 3]
    assert log.events == [call_event("c0", 0), call_event("c1", 1), call_event("c2", 2), result]


@pytest.mark.anyio
async def test_stored_events_are_detached_frozen_snapshots(make_log: LogFactory) -> None:
    log = make_log()
    event: dict[str, Any] = {"type": "tool/code-dispatch", "content": [{"type": "text"}]}
    await log.append(event)
    event["content"].append({"type": "image"})
    event["type"] = "changed"
    (stored,) = log.events
    assert stored == {"type": "tool/code-dispatch", "content": [{"type": "text"}]}
    with pytest.raises(TypeError, match="frozen"):
        stored["type"] = "x"
    with pytest.raises(TypeError, match="frozen"):
        stored["content"].append(1)
    # Each read is a new list; clearing it does not touch the log.
    log.events.clear()
    assert len(log.events) == 1


@pytest.mark.anyio
async def test_json_values_round_trip_with_their_python_types(make_log: LogFactory) -> None:
    log = make_log()
    event = {
        "type": "tool/result",
        "int": 3,
        "float": 3.0,
        "small": 5e-324,
        "big": 2**70,
        "neg": -12,
        "bools": [True, False],
        "null": None,
        "nested": {"a": [[], {}, [{"b": 0.1}]]},
    }
    await log.append(event)
    (stored,) = log.events
    assert stored == event
    assert type(stored["int"]) is int
    assert type(stored["float"]) is float
    assert stored["bools"][0] is True
    assert stored["big"] == 2**70


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "error", "message"),
    [
        ("tool/call", TypeError, "must be a dict, got str"),
        ([{"type": "x"}], TypeError, "must be a dict, got list"),
        ({"callId": "c1"}, ValueError, 'needs a "type" key'),
        ({"type": None}, TypeError, '"type" must be a string, got NoneType'),
        ({"type": 7}, TypeError, '"type" must be a string, got int'),
        ({"type": ""}, ValueError, '"type" must be a non-empty string'),
        ({"type": "x", "v": math.nan}, TypeError, r"not lossless JSON: event\.v"),
        ({"type": "x", "v": -0.0}, TypeError, r"event\.v: -0\.0"),
        ({"type": "x", "v": (1, 2)}, TypeError, r"event\.v: tuple"),
        ({"type": "x", "v": {1: "a"}}, TypeError, "key 1 is not a string"),
        ({"type": "x", "v": {"s": {1, 2}}}, TypeError, r"event\.v\.s: set"),
        ({"type": "x", "v": b"raw"}, TypeError, "bytes"),
    ],
)
@pytest.mark.anyio
async def test_invalid_events_are_refused_and_nothing_is_written(
    make_log: LogFactory, event: Any, error: type[Exception], message: str
) -> None:
    log = make_log()
    await log.append({"type": "before"})
    with pytest.raises(error, match=message):
        await log.append(event)
    assert await log.append({"type": "after"}) == 1
    assert log.events == [{"type": "before"}, {"type": "after"}]


@pytest.mark.anyio
async def test_cyclic_event_is_refused(make_log: LogFactory) -> None:
    log = make_log()
    event: dict[str, Any] = {"type": "x"}
    event["self"] = event
    with pytest.raises(TypeError, match="cycle"):
        await log.append(event)
    assert log.events == []


# --- unicode and size -------------------------------------------------------------------


@pytest.mark.anyio
async def test_unicode_round_trips(make_log: LogFactory) -> None:
    log = make_log()
    event = {
        "type": "tool/result",
        "text": "héllo — 世界 😀 \u0000 \u2028 \ufeff",
        "keys": {"ключ": "значение", "🔑": "🗝"},
        # A lone surrogate is a legal str (and JS string); it is stored as a JSON escape.
        "lone": "a\ud800b",
    }
    await log.append(event)
    assert log.events == [event]


@pytest.mark.anyio
async def test_large_and_deep_events_round_trip(make_log: LogFactory) -> None:
    log = make_log(max_inline_bytes=None)  # no retention bound: everything kept verbatim
    big = {"type": "tool/result", "text": "x😀" * 1_000_000, "list": list(range(50_000))}
    deep: Any = "leaf"
    for _ in range(200):
        deep = {"d": [deep]}
    nested = {"type": "deep", "value": deep}
    assert await log.append(big) == 0
    assert await log.append(nested) == 1
    assert log.events == [big, nested]


# --- concurrency ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_concurrent_appends_from_many_tasks_keep_order_and_count(
    make_log: LogFactory,
) -> None:
    log = make_log()
    tasks = 300
    seq_of: dict[int, int] = {}

    async def worker(n: int) -> None:
        # Stagger the tasks so appends interleave with other tasks' checkpoints.
        await anyio.sleep(0.001 * (n % 7))
        seq_of[n] = await log.append(call_event(f"c{n}", n))
        await anyio.lowlevel.checkpoint()
        seq_of[-n - 1] = await log.append({"type": "tool/result", "callSeq": seq_of[n], "n": n})

    async with anyio.create_task_group() as tg:
        for n in range(tasks):
            tg.start_soon(worker, n)

    events = log.events
    assert len(events) == 2 * tasks
    assert sorted(seq_of.values()) == list(range(2 * tasks))
    for n in range(tasks):
        # The number append returned is the event's position in the log...
        assert events[seq_of[n]]["callId"] == f"c{n}"
        assert events[seq_of[-n - 1]] == {"type": "tool/result", "callSeq": seq_of[n], "n": n}
        # ... and each task's result comes after its own call.
        assert seq_of[-n - 1] > seq_of[n]


@pytest.mark.anyio
async def test_appends_without_awaits_in_between_take_consecutive_numbers(
    make_log: LogFactory,
) -> None:
    # A task that appends call then result back to back is never interleaved: append does
    # not yield, so no other task can slip an event in between.
    log = make_log()
    pairs: list[tuple[int, int]] = []

    async def worker(n: int) -> None:
        await anyio.lowlevel.checkpoint()
        first = await log.append({"type": "a", "n": n})
        second = await log.append({"type": "b", "n": n})
        pairs.append((first, second))

    async with anyio.create_task_group() as tg:
        for n in range(100):
            tg.start_soon(worker, n)
    assert all(second == first + 1 for first, second in pairs)


def test_appends_from_many_threads_are_serialised(make_log: LogFactory) -> None:
    # Each thread drives append on its own event loop, so the appends really overlap.
    log = make_log()

    def append_from_thread(n: int) -> int:
        return anyio.run(log.append, {"type": "t", "n": n})

    with ThreadPoolExecutor(max_workers=8) as pool:
        seqs = list(pool.map(append_from_thread, range(80)))
    assert sorted(seqs) == list(range(80))
    events = log.events
    assert [events[seq]["n"] for seq in seqs] == list(range(80))


# --- close / context manager --------------------------------------------------------------


@pytest.mark.anyio
async def test_context_manager_closes_and_append_after_close_raises(
    make_log: LogFactory,
) -> None:
    log = make_log()
    with log as entered:
        assert entered is log
        await log.append({"type": "x"})
    with pytest.raises(RuntimeError, match="session log is closed"):
        await log.append({"type": "y"})
    log.close()  # idempotent


@pytest.mark.anyio
async def test_memory_log_stays_readable_after_close() -> None:
    log = MemorySessionLog()
    await log.append({"type": "x"})
    log.close()
    assert log.events == [{"type": "x"}]


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


@pytest.mark.parametrize("bounded", [True, False])
def test_unread_memory_events_are_not_containers_the_collector_scans(bounded: bool) -> None:
    # A host appending thousands of sub-call events it never reads: with the default
    # bound each is one bytes object (untracked by the cycle collector) until read; with
    # no bound the frozen events themselves are kept (nothing is encoded).
    log = MemorySessionLog() if bounded else MemorySessionLog(max_inline_bytes=None)
    event = {"type": "tool/code-dispatch", "arguments": {"i": [1, 2, {"k": "v"}]}, "n": 0}
    before = _tracked()
    for n in range(2_000):
        log.append_now(dict(event, n=n))
    grown = _tracked() - before
    if bounded:
        assert grown < 20, grown
    else:
        assert grown >= 2_000 * 3, grown
    # Read back: equal frozen events, each decoded once (the same objects on a re-read).
    first = log.events
    assert [e["n"] for e in first] == list(range(2_000))
    assert first[7] == dict(event, n=7)
    with pytest.raises(TypeError):
        first[7]["arguments"]["i"].append(3)  # type: ignore[index]
    assert all(a is b for a, b in zip(first, log.events, strict=True))
    log.append_now(dict(event, n=2_000))
    assert log.events[-1]["n"] == 2_000 and log.events[0] is first[0]


@pytest.mark.anyio
async def test_sqlite_log_refuses_reads_after_close(tmp_path: Path) -> None:
    log = SqliteSessionLog(tmp_path / "s.db")
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = log.events


# --- SQLite specifics ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_sqlite_uses_wal_and_stores_camelcase_json_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteSessionLog(path) as log:
        await log.append(call_event("call_1", 5))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = conn.execute("SELECT seq, type, body FROM events").fetchall()
    finally:
        conn.close()
    assert rows == [
        (
            0,
            "tool/call",
            '{"type":"tool/call","turn":1,"step":1,"callId":"call_1",'
            '"name":"echo","arguments":"{\\"value\\": 5}"}',
        )
    ]


@pytest.mark.anyio
async def test_sqlite_reopen_reads_back_and_continues_the_sequence(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteSessionLog(path) as first:
        assert await first.append({"type": "a"}) == 0
        assert await first.append({"type": "b", "x": "é"}) == 1
        before = first.events
    with SqliteSessionLog(path) as second:
        assert second.events == before
        assert await second.append({"type": "c"}) == 2
        assert [e["type"] for e in second.events] == ["a", "b", "c"]


@pytest.mark.anyio
async def test_two_logs_on_one_file_never_reuse_a_number(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteSessionLog(path) as one, SqliteSessionLog(path) as two:
        seqs = []
        for n in range(10):
            seqs.append(await (one if n % 2 else two).append({"type": "t", "n": n}))
        assert seqs == list(range(10))
        assert one.events == two.events


def test_sqlite_refuses_an_unknown_format_version(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(ValueError, match="unsupported session log format version 99"):
        SqliteSessionLog(path)


def test_sqlite_rejects_a_bad_synchronous_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteSessionLog(tmp_path / "s.db", synchronous="OFF")  # type: ignore[arg-type]


def _run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.anyio
async def test_sqlite_survives_a_process_restart(tmp_path: Path) -> None:
    path = tmp_path / "restart.db"
    # 1. Another process writes events, then exits without closing the log.
    _run_python(
        f"""
        import anyio
        from codemode.engine._session import SqliteSessionLog

        async def main():
            log = SqliteSessionLog({str(path)!r})
            assert await log.append({{"type": "tool/call", "callId": "c1", "text": "日本語 😀"}}) == 0
            assert await log.append({{"type": "tool/result", "seq": 0, "big": "x" * 60000}}) == 1

        anyio.run(main)
        """
    )
    # 2. This process reads them back and continues the sequence.
    with SqliteSessionLog(path) as log:
        events = log.events
        assert [e["type"] for e in events] == ["tool/call", "tool/result"]
        assert events[0]["text"] == "日本語 😀"
        assert events[1]["big"] == "x" * 60000  # within the 64 KiB inline bound
        assert await log.append({"type": "tool/code-dispatch", "isError": False}) == 2
        expected = log.events
    # 3. A third process sees exactly the same list and can append after it.
    out = _run_python(
        f"""
        import json, sys, anyio
        from codemode.engine._session import SqliteSessionLog

        async def main():
            with SqliteSessionLog({str(path)!r}) as log:
                seq = await log.append({{"type": "tool/code-dispatch-start"}})
                sys.stdout.write(json.dumps({{"seq": seq, "events": log.events}}))

        anyio.run(main)
        """
    )
    seen = json.loads(out)
    assert seen["seq"] == 3
    assert seen["events"] == [*expected, {"type": "tool/code-dispatch-start"}]


def test_read_opens_an_existing_log_read_only(tmp_path: Path) -> None:
    from codemode.engine import SqliteSessionLog as Log

    path = tmp_path / "s.db"
    with Log(path) as log:
        log.append_now({"type": "tool/call", "callId": "a"})
    assert [e["callId"] for e in Log.read(path)] == ["a"]
    missing = tmp_path / "missing.db"
    with pytest.raises(FileNotFoundError):
        Log.read(missing)
    assert not missing.exists()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(ValueError, match="not a session log"):
        Log.read(junk)


def test_a_file_that_is_not_sqlite_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("plain text\n")
    with pytest.raises(
        ValueError, match=r"notes\.txt is not a session log: file is not a database"
    ):
        SqliteSessionLog(path)
    assert path.read_text() == "plain text\n"
