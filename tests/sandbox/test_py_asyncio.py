"""The Python guest's asyncio: primitives, tasks and waiting, with tool calls as coroutines.

Everything runs in real workers against host tools; orderings are forced with events
and host-side counters, never with timing.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from sandbox_helpers import DEFAULT_TOOLS, Run, err, ok

pytestmark = pytest.mark.anyio


class _Gauge:
    """A host tool that records how many of its calls were in flight at once."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.calls = 0

    async def __call__(self, args: Any) -> Any:
        self.active += 1
        self.calls += 1
        self.peak = max(self.peak, self.active)
        try:
            await anyio.sleep(0.02)
        finally:
            self.active -= 1
        return args.get("i")


async def test_semaphore_bounds_a_fan_out(run: Run) -> None:
    gauge = _Gauge()
    program = """
import asyncio
sem = asyncio.Semaphore(3)
async def one(i):
    async with sem:
        return await tools.work({'i': i})
return await asyncio.gather(*[one(i) for i in range(12)])
"""
    assert ok(await run(program, tools={"work": gauge})) == list(range(12))
    assert gauge.calls == 12 and gauge.peak == 3


async def test_lock_event_and_queue(run: Run) -> None:
    program = """
import asyncio
lock = asyncio.Lock()
ready = asyncio.Event()
q = asyncio.Queue(maxsize=2)
log = []
async def producer():
    await ready.wait()
    for i in range(5):
        await q.put(await tools.echo({'i': i}))
    await q.put(None)
async def consumer():
    out = []
    while (item := await q.get()) is not None:
        async with lock:
            out.append(item['i'])
        q.task_done()
    return out
p = asyncio.create_task(producer())
c = asyncio.create_task(consumer())
log.append(lock.locked())
ready.set()
await p
got = await c
try:
    q.get_nowait()
except asyncio.QueueEmpty:
    log.append('empty')
return [got, log, ready.is_set(), q.qsize()]
"""
    assert ok(await run(program)) == [[0, 1, 2, 3, 4], [False, "empty"], True, 0]


async def test_create_task_and_task_group_take_tool_calls_and_coroutines(run: Run) -> None:
    program = """
import asyncio
async def double(i):
    return 2 * (await tools.echo({'i': i}))['i']
t1 = asyncio.create_task(tools.echo({'t': 1}))
t2 = asyncio.create_task(double(5), name='doubler')
async with asyncio.TaskGroup() as tg:
    a = tg.create_task(double(1))
    b = tg.create_task(tools.echo({'b': 2}))
return [await t1, await t2, t2.get_name(), a.result(), b.result(), t1.done(), repr(t2)]
"""
    assert ok(await run(program)) == [
        {"t": 1}, 10, "doubler", 2, {"b": 2}, True, "<Task 'doubler' finished>",
    ]  # fmt: skip


async def test_task_group_failures_arrive_as_an_exception_group(run: Run) -> None:
    program = """
import asyncio
async def bad(i):
    raise ValueError(f'bad {i}')
async def refused():
    raise ToolCallError('refused', toolName='mine')
caught = []
try:
    async with asyncio.TaskGroup() as tg:
        tg.create_task(bad(1))
        tg.create_task(bad(2))
        tg.create_task(refused())
except* ValueError as group:
    caught.append(sorted(str(e) for e in group.exceptions))
except* ToolCallError as group:
    caught.append([e.toolName for e in group.exceptions])
try:
    async with asyncio.TaskGroup() as tg:
        tg.create_task(tools.fail({'message': 'tool says no'}))
except* ToolCallError as group:
    caught.append([str(e) for e in group.exceptions])
return caught
"""
    assert ok(await run(program)) == [["bad 1", "bad 2"], ["mine"], ["tool says no"]]


async def test_wait_for_and_timeout(run: Run) -> None:
    program = """
import asyncio
out = [await asyncio.wait_for(tools.echo({'w': 1}), 5)]
try:
    await asyncio.wait_for(tools.slow({'seconds': 30}), 0.01)
except TimeoutError:
    out.append('wait_for timed out')
try:
    async with asyncio.timeout(0.01):
        await asyncio.Event().wait()
except TimeoutError:
    out.append('timeout block expired')
return out
"""
    assert ok(await run(program)) == [{"w": 1}, "wait_for timed out", "timeout block expired"]


async def test_as_completed_yields_in_completion_order(run: Run) -> None:
    program = """
import asyncio
gate = asyncio.Event()
async def late():
    await gate.wait()
    return 'late'
out = []
for next_done in asyncio.as_completed([late(), tools.echo({'v': 'early'})]):
    out.append(await next_done)
    gate.set()
return out
"""
    assert ok(await run(program)) == [{"v": "early"}, "late"]


async def test_wait_returns_the_programs_own_tasks(run: Run) -> None:
    program = """
import asyncio
gate = asyncio.Event()
fast = asyncio.create_task(tools.echo({'v': 1}))
slow = asyncio.create_task(gate.wait())
done, pending = await asyncio.wait([fast, slow], return_when=asyncio.FIRST_COMPLETED)
first = [fast in done, slow in pending]
gate.set()
done, pending = await asyncio.wait([fast, slow, tools.echo({'v': 2})])
return [first, len(done), len(pending), sorted(str(t.result()) for t in done)]
"""
    assert ok(await run(program)) == [[True, True], 3, 0, ["True", "{'v': 1}", "{'v': 2}"]]


async def test_gather_return_exceptions_keeps_order(run: Run) -> None:
    program = """
import asyncio
async def boom():
    raise KeyError('k')
res = await asyncio.gather(tools.fail({}), boom(), tools.echo({'v': 1}), return_exceptions=True)
return [type(r).__name__ if isinstance(r, BaseException) else r for r in res]
"""
    assert ok(await run(program)) == ["ToolCallError", "KeyError", {"v": 1}]


async def test_cancelled_task(run: Run) -> None:
    program = """
import asyncio
t = asyncio.create_task(asyncio.Event().wait())
await asyncio.sleep(0)
t.cancel()
try:
    await t
except asyncio.CancelledError:
    pass
seen = []
t2 = asyncio.create_task(tools.echo({}))
t2.add_done_callback(lambda task: seen.append(task is t2))
await t2
await asyncio.sleep(0)
return [t.cancelled(), t.done(), seen]
"""
    assert ok(await run(program)) == [True, True, [True]]


async def test_tasks_and_groups_are_opaque(run: Run) -> None:
    program = """
import asyncio
t = asyncio.create_task(tools.echo({}))
await t
async with asyncio.TaskGroup() as tg:
    pass
return [dir(t), dir(tg), [n for n in dir(asyncio) if 'loop' in n.lower()]]
"""
    names, group_names, loop_names = ok(await run(program))
    assert names == [
        "add_done_callback", "cancel", "cancelled", "done", "exception", "get_name",
        "remove_done_callback", "result", "set_name",
    ]  # fmt: skip
    assert group_names == ["create_task"]
    assert loop_names == []


@pytest.mark.parametrize(
    ("program", "kind", "fragment"),
    [
        ("t = asyncio.create_task(tools.echo({}))\nt.get_coro()", "exception", "get_coro"),
        ("t = asyncio.create_task(tools.echo({}))\nt.get_loop()", "exception", "get_loop"),
        ("t = asyncio.create_task(tools.echo({}))\nt._Task__inner", "forbidden", "_Task__inner"),
        ("t = asyncio.create_task(tools.echo({}))\ngetattr(t, '_Task__inner')", "forbidden", ""),
        ("q = asyncio.Queue()\nq._loop", "forbidden", '"_loop" is an invalid attribute'),
        ("getattr(asyncio.Lock(), '_loop', None)", "forbidden", '"_loop"'),
        ("asyncio.get_event_loop()", "exception", "has no attribute 'get_event_loop'"),
        ("asyncio.get_running_loop()", "exception", "has no attribute 'get_running_loop'"),
        ("asyncio.current_task()", "exception", "has no attribute 'current_task'"),
        ("asyncio.gather.__self__", "forbidden", '"__self__" is an invalid attribute'),
        ("c = asyncio.Event().wait()\nc.send(None)", "forbidden", '"send" of coroutines'),
        ("c = asyncio.Event().wait()\nc.cr_frame", "forbidden", '"cr_frame" is a restricted'),
        ("import copy\ncopy.copy(asyncio.create_task(tools.echo({})))", "exception", "pickled"),
        ("asyncio.Lock.acquire = print", "forbidden", "cannot be modified"),
        ("asyncio.create_task(print)", "exception", "a coroutine was expected"),
        ("await asyncio.wait_for(1, 1)", "exception", "a coroutine or an awaitable is required"),
        ("asyncio.run(tools.echo({}))", "exception", "use `return await main()`"),
    ],
)
async def test_nothing_internal_is_reachable(
    run: Run, program: str, kind: str, fragment: str
) -> None:
    message = err(await run("import asyncio\n" + program), kind)
    assert fragment in message, message


async def test_tool_calls_started_by_tasks_are_not_reported_as_unawaited(run: Run) -> None:
    gauge = _Gauge()
    program = """
import asyncio
t = asyncio.create_task(tools.work({'i': 1}))
g = asyncio.gather(tools.work({'i': 2}))
forgotten = tools.work({'i': 3})
await asyncio.wait([t, asyncio.ensure_future(g)])  # scheduled calls ran to completion
"""
    result = await run(program, tools={**DEFAULT_TOOLS, "work": gauge})
    assert ok(result) is None
    assert gauge.calls == 2  # scheduled calls ran; the one only created did not
    assert result.logs == ["1 tool call was never awaited: tools.work ×1"]


async def test_recursion_in_a_task_is_terminal(run: Run) -> None:
    program = """
import asyncio
def deep(n):
    return deep(n + 1)
async def task():
    try:
        deep(0)
    except RecursionError:
        return 'caught'
r = await asyncio.gather(task(), return_exceptions=True)
return 'survived'
"""
    message = err(await run(program), "recursion")
    assert message.endswith("RecursionError: maximum recursion depth exceeded"), message[-200:]


async def test_barrier_shield_and_coroutine_checks(run: Run) -> None:
    program = """
import asyncio
barrier = asyncio.Barrier(2)
order = []
async def party(i):
    order.append(('before', i))
    await barrier.wait()
    order.append(('after', i))
await asyncio.gather(party(1), party(2))
shielded = await asyncio.shield(tools.echo({'s': 1}))
async def own():
    pass
call = tools.echo({})
checks = [asyncio.iscoroutine(call), asyncio.iscoroutinefunction(own), asyncio.iscoroutine(1)]
await call
return [[o[0] for o in order], shielded, checks]
"""
    assert ok(await run(program)) == [
        ["before", "before", "after", "after"], {"s": 1}, [True, True, False],
    ]  # fmt: skip
