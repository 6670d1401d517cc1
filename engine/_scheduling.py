"""Native scheduling of one model step's sibling tool calls.

Calls are walked in model order. An exclusive call is a group of one (a barrier). A
parallel call opens a rolling pool of consecutive parallel calls capped at
``max_parallel``; before each additional start the next call is re-classified, so a
registry change affects calls not yet started. Per started call: append ``tool/call``,
run ``prepare`` (ordered: call N+1's prepare waits for call N's), launch the body (the
only overlapping stage), and commit in model order (post-execute/finish, then
``tool/result``). On abort no further call starts; started calls drain and commit; every
never-started call gets a synthetic ``tool/call`` + ``tool/result`` pair with
``ABORTED_BEFORE_DISPATCH``.
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from ._arguments import UnparsedArguments
from ._pipeline import Dispatch, Pipeline, Settled
from ._presentation import call_card_fields, result_card_fields
from ._results import aborted_before_dispatch_result
from ._signals import AbortSignal
from ._types import ToolExecutionInput, ToolExecutionResult

if TYPE_CHECKING:
    from ._runtime import ToolRuntime
    from ._scope import Scope

__all__ = ["ModelToolCall", "run_tool_calls"]


class ModelToolCall(msgspec.Struct, frozen=True):
    """One tool call as the model emitted it; ``arguments`` is the raw JSON string."""

    call_id: str
    name: str
    arguments: str


def parse_arguments(raw: str) -> Any:
    """``""`` -> ``{}``; valid JSON -> its value; invalid JSON stays the raw string (an
    ``UnparsedArguments``, so that the tool's refusal can say the JSON was invalid)."""
    if raw == "":
        return {}
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return UnparsedArguments(raw)


def _reject_constant(name: str) -> Any:
    # ``NaN``/``Infinity``/``-Infinity`` are not JSON (``JSON.parse`` rejects them); Python's
    # ``json`` accepts them by default, which would turn a raw string into lossy arguments.
    raise ValueError(f"{name} is not valid JSON")


class _Call:
    __slots__ = ("call", "index", "input", "parallel", "seq", "settled")

    def __init__(self, index: int, call: ModelToolCall, input_: ToolExecutionInput) -> None:
        self.index = index
        self.call = call
        self.input = input_
        self.seq: int | None = None
        self.settled: Settled | None = None
        self.parallel = False


class _Step:
    def __init__(
        self,
        rt: ToolRuntime,
        agent: Scope | None,
        turn: int,
        step: int,
        max_parallel: int,
    ) -> None:
        self.rt = rt
        self.pipeline: Pipeline = rt.pipeline
        self.session = agent.session if agent is not None else None
        self.turn = turn
        self.step = step
        self.cap = max_parallel
        self.results: dict[int, ToolExecutionResult] = {}
        self.wake = anyio.Event()

    async def append(self, event: dict[str, Any]) -> int | None:
        if self.session is None:
            return None
        return await self.session.append(event)

    async def log_call(self, c: _Call) -> None:
        c.seq = await self.append(
            {
                "type": "tool/call",
                "turn": self.turn,
                "step": self.step,
                "callId": c.call.call_id,
                "name": c.call.name,
                "arguments": c.call.arguments,
                **call_card_fields(self.rt.get(c.call.name, c.input.agent), c.input.arguments),
            }
        )

    async def log_result(self, c: _Call, result: ToolExecutionResult) -> None:
        event: dict[str, Any] = {
            "type": "tool/result",
            "turn": self.turn,
            "step": self.step,
            "callId": c.call.call_id,
            "sourceEventSeqs": [c.seq] if c.seq is not None else [],
            "message": {
                "role": "user",
                "source": {"kind": "tool", "callId": c.call.call_id},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": c.call.call_id,
                        "content": list(result.content),
                        "isError": result.is_error,
                    }
                ],
            },
        }
        if result.is_error and result.error.info is not None:
            event["error"] = result.error.info.to_json()
        if result.meta is not None:
            event["meta"] = result.meta
        # The definition the call resolved at prepare, not a new lookup.
        tool = (
            c.settled.exec._tool
            if c.settled is not None
            else self.rt.get(c.call.name, c.input.agent)
        )
        event.update(result_card_fields(tool, c.input.arguments, result))
        await self.append(event)

    async def commit(self, c: _Call) -> None:
        assert c.settled is not None
        final = await self.pipeline.commit(c.settled)
        self.results[c.index] = final
        await self.log_result(c, final)

    async def start(self, c: _Call, tg: Any) -> None:
        await self.log_call(c)
        gate = await self.pipeline.prepare(c.input)
        if isinstance(gate, Settled):
            c.settled = gate
            return
        dispatch: Dispatch = gate

        async def body() -> None:
            try:
                c.settled = await self.pipeline.run(dispatch)
            finally:
                self.wake.set()

        tg.start_soon(body)

    async def sleep(self) -> None:
        await self.wake.wait()
        self.wake = anyio.Event()


async def _schedule(
    rt: ToolRuntime,
    state: _Step,
    queue: deque[_Call],
    signal: AbortSignal,
    max_parallel: int,
    tg: Any,
) -> None:
    commits: deque[_Call] = deque()
    while queue or commits:
        # Commit settled heads in model order first.
        if commits and commits[0].settled is not None:
            await state.commit(commits.popleft())
            continue
        if queue and not signal.aborted:
            nxt = queue[0]
            parallel = rt.execution_mode(nxt.input) == "parallel"
            pool_parallel = all(c.parallel for c in commits)
            running = sum(1 for c in commits if c.settled is None)
            if parallel and pool_parallel and running < max_parallel:
                queue.popleft()
                nxt.parallel = True
                commits.append(nxt)
                await state.start(nxt, tg)
                continue
            if not parallel and not commits:
                queue.popleft()
                commits.append(nxt)
                await state.start(nxt, tg)
                continue
        if not commits:
            return  # aborted with nothing in flight
        await state.sleep()


async def run_tool_calls(
    rt: ToolRuntime,
    calls: list[ModelToolCall],
    *,
    agent: Scope | None = None,
    signal: AbortSignal,
    turn: int = 0,
    step: int = 0,
    max_parallel: int = 10,
) -> list[ToolExecutionResult]:
    """Run one model step's sibling calls; results come back in model order."""
    if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
        raise ValueError("run_tool_calls(max_parallel=...) must be a positive integer")
    state = _Step(rt, agent, turn, step, max_parallel)
    # One step's calls are all queued now; each waits its turn behind barriers and the cap.
    queued_at = time.perf_counter()
    queue: deque[_Call] = deque(
        _Call(
            i,
            call,
            ToolExecutionInput(
                call_id=call.call_id,
                name=call.name,
                arguments=parse_arguments(call.arguments),
                signal=signal,
                agent=agent,
                queued_at=queued_at,
            ),
        )
        for i, call in enumerate(calls)
    )
    dispose = signal.add_listener(lambda _s: state.wake.set())
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            try:
                await _schedule(rt, state, queue, signal, max_parallel, tg)
            except Exception as exc:
                # An internal failure (e.g. the session log refused an event) stops new
                # starts; leaving the task group awaits the in-flight bodies. The error is
                # re-raised as itself below, not wrapped in an ExceptionGroup, and no
                # results are fabricated.
                failure = exc
    finally:
        dispose()
    if failure is not None:
        raise failure
    # Never-started calls (abort): synthetic audit pairs, in model order.
    for c in queue:
        await state.log_call(c)
        result = aborted_before_dispatch_result()
        state.results[c.index] = result
        await state.log_result(c, result)
    return [state.results[i] for i in range(len(calls))]
