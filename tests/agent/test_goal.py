"""Goals: the three tools, authority, persistence and goal rounds, over the real client."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.agent import (
    Agent,
    GoalService,
    ModelClient,
    ModelConfig,
    RetryPolicy,
    build_goal_tools,
    enable_goals,
)
from codemode.engine import SqliteSessionLog, ToolExecutionInput, ToolRuntime
from codemode.engine.json import thaw
from codemode.sandbox import Limits, PythonRuntime
from tests.agent.model_server import Call, ModelServer, Reply

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_retries=0, base_delay=0.001, max_delay=0.01)


def _args(**values: Any) -> list[str]:
    return [json.dumps(values)]


@contextlib.asynccontextmanager
async def _agent(
    server: ModelServer,
    session: Path,
    *,
    runtime: ToolRuntime | None = None,
    resume: bool = False,
    **goal_options: Any,
) -> AsyncIterator[Agent]:
    rt = runtime or ToolRuntime(mode="native")
    if runtime is None:
        for tool in build_goal_tools():
            rt.register(tool)
    with SqliteSessionLog(session) as log:
        async with ModelClient(
            ModelConfig(server.base_url, "scripted", retry=FAST), api_key="k"
        ) as client:
            agent = Agent(rt, rt.scope("agent", session=log), client, max_steps=8)
            if resume:
                agent.resume()
            enable_goals(agent, **goal_options)
            yield agent


def _tool_results(server: ModelServer) -> list[str]:
    return [m["content"] for r in server.requests for m in r.messages if m["role"] == "tool"]


def _last_tool(server: ModelServer, index: int) -> dict[str, Any]:
    content = [m for m in server.requests[index].messages if m["role"] == "tool"][-1]["content"]
    return dict(json.loads(content))


async def test_goal_rounds_run_until_the_model_completes_the_goal(tmp_path: Path) -> None:
    script = [
        # Turn 1 (the human's): create the goal, answer.
        Reply(calls=[Call("c1", "create_goal", _args(objective="  make all tests pass "))]),
        Reply(text=["Goal recorded; starting."]),
        # Round 1: read the goal, keep going.
        Reply(calls=[Call("c2", "get_goal")]),
        Reply(text=["Fixed two tests."]),
        # Round 2: complete it; the wrap-up context follows; answer.
        Reply(
            calls=[
                Call("c3", "update_goal", _args(goal_id="goal-1", revision=1, action="complete"))
            ]
        ),
        Reply(text=["All tests pass now."]),
    ]
    with ModelServer(script) as server:
        async with _agent(server, tmp_path / "s.db") as agent:
            outcomes = await agent.run("get the test suite green")
            service = GoalService.of(agent)
            assert service is not None
            final = service.value()
    assert [(o.origin, o.reason) for o in outcomes] == [
        ("user", "done"),
        ("goal", "done"),
        ("goal", "done"),
    ]
    created = _last_tool(server, 1)
    assert created == {
        "goal": {
            "id": "goal-1",
            "revision": 1,
            "objective": "make all tests pass",
            "phase": "active",
            "roundsStarted": 0,
            "maxGoalRounds": 20,
        },
        "activation": "armed",
    }
    # Each round is announced as a context message (not the user's words).
    round_one = server.requests[2].messages[-1]
    assert round_one["role"] == "user"
    assert round_one["content"].startswith("[goal round 1 of 20] This is an automatic")
    assert "Objective: make all tests pass" in round_one["content"]
    assert _last_tool(server, 3)["goal"]["roundsStarted"] == 1
    # Completing in a goal round defers the wrap-up after the tool result.
    last = server.requests[5].messages
    assert json.loads(last[-2]["content"])["goal"]["phase"] == "complete"
    assert last[-1]["content"].startswith("[goal] Goal goal-1 is complete after 2 goal rounds;")
    assert final["goal"]["phase"] == "complete" and final["activation"] == "disarmed"
    assert len(server.requests) == 6
    # The compact JSON rendering (JSON.stringify).
    assert _tool_results(server)[0] == json.dumps(created, separators=(",", ":"))


async def test_blocked_needs_the_threshold_of_consecutive_rounds(tmp_path: Path) -> None:
    blocked = _args(
        goal_id="goal-1", revision=1, action="blocked", blocked_reason="the CI host is down"
    )
    script = [
        Reply(calls=[Call("c1", "create_goal", _args(objective="deploy", max_goal_rounds=5))]),
        Reply(text=["ok"]),
        Reply(calls=[Call("c2", "update_goal", blocked)]),  # round 1: too early
        Reply(text=["still trying"]),
        Reply(text=["round 2, still down"]),
        Reply(calls=[Call("c3", "update_goal", blocked)]),  # round 3: allowed
        Reply(text=["The CI host is down; I stopped."]),
    ]
    with ModelServer(script) as server:
        async with _agent(server, tmp_path / "s.db", block_threshold=3) as agent:
            outcomes = await agent.run("deploy the site")
            service = GoalService.of(agent)
            assert service is not None and service.goal is not None
            goal = service.goal
    assert [o.origin for o in outcomes] == ["user", "goal", "goal", "goal"]
    early = [m for m in server.requests[3].messages if m["role"] == "tool"][-1]["content"]
    assert early == (
        "Error: blocked requires at least 3 consecutive goal rounds; current round is 1"
    )
    assert goal.phase == "blocked" and goal.rounds_started == 3
    assert goal.blocked_reason is not None
    assert (goal.blocked_reason.code, goal.blocked_reason.message) == (
        "reported",
        "the CI host is down",
    )
    assert (
        server.requests[-1]
        .messages[-1]["content"]
        .startswith("[goal] Goal goal-1 is blocked: the CI host is down.")
    )


async def test_rounds_stop_at_max_goal_rounds(tmp_path: Path) -> None:
    script = [
        Reply(calls=[Call("c1", "create_goal", _args(objective="refactor", max_goal_rounds=2))]),
        Reply(text=["on it"]),
        Reply(text=["round one"]),
        Reply(text=["round two"]),
    ]
    with ModelServer(script) as server:
        async with _agent(server, tmp_path / "s.db") as agent:
            outcomes = await agent.run("refactor the parser")
            service = GoalService.of(agent)
            assert service is not None
            value = service.value()
    assert len(outcomes) == 3 and len(server.requests) == 4
    assert value["activation"] == "disarmed"
    assert value["goal"]["phase"] == "blocked" and value["goal"]["roundsStarted"] == 2
    assert value["goal"]["blockedReason"] == {
        "code": "max_goal_rounds",
        "message": "the goal used all 2 automatic goal rounds without being completed",
    }


async def test_authority_rules(tmp_path: Path) -> None:
    edit = _args(goal_id="goal-1", revision=1, action="edit", objective="other")
    script = [
        Reply(calls=[Call("c1", "create_goal", _args(objective="ship it"))]),
        Reply(text=["ok"]),
        # Round 1: the model may not create, edit or pause on its own.
        Reply(
            calls=[
                Call("c2", "create_goal", _args(objective="a second goal")),
                Call("c3", "update_goal", edit),
                Call("c4", "update_goal", _args(goal_id="goal-1", revision=1, action="complete")),
            ]
        ),
        Reply(text=["done"]),
    ]
    with ModelServer(script) as server:
        async with _agent(server, tmp_path / "s.db") as agent:
            await agent.run("ship the release")
    create_err, edit_err, complete_ok = [
        m["content"] for m in server.requests[3].messages if m["role"] == "tool"
    ][-3:]
    assert create_err == (
        "Error: create_goal requires a direct top-level human request; this turn was "
        "started by an automatic goal round"
    )
    assert edit_err == (
        "Error: update_goal edit requires a direct top-level human request; this turn was "
        "started by an automatic goal round"
    )
    assert json.loads(complete_ok)["goal"]["phase"] == "complete"


def _call(rt: ToolRuntime, agent: Agent, name: str, args: dict[str, Any]) -> Any:
    from codemode.engine import AbortController

    return rt.execute(
        ToolExecutionInput(
            call_id=f"t-{name}",
            name=name,
            arguments=args,
            signal=AbortController().signal,
            agent=agent.scope,
        )
    )


async def test_update_validation_and_stale_revisions(tmp_path: Path) -> None:
    with ModelServer([]) as server:
        async with _agent(server, tmp_path / "s.db") as agent:
            rt = agent.runtime
            agent.origin = "user"  # as during a human turn

            async def err(name: str, **args: Any) -> tuple[str, str]:
                result = await _call(rt, agent, name, args)
                assert result.is_error, result
                return result.error.info.code, result.error.message

            assert await err("update_goal", goal_id="x", revision=1, action="pause") == (
                "GOAL_TOOL_NOT_FOUND",
                "this session has no goal; create one first",
            )
            assert await err("create_goal", objective="   ") == (
                "GOAL_TOOL_INVALID_CREATE",
                "objective must be a non-empty string",
            )
            assert (await err("create_goal", objective="x", max_goal_rounds=1.5))[0] == (
                "GOAL_TOOL_INVALID_CREATE"
            )
            ok = await _call(rt, agent, "create_goal", {"objective": "write docs"})
            assert not ok.is_error
            assert await err("create_goal", objective="again") == (
                "GOAL_TOOL_EXISTS",
                "this session already has goal goal-1 (phase active); read it with get_goal "
                "and change it with update_goal",
            )
            assert await err("update_goal", goal_id="", revision=1, action="pause") == (
                "GOAL_TOOL_INVALID_UPDATE",
                "goal_id must be non-empty and revision must be a positive safe integer",
            )
            assert await err("update_goal", goal_id="goal-1", revision=0, action="pause") == (
                "GOAL_TOOL_INVALID_UPDATE",
                "goal_id must be non-empty and revision must be a positive safe integer",
            )
            assert await err("update_goal", goal_id="goal-1", revision=1, action="blocked") == (
                "GOAL_TOOL_INVALID_UPDATE",
                "blocked_reason is required with action blocked",
            )
            assert (
                await err(
                    "update_goal", goal_id="goal-1", revision=1, action="pause", objective="x"
                )
            ) == ("GOAL_TOOL_INVALID_UPDATE", "objective is valid only with action edit")
            assert (await err("update_goal", goal_id="goal-9", revision=1, action="pause"))[
                0
            ] == "GOAL_TOOL_NOT_FOUND"
            paused = await _call(
                rt, agent, "update_goal", {"goal_id": "goal-1", "revision": 1, "action": "pause"}
            )
            assert thaw(paused.value)["goal"]["phase"] == "paused"
            assert thaw(paused.value)["activation"] == "disarmed"
            assert await err("update_goal", goal_id="goal-1", revision=1, action="resume") == (
                "GOAL_TOOL_STALE_REVISION",
                "revision 1 of goal-1 is stale: the current revision is 2; call get_goal and "
                "decide again",
            )
            assert (await err("update_goal", goal_id="goal-1", revision=2, action="pause"))[
                0
            ] == "GOAL_TOOL_INVALID_TRANSITION"
            # A human turn has no goal-round streak: blocked is below any threshold.
            assert await err(
                "update_goal", goal_id="goal-1", revision=2, action="blocked", blocked_reason="x"
            ) == (
                "GOAL_TOOL_INVALID_TRANSITION",
                "cannot blocked goal goal-1: it is paused (blocked needs a goal that is active)",
            )
            agent.origin = "schedule"
            code, message = await err(
                "update_goal", goal_id="goal-1", revision=2, action="complete"
            )
            assert code == "GOAL_TOOL_AUTHORITY" and "a schedule reminder" in message
            agent.origin = None


async def test_the_goal_survives_resume(tmp_path: Path) -> None:
    first = [
        Reply(calls=[Call("c1", "create_goal", _args(objective="port to 3.12"))]),
        Reply(text=["started"]),
        Reply(text=["round one done"]),
    ]
    session = tmp_path / "s.db"
    with ModelServer(first) as server:
        async with _agent(server, session, default_max_goal_rounds=1) as agent:
            await agent.run("port the code to python 3.12")
    with ModelServer([Reply(calls=[Call("c2", "get_goal")]), Reply(text=["ok"])]) as server:
        async with _agent(server, session, resume=True) as agent:
            await agent.run_turn("what is the goal?")
    value = _last_tool(server, 1)
    assert value["goal"]["id"] == "goal-1"
    assert value["goal"]["roundsStarted"] == 1 and value["goal"]["phase"] == "blocked"
    kinds = [e["type"] for e in SqliteSessionLog.read(session)]
    assert kinds.count("agent/goal") == 3  # created, round 1, out of rounds


async def test_without_an_agent_the_tools_say_so() -> None:
    from codemode.engine import AbortController

    rt = ToolRuntime(mode="native")
    for tool in build_goal_tools():
        rt.register(tool)
    result = await rt.execute(
        ToolExecutionInput(
            call_id="x", name="get_goal", arguments={}, signal=AbortController().signal
        )
    )
    assert result.is_error and result.error.info.code == "GOAL_TOOL_NO_AGENT"
    assert result.error.message == (
        "get_goal requires a calling agent session (no agent drives this scope)"
    )


async def test_goal_tools_from_a_python_program(tmp_path: Path) -> None:
    program = (
        "g = await tools.create_goal(objective='tidy the repo')\n"
        "again = await tools.get_goal()\n"
        "return [g['goal']['id'], again['activation']]"
    )
    script = [
        Reply(calls=[Call("c1", "run_code", _args(description="goal", code=program))]),
        Reply(
            calls=[
                Call("c2", "update_goal", _args(goal_id="goal-1", revision=1, action="complete"))
            ]
        ),
        Reply(text=["done"]),
    ]
    async with PythonRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as python:
        rt = ToolRuntime(mode="both", code_runtime=python)
        for tool in build_goal_tools():
            rt.register(tool)
        with ModelServer(script) as server:
            async with _agent(server, tmp_path / "s.db", runtime=rt) as agent:
                outcomes = await agent.run("tidy up")
    run_code = [m for m in server.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert json.loads(run_code) == ["goal-1", "armed"]
    assert len(outcomes) == 1  # completed within the human's turn: no round starts


async def test_a_subagent_cannot_create_or_change_the_goal(tmp_path: Path) -> None:
    from codemode.agent import ChildHost

    with ModelServer([]) as server:
        async with _agent(server, tmp_path / "s.db") as agent:
            child = ChildHost(agent).make_child(agent, label="helper")
            enable_goals(child)
            child.origin = "user"  # even a human-looking turn of a child is not the human's
            result = await _call(agent.runtime, child, "create_goal", {"objective": "x"})
            child.origin = None
    assert result.is_error and result.error.info.code == "GOAL_TOOL_AUTHORITY"
    assert result.error.message == (
        "create_goal is not available to subagents: goals belong to the top-level session "
        "and its human"
    )
