"""Session logs keep large fields as a preview, byte size and sha256 (issue 9, item 3).

A session lives as long as its agent, so what it keeps per call must be bounded: 2,000
calls with 1 MB arguments once kept 2 GB alive in the host.
"""

from __future__ import annotations

import gc
import hashlib
import json
import tracemalloc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_support import live_signal

from codemode.engine import (
    MemorySessionLog,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine._session import SqliteSessionLog
from codemode.engine.json import snapshot
from codemode.engine.testing import InProcessRuntime

pytestmark = pytest.mark.anyio

MiB = 2**20


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def logs(kind: str, tmp_path: Path) -> Iterator[Any]:
    opened: list[Any] = []

    def make(**options: Any) -> Any:
        if kind == "memory":
            log: Any = MemorySessionLog(**options)
        else:
            log = SqliteSessionLog(tmp_path / f"s{len(opened)}.db", **options)
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


async def test_a_large_field_becomes_a_preview_with_size_and_digest(logs: Any) -> None:
    log = logs()
    arguments = {"path": "a.txt", "content": "é" * 100_000}
    content = [{"type": "text", "text": "ok"}]
    event = {
        "type": "tool/code-dispatch",
        "name": "write",
        "arguments": arguments,
        "content": content,
    }
    await log.append(event)
    (stored,) = log.events
    body = compact(arguments)
    marker = stored["arguments"]
    assert marker["truncated"] is True
    assert marker["bytes"] == len(body)
    assert marker["sha256"] == hashlib.sha256(body).hexdigest()
    assert body.decode().startswith(marker["preview"]) and 0 < len(marker["preview"]) <= 1024
    assert stored["truncatedFields"] == ["arguments"]
    # Small fields stay inline and exact.
    assert stored["content"] == content and stored["name"] == "write"


async def test_every_large_top_level_field_is_bounded(logs: Any) -> None:
    log = logs(max_inline_bytes=1_000)
    event = {
        "type": "tool/result",
        "message": {"content": [{"type": "text", "text": "y" * 5_000}]},
        "arguments": {"small": 1},
        "note": "z" * 2_000,
    }
    await log.append(event)
    (stored,) = log.events
    assert stored["truncatedFields"] == ["message", "note"]
    assert stored["arguments"] == {"small": 1}
    assert stored["note"]["bytes"] == 2_002 and len(stored["note"]["preview"]) == 1_000
    assert stored["type"] == "tool/result"


async def test_fields_at_the_bound_are_kept_verbatim(logs: Any) -> None:
    log = logs()
    text_ = "x" * (64 * 1024 - 2)  # exactly 64 KiB of JSON with its quotes
    await log.append({"type": "t", "arguments": text_})
    await log.append({"type": "t", "arguments": text_ + "x"})
    kept, cut = log.events
    assert kept == {"type": "t", "arguments": text_}
    assert cut["truncatedFields"] == ["arguments"] and cut["arguments"]["bytes"] == 64 * 1024 + 1


async def test_no_bound_keeps_everything(logs: Any) -> None:
    log = logs(max_inline_bytes=None)
    event = {"type": "t", "arguments": {"s": "x" * 200_000}}
    await log.append(event)
    assert log.events == [event]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "64k"])
def test_the_bound_is_validated(bad: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_inline_bytes must be a positive integer or None"):
        MemorySessionLog(max_inline_bytes=bad)
    with pytest.raises(ValueError, match="max_inline_bytes must be a positive integer or None"):
        SqliteSessionLog(tmp_path / "s.db", max_inline_bytes=bad)


async def test_deep_large_fields_are_bounded_too(logs: Any) -> None:
    log = logs()
    value: Any = "x" * 70_000
    for _ in range(5_000):
        value = [value]
    await log.append({"type": "t", "arguments": value})
    (stored,) = log.events
    assert stored["arguments"]["bytes"] == 70_002 + 10_000
    assert stored["arguments"]["preview"].startswith("[[[[")


def _echo_tool() -> Any:
    async def echo(args: Any, ctx: Any) -> Any:
        return len(args["blob"])

    return define_tool(
        name="echo",
        description="Measure a blob.",
        parameters={"blob": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "integer"}, render=lambda args, v: [text(str(v))]),
        execute=echo,
        is_concurrency_safe=lambda args: True,
    )


async def test_two_thousand_one_megabyte_calls_retain_little(kind: str, tmp_path: Path) -> None:
    """2,000 code-mode sub-calls with 1 MB arguments each: what the session (and the rest
    of the engine) keeps afterwards stays far below 200 MiB. Measured with tracemalloc
    while the program runs, so a log that keeps the arguments fails after ~200 calls
    instead of holding gigabytes."""
    budget = 200 * MiB
    calls = 2_000 if kind == "memory" else 300  # SQLite: the same path, fewer writes
    session: Any = MemorySessionLog() if kind == "memory" else SqliteSessionLog(tmp_path / "big.db")
    over: list[int] = []

    async def program(tools: Any, print_: Any) -> Any:
        for i in range(calls):
            # A fresh 1 MB string per call (a shared one would be retained only once).
            await tools.echo({"blob": str(i).rjust(1_000_000, "x")})
            if i % 50 == 49 and tracemalloc.get_traced_memory()[0] - base > budget:
                over.append(i)
                return "over"
        return "done"

    rt = ToolRuntime(mode="code", code_runtime=InProcessRuntime(program))
    rt.register(_echo_tool())
    agent = rt.scope("agent", session=session)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = await rt.execute(
            ToolExecutionInput(
                call_id="call-1",
                name="run_code",
                arguments={"code": "(in-process program)", "description": "Send big blobs"},
                signal=live_signal(),
                agent=agent,
            )
        )
        del result
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert over == []
    assert retained < 20 * MiB, retained
    events = session.events
    assert len(events) == 2 * calls
    settled = [e for e in events if e["type"] == "tool/code-dispatch"]
    assert all(e["truncatedFields"] == ["arguments"] for e in settled)
    assert settled[0]["arguments"]["bytes"] == len(compact({"blob": "0".rjust(1_000_000, "x")}))
    session.close()


async def test_the_log_keeps_no_reference_to_an_elided_value(logs: Any) -> None:
    log = logs()
    arguments = snapshot({"blob": "x" * 100_000})
    alive = weakref.ref(arguments)
    # A sub-call's start and settle events carry the same arguments object.
    await log.append({"type": "tool/code-dispatch-start", "arguments": arguments})
    await log.append({"type": "tool/code-dispatch", "arguments": arguments})
    del arguments
    gc.collect()
    assert alive() is None
    start, settle = log.events
    assert start["arguments"] == settle["arguments"]
    assert start["arguments"]["bytes"] == 100_011
