"""The sub-dispatch lane without a driver loop: who runs stages and bodies, what a
cancelled program task leaves behind, how many hand-offs a sequential sub-call costs,
and the coroutine-free pipeline phases against the awaited ones."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from code_mode_support import code_rt, echo_tool, run_code, sleep_tool
from pipeline_support import call

from codemode.engine import (
    Accept,
    CodeRunError,
    CodeRunRequest,
    CodeRunResult,
    MemorySessionLog,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)


@contextlib.contextmanager
def _loop_iterations() -> Iterator[list[int]]:
    """Count the running loop's iterations while in the block (``[0]`` of the list)."""
    loop = asyncio.get_running_loop()
    original = loop._run_once  # type: ignore[attr-defined]
    ticks = [0]

    def counting() -> None:
        ticks[0] += 1
        original()

    loop._run_once = counting  # type: ignore[attr-defined]
    try:
        yield ticks
    finally:
        del loop._run_once  # type: ignore[attr-defined]


class _MostPerIteration:
    """Beside a run (``tick`` in a task): the most ``count`` grew within one iteration of
    the loop, until ``stop``."""

    def __init__(self) -> None:
        self.count = 0
        self.most = 0
        self._ticking = True

    async def tick(self) -> None:
        last = 0
        while self._ticking:
            await asyncio.sleep(0)
            self.most, last = max(self.most, self.count - last), self.count

    def stop(self) -> None:
        self._ticking = False


@pytest.mark.anyio
async def test_stages_and_bodies_never_run_in_the_programs_task() -> None:
    # Cancelling a program's task (a timeout, the run's end) must only detach it from its
    # call: a body or an ordered stage running in that task would be cancelled with it.
    seen: dict[str, Any] = {}

    async def body(args: Any, ctx: Any) -> Any:
        seen["body"] = asyncio.current_task()
        return args["value"]

    async def pre(exec_: Any, next_: Any) -> Any:
        seen["pre"] = asyncio.current_task()
        return await next_()

    async def program(tools: Any, print: Any) -> Any:
        seen["program"] = asyncio.current_task()
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True, body=body))
    rt.on("tools/pre-execute", pre)
    result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert result.value["result"] == "x"
    assert seen["body"] is not seen["program"]
    assert seen["pre"] is not seen["program"]


@pytest.mark.anyio
async def test_a_cancelled_caller_leaves_its_call_running_committed_and_logged() -> None:
    log: list[str] = []
    outcome: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        try:
            with anyio.fail_after(0.01):
                await tools.nap({"id": "slow", "ms": 60})
        except TimeoutError:
            outcome.append("timed out")
        # The detached call still runs; a later call queues behind nothing exclusive.
        return await tools.nap({"id": "next"})

    rt, _ = code_rt(program)
    rt.register(sleep_tool("nap", log=log))
    scope = rt.scope("a", session=MemorySessionLog())
    result = await run_code(rt, agent=scope)
    assert outcome == ["timed out"]
    assert result.value["result"] == "next"
    # The slow body was not cancelled with its caller: it was aborted by the run's end
    # (the program returned) or finished, and its start and settle are both logged.
    assert log[0] == "start slow"
    settles = [e for e in scope.session.events if e["type"] == "tool/code-dispatch"]
    assert [e["subCallId"] for e in settles] == ["call-1:code:1", "call-1:code:2"]


@pytest.mark.anyio
@pytest.mark.parametrize(("waits", "iterations"), [(False, 0), (True, 2)])
async def test_a_sequential_sub_call_costs_no_loop_iteration_of_its_own(
    waits: bool, iterations: int
) -> None:
    # The call's whole lane pass runs as the program submits, as an idle worker whose
    # task it borrows (``_Workers._borrow``): a body that does not wait is started, run
    # and committed before ``submit`` returns, so the program never yields to the loop.
    # Handing the call to a worker and back cost two; a driver loop woken per stage,
    # four. A body that yields once costs one iteration to resume and one for the
    # program to get its value: the worker takes the body over at once (woken from the
    # loop it cost a third). Counted deterministically on the running loop.
    counts: list[int] = []

    async def body(args: Any, ctx: Any) -> Any:
        if waits:
            await asyncio.sleep(0)
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        for i in range(5):
            await tools.echo({"value": str(i)})  # warm: an idle worker to borrow
        for i in range(20):
            before = ticks[0]
            await tools.echo({"value": str(i)})
            counts.append(ticks[0] - before)
        return None

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True, body=body))
    with _loop_iterations() as ticks:
        await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert counts == [iterations] * 20


@pytest.mark.anyio
async def test_a_sequential_program_s_bodies_all_run_as_one_worker_task() -> None:
    # After the first call, each call's first step runs as the idle worker the previous
    # one left (``_Workers._borrow``): no task is created per sub-call. Before, each call
    # had a task of its own (30 calls, 30 tasks).
    seen: list[Any] = []
    program_task: list[Any] = []

    async def body(args: Any, ctx: Any) -> Any:
        seen.append(asyncio.current_task())
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        program_task.append(asyncio.current_task())
        return [await tools.echo({"value": str(i)}) for i in range(30)]

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True, body=body))
    result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert result.value["result"] == [str(i) for i in range(30)]
    assert len({id(task) for task in seen}) == 1
    assert seen[0] is not program_task[0]


_probe: contextvars.ContextVar[str] = contextvars.ContextVar("probe", default="unset")


@pytest.mark.anyio
@pytest.mark.parametrize("parallel", [True, False])
async def test_a_borrowed_body_that_waits_keeps_its_task_its_scopes_and_its_context(
    parallel: bool,
) -> None:
    # The body's first step runs as a borrowed worker; when it waits, that worker's task
    # takes it over. Its task, a cancel scope and a context variable's token entered
    # before the wait must all still be its own after it (anyio raises on a scope exited
    # in another task; ``ContextVar.reset`` on a token from another context).
    after: list[tuple[bool, str]] = []

    async def body(args: Any, ctx: Any) -> Any:
        token = _probe.set(args["value"])
        before = asyncio.current_task()
        with anyio.CancelScope():
            await anyio.sleep(0.001)
            same = asyncio.current_task() is before
        seen = _probe.get()
        _probe.reset(token)
        after.append((same, seen))
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        return [await tools.echo({"value": str(i)}) for i in range(6)]

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=parallel, body=body))
    result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert result.value["result"] == [str(i) for i in range(6)]
    assert after == [(True, str(i)) for i in range(6)]
    assert _probe.get() == "unset"  # the caller's context never saw the body's value


@pytest.mark.anyio
async def test_a_borrowed_body_cancelled_before_its_worker_takes_it_over_gets_it() -> None:
    # A body that cancels its own task, then waits: the cancellation lands while the
    # worker is still parked, before it took the body over. The body must get it at its
    # wait, as it would in a task of its own; the call then settles with what it returns.
    async def body(args: Any, ctx: Any) -> Any:
        if args["value"] == "self-cancel":
            current = asyncio.current_task()
            assert current is not None
            current.cancel()
            try:
                await anyio.sleep(5)
            except asyncio.CancelledError:
                return "got it"
            return "missed it"
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        first = await tools.echo({"value": "warm"})  # leaves an idle worker to borrow
        second = await tools.echo({"value": "self-cancel"})
        third = await tools.echo({"value": "after"})
        return [first, second, third]

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True, body=body))
    with anyio.fail_after(10):
        result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert result.value["result"] == ["warm", "got it", "after"]


@pytest.mark.anyio
async def test_a_borrowed_body_still_waiting_when_the_run_ends_is_cancelled() -> None:
    # The run's end cancels every worker: the one that took over a waiting borrowed body
    # too, and the body sees the cancellation (its ``finally`` runs) before the run
    # returns.
    ended: list[str] = []
    started = anyio.Event()

    async def body(args: Any, ctx: Any) -> Any:
        if args["value"] == "slow":
            started.set()
            try:
                await anyio.sleep(30)
            finally:
                ended.append("slow")
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        await tools.echo({"value": "warm"})
        slow = asyncio.ensure_future(tools.echo({"value": "slow"}))
        await started.wait()
        slow.cancel()  # detaches the program; the body goes on until the run ends
        return "done"

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True, body=body))
    with anyio.fail_after(10):
        result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert result.value["result"] == "done"
    assert ended == ["slow"]


@pytest.mark.anyio
async def test_a_fan_out_s_workers_start_the_next_bodies_themselves() -> None:
    # 60 calls of 5 ms at cap 6: ten waves. Every worker of a wave settles before the
    # first takes the lane; that one commits and starts one call, and each of the others
    # starts the next in its own task. The first used to start the whole next wave and
    # hand all but one of its bodies to new tasks: a task per sub-call. Counted on the
    # running loop.
    loop = asyncio.get_running_loop()
    created = 0
    original = loop.create_task

    def counting(coro: Any, **kwargs: Any) -> Any:
        nonlocal created
        created += 1
        return original(coro, **kwargs)

    async def program(tools: Any, print: Any) -> Any:
        nonlocal created
        gathered = [tools.nap({"id": str(i), "ms": 5}) for i in range(60)]
        created = 0
        return await asyncio.gather(*gathered)

    rt, _ = code_rt(program)
    rt.max_parallel_sub_calls = 6
    rt.register(sleep_tool("nap"))
    loop.create_task = counting  # type: ignore[method-assign]
    try:
        result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    finally:
        del loop.create_task  # type: ignore[method-assign]
    assert result.value["result"] == [str(i) for i in range(60)]
    # The program's gather makes 60; the driver one worker per body running at once
    # (6), and a few pumps.
    assert created <= 60 + 6 + 6


@pytest.mark.anyio
async def test_a_queued_call_is_classified_once_when_it_can_start() -> None:
    # 40 calls of 2 ms at cap 4: the queue's head waits while four run. Classifying it at
    # every pass that found the cap reached ran its tool's classifier (and validated its
    # arguments) over and over; a call is classified when it could start on the answer.
    classified: list[str] = []

    async def execute(args: Any, ctx: Any) -> Any:
        await anyio.sleep(0.002)
        return args["id"]

    def safe(args: Any) -> bool:
        classified.append(args["id"])
        return True

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(*(tools.nap({"id": str(i)}) for i in range(40)))

    rt, _ = code_rt(program)
    rt.max_parallel_sub_calls = 4
    rt.register(
        define_tool(
            name="nap",
            description="Sleep 2 ms, then return the id.",
            parameters={"id": {"type": "string", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
            execute=execute,
            is_concurrency_safe=safe,
        )
    )
    result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
    assert result.value["result"] == [str(i) for i in range(40)]
    assert classified == [str(i) for i in range(40)]


@pytest.mark.anyio
async def test_a_tool_swapped_while_its_start_event_is_appended_runs_the_new_body() -> None:
    # A log the driver does not know is awaited for the start event, after the call was
    # classified and before its stage 1: the definition classified with is a hint valid
    # only at its registry version, so the swapped-in definition is the one that runs.
    holder: dict[str, Any] = {}

    async def new(args: Any, ctx: Any) -> Any:
        return f"new:{args['value']}"

    class SwappingLog(MemorySessionLog):
        async def append(self, event: dict[str, Any]) -> int:
            if event["type"] == "tool/code-dispatch-start" and "swapped" not in holder:
                holder["swapped"] = True
                holder["dispose"]()
                rt.register(echo_tool("echo", parallel=True, body=new))
            return await super().append(event)

    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    holder["dispose"] = rt.register(echo_tool("echo", parallel=True))
    result = await run_code(rt, agent=rt.scope("a", session=SwappingLog()))
    assert holder.get("swapped") is True
    assert result.value["result"] == "new:x"


@pytest.mark.anyio
async def test_timings_are_non_negative_milliseconds_with_three_decimals() -> None:
    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(*(tools.nap({"id": str(i), "ms": 2}) for i in range(5)))

    rt, _ = code_rt(program)
    rt.register(sleep_tool("nap"))
    scope = rt.scope("a", session=MemorySessionLog())
    await run_code(rt, agent=scope)
    for event in scope.session.events:
        for key, value in event["timing"].items():
            if key == "inFlight":
                continue
            assert type(value) is float and value >= 0.0
            assert value == round(value, 3)


# ------------------------------------------- coroutine-free phases vs awaited phases


def _tool(*, parallel: bool = True) -> Any:
    async def execute(args: Any, ctx: Any) -> Any:
        if args["value"] == "boom":
            raise RuntimeError("deliberate failure")
        return {"echo": args["value"]}

    return define_tool(
        name="t",
        description="t",
        parameters={"value": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text(str(v))]),
        execute=execute,
        is_concurrency_safe=(lambda args: True) if parallel else None,
    )


def _shape(result: Any) -> Any:
    return (
        result.is_error,
        list(result.content),
        None if result.is_error else result.value,
        None if not result.is_error else result.error.message,
        tuple(result.additional_contexts),
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments", [{"value": "hi"}, {"value": "boom"}, {"value": 3}, {}, "raw", None]
)
async def test_plain_call_phases_give_what_the_awaited_phases_give(arguments: Any) -> None:
    plain = ToolRuntime()
    plain.register(_tool())
    hooked = ToolRuntime()
    hooked.register(_tool())
    observed: list[str] = []

    async def pre(exec_: Any, next_: Any) -> Any:
        return await next_()

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        return await next_()

    hooked.on("tools/pre-execute", pre)
    hooked.on("tools/post-execute", post)
    hooked.on("tools/result", lambda exec_, result: observed.append(exec_.name))
    assert plain.pipeline.prepare_now(call("t", arguments)) is not None
    assert hooked.pipeline.prepare_now(call("t", arguments)) is None
    fast = await plain.execute(call("t", arguments))
    slow = await hooked.execute(call("t", arguments))
    assert _shape(fast) == _shape(slow)
    assert observed == ["t"]


@pytest.mark.anyio
async def test_a_guard_denial_and_a_denied_guard_read_the_same_without_listeners() -> None:
    rt = ToolRuntime()
    rt.register(_tool())
    rt.guard(lambda exec_: "not on my watch" if exec_.arguments["value"] == "no" else None)
    denied = await rt.execute(call("t", {"value": "no"}))
    assert denied.is_error and denied.error.message == "not on my watch"
    allowed = await rt.execute(call("t", {"value": "yes"}))
    assert not allowed.is_error and allowed.value == {"echo": "yes"}


@pytest.mark.anyio
async def test_an_accept_with_contexts_still_merges_them() -> None:
    # The default accept keeps the result as it stands only when there is nothing to
    # merge; a listener's accept with contexts goes the general way.
    rt = ToolRuntime()
    rt.register(_tool())
    context = {"role": "user", "content": [text("note")]}

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        return Accept(additional_contexts=[context])

    rt.on("tools/post-execute", post)
    result = await rt.execute(call("t", {"value": "hi"}))
    assert not result.is_error
    assert [dict(c) for c in result.additional_contexts] == [context]


# ------------------------------------------------------- define_tool validation memo


def test_a_mutable_argument_is_validated_again_after_it_changes() -> None:
    rt = ToolRuntime()
    rt.register(_tool())
    arguments: dict[str, Any] = {"value": "ok"}
    assert rt.execution_mode(call("t", arguments)) == "parallel"
    arguments["value"] = 3  # the memo must not answer for a value that can change
    assert rt.execution_mode(call("t", arguments)) == "exclusive"
    arguments["value"] = "ok again"
    assert rt.execution_mode(call("t", arguments)) == "parallel"


@pytest.mark.anyio
async def test_a_sealed_argument_is_validated_once_across_classifier_and_body() -> None:
    from codemode.engine import json as engine_json

    rt = ToolRuntime()
    rt.register(_tool())
    frozen = engine_json.snapshot({"value": 3})
    assert rt.execution_mode(call("t", frozen)) == "exclusive"
    result = await rt.execute(call("t", frozen))
    assert result.is_error
    assert result.error.message == 'invalid arguments: "value" must be a string'


@pytest.mark.anyio
async def test_thousands_of_calls_abandoned_at_a_run_s_end_are_settled_a_slice_at_a_time() -> None:
    # A sandbox begins calls from its read callback as their frames arrive; with the
    # cap's worth in flight the rest wait in the queue. When the run ends, each waiting
    # call is settled as abandoned: a storm's thousands must not all be settled in one
    # loop iteration (nothing else on the loop would run meanwhile).
    calls = 3000
    settled = _MostPerIteration()

    class StormRuntime:
        language = "python"
        isolation = "in-process"

        async def run(self, request: CodeRunRequest) -> CodeRunResult:
            nap = request.bindings[0].functions["nap"]
            all_settled = anyio.Event()

            def settle(ok: bool, payload: Any) -> None:
                settled.count += 1
                if settled.count == calls:
                    all_settled.set()

            def storm() -> None:
                for i in range(calls):
                    nap.begin({"id": str(i), "ms": 300}, settle)

            asyncio.get_running_loop().call_soon(storm)
            with anyio.move_on_after(0.05):
                await all_settled.wait()
            return CodeRunResult(error=CodeRunError("timeout", "the run took too long"))

    rt = ToolRuntime(mode="code", max_parallel_sub_calls=10, code_runtime=StormRuntime())
    rt.register(sleep_tool("nap"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(settled.tick)
        result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
        settled.stop()
    assert result.is_error
    assert settled.count == calls  # the 10 in flight cancelled, the rest abandoned
    assert 0 < settled.most < calls - 10


@pytest.mark.anyio
async def test_a_lane_starting_thousands_of_queued_calls_lets_the_loop_run_between() -> None:
    # 2,000 parallel calls wait behind an exclusive one; when it commits, the lane starts
    # them all, handing each body to a worker whose first step runs at once (inside the
    # lane holder's step). Those nested jobs must not renew the holder's time slice: that
    # kept it starting the whole queue in one loop iteration.
    calls = 2000
    started = _MostPerIteration()

    async def nap(args: Any, ctx: Any) -> Any:
        started.count += 1
        await anyio.lowlevel.checkpoint()
        return args["value"]

    async def barrier(args: Any, ctx: Any) -> Any:
        await anyio.sleep(0.01)
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        first = asyncio.ensure_future(tools.gate({"value": "gate"}))
        rest = [asyncio.ensure_future(tools.nap({"value": str(i)})) for i in range(calls)]
        return [await first, len(await asyncio.gather(*rest))]

    rt, _ = code_rt(program, cap=calls)
    rt.register(echo_tool("gate", body=barrier))  # no classifier: exclusive
    rt.register(echo_tool("nap", parallel=True, body=nap))
    async with anyio.create_task_group() as tg:
        tg.start_soon(started.tick)
        result = await run_code(rt, agent=rt.scope("a", session=MemorySessionLog()))
        started.stop()
    assert result.value["result"] == ["gate", calls]
    assert 0 < started.most < calls
