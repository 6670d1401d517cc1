"""Sub-dispatch events, the ``tools/code-dispatch-log`` waterfall and the spill policy's
dispatch arm (reference §3.7, §2.9 arm 2)."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from code_mode_support import code_rt, echo_tool, run_code, sleep_tool

from codemode.engine import CodeDispatchLog, Deny, MemorySessionLog, SqliteSessionLog, text
from codemode.engine.policies import LocalSpillStore, SpillPolicy
from codemode.engine.testing import ToolCallError

START_KEYS = {"type", "rootCallId", "parentCallId", "subCallId", "name", "arguments", "timing"}
SETTLE_KEYS = START_KEYS | {"isError", "content"}


def strip_timing(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "timing"}


@pytest.mark.anyio
async def test_two_sequential_awaits_log_start_and_settle_pairs() -> None:
    async def program(tools: Any, print: Any) -> Any:
        first = await tools.echo({"value": "one"})
        second = await tools.echo({"value": "two"})
        print(f"saw {first}")
        return second

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))
    scope = rt.scope("agent", session=MemorySessionLog())
    result = await run_code(rt, agent=scope, call_id="call-1", root_call_id="root")
    assert result.value == {"logs": ["saw echo:one"], "result": "echo:two"}
    assert list(result.content) == [{"type": "text", "text": "saw echo:one\necho:two"}]
    events = scope.session.events
    assert [set(e) for e in events] == [START_KEYS, SETTLE_KEYS, START_KEYS, SETTLE_KEYS]
    common = {"rootCallId": "root", "parentCallId": "call-1", "name": "echo"}
    assert [strip_timing(e) for e in events] == [
        {"type": "tool/code-dispatch-start", **common, "subCallId": "call-1:code:1",
         "arguments": {"value": "one"}},
        {"type": "tool/code-dispatch", **common, "subCallId": "call-1:code:1",
         "arguments": {"value": "one"}, "isError": False,
         "content": [{"type": "text", "text": "echo:one"}]},
        {"type": "tool/code-dispatch-start", **common, "subCallId": "call-1:code:2",
         "arguments": {"value": "two"}},
        {"type": "tool/code-dispatch", **common, "subCallId": "call-1:code:2",
         "arguments": {"value": "two"}, "isError": False,
         "content": [{"type": "text", "text": "echo:two"}]},
    ]  # fmt: skip


@pytest.mark.anyio
async def test_events_carry_timings_for_charting_fan_out() -> None:
    async def program(tools: Any, print: Any) -> Any:
        durations = [5, 40, 40, 5]
        return await asyncio.gather(
            *(tools.nap({"id": str(i), "ms": ms}) for i, ms in enumerate(durations))
        )

    rt, _ = code_rt(program, cap=3)
    rt.register(sleep_tool("nap"))
    scope = rt.scope("agent", session=MemorySessionLog())
    await run_code(rt, agent=scope)
    starts = [e["timing"] for e in scope.session.events if e["type"] == "tool/code-dispatch-start"]
    settles = [e["timing"] for e in scope.session.events if e["type"] == "tool/code-dispatch"]
    assert all(set(t) == {"queuedMs", "startedMs", "inFlight"} for t in starts)
    assert all(
        set(t) == {"queuedMs", "startedMs", "settledMs", "committedMs", "inFlight"} for t in settles
    )
    for t in settles:
        assert 0 <= t["queuedMs"] <= t["startedMs"] <= t["settledMs"] <= t["committedMs"]
    # In-flight count when each call started: a pool of 3; the 4th takes the slot the
    # first call freed while the other two are still running.
    assert [t["inFlight"] for t in starts] == [0, 1, 2, 2]
    assert [t["inFlight"] for t in settles] == [0, 1, 2, 2]
    assert starts[3]["startedMs"] >= settles[0]["settledMs"]


@pytest.mark.anyio
async def test_denied_and_failed_calls_have_exactly_one_start_and_settle() -> None:
    async def boom(args: Any, ctx: Any) -> Any:
        raise RuntimeError("kaboom")

    async def program(tools: Any, print: Any) -> Any:
        for name in ("denied", "broken", "echo"):
            try:
                await tools[name]({"value": "x"})
            except ToolCallError:
                pass

    rt, _ = code_rt(program)
    rt.register(echo_tool("denied"))
    rt.register(echo_tool("broken", body=boom))
    rt.register(echo_tool("echo"))

    async def pre(exec_: Any, next_: Any) -> Any:
        return Deny("not on my watch") if exec_.name == "denied" else await next_()

    rt.on("tools/pre-execute", pre)
    scope = rt.scope("agent", session=MemorySessionLog())
    await run_code(rt, agent=scope)
    events = scope.session.events
    assert [(e["type"][5:], e["subCallId"][-1], e.get("isError")) for e in events] == [
        ("code-dispatch-start", "1", None),
        ("code-dispatch", "1", True),
        ("code-dispatch-start", "2", None),
        ("code-dispatch", "2", True),
        ("code-dispatch-start", "3", None),
        ("code-dispatch", "3", False),
    ]
    assert events[1]["content"] == [{"type": "text", "text": "Error: not on my watch"}]
    assert events[3]["content"] == [{"type": "text", "text": "Error: kaboom"}]


@pytest.mark.anyio
async def test_no_agent_means_sub_calls_run_but_nothing_is_logged() -> None:
    seen: list[Any] = []

    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    calls: list[Any] = []
    rt.register(echo_tool("echo", calls=calls))

    async def listener(dispatch: Any, next_: Any) -> Any:
        seen.append(dispatch)
        return await next_()

    rt.on("tools/code-dispatch-log", listener)
    result = await run_code(rt)
    assert result.value["result"] == "echo:x"
    assert calls == [{"value": "x"}]
    assert seen == []
    # An agent without a session is the same: nothing to log into.
    result = await run_code(rt, agent=rt.scope("sessionless"))
    assert result.value["result"] == "echo:x" and seen == []


@pytest.mark.anyio
async def test_sqlite_session_receives_the_same_events(tmp_path: Path) -> None:
    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))
    session = SqliteSessionLog(tmp_path / "s.db")
    try:
        scope = rt.scope("agent", session=session)
        await run_code(rt, agent=scope)
        assert [e["type"] for e in session.events] == [
            "tool/code-dispatch-start",
            "tool/code-dispatch",
        ]
        assert session.events[1]["content"] == [{"type": "text", "text": "echo:x"}]
    finally:
        session.close()


# ---------------------------------------------------------- the log waterfall


@pytest.mark.anyio
async def test_waterfall_replaces_only_the_durable_copy() -> None:
    received: list[CodeDispatchLog] = []

    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "secret"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def redact(dispatch: CodeDispatchLog, next_: Any) -> Any:
        received.append(dispatch)
        content = await next_()
        assert list(content) == [{"type": "text", "text": "echo:secret"}]
        return [text("[redacted]")]

    scope = rt.scope("agent", session=MemorySessionLog())
    scope.on("tools/code-dispatch-log", redact)
    result = await run_code(rt, agent=scope, call_id="c-2")
    assert result.value["result"] == "echo:secret"
    assert scope.session.events[1]["content"] == [{"type": "text", "text": "[redacted]"}]
    (dispatch,) = received
    assert (dispatch.sub_call_id, dispatch.name, dispatch.is_error) == ("c-2:code:1", "echo", False)
    assert dispatch.agent is scope
    assert dispatch.exec.name == "run_code" and dispatch.exec.call_id == "c-2"
    assert list(dispatch.content) == [{"type": "text", "text": "echo:secret"}]


@pytest.mark.anyio
async def test_waterfall_is_scope_filtered_and_ordered() -> None:
    order: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))
    scope, other = rt.scope("agent", session=MemorySessionLog()), rt.scope("other")

    def listener(label: str) -> Any:
        async def run(dispatch: Any, next_: Any) -> Any:
            order.append(label)
            return await next_()

        return run

    rt.on("tools/code-dispatch-log", listener("global"))
    scope.on("tools/code-dispatch-log", listener("scope"))
    other.on("tools/code-dispatch-log", listener("other"))
    rt.on("tools/code-dispatch-log", listener("prepended"), prepend=True)
    await run_code(rt, agent=scope)
    assert order == ["prepended", "global", "scope"]


@pytest.mark.anyio
@pytest.mark.parametrize("failure", ["raise", "garbage", "lossy"])
async def test_a_failing_waterfall_listener_is_contained(
    failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def broken(dispatch: Any, next_: Any) -> Any:
        await next_()
        if failure == "raise":
            raise RuntimeError("listener broke")
        if failure == "garbage":
            return "not a block list"
        return [{"type": "text", "text": float("nan")}]

    rt.on("tools/code-dispatch-log", broken)
    scope = rt.scope("agent", session=MemorySessionLog())
    with caplog.at_level(logging.WARNING):
        result = await run_code(rt, agent=scope)
    assert result.value["result"] == "echo:x"
    assert scope.session.events[1]["content"] == [{"type": "text", "text": "echo:x"}]
    assert any("code-dispatch-log listener failed" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_spill_policy_dispatch_arm_with_a_local_store(tmp_path: Path) -> None:
    long_text = "".join(f"line {i:04d}\n" for i in range(200))

    async def body(args: Any, ctx: Any) -> Any:
        return long_text

    async def program(tools: Any, print: Any) -> Any:
        value = await tools.read({"value": "x"})
        return len(value)

    rt, _ = code_rt(program)
    rt.register(echo_tool("read", body=body))
    store = LocalSpillStore(tmp_path / "spill")
    dispose = SpillPolicy(store, max_inline_bytes=400).install(rt)
    scope = rt.scope("agent", session=MemorySessionLog())
    result = await run_code(rt, agent=scope, call_id="sp-1")
    # The program received the full value; the outer result is small, so not spilled.
    assert result.value == {"logs": [], "result": len(long_text)}
    assert list(result.content) == [{"type": "text", "text": str(len(long_text))}]
    (block,) = scope.session.events[1]["content"]
    preview = block["text"]
    assert len(preview.encode()) <= 400
    match = re.search(r"Full formatted result stored at: (\S+)\. ", preview)
    assert match is not None, preview
    saved = Path(match.group(1))
    assert saved.parent == tmp_path / "spill" and saved.name.endswith("read.txt")
    assert await anyio.Path(saved).read_text() == long_text
    assert preview.startswith("line 0000")
    assert preview.endswith("Use read with offset/limit, or grep this path to search within it.)")
    dispose()


@pytest.mark.anyio
async def test_a_slow_log_listener_never_delays_the_program_value() -> None:
    released = anyio.Event()
    got_value: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        got_value.append(await tools.echo({"value": "x"}))
        return got_value[0]

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def slow(dispatch: Any, next_: Any) -> Any:
        await released.wait()
        return await next_()

    rt.on("tools/code-dispatch-log", slow)
    scope = rt.scope("agent", session=MemorySessionLog())
    results: list[Any] = []

    async def execute() -> None:
        results.append(await run_code(rt, agent=scope))

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        with anyio.fail_after(2):
            while not got_value:  # noqa: ASYNC110 - polling a test double
                await anyio.sleep(0.001)
        # The value is delivered, but run_code has not returned: the settle event is
        # still pending and is drained inside the run.
        assert results == []
        assert [e["type"] for e in scope.session.events] == ["tool/code-dispatch-start"]
        released.set()
    assert results[0].value["result"] == "echo:x"
    assert [e["type"] for e in scope.session.events] == [
        "tool/code-dispatch-start",
        "tool/code-dispatch",
    ]
