"""Stages 2-6: pre-cancel, tools/pre-execute, approval, guards, cancel re-check."""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_support import BEFORE, call, echo_tool, error_text, recorder

from codemode.engine import (
    AbortController,
    Allow,
    Ask,
    Deny,
    HarnessError,
    ToolExecutionSuccess,
    ToolRuntime,
)


class Approval:
    """An approval service double returning a fixed outcome (optionally aborting first)."""

    def __init__(self, outcome: str, abort: AbortController | None = None) -> None:
        self.outcome = outcome
        self.abort = abort
        self.requests: list[tuple[Any, Any]] = []

    async def request(self, exec_: Any, reason: Any) -> str:
        self.requests.append((exec_, reason))
        if self.abort is not None:
            self.abort.abort("user hit stop")
        return self.outcome


def _runtime(**kwargs: Any) -> tuple[ToolRuntime, list[Any], Any]:
    rt = ToolRuntime(**kwargs)
    bodies: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        bodies.append(args)
        return args["value"]

    finalized: list[Any] = []

    def finalize(_exec: Any, result: Any) -> None:
        finalized.append(result)

    rt.register(echo_tool(body=body, finalize_content=finalize))
    return rt, bodies, finalized


def _deciding(decision: Any) -> Any:
    async def pre(_exec: Any, _next: Any) -> Any:
        return decision

    return pre


# --- pre-cancel --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pre_aborted_call_is_a_final_aborted_before_dispatch() -> None:
    rt, bodies, finalized = _runtime()
    rec = recorder(rt)
    controller = AbortController()
    controller.abort("gone")
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result) == (*BEFORE, "Error: tool call aborted before dispatch")
    assert result.to_json()["error"] == {
        "message": "tool call aborted before dispatch",
        "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
    }
    assert rec.events == ["result"]
    assert bodies == []
    assert len(finalized) == 1


# --- pre-execute -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_allow_runs_the_body() -> None:
    rt, bodies, _ = _runtime()
    rt.on("tools/pre-execute", _deciding(Allow()))
    result = await rt.execute(call())
    assert isinstance(result, ToolExecutionSuccess)
    assert result.value == "hi"
    assert result.content == [{"type": "text", "text": "hi"}]
    assert bodies == [{"value": "hi"}]


@pytest.mark.anyio
async def test_deny_is_a_post_result_without_info_and_post_execute_still_runs() -> None:
    rt, bodies, finalized = _runtime()
    rt.on("tools/pre-execute", _deciding(Deny("not on my watch")))
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result) == (
        "not on my watch",
        None,
        None,
        "Error: not on my watch",
    )
    # The deciding listener is outermost, so the recorder's pre never runs.
    assert rec.events == ["post", "result"]
    assert bodies == []
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_pre_execute_listener_cannot_rewrite_frozen_arguments() -> None:
    rt, bodies, _ = _runtime()

    async def rewrite(exec_: Any, next_: Any) -> Any:
        with pytest.raises(TypeError):
            exec_.arguments["value"] = "rewritten"
        with pytest.raises(AttributeError):
            exec_.arguments = {"value": "rewritten"}
        with pytest.raises(AttributeError):
            exec_.name = "other"
        return await next_()

    rt.on("tools/pre-execute", rewrite)
    result = await rt.execute(call())
    assert result.value == "hi"  # type: ignore[union-attr]
    assert bodies == [{"value": "hi"}]


@pytest.mark.anyio
async def test_throwing_pre_execute_listener_is_final_and_skips_post_execute() -> None:
    rt, bodies, finalized = _runtime()

    async def boom(_exec: Any, _next: Any) -> Any:
        raise RuntimeError("policy exploded")

    rt.on("tools/pre-execute", boom)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result) == ("policy exploded", None, None, "Error: policy exploded")
    assert rec.events == ["result"]
    assert bodies == []
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_throwing_harness_error_keeps_name_and_code() -> None:
    class PolicyError(HarnessError):
        pass

    rt, _, _ = _runtime()

    async def boom(_exec: Any, _next: Any) -> Any:
        raise PolicyError("blocked by policy", "POLICY")

    rt.on("tools/pre-execute", boom)
    result = await rt.execute(call())
    assert error_text(result)[:3] == ("blocked by policy", "PolicyError", "POLICY")


@pytest.mark.anyio
async def test_pre_execute_throw_after_cancellation_keeps_its_own_outcome() -> None:
    rt, _, _ = _runtime()
    controller = AbortController()

    async def boom(_exec: Any, _next: Any) -> Any:
        controller.abort("late")
        raise RuntimeError("own failure")

    rt.on("tools/pre-execute", boom)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ("own failure", None, None)


@pytest.mark.anyio
async def test_deny_after_cancellation_keeps_the_denial() -> None:
    rt, _, _ = _runtime()
    controller = AbortController()

    async def deny(_exec: Any, _next: Any) -> Any:
        controller.abort("late")
        return Deny("denied anyway")

    rt.on("tools/pre-execute", deny)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == ("denied anyway", None, None)


@pytest.mark.anyio
async def test_abort_during_pre_execute_is_a_post_aborted_before_dispatch() -> None:
    rt, bodies, finalized = _runtime()
    controller = AbortController()

    async def slow_allow(_exec: Any, next_: Any) -> Any:
        controller.abort("while deciding")
        return await next_()

    rt.on("tools/pre-execute", slow_allow)
    rec = recorder(rt)
    result = await rt.execute(call(signal=controller.signal))
    assert error_text(result)[:3] == BEFORE
    assert rec.events == ["pre", "post", "result"]
    assert bodies == []
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_invalid_pre_execute_decision_is_a_final_error() -> None:
    rt, bodies, _ = _runtime()
    rt.on("tools/pre-execute", _deciding("allow"))
    rec = recorder(rt)
    result = await rt.execute(call())
    message = error_text(result)[0]
    assert message.startswith("tools/pre-execute returned 'allow'")
    assert rec.events == ["result"]
    assert bodies == []


# --- ask / approval ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ask_without_approval_service_denies_with_the_reason_or_default() -> None:
    rt, bodies, _ = _runtime()
    dispose = rt.on("tools/pre-execute", _deciding(Ask("needs a human")))
    result = await rt.execute(call())
    assert error_text(result) == ("needs a human", None, None, "Error: needs a human")
    dispose()
    rt.on("tools/pre-execute", _deciding(Ask()))
    result = await rt.execute(call())
    assert error_text(result)[:3] == (
        'tool "echo" requires approval (not yet supported)',
        None,
        None,
    )
    assert bodies == []


@pytest.mark.anyio
async def test_ask_without_an_agent_is_denied_before_the_service() -> None:
    approval = Approval("allowed-once")
    rt, bodies, _ = _runtime(approval=approval)
    rt.on("tools/pre-execute", _deciding(Ask("why")))
    result = await rt.execute(call())
    assert error_text(result)[:3] == (
        'tool "echo" requires approval, but the call has no agent to route it through',
        None,
        None,
    )
    assert approval.requests == []
    assert bodies == []


OUTCOMES = {
    "rejected": 'the user rejected tool "echo"',
    "cancelled": 'approval for tool "echo" was cancelled',
    "unavailable": 'tool "echo" requires approval, but no approval channel is available',
}


@pytest.mark.anyio
@pytest.mark.parametrize("outcome", list(OUTCOMES))
async def test_non_grant_outcomes_deny_with_distinct_reasons(outcome: str) -> None:
    approval = Approval(outcome)
    rt, bodies, finalized = _runtime(approval=approval)
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask("please")))
    rec = recorder(rt)
    result = await rt.execute(call(agent=agent))
    assert error_text(result) == (OUTCOMES[outcome], None, None, f"Error: {OUTCOMES[outcome]}")
    assert rec.events == ["post", "result"]
    assert bodies == []
    assert len(finalized) == 1
    ((exec_, reason),) = approval.requests
    assert reason == "please"
    assert exec_.name == "echo" and exec_.agent is agent


@pytest.mark.anyio
async def test_allowed_once_runs_the_body_and_the_reason_may_be_absent() -> None:
    approval = Approval("allowed-once")
    rt, bodies, _ = _runtime()
    rt.approval = approval
    assert rt.approval is approval
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask()))
    result = await rt.execute(call(agent=agent))
    assert isinstance(result, ToolExecutionSuccess)
    assert bodies == [{"value": "hi"}]
    assert approval.requests[0][1] is None


@pytest.mark.anyio
async def test_cancelled_approval_with_a_cancelled_caller_is_aborted_before_dispatch() -> None:
    controller = AbortController()
    rt, bodies, finalized = _runtime(approval=Approval("cancelled", abort=controller))
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask()))
    rec = recorder(rt)
    result = await rt.execute(call(agent=agent, signal=controller.signal))
    assert error_text(result)[:3] == BEFORE
    # A post-result: post-execute still runs.
    assert rec.events == ["post", "result"]
    assert bodies == []
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_rejection_that_settles_after_cancellation_keeps_the_rejection() -> None:
    controller = AbortController()
    rt, _, _ = _runtime(approval=Approval("rejected", abort=controller))
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask()))
    result = await rt.execute(call(agent=agent, signal=controller.signal))
    assert error_text(result)[:3] == ('the user rejected tool "echo"', None, None)


@pytest.mark.anyio
async def test_grant_after_cancellation_is_aborted_before_dispatch() -> None:
    controller = AbortController()
    rt, bodies, _ = _runtime(approval=Approval("allowed-once", abort=controller))
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask()))
    rec = recorder(rt)
    result = await rt.execute(call(agent=agent, signal=controller.signal))
    assert error_text(result)[:3] == BEFORE
    assert rec.events == ["post", "result"]
    assert bodies == []


@pytest.mark.anyio
async def test_throwing_or_unknown_approval_is_a_final_error() -> None:
    class Broken:
        async def request(self, _exec: Any, _reason: Any) -> str:
            raise RuntimeError("approval channel crashed")

    rt, bodies, _ = _runtime(approval=Broken())
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask()))
    rec = recorder(rt)
    result = await rt.execute(call(agent=agent))
    assert error_text(result)[:3] == ("approval channel crashed", None, None)
    assert rec.events == ["result"]

    rt.approval = Approval("maybe")
    result = await rt.execute(call(agent=agent))
    assert error_text(result)[0] == "approval service returned unknown outcome 'maybe'"
    assert bodies == []


# --- guards -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_guards_run_global_first_then_the_chain_farthest_first() -> None:
    rt, bodies, _ = _runtime()
    preset = rt.scope("preset")
    agent = rt.scope("agent", parent=preset)
    order: list[str] = []

    def guard(label: str, reason: str | None = None) -> Any:
        def check(exec_: Any) -> str | None:
            order.append(label)
            return reason

        return check

    agent.guard(guard("agent"))
    preset.guard(guard("preset"))
    rt.guard(guard("global-1"))
    rt.guard(guard("global-2"))
    result = await rt.execute(call(agent=agent))
    assert isinstance(result, ToolExecutionSuccess)
    assert order == ["global-1", "global-2", "preset", "agent"]

    order.clear()
    preset.guard(guard("preset-deny", "preset says no"))
    agent.guard(guard("agent-deny", "agent says no"))
    rec = recorder(rt)
    result = await rt.execute(call(agent=agent))
    assert error_text(result) == ("preset says no", None, None, "Error: preset says no")
    assert order == ["global-1", "global-2", "preset", "preset-deny"]
    # A denial is a post-result: post-execute runs, tools/execute and the body do not.
    assert rec.events == ["pre", "post", "result"]
    assert bodies == [{"value": "hi"}]


@pytest.mark.anyio
async def test_scoped_guards_only_see_their_scopes_calls() -> None:
    rt, _, _ = _runtime()
    agent = rt.scope("agent")
    other = rt.scope("other")
    agent.guard(lambda _e: "agent only")
    assert error_text(await rt.execute(call(agent=agent)))[0] == "agent only"
    assert not (await rt.execute(call(agent=other))).is_error
    assert not (await rt.execute(call())).is_error


@pytest.mark.anyio
async def test_a_guard_registered_by_a_guard_runs_in_the_same_pass() -> None:
    rt, _, _ = _runtime()
    seen: list[str] = []

    def late(_exec: Any) -> str:
        seen.append("late")
        return "late guard denies"

    def registering(_exec: Any) -> None:
        seen.append("first")
        if "late" not in seen:
            rt.guard(late)
        return None

    rt.guard(registering)
    result = await rt.execute(call())
    assert error_text(result)[0] == "late guard denies"
    assert seen == ["first", "late"]


@pytest.mark.anyio
async def test_guards_do_not_emit_tools_change_and_dispose_exactly() -> None:
    rt, _, _ = _runtime()
    changes: list[int] = []
    rt.on("tools/change", lambda: changes.append(1))
    dispose = rt.guard(lambda _e: "no")
    dispose_other = rt.guard(lambda _e: None)
    assert error_text(await rt.execute(call()))[0] == "no"
    dispose()
    dispose()  # idempotent
    assert not (await rt.execute(call())).is_error
    dispose_other()
    assert changes == []


@pytest.mark.anyio
async def test_guards_only_run_for_allow_decisions() -> None:
    rt, _, _ = _runtime()
    ran: list[Any] = []
    rt.guard(lambda e: ran.append(e) or None)
    rt.on("tools/pre-execute", _deciding(Deny("denied first")))
    assert error_text(await rt.execute(call()))[0] == "denied first"
    assert ran == []


@pytest.mark.anyio
async def test_guards_see_frozen_execution_and_run_after_a_grant() -> None:
    rt, _, _ = _runtime(approval=Approval("allowed-once"))
    agent = rt.scope("agent")
    rt.on("tools/pre-execute", _deciding(Ask()))

    def inspect(exec_: Any) -> str:
        with pytest.raises(TypeError):
            exec_.arguments["value"] = "x"
        return f"guard saw {exec_.arguments['value']}"

    rt.guard(inspect)
    assert error_text(await rt.execute(call(agent=agent)))[0] == "guard saw hi"


@pytest.mark.anyio
async def test_throwing_guard_is_a_final_error() -> None:
    rt, _, finalized = _runtime()

    def boom(_exec: Any) -> None:
        raise LookupError("guard crashed")

    rt.guard(boom)
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result)[:3] == ("guard crashed", None, None)
    assert rec.events == ["pre", "result"]
    assert len(finalized) == 1


# --- scope filtering of pre-execute -------------------------------------------------------


@pytest.mark.anyio
async def test_scoped_pre_execute_listener_sees_only_its_agents_calls() -> None:
    rt, _, _ = _runtime()
    agent = rt.scope("agent")
    other = rt.scope("other")
    seen: list[Any] = []

    async def watch(exec_: Any, next_: Any) -> Any:
        seen.append(exec_.agent)
        return await next_()

    agent.on("tools/pre-execute", watch)
    await rt.execute(call())
    await rt.execute(call(agent=other))
    await rt.execute(call(agent=agent))
    assert seen == [agent]


@pytest.mark.anyio
async def test_an_empty_ask_reason_is_kept_as_the_denial() -> None:
    # The default applies only to an absent reason (the reference's ``??``).
    rt, bodies, _ = _runtime()
    rt.on("tools/pre-execute", _deciding(Ask("")))
    result = await rt.execute(call())
    assert error_text(result) == ("", None, None, "Error: ")
    assert bodies == []


@pytest.mark.anyio
async def test_a_deny_without_a_reason_fails_closed() -> None:
    rt, bodies, _ = _runtime()
    rt.on("tools/pre-execute", _deciding(Deny(None)))  # type: ignore[arg-type]
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result)[0].startswith("tools/pre-execute returned Deny(reason=None)")
    assert rec.events == ["result"]
    assert bodies == []
