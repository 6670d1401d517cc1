"""The per-run single-lane driver: argument checks, ids, ordering, overlap, barriers,
head-of-line commits, backpressure, abandonment, settle-abort and drain
(reference §3.5, §3.6, §3.9, §7.1)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from code_mode_support import (
    GatedSession,
    ScriptedRuntime,
    code_rt,
    echo_tool,
    run_code,
    sleep_tool,
)

from codemode.engine import (
    AbortController,
    CodeRunRequest,
    CodeRunResult,
    MemorySessionLog,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.testing import ToolCallError

# ------------------------------------------------------------ argument checks


class Hostile(dict):  # type: ignore[type-arg]
    """A dict subclass is not a plain JSON object."""


@pytest.mark.anyio
async def test_lossy_arguments_are_rejected_without_consuming_a_number() -> None:
    import datetime

    async def program(tools: Any, print: Any) -> Any:
        messages = []
        for args in (
            (),
            ({"value": float("nan")},),
            ({"value": datetime.date(2020, 1, 1)},),
            ({"value": lambda: 1},),
            ({1: "int key"},),
            (Hostile(value="x"),),
        ):
            try:
                await tools.echo(*args)
            except ToolCallError as exc:
                messages.append(exc.message)
        messages.append(await tools.echo({"value": "ok"}))
        return messages

    rt, _ = code_rt(program)
    calls: list[Any] = []
    rt.register(echo_tool("echo", calls=calls))
    scope = rt.scope("agent", session=MemorySessionLog())
    result = await run_code(rt, agent=scope)
    messages = result.value["result"]
    assert messages[0] == (
        "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)"
    )
    assert all(m.startswith("tool arguments must be lossless JSON: ") for m in messages[1:6])
    assert messages[6] == "echo:ok"
    assert calls == [{"value": "ok"}]
    events = scope.session.events
    assert [(e["type"], e["subCallId"]) for e in events] == [
        ("tool/code-dispatch-start", "call-1:code:1"),
        ("tool/code-dispatch", "call-1:code:1"),
    ]


@pytest.mark.anyio
async def test_null_arguments_are_dispatched_and_fail_validation() -> None:
    async def program(tools: Any, print: Any) -> Any:
        try:
            await tools.echo(None)
        except ToolCallError as exc:
            return exc.message

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))
    result = await run_code(rt)
    assert result.value["result"] == 'invalid arguments: "arguments" must be an object'


@pytest.mark.anyio
@pytest.mark.parametrize("durable", [False, True])
async def test_deep_arguments_are_dispatched_and_logged(durable: bool) -> None:
    depth = 5000

    async def body(args: Any, ctx: Any) -> Any:
        cursor, n = args["value"], 0
        while isinstance(cursor, list):
            cursor, n = cursor[0], n + 1
        return f"{n}:{cursor}"

    async def program(tools: Any, print: Any) -> Any:
        nested: Any = "leaf"
        for _ in range(depth):
            nested = [nested]
        return await tools.deep({"value": nested})

    rt, _ = code_rt(program)
    rt.register(
        define_tool(
            name="deep",
            description="Measure nesting.",
            parameters={"value": {"type": "json", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
            execute=body,
        )
    )
    scope = rt.scope("agent", session=MemorySessionLog() if durable else None)
    result = await run_code(rt, agent=scope)
    assert result.value["result"] == f"{depth}:leaf"
    if not durable:
        return
    logged = scope.session.events[-1]["arguments"]["value"]
    n = 0
    while isinstance(logged, list):
        logged, n = logged[0], n + 1
    assert (n, logged) == (depth, "leaf")


@pytest.mark.anyio
async def test_tools_see_frozen_arguments_and_the_log_keeps_the_original() -> None:
    mutated: list[bool] = []

    async def body(args: Any, ctx: Any) -> Any:
        try:
            args["list"].append("injected")
            mutated.append(True)
        except TypeError:
            mutated.append(False)
        return "ok"

    async def program(tools: Any, print: Any) -> Any:
        args = {"list": ["original"]}
        await tools.mutator(args)
        args["list"].append("after the call")
        return None

    rt, _ = code_rt(program)
    rt.register(
        define_tool(
            name="mutator",
            description="Tries to mutate its arguments.",
            parameters={"list": {"type": "array", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
            execute=body,
        )
    )
    scope = rt.scope("agent", session=MemorySessionLog())
    await run_code(rt, agent=scope)
    assert mutated == [False]
    assert [e["arguments"] for e in scope.session.events] == [{"list": ["original"]}] * 2


# --------------------------------------------------------- ids, parent, root id


@pytest.mark.anyio
async def test_sub_call_ids_parent_token_and_root_call_id() -> None:
    seen: list[tuple[str, str, Any]] = []
    outer_token: list[Any] = []

    async def program(tools: Any, print: Any) -> Any:
        await tools.echo({"value": "a"})
        await asyncio.gather(tools.echo({"value": "b"}), tools.echo({"value": "c"}))
        return None

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def pre(exec_: Any, next_: Any) -> Any:
        if exec_.name == "run_code":
            outer_token.append(exec_.token)
        return await next_()

    rt.on("tools/pre-execute", pre)
    rt.on(
        "tools/result",
        lambda exec_, result: seen.append((exec_.call_id, exec_.root_call_id, exec_.parent)),
    )
    await run_code(rt, call_id="outer-7", root_call_id="root-0")
    (token,) = outer_token
    assert seen == [
        ("outer-7:code:1", "root-0", token),
        ("outer-7:code:2", "root-0", token),
        ("outer-7:code:3", "root-0", token),
        ("outer-7", "root-0", None),
    ]


# ------------------------------------------------------------------- ordering


@pytest.mark.anyio
async def test_starts_and_prepares_are_ordered_slow_pre_execute_delays_the_next() -> None:
    log: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(*(tools.nap({"id": str(i)}) for i in (1, 2, 3)))

    rt, _ = code_rt(program)
    rt.register(sleep_tool("nap", log=log))

    async def pre(exec_: Any, next_: Any) -> Any:
        if exec_.name == "nap":
            log.append(f"pre {exec_.arguments['id']}")
            if exec_.arguments["id"] == "1":
                await anyio.sleep(0.03)
            log.append(f"pre-done {exec_.arguments['id']}")
        return await next_()

    rt.on("tools/pre-execute", pre)
    result = await run_code(rt)
    assert result.value["result"] == ["1", "2", "3"]
    prepares = [entry for entry in log if entry.startswith("pre")]
    assert prepares == ["pre 1", "pre-done 1", "pre 2", "pre-done 2", "pre 3", "pre-done 3"]
    # The start event precedes the call's own pre-execute.
    assert log.index("pre-done 1") < log.index("start 1")


@pytest.mark.anyio
async def test_start_event_is_durable_before_pre_execute_runs() -> None:
    observed: list[list[str]] = []
    scope_holder: list[Any] = []

    async def program(tools: Any, print: Any) -> Any:
        await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def pre(exec_: Any, next_: Any) -> Any:
        if exec_.name == "echo":
            observed.append([e["type"] for e in scope_holder[0].session.events])
        return await next_()

    rt.on("tools/pre-execute", pre)
    scope = rt.scope("agent", session=MemorySessionLog())
    scope_holder.append(scope)
    await run_code(rt, agent=scope)
    assert observed == [["tool/code-dispatch-start"]]


async def peak_for(cap: int, calls: int, *, parallel: bool = True) -> tuple[int, list[str]]:
    active = 0
    peak = 0
    order: list[str] = []
    expected = min(cap, calls) if parallel else 1
    enough = anyio.Event()

    async def body(args: Any, ctx: Any) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        order.append(f"enter {args['value']}")
        if peak >= expected:
            enough.set()
        with anyio.move_on_after(2):
            await enough.wait()
        await anyio.sleep(0.001)
        order.append(f"exit {args['value']}")
        active -= 1
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(*(tools.probe({"value": str(i)}) for i in range(calls)))

    rt, _ = code_rt(program, cap=cap)
    rt.register(echo_tool("probe", parallel=parallel, body=body))
    result = await run_code(rt)
    assert result.value["result"] == [str(i) for i in range(calls)]
    return peak, order


@pytest.mark.anyio
@pytest.mark.parametrize(("cap", "calls", "expected"), [(1, 5, 1), (10, 30, 10), (100, 100, 100)])
async def test_parallel_bodies_overlap_up_to_the_cap(cap: int, calls: int, expected: int) -> None:
    peak, order = await peak_for(cap, calls)
    assert peak == expected
    if cap == 1:
        assert order == [f"{step} {i}" for i in range(calls) for step in ("enter", "exit")]


@pytest.mark.anyio
async def test_exclusive_calls_run_strictly_serially_in_submission_order() -> None:
    peak, order = await peak_for(10, 4, parallel=False)
    assert peak == 1
    assert order == [f"{step} {i}" for i in range(4) for step in ("enter", "exit")]


@pytest.mark.anyio
async def test_calls_are_reclassified_when_they_start() -> None:
    log: list[str] = []
    state = {"parallel": True}

    async def body(args: Any, ctx: Any) -> Any:
        log.append(f"start {args['value']}")
        if args["value"] == "1":
            # After a first wait: a body that does not wait starts (and runs) as its call
            # is submitted, before the program's next task submits call 2.
            await anyio.lowlevel.checkpoint()
            state["parallel"] = False  # a registry/policy change while 3 and 4 are queued
        await anyio.sleep({"1": 0.01, "2": 0.04}.get(args["value"], 0))
        log.append(f"end {args['value']}")
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(*(tools.flip({"value": str(i)}) for i in (1, 2, 3, 4)))

    rt, _ = code_rt(program, cap=2)
    tool = echo_tool("flip", body=body)
    import msgspec

    rt.register(msgspec.structs.replace(tool, is_concurrency_safe=lambda a: state["parallel"]))
    assert (await run_code(rt)).value["result"] == ["1", "2", "3", "4"]
    # Parallel, call 3 would have taken call 1's slot while 2 still ran; reclassified
    # exclusive, it waits for the pool to drain and 4 waits for 3.
    assert log == ["start 1", "start 2", "end 1", "end 2", "start 3", "end 3", "start 4", "end 4"]


@pytest.mark.anyio
async def test_exclusive_barrier_is_held_through_its_commit() -> None:
    log: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(
            tools.nap({"id": "p1", "ms": 20}),
            tools.lock({"id": "x", "ms": 10}),
            tools.nap({"id": "p2"}),
            tools.nap({"id": "p3"}),
        )

    rt, _ = code_rt(program)
    rt.register(sleep_tool("nap", log=log))
    rt.register(sleep_tool("lock", parallel=False, log=log))

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name in ("nap", "lock"):
            log.append(f"post {exec_.arguments['id']}")
            if exec_.name == "lock":
                await anyio.sleep(0.02)
                log.append("post-done x")
        return await next_()

    rt.on("tools/post-execute", post)
    result = await run_code(rt)
    assert result.value["result"] == ["p1", "x", "p2", "p3"]
    assert log[:9] == [
        "start p1",
        "end p1",
        "post p1",
        "start x",
        "end x",
        "post x",
        "post-done x",
        "start p2",
        "start p3",
    ]
    # p2 and p3 overlap after the barrier; whichever body settles commits what is ready
    # at once, so p2's commit may come before p3's body ends. Commits stay in order.
    assert sorted(log[9:]) == ["end p2", "end p3", "post p2", "post p3"]
    assert log.index("end p2") < log.index("post p2") < log.index("post p3")
    assert log.index("end p3") < log.index("post p3")


@pytest.mark.anyio
async def test_head_of_line_commits_deliver_values_in_submission_order() -> None:
    log: list[str] = []
    delivered: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        async def call(ident: str, ms: int) -> str:
            value: str = await tools.nap({"id": ident, "ms": ms})
            delivered.append(value)
            return value

        # A race: the fast call's body finishes first, but its value is delivered only
        # after the slow call, submitted earlier, has committed.
        slow = asyncio.ensure_future(call("slow", 40))
        fast = asyncio.ensure_future(call("fast", 0))
        done, _ = await asyncio.wait([slow, fast], return_when=asyncio.FIRST_COMPLETED)
        first = [t for t in (slow, fast) if t in done]
        await asyncio.gather(slow, fast)
        return first[0].result()

    rt, _ = code_rt(program)
    rt.register(sleep_tool("nap", log=log))
    committed: list[str] = []

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "nap":
            committed.append(exec_.arguments["id"])
        return await next_()

    rt.on("tools/post-execute", post)
    result = await run_code(rt)
    assert log == ["start slow", "start fast", "end fast", "end slow"]
    assert committed == ["slow", "fast"]
    assert delivered == ["slow", "fast"]
    assert result.value["result"] == "slow"


@pytest.mark.anyio
async def test_slow_durable_log_throttles_starts_but_not_delivered_values() -> None:
    session = GatedSession()
    started: list[str] = []
    delivered: list[str] = []
    cap = 2

    async def body(args: Any, ctx: Any) -> Any:
        started.append(args["value"])
        return args["value"]

    async def program(tools: Any, print: Any) -> Any:
        async def call(i: int) -> None:
            delivered.append(await tools.quick({"value": str(i)}))

        await asyncio.gather(*(call(i) for i in range(10)))

    rt, _ = code_rt(program, cap=cap)
    rt.register(echo_tool("quick", parallel=True, body=body))
    scope = rt.scope("agent", session=session)  # type: ignore[arg-type]
    outcome: list[Any] = []

    async def execute() -> None:
        outcome.append(await run_code(rt, agent=scope))

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        with anyio.fail_after(2):
            while session.waiting <= cap:  # noqa: ASYNC110 - polling a test double
                await anyio.sleep(0.001)
        await anyio.sleep(0.02)
        # cap + 1 settle appends are pending: the lane stopped starting calls, yet every
        # committed call's value already reached the program.
        assert session.waiting == cap + 1
        assert delivered == ["0", "1", "2"]
        # At most one more call started (before the third commit, when the lane got to
        # it first; a call whose body never waits is started and committed as it is
        # submitted): none after.
        assert started in (["0", "1", "2"], ["0", "1", "2", "3"])
        session.gate.set()
    assert not outcome[0].is_error
    assert started == delivered == [str(i) for i in range(10)]
    assert sum(e["type"] == "tool/code-dispatch" for e in session.events) == 10


# ------------------------------------------------ settle: abandon, abort, drain


@pytest.mark.anyio
async def test_program_return_aborts_in_flight_and_abandons_queued_calls() -> None:
    reasons: list[Any] = []
    tasks: list[asyncio.Future[Any]] = []
    started = anyio.Event()

    async def slow(args: Any, ctx: Any) -> Any:
        started.set()
        await ctx.signal.wait()
        reasons.append(ctx.signal.reason)
        return "finished anyway"

    async def program(tools: Any, print: Any) -> Any:
        tasks.append(asyncio.ensure_future(tools.slow({"value": "a"})))
        tasks.append(asyncio.ensure_future(tools.echo({"value": "queued"})))
        await started.wait()
        return "returned early"

    rt, _ = code_rt(program)
    rt.register(echo_tool("slow", body=slow))
    calls: list[Any] = []
    rt.register(echo_tool("echo", calls=calls))
    results: list[Any] = []
    rt.on("tools/result", lambda exec_, result: results.append((exec_.name, result)))
    scope = rt.scope("agent", session=MemorySessionLog())
    result = await run_code(rt, agent=scope)

    assert result.value == {"logs": [], "result": "returned early"}
    assert reasons == ["run_code settled"]
    assert calls == []
    errors = [str(t.exception()) for t in tasks]
    assert errors == [
        "run_code run is over (run_code settled); slow result discarded",
        "run_code run is over (run_code settled); echo tool call abandoned",
    ]
    # The in-flight call's success became ABORTED; the abandoned one left no trace.
    assert [(e["type"], e["name"]) for e in scope.session.events] == [
        ("tool/code-dispatch-start", "slow"),
        ("tool/code-dispatch", "slow"),
    ]
    settle = scope.session.events[1]
    assert settle["isError"] is True
    assert settle["content"] == [{"type": "text", "text": "Error: tool call aborted"}]
    assert [(name, r.is_error) for name, r in results] == [("slow", True), ("run_code", False)]
    assert results[0][1].error.info.code == "ABORTED"


@pytest.mark.anyio
async def test_calls_after_the_run_is_over_are_not_dispatched() -> None:
    leaked: list[Any] = []

    async def program(tools: Any, print: Any) -> Any:
        leaked.append(tools.echo)
        return None

    rt, _ = code_rt(program)
    calls: list[Any] = []
    rt.register(echo_tool("echo", calls=calls))
    scope = rt.scope("agent", session=MemorySessionLog())
    await run_code(rt, agent=scope)
    with pytest.raises(ToolCallError) as error:
        await leaked[0]({"value": "late"})
    assert error.value.message == "run_code run is over (run_code settled); echo not dispatched"
    assert calls == [] and scope.session.events == []


@pytest.mark.anyio
async def test_a_commit_in_progress_when_the_program_returns_finishes_inside_the_run() -> None:
    events: list[str] = []
    in_post = anyio.Event()

    async def program(tools: Any, print: Any) -> Any:
        asyncio.ensure_future(tools.echo({"value": "x"})).add_done_callback(
            lambda t: events.append(f"program saw: {t.exception()}")
        )
        await in_post.wait()
        return None

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "echo":
            in_post.set()
            await anyio.sleep(0.02)
            events.append("post-execute done")
        return await next_()

    rt.on("tools/post-execute", post)
    rt.on(
        "tools/result",
        lambda exec_, result: events.append(f"result {exec_.name} {result.is_error}"),
    )
    result = await run_code(rt)
    await anyio.lowlevel.checkpoint()
    assert not result.is_error
    # The success whose post-execute was mid-flight is aborted (reference §7.7), and its
    # commit finishes before the outer result.
    assert [e for e in events if not e.startswith("program")] == [
        "post-execute done",
        "result echo True",
        "result run_code False",
    ]
    assert "program saw: run_code run is over (run_code settled); echo result discarded" in events


@pytest.mark.anyio
async def test_runtime_failure_still_drains_in_flight_calls() -> None:
    aborted: list[bool] = []

    async def slow(args: Any, ctx: Any) -> Any:
        await ctx.signal.wait()
        aborted.append(True)
        return "x"

    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        fut = asyncio.ensure_future(request.bindings[0].functions["slow"]({"value": "orphan"}))
        fut.add_done_callback(lambda f: f.exception())
        await anyio.sleep(0.01)
        raise RuntimeError("backend exploded")

    rt = ToolRuntime(mode="code", code_runtime=ScriptedRuntime(behavior))
    rt.register(echo_tool("slow", body=slow))
    scope = rt.scope("agent", session=MemorySessionLog())
    result = await run_code(rt, agent=scope)
    assert result.error.message == "backend exploded"
    assert aborted == [True]
    assert [e["type"] for e in scope.session.events] == [
        "tool/code-dispatch-start",
        "tool/code-dispatch",
    ]


@pytest.mark.anyio
async def test_every_event_is_appended_before_the_outer_result() -> None:
    from codemode.engine.scheduling import ModelToolCall, run_tool_calls

    async def program(tools: Any, print: Any) -> Any:
        await tools.nap({"id": "a"})
        asyncio.ensure_future(tools.nap({"id": "b", "ms": 10})).add_done_callback(
            lambda t: t.exception()
        )
        await anyio.sleep(0.001)
        return "done"

    rt, _ = code_rt(program)
    rt.register(sleep_tool("nap"))
    scope = rt.scope("agent", session=MemorySessionLog())
    arguments = '{"code": "program", "description": "Nap twice"}'
    results = await run_tool_calls(
        rt,
        [ModelToolCall("call-9", "run_code", arguments)],
        agent=scope,
        signal=AbortController().signal,
    )
    assert not results[0].is_error
    assert [(e["type"], e.get("subCallId")) for e in scope.session.events] == [
        ("tool/call", None),
        ("tool/code-dispatch-start", "call-9:code:1"),
        ("tool/code-dispatch", "call-9:code:1"),
        ("tool/code-dispatch-start", "call-9:code:2"),
        ("tool/code-dispatch", "call-9:code:2"),
        ("tool/result", None),
    ]


@pytest.mark.anyio
async def test_host_cancellation_cancels_parallel_bodies_and_leaves_no_worker_task() -> None:
    # Parallel bodies run in plain asyncio tasks the driver owns (cheaper than task-group
    # spawns); cancelling the host's call must still reach every body in flight, and no
    # worker may outlive the run.
    started = 0
    cancelled: list[str] = []
    all_started = anyio.Event()

    async def hang(args: Any, ctx: Any) -> Any:
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(args["value"])

    async def program(tools: Any, print: Any) -> Any:
        return await asyncio.gather(*(tools.hang({"value": str(i)}) for i in range(3)))

    rt, _ = code_rt(program)
    rt.register(echo_tool("hang", body=hang, parallel=True))
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_code, rt)
        with anyio.fail_after(10):
            await all_started.wait()
        tg.cancel_scope.cancel()
    assert sorted(cancelled) == ["0", "1", "2"]
    await anyio.lowlevel.checkpoint()
    leftover = [t for t in asyncio.all_tasks() if t.get_name() == "run_code sub-dispatch worker"]
    assert leftover == []


@pytest.mark.anyio
async def test_a_crashing_body_worker_fails_the_run_instead_of_hanging() -> None:
    # A bug that escapes a body (here: the pipeline's run stage itself raising) must end
    # the run as a task group would, not leave the program waiting for the call forever.
    async def program(tools: Any, print: Any) -> Any:
        return await tools.echo({"value": "x"})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo", parallel=True))

    original = rt.pipeline.run

    async def broken(gate: Any) -> Any:
        if gate.exec.name == "echo":  # the sub-call's body stage only, not run_code's
            raise RuntimeError("pipeline bug")
        return await original(gate)

    rt.pipeline.run = broken  # type: ignore[method-assign]
    with anyio.fail_after(10):
        result = await run_code(rt)
    # run_code's own body failed (its task group re-raised the worker's crash, as it does
    # for any task's), and the pipeline turned that into the call's error result.
    assert result.is_error
    assert result.error.message == "unhandled errors in a TaskGroup (1 sub-exception)"
