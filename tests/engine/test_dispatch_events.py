"""The sub-dispatch events a memory log takes encoded (``code_mode/_events``) are the
bytes of the dicts every other log gets: the same keys, in the same order, with the same
values; what the encoded way cannot write (an event over the retention bound, a lone
surrogate) still goes the dict way."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from code_mode_support import code_rt, echo_tool, run_code

from codemode.engine import MemorySessionLog
from codemode.engine._session import _encode_bytes
from codemode.engine.code_mode._events import (
    UNENCODABLE,
    SettleEvent,
    SettleTiming,
    StartEvent,
    StartTiming,
    encode_event,
)
from codemode.engine.json import sealed, snapshot


class DictLog(MemorySessionLog):
    """A memory log the driver does not recognise as its own: it gets every event as
    a dict (the way any other log does)."""


def _stored(log: MemorySessionLog) -> list[bytes]:
    """The log's stored events as compact JSON, whatever form it kept them in."""
    events: list[Any] = log._events
    return [e if isinstance(e, bytes) else _encode_bytes(e) for e in events]


ARGS = [
    {"value": "one"},
    {"nested": {"list": [1, 2.5, None, True, "é", "\u2028"], "empty": {}}, "n": -3},
    {},
]


def test_the_structs_encode_to_the_bytes_of_the_dicts() -> None:
    for args in ARGS:
        frozen = snapshot(args)
        start = {
            "type": "tool/code-dispatch-start",
            "rootCallId": "root",
            "parentCallId": "call-1",
            "subCallId": "call-1:code:7",
            "name": "my-tool",
            "arguments": frozen,
            "timing": sealed({"queuedMs": 0.125, "startedMs": 1.5, "inFlight": 3}),
        }
        assert encode_event(
            StartEvent(
                "root", "call-1", "call-1:code:7", "my-tool", frozen, StartTiming(0.125, 1.5, 3)
            )
        ) == _encode_bytes(sealed(start))
        content = snapshot([{"type": "text", "text": "ok"}])
        for started, settled in ((2.0, 3.25), (None, None)):
            settle = {
                "type": "tool/code-dispatch",
                "rootCallId": "root",
                "parentCallId": "call-1",
                "subCallId": "call-1:code:7",
                "name": "my-tool",
                "arguments": frozen,
                "isError": False,
                "content": content,
                "timing": sealed(
                    {
                        "queuedMs": 0.125,
                        "startedMs": started,
                        "settledMs": settled,
                        "committedMs": 4.0,
                        "inFlight": 0,
                    }
                ),
            }
            event = SettleEvent(
                "root", "call-1", "call-1:code:7", "my-tool", frozen, False, content,
                SettleTiming(0.125, started, settled, 4.0, 0),
            )  # fmt: skip
            assert encode_event(event) == _encode_bytes(sealed(settle))


def test_what_utf8_cannot_hold_is_left_to_the_dict_way() -> None:
    lone = snapshot({"v": "\ud800"})
    with pytest.raises(UNENCODABLE):
        encode_event(StartEvent("r", "c", "c:code:1", "t", lone, StartTiming(0, 0, 0)))


def _program(*calls: Any) -> Any:
    async def program(tools: Any, print: Any) -> Any:
        for args in calls:
            await tools.echo(args)
        return "done"

    return program


@pytest.mark.anyio
async def test_a_memory_log_stores_the_same_events_either_way() -> None:
    calls = ({"value": "one"}, {"value": "two", "n": [1, 2]})
    logs: list[MemorySessionLog] = []
    for log in (MemorySessionLog(), DictLog()):
        rt, _ = code_rt(_program(*calls))
        rt.register(echo_tool("echo"))
        scope = rt.scope("agent", session=log)
        await run_code(rt, agent=scope, call_id="call-1", root_call_id="root")
        logs.append(log)
    fast, slow = logs
    # The driver's own log took the encoded bytes; the other got dicts.
    assert all(isinstance(e, bytes) for e in fast._events)
    fast_events, slow_events = fast.events, slow.events
    assert len(fast_events) == len(slow_events) == 4
    assert [e.get("isError") for e in fast_events] == [None, False, None, False]
    for mine, theirs in zip(fast_events, slow_events, strict=True):
        assert list(mine) == list(theirs)  # the same keys in the same order
        assert list(mine["timing"]) == list(theirs["timing"])
        assert {k: v for k, v in mine.items() if k != "timing"} == {
            k: v for k, v in theirs.items() if k != "timing"
        }
        for key, value in mine["timing"].items():
            assert type(value) is type(theirs["timing"][key])


@pytest.mark.anyio
async def test_an_event_over_the_bound_is_stored_with_its_fields_bounded() -> None:
    big = {"value": "x" * 400}
    log = MemorySessionLog(max_inline_bytes=256)
    rt, _ = code_rt(_program(big, {"value": "small"}))
    rt.register(echo_tool("echo"))
    scope = rt.scope("agent", session=log)
    await run_code(rt, agent=scope, call_id="call-1", root_call_id="root")
    events = log.events
    assert [e["type"] for e in events] == [
        "tool/code-dispatch-start",
        "tool/code-dispatch",
    ] * 2
    # The echoed value is as big: the settle event's content is bounded too.
    assert events[0]["truncatedFields"] == ["arguments"]
    assert events[1]["truncatedFields"] == ["arguments", "content"]
    for event in events[:2]:
        marker = event["arguments"]
        assert marker["truncated"] is True
        assert marker["bytes"] == len(msgspec.json.encode(big))
    assert "truncatedFields" not in events[2] and events[2]["arguments"] == {"value": "small"}


@pytest.mark.anyio
async def test_a_lone_surrogate_argument_is_still_logged() -> None:
    log = MemorySessionLog()
    rt, _ = code_rt(_program({"value": "\udc80"}))
    rt.register(echo_tool("echo"))
    scope = rt.scope("agent", session=log)
    await run_code(rt, agent=scope, call_id="call-1", root_call_id="root")
    assert [e["arguments"] for e in log.events] == [{"value": "\udc80"}] * 2


@pytest.mark.anyio
async def test_a_closed_log_refuses_an_encoded_event() -> None:
    log = MemorySessionLog()
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append_encoded(b'{"type":"x"}')
    assert MemorySessionLog(max_inline_bytes=8).append_encoded(b'{"type":"long"}') is None


def test_what_is_known_to_be_over_the_bound_is_not_encoded_first() -> None:
    from codemode.engine.code_mode._events import too_big

    measured = snapshot({"blob": "x" * 10})
    measured._digest = (10_000_000, "0" * 64, b"{")  # as the bridge measures a big argument
    assert too_big(measured, 64 * 1024)
    assert not too_big(measured, None)  # no bound: everything is kept
    assert not too_big(snapshot({"blob": "x" * 10}), 64 * 1024)  # unknown: encode and see
    content = snapshot([{"type": "text", "text": "x" * 70_000}])
    assert too_big(content, 64 * 1024)
    assert not too_big(snapshot([{"type": "text", "text": "short"}]), 64 * 1024)


@pytest.mark.anyio
async def test_a_measured_big_argument_goes_the_dict_way_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import codemode.engine.code_mode._driver as driver

    encoded: list[Any] = []
    real = driver.encode_event

    def counting(event: Any) -> Any:
        encoded.append(event)
        return real(event)

    monkeypatch.setattr(driver, "encode_event", counting)
    big = snapshot({"value": "x" * 300})
    big._digest = (len(msgspec.json.encode(big)), "0" * 64, b"{")
    log = MemorySessionLog(max_inline_bytes=256)
    rt, _ = code_rt(_program(big))
    rt.register(echo_tool("echo"))
    await run_code(rt, agent=rt.scope("agent", session=log), call_id="c", root_call_id="r")
    assert encoded == []  # neither event was encoded only to be found too big
    assert [e["truncatedFields"] for e in log.events] == [["arguments"], ["arguments", "content"]]
