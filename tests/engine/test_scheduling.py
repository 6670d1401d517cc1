"""run_tool_calls: one model step's sibling calls (reference §2.7)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pipeline_support import BEFORE, echo_tool, error_text

from codemode.engine import AbortController, MemorySessionLog, ToolOutput, ToolRuntime, text
from codemode.engine.scheduling import ModelToolCall, parse_arguments, run_tool_calls


class Probe:
    """Counts overlapping bodies and records a timeline."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.timeline: list[str] = []

    def tool(self, name: str, *, parallel: Any = True, delay: float = 0.0, **kw: Any) -> Any:
        async def body(args: Any, _exec: Any) -> Any:
            label = args.get("label", name) if isinstance(args, dict) else name
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.timeline.append(f"start:{label}")
            try:
                wait = args.get("delay", delay) if isinstance(args, dict) else delay
                await anyio.sleep(wait)
                self.timeline.append(f"end:{label}")  # not reached when cancelled
            finally:
                self.running -= 1
            return label

        classifier = parallel if callable(parallel) else (lambda _a: parallel)
        return _open_tool(name, body, classifier, **kw)


def _open_tool(name: str, body: Any, classifier: Any, **kw: Any) -> Any:
    from codemode.engine import define_tool

    return define_tool(
        name=name,
        description=f"{name} tool",
        parameters={"label": {"type": "string"}, "delay": {"type": "number"}},
        output=kw.pop(
            "output", ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)])
        ),
        execute=body,
        is_concurrency_safe=classifier,
        **kw,
    )


def mc(call_id: str, name: str, arguments: Any = "") -> ModelToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ModelToolCall(call_id, name, raw)


def _run(rt: ToolRuntime, calls: list[ModelToolCall], **kw: Any) -> Any:
    kw.setdefault("signal", AbortController().signal)
    return run_tool_calls(rt, calls, **kw)


def _post_order(rt: ToolRuntime) -> list[str]:
    order: list[str] = []

    async def post(exec_: Any, _result: Any, next_: Any) -> Any:
        order.append(exec_.call_id)
        return await next_()

    rt.on("tools/post-execute", post)
    return order


# --- argument parsing -------------------------------------------------------------------------


def test_parse_arguments() -> None:
    assert parse_arguments("") == {}
    assert parse_arguments('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    for raw in ("{not json", "NaN", "Infinity", '{"x": -Infinity}', "{'a': 1}", " "):
        assert parse_arguments(raw) == raw
    assert parse_arguments("[1]") == [1]


@pytest.mark.anyio
async def test_model_arguments_are_parsed_per_call() -> None:
    rt = ToolRuntime()
    seen: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        seen.append(args)
        return "ok"

    rt.register(_open_tool("t", body, lambda _a: True))
    results = await _run(
        rt,
        [
            mc("a", "t", ""),
            mc("b", "t", '{"label": "x"}'),
            mc("c", "t", "{oops"),
            mc("d", "t", "NaN"),
        ],
    )
    assert seen == [{}, {"label": "x"}]
    # The raw string is kept (and never reaches the body); the error says it is not
    # JSON, where the parser stopped, and shows the text up to just past that point.
    assert [error_text(r)[:3] for r in results[2:]] == [
        (
            "arguments are not valid JSON: Expecting property name enclosed in double "
            "quotes at line 1 column 2: {oops",
            "ToolArgsError",
            "INVALID_ARGS",
        ),
        (
            "arguments are not valid JSON: NaN is not valid JSON: NaN",
            "ToolArgsError",
            "INVALID_ARGS",
        ),
    ]
    assert [r.is_error for r in results[:2]] == [False, False]


@pytest.mark.anyio
async def test_a_json_string_that_is_not_an_object_is_refused_by_the_schema() -> None:
    rt = ToolRuntime()
    rt.register(_open_tool("t", lambda _a, _e: "ok", lambda _a: True))
    # Valid JSON, but a string: the schema's own complaint, not a JSON one.
    results = await _run(rt, [mc("a", "t", '"just text"')])
    assert error_text(results[0])[:3] == (
        'invalid arguments: "arguments" must be an object',
        "ToolArgsError",
        "INVALID_ARGS",
    )


@pytest.mark.anyio
async def test_run_code_names_invalid_json_too() -> None:
    # Code mode's run_code validates its own arguments (no code runtime is needed to
    # refuse them).
    rt = ToolRuntime(mode="code")
    results = await _run(rt, [mc("a", "run_code", '{"code": "return 1" "description": "x"}')])
    message = error_text(results[0])[0]
    assert message.startswith(
        "arguments are not valid JSON: Expecting ',' delimiter at line 1 column 21: "
    ), message


# --- ordering, events -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_commits_and_events_follow_model_order_when_a_later_call_finishes_first() -> None:
    probe = Probe()
    rt = ToolRuntime()
    rt.register(probe.tool("par"))
    order = _post_order(rt)
    log = MemorySessionLog()
    agent = rt.scope("agent", session=log)
    calls = [
        mc("slow", "par", {"label": "slow", "delay": 0.05}),
        mc("fast", "par", {"label": "fast", "delay": 0}),
    ]
    results = await _run(rt, calls, agent=agent, turn=3, step=2)
    assert [r.value for r in results] == ["slow", "fast"]
    assert probe.timeline.index("end:fast") < probe.timeline.index("end:slow")
    assert order == ["slow", "fast"]
    assert [(e["type"], e["callId"]) for e in log.events] == [
        ("tool/call", "slow"),
        ("tool/call", "fast"),
        ("tool/result", "slow"),
        ("tool/result", "fast"),
    ]
    assert log.events[0] == {
        "type": "tool/call",
        "turn": 3,
        "step": 2,
        "callId": "slow",
        "name": "par",
        "arguments": '{"label": "slow", "delay": 0.05}',
    }
    result_event = log.events[2]
    assert result_event["turn"] == 3 and result_event["step"] == 2
    assert result_event["sourceEventSeqs"] == [0]
    assert result_event["message"] == {
        "role": "user",
        "source": {"kind": "tool", "callId": "slow"},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "slow",
                "content": [{"type": "text", "text": "slow"}],
                "isError": False,
            }
        ],
    }
    assert "error" not in result_event and "meta" not in result_event
    assert log.events[3]["sourceEventSeqs"] == [1]


@pytest.mark.anyio
async def test_result_events_carry_error_info_and_meta() -> None:
    rt = ToolRuntime()

    async def body(_args: Any, _exec: Any) -> Any:
        return "v"

    rt.register(
        _open_tool(
            "meta",
            body,
            lambda _a: False,
            output=ToolOutput(
                schema={"type": "string"},
                render=lambda _a, v: [text(v)],
                presentation_meta=lambda _a, v: {"shown": v},
            ),
        )
    )
    log = MemorySessionLog()
    agent = rt.scope("agent", session=log)
    raw = '{"label":1}'
    await _run(rt, [mc("m", "meta"), mc("u", "ghost", raw)], agent=agent)
    ok, failed = log.events[1], log.events[3]
    assert ok["meta"] == {"shown": "v"}
    assert log.events[2]["arguments"] == raw
    assert failed["error"] == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
    block = failed["message"]["content"][0]
    assert block["isError"] is True
    assert block["content"] == [{"type": "text", "text": 'Error: unknown tool "ghost"'}]


@pytest.mark.anyio
async def test_without_an_agent_no_events_are_written() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    results = await _run(rt, [mc("a", "echo", {"value": "x"})])
    assert results[0].value == "x"


def test_max_parallel_is_validated() -> None:
    rt = ToolRuntime()
    for bad in (0, -1, True, 2.0):
        with pytest.raises(
            ValueError, match=r"^run_tool_calls\(max_parallel=\.\.\.\) must be a positive integer$"
        ):
            anyio.run(lambda b=bad: _run(rt, [], max_parallel=b))  # type: ignore[misc]


# --- pool and barriers ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_rolling_pool_is_capped() -> None:
    probe = Probe()
    rt = ToolRuntime()
    rt.register(probe.tool("par", delay=0.01))
    calls = [mc(f"c{i}", "par", {"label": f"c{i}"}) for i in range(7)]
    results = await _run(rt, calls, max_parallel=3)
    assert probe.peak == 3
    assert [r.value for r in results] == [f"c{i}" for i in range(7)]
    probe2 = Probe()
    rt2 = ToolRuntime()
    rt2.register(probe2.tool("par", delay=0.005))
    await _run(rt2, [mc(f"c{i}", "par") for i in range(12)])
    assert probe2.peak == 10  # the default cap


@pytest.mark.anyio
async def test_pool_rolls_instead_of_waiting_for_the_whole_batch() -> None:
    rt = ToolRuntime()
    release = anyio.Event()

    async def body(args: Any, _exec: Any) -> Any:
        if args["label"] == "first":
            await release.wait()  # only the fourth call can release it
        if args["label"] == "fourth":
            release.set()
        return args["label"]

    rt.register(_open_tool("par", body, lambda _a: True))
    labels = ["first", "second", "third", "fourth"]
    with anyio.fail_after(2):
        results = await _run(rt, [mc(x, "par", {"label": x}) for x in labels], max_parallel=2)
    assert [r.value for r in results] == labels


@pytest.mark.anyio
async def test_exclusive_calls_are_barriers_held_through_their_commit() -> None:
    probe = Probe()
    rt = ToolRuntime()
    rt.register(probe.tool("par", delay=0.03))
    rt.register(probe.tool("ex", parallel=False, delay=0.01))

    async def slow_post(exec_: Any, _result: Any, next_: Any) -> Any:
        if exec_.name == "ex":
            probe.timeline.append("post-begin:ex")
            await anyio.sleep(0.02)
            probe.timeline.append("post-end:ex")
        return await next_()

    rt.on("tools/post-execute", slow_post)
    calls = [
        mc("p1", "par", {"label": "p1"}),
        mc("p2", "par", {"label": "p2"}),
        mc("x", "ex", {"label": "x"}),
        mc("p3", "par", {"label": "p3"}),
        mc("p4", "par", {"label": "p4"}),
    ]
    await _run(rt, calls)
    t = probe.timeline
    assert t[:2] == ["start:p1", "start:p2"]
    assert t.index("start:x") > max(t.index("end:p1"), t.index("end:p2"))
    assert t.index("start:p3") > t.index("post-end:ex")
    assert t.index("start:p4") < t.index("end:p3")  # the next pool overlaps again
    assert probe.peak == 2


@pytest.mark.anyio
async def test_prepare_is_ordered_while_bodies_overlap() -> None:
    probe = Probe()
    rt = ToolRuntime()
    rt.register(probe.tool("par"))

    async def slow_first(exec_: Any, next_: Any) -> Any:
        probe.timeline.append(f"pre-begin:{exec_.call_id}")
        if exec_.call_id == "a":
            await anyio.sleep(0.02)
        probe.timeline.append(f"pre-end:{exec_.call_id}")
        return await next_()

    rt.on("tools/pre-execute", slow_first)
    await _run(rt, [mc("a", "par", {"label": "a", "delay": 0.05}), mc("b", "par", {"label": "b"})])
    t = probe.timeline
    assert t.index("pre-begin:b") > t.index("pre-end:a")
    assert t.index("start:b") < t.index("end:a")


@pytest.mark.anyio
async def test_calls_are_reclassified_before_each_start() -> None:
    probe = Probe()
    rt = ToolRuntime()
    safe = {"value": True}
    rt.register(probe.tool("par", parallel=lambda _a: safe["value"], delay=0.02))

    async def flip(exec_: Any, next_: Any) -> Any:
        if exec_.call_id == "a":
            safe["value"] = False  # a registry-side change before "b" starts
        return await next_()

    rt.on("tools/pre-execute", flip)
    await _run(rt, [mc("a", "par", {"label": "a"}), mc("b", "par", {"label": "b"})])
    assert probe.timeline == ["start:a", "end:a", "start:b", "end:b"]


@pytest.mark.anyio
async def test_registry_mutations_reach_calls_not_yet_started() -> None:
    rt = ToolRuntime()
    holder: dict[str, Any] = {}

    async def unregister(_args: Any, _exec: Any) -> Any:
        holder["dispose"]()
        return "removed"

    rt.register(_open_tool("remover", unregister, lambda _a: False))
    holder["dispose"] = rt.register(echo_tool())
    results = await _run(rt, [mc("a", "remover"), mc("b", "echo", {"value": "x"})])
    assert results[0].value == "removed"
    assert error_text(results[1])[0] == 'unknown tool "echo"'


# --- abort ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_abort_mid_batch_drains_started_calls_and_synthesises_the_rest() -> None:
    rt = ToolRuntime()
    controller = AbortController()
    observed: list[str] = []

    async def body(args: Any, exec_: Any) -> Any:
        if args.get("label") == "stopper":
            controller.abort("user stop")
        else:
            with anyio.fail_after(2):
                await exec_.signal.wait()
        return "done"

    rt.register(_open_tool("par", body, lambda _a: True))
    rt.on("tools/result", lambda e, _r: observed.append(e.call_id))
    log = MemorySessionLog()
    agent = rt.scope("agent", session=log)
    calls = [
        mc("w1", "par", {"label": "w1"}),
        mc("stop", "par", {"label": "stopper"}),
        mc("never1", "par", {"label": "n1"}),
        mc("never2", "par", {"label": "n2"}),
    ]
    results = await _run(rt, calls, agent=agent, signal=controller.signal, max_parallel=2)
    assert [error_text(r)[2] for r in results] == [
        "ABORTED",
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "ABORTED_BEFORE_DISPATCH",
    ]
    assert error_text(results[2]) == (*BEFORE, "Error: tool call aborted before dispatch")
    # Started calls went through the pipeline; synthetic ones did not.
    assert observed == ["w1", "stop"]
    assert [(e["type"], e["callId"]) for e in log.events] == [
        ("tool/call", "w1"),
        ("tool/call", "stop"),
        ("tool/result", "w1"),
        ("tool/result", "stop"),
        ("tool/call", "never1"),
        ("tool/result", "never1"),
        ("tool/call", "never2"),
        ("tool/result", "never2"),
    ]
    synthetic = log.events[5]
    assert synthetic["error"] == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert synthetic["sourceEventSeqs"] == [4]
    assert synthetic["message"]["content"][0]["content"] == [
        {"type": "text", "text": "Error: tool call aborted before dispatch"}
    ]
    assert log.events[4]["arguments"] == '{"label": "n1"}'


@pytest.mark.anyio
async def test_pre_aborted_step_starts_nothing() -> None:
    rt = ToolRuntime()
    ran: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        ran.append(args)
        return "x"

    rt.register(_open_tool("t", body, lambda _a: False))
    controller = AbortController()
    controller.abort()
    log = MemorySessionLog()
    results = await _run(
        rt, [mc("a", "t"), mc("b", "t")], agent=rt.scope("s", session=log), signal=controller.signal
    )
    assert ran == []
    assert [error_text(r)[:3] for r in results] == [BEFORE, BEFORE]
    assert [e["type"] for e in log.events] == ["tool/call", "tool/result"] * 2


@pytest.mark.anyio
async def test_abort_while_an_exclusive_call_runs_stops_later_starts() -> None:
    rt = ToolRuntime()
    controller = AbortController()
    ran: list[str] = []

    async def body(args: Any, _exec: Any) -> Any:
        ran.append(args["label"])
        controller.abort("stop")
        return "finished"

    rt.register(_open_tool("ex", body, lambda _a: False))
    results = await _run(
        rt, [mc("a", "ex", {"label": "a"}), mc("b", "ex", {"label": "b"})], signal=controller.signal
    )
    assert ran == ["a"]
    assert [error_text(r)[2] for r in results] == ["ABORTED", "ABORTED_BEFORE_DISPATCH"]


# --- results and failures ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_concludes_turn_and_contexts_ride_the_results() -> None:
    rt = ToolRuntime()

    async def body(_args: Any, exec_: Any) -> Any:
        exec_.defer_context({"role": "user", "content": [text("ctx")]})
        exec_.conclude_turn()
        return "final"

    rt.register(_open_tool("t", body, lambda _a: True))
    (result,) = await _run(rt, [mc("a", "t")])
    assert result.concludes_turn is True
    assert list(result.additional_contexts) == [{"role": "user", "content": [text("ctx")]}]


@pytest.mark.anyio
async def test_an_internal_failure_awaits_in_flight_bodies_and_reraises_itself() -> None:
    probe = Probe()
    rt = ToolRuntime()
    rt.register(probe.tool("par", delay=0.03))

    class FailingLog(MemorySessionLog):
        async def append(self, event: dict[str, Any]) -> int:
            if len(self.events) == 1:
                raise RuntimeError("session store unavailable")
            return await super().append(event)

    log = FailingLog()
    agent = rt.scope("agent", session=log)
    with pytest.raises(RuntimeError, match="session store unavailable"):
        await _run(
            rt, [mc("a", "par", {"label": "a"}), mc("b", "par", {"label": "b"})], agent=agent
        )
    # The first call's body was awaited to completion, not cancelled; no result was written.
    assert probe.timeline == ["start:a", "end:a"]
    assert [e["type"] for e in log.events] == ["tool/call"]
