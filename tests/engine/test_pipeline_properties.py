"""Properties of the whole pipeline over random policy interleavings (Hypothesis)."""

from __future__ import annotations

import json
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_support import call, echo_tool
from strategies import json_values, lossy_values

from codemode.engine import (
    AbortController,
    AbortSignal,
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolRuntime,
    text,
)
from codemode.engine.scheduling import ModelToolCall, run_tool_calls

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PRE = ["allow", "deny", "ask", "ask-no-reason", "throw", "abort-then-allow", "pass"]
APPROVAL = [None, "allowed-once", "rejected", "cancelled", "unavailable", "raise"]
GUARD = [None, "deny", "raise"]
WRAPPER = ["none", "pass", "short-ok", "short-bad", "error-result", "throw", "abort-own", "expired"]
BODY = ["ok", "bad-value", "raise", "abort-caller", "defer"]
POST = ["none", "accept", "content", "value-ok", "value-bad", "block", "throw", "both", "abort"]
FINAL = ["keep", "replace", "raise"]

scenarios = st.fixed_dictionaries(
    {
        "pre": st.sampled_from(PRE),
        "approval": st.sampled_from(APPROVAL),
        "abort_in_approval": st.booleans(),
        "agent": st.booleans(),
        "global_guard": st.sampled_from(GUARD),
        "scoped_guard": st.sampled_from(GUARD),
        "wrapper": st.sampled_from(WRAPPER),
        "body": st.sampled_from(BODY),
        "post": st.sampled_from(POST),
        "finalizer": st.sampled_from(FINAL),
        "pre_aborted": st.booleans(),
        "lossy": st.booleans(),
    }
)


class Approval:
    def __init__(self, outcome: str, controller: AbortController | None) -> None:
        self.outcome = outcome
        self.controller = controller

    async def request(self, _exec: Any, _reason: Any) -> str:
        if self.controller is not None:
            self.controller.abort("during approval")
        if self.outcome == "raise":
            raise RuntimeError("approval failed")
        return self.outcome


async def _run_scenario(s: dict[str, Any]) -> dict[str, Any]:
    controller = AbortController()
    approval = None
    if s["approval"] is not None:
        approval = Approval(s["approval"], controller if s["abort_in_approval"] else None)
    rt = ToolRuntime(approval=approval)
    agent = rt.scope("agent") if s["agent"] else None
    counts: dict[str, Any] = {"body": 0, "finalize": 0, "events": []}

    async def body(args: Any, exec_: Any) -> Any:
        counts["body"] += 1
        kind = s["body"]
        if kind == "bad-value":
            return 42
        if kind == "raise":
            raise RuntimeError("body failed")
        if kind == "abort-caller":
            controller.abort("during body")
        if kind == "defer":
            exec_.defer_context({"role": "user", "content": [text("ctx")]})
        return args["value"]

    def finalize(_exec: Any, _result: Any) -> Any:
        counts["finalize"] += 1
        if s["finalizer"] == "raise":
            raise RuntimeError("finalizer failed")
        return [text("finalized")] if s["finalizer"] == "replace" else None

    rt.register(echo_tool(body=body, finalize_content=finalize))

    async def pre(_exec: Any, next_: Any) -> Any:
        kind = s["pre"]
        decisions = {"allow": Allow(), "deny": Deny("denied"), "ask": Ask("why")}
        if kind in decisions:
            return decisions[kind]
        if kind == "ask-no-reason":
            return Ask()
        if kind == "throw":
            raise RuntimeError("pre failed")
        if kind == "abort-then-allow":
            controller.abort("during pre")
        return await next_()

    rt.on("tools/pre-execute", pre)

    def guard(kind: str | None) -> Any:
        def check(_exec: Any) -> str | None:
            if kind == "raise":
                raise RuntimeError("guard failed")
            return "guard denied" if kind == "deny" else None

        return check

    rt.guard(guard(s["global_guard"]))
    if agent is not None:
        agent.guard(guard(s["scoped_guard"]))

    async def wrap(exec_: Any, next_: Any) -> Any:
        kind = s["wrapper"]
        if kind == "short-ok":
            return ToolExecutionSuccess(value="cached", content=[])
        if kind == "short-bad":
            return ToolExecutionSuccess(value=[], content=[])
        if kind == "error-result":
            return ToolExecutionFailure(error=ToolFailure("wrapped"), content=[text("w")])
        if kind == "throw":
            raise RuntimeError("wrapper failed")
        if kind == "abort-own":
            own = AbortController()
            exec_.signal = own.signal
            own.abort("wrapper abort")
        if kind == "expired":
            exec_.signal = AbortSignal.aborted_with("expired")
        return await next_()

    if s["wrapper"] != "none":
        rt.on("tools/execute", wrap)

    async def post(_exec: Any, _result: Any, next_: Any) -> Any:
        kind = s["post"]
        if kind == "abort":
            controller.abort("during post")
            return await next_()
        table = {
            "accept": Accept(),
            "content": Accept(content=[text("c")]),
            "value-ok": Accept(value="v"),
            "value-bad": Accept(value=1),
            "block": Block([text("blocked")]),
            "both": Accept(value="v", content=[]),
        }
        if kind == "throw":
            raise RuntimeError("post failed")
        return table[kind] if kind in table else await next_()

    rt.on("tools/post-execute", post)
    rt.on("tools/result", lambda e, r: counts["events"].append((e, r)))

    if s["pre_aborted"]:
        controller.abort("before")
    arguments = {"value": float("nan")} if s["lossy"] else {"value": "hi"}
    result = await rt.execute(call(arguments=arguments, agent=agent, signal=controller.signal))
    return {"result": result, **counts}


@SETTINGS
@given(scenarios)
def test_every_interleaving_yields_one_result_and_one_finalize(s: dict[str, Any]) -> None:
    out = anyio.run(_run_scenario, s)
    result = out["result"]
    assert out["finalize"] == 1
    ((observed_exec, observed_result),) = out["events"]
    assert observed_result is result
    assert observed_exec.frozen
    assert out["body"] <= 1
    json.dumps(result.to_json())  # wire-ready JSON
    if s["finalizer"] == "raise":
        # Whatever happened before, a throwing finalizer decides the final error.
        assert result.error.message == "finalizer failed"  # type: ignore[union-attr]
        assert list(result.content) == [text("Error: finalizer failed")]
        return
    if s["lossy"]:
        assert out["body"] == 0
        assert result.error.message == (  # type: ignore[union-attr]
            "tool execution arguments must be losslessly JSON-serializable"
        )
        return
    if s["pre_aborted"]:
        assert out["body"] == 0
        assert result.error.info.code == "ABORTED_BEFORE_DISPATCH"  # type: ignore[union-attr]
        return
    if isinstance(result, ToolExecutionSuccess):
        assert result.value in ("hi", "cached", "v")
        return
    info = result.error.info
    code = None if info is None else info.code
    if code == "ABORTED":
        assert out["body"] == 1
    if code == "ABORTED_BEFORE_DISPATCH":
        assert out["body"] == 0
    if s["finalizer"] == "keep" and s["post"] not in ("block", "content"):
        assert list(result.content) in (
            [text(f"Error: {result.error.message}")],
            [text("w")],  # a wrapper-authored failure keeps its content
        )


@settings(max_examples=60, deadline=None)
@given(json_values())
def test_lossless_arguments_reach_the_body_unchanged(value: Any) -> None:
    async def main() -> Any:
        rt = ToolRuntime()
        seen: list[Any] = []

        async def body(args: Any, _exec: Any) -> Any:
            seen.append(args)
            return None

        rt.register(raw_body_tool(body))
        result = await rt.execute(call("raw", arguments=value))
        return result, seen

    result, seen = anyio.run(main)
    assert not result.is_error
    assert seen == [value]


@settings(max_examples=60, deadline=None)
@given(lossy_values())
def test_lossy_arguments_never_reach_the_body(value: Any) -> None:
    async def main() -> Any:
        rt = ToolRuntime()
        ran: list[Any] = []

        async def body(args: Any, _exec: Any) -> Any:
            ran.append(args)
            return None

        rt.register(raw_body_tool(body))
        return await rt.execute(call("raw", arguments={"v": value})), ran

    result, ran = anyio.run(main)
    assert ran == []
    assert result.error.message == "tool execution arguments must be losslessly JSON-serializable"


def raw_body_tool(body: Any) -> Any:
    from pipeline_support import raw_tool

    return raw_tool(body=body)


batches = st.lists(
    st.tuples(st.booleans(), st.integers(min_value=0, max_value=3), st.booleans()),
    min_size=0,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(batches, st.integers(min_value=1, max_value=4))
def test_scheduling_keeps_model_order_and_the_cap(batch: list[Any], cap: int) -> None:
    async def main() -> Any:
        rt = ToolRuntime()
        state = {"running": 0, "peak": 0, "exclusive_overlap": False}

        async def body(args: Any, _exec: Any) -> Any:
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
            if not args["parallel"] and state["running"] > 1:
                state["exclusive_overlap"] = True
            await anyio.sleep(args["ms"] / 1000)
            if not args["parallel"] and state["running"] > 1:
                state["exclusive_overlap"] = True
            state["running"] -= 1
            if args["fail"]:
                raise RuntimeError("failed")
            return args["id"]

        from codemode.engine import ToolOutput, define_tool

        rt.register(
            define_tool(
                name="t",
                description="t",
                parameters={
                    "id": {"type": "string", "required": True},
                    "parallel": {"type": "boolean", "required": True},
                    "ms": {"type": "integer", "required": True},
                    "fail": {"type": "boolean", "required": True},
                },
                output=ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
                execute=body,
                is_concurrency_safe=lambda a: a["parallel"],
            )
        )
        from codemode.engine import MemorySessionLog

        log = MemorySessionLog()
        calls = [
            ModelToolCall(
                f"c{i}",
                "t",
                json.dumps({"id": f"c{i}", "parallel": par, "ms": ms, "fail": fail}),
            )
            for i, (par, ms, fail) in enumerate(batch)
        ]
        results = await run_tool_calls(
            rt,
            calls,
            agent=rt.scope("a", session=log),
            signal=AbortController().signal,
            max_parallel=cap,
        )
        return results, log.events, state

    results, events, state = anyio.run(main)
    assert len(results) == len(batch)
    for i, (result, (_par, _ms, fail)) in enumerate(zip(results, batch, strict=True)):
        assert result.is_error is fail
        if not fail:
            assert result.value == f"c{i}"
    assert state["peak"] <= cap
    assert not state["exclusive_overlap"]
    assert [e["callId"] for e in events if e["type"] == "tool/result"] == [
        f"c{i}" for i in range(len(batch))
    ]
    seqs = {e["callId"]: n for n, e in enumerate(events) if e["type"] == "tool/call"}
    for e in events:
        if e["type"] == "tool/result":
            assert e["sourceEventSeqs"] == [seqs[e["callId"]]]
