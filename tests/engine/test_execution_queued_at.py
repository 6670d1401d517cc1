"""``ToolExecution.queued_at``: when a call was queued, for observers' queue-wait timing.

Set by ``run_tool_calls`` (a step's calls are queued together) and by the code-mode
driver (each sub-call when the program submits it); ``None`` for a bare ``execute``.
Asserted as orderings of one clock's readings, never as durations.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio
import pytest
from code_mode_support import code_rt, run_code
from pipeline_support import call, echo_tool

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolDefinition,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.scheduling import ModelToolCall, run_tool_calls

pytestmark = pytest.mark.anyio


def _recorder(rt: ToolRuntime) -> dict[str, tuple[float | None, float]]:
    """call id -> (queued_at, perf_counter when pre-execute saw the call)."""
    seen: dict[str, tuple[float | None, float]] = {}

    async def pre(exec_: Any, next_: Any) -> Any:
        seen[exec_.call_id] = (exec_.queued_at, time.perf_counter())
        return await next_()

    rt.on("tools/pre-execute", pre)
    return seen


def _timed_tool(ends: dict[str, float], *, parallel: bool) -> ToolDefinition:
    async def execute(args: Any, _ctx: Any) -> Any:
        await anyio.sleep(0.005)
        ends[args["id"]] = time.perf_counter()
        return args["id"]

    return define_tool(
        name="nap",
        description="Sleep a moment, then return the id.",
        parameters={"id": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
        execute=execute,
        is_concurrency_safe=(lambda _a: True) if parallel else None,
    )


async def test_a_bare_execute_has_no_queue_time() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    seen = _recorder(rt)
    await rt.execute(call("echo", {"value": "x"}))
    assert seen["c1"][0] is None


async def test_run_tool_calls_queues_a_step_at_once() -> None:
    rt = ToolRuntime()
    ends: dict[str, float] = {}
    rt.register(_timed_tool(ends, parallel=False))  # exclusive: b waits for a
    seen = _recorder(rt)
    before = time.perf_counter()
    calls = [ModelToolCall("a", "nap", '{"id": "a"}'), ModelToolCall("b", "nap", '{"id": "b"}')]
    await run_tool_calls(rt, calls, signal=AbortController().signal)
    (qa, start_a), (qb, start_b) = seen["a"], seen["b"]
    assert qa is not None and qa == qb
    assert before <= qa <= start_a
    # b was queued with a but taken up only after a's body ended: it waited its turn.
    assert qb < ends["a"] < start_b


async def test_sub_calls_are_queued_when_the_program_submits_them() -> None:
    async def program(tools: Any, print: Any) -> Any:
        # Both submitted at once; the cap of 1 makes the second wait for the first.
        return await asyncio.gather(tools.nap({"id": "1"}), tools.nap({"id": "2"}))

    rt, _ = code_rt(program, cap=1)
    ends: dict[str, float] = {}
    rt.register(_timed_tool(ends, parallel=True))
    seen = _recorder(rt)
    session = MemorySessionLog()
    before = time.perf_counter()
    result = await run_code(rt, agent=rt.scope("agent", session=session))
    assert not result.is_error, result
    (q1, start1), (q2, start2) = seen["call-1:code:1"], seen["call-1:code:2"]
    assert q1 is not None and q2 is not None
    assert before <= q1 <= start1
    # With a cap of 1 the second sub-call was queued before the first body ended and
    # taken up after it.
    assert q1 <= q2 < ends["1"] < start2
    starts = [e for e in session.events if e["type"] == "tool/code-dispatch-start"]
    assert [e["subCallId"] for e in starts] == ["call-1:code:1", "call-1:code:2"]
