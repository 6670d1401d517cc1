"""Call relays on the host: plain asyncio tasks owned by the run's supervisor.

A run's binding calls are relayed by tasks that park between calls for reuse; on asyncio
they are plain tasks rather than task-group spawns (cheaper per fan-out), so the
supervisor must end them itself: cancelled with the run, never left behind.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import (
    AbortController,
    Binding,
    BindingCallError,
    CodeRunRequest,
    ErrorClass,
    SettlingBinding,
)
from codemode.sandbox import Limits, PythonRuntime

pytestmark = pytest.mark.anyio


def _relay_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "sandbox call relay"]


async def test_cancelling_a_run_cancels_its_in_flight_calls_and_ends_every_relay() -> None:
    started = 0
    cancelled = 0
    all_started = anyio.Event()

    async def hang(args: Any) -> Any:
        nonlocal started, cancelled
        started += 1
        if started == 4:
            all_started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled += 1

    program = "import asyncio\nawait asyncio.gather(*[tools.hang({}) for _ in range(4)])\n"
    async with PythonRuntime(Limits(max_wall_ms=30_000)) as runtime:
        request = CodeRunRequest(program, bindings({"hang": hang}), AbortController().signal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run, request)
            with anyio.fail_after(20):
                await all_started.wait()
            tg.cancel_scope.cancel()
        assert cancelled == 4
        assert _relay_tasks() == []


async def test_parked_relays_end_with_the_run() -> None:
    async def echo(args: Any) -> Any:
        return args

    # Sequential calls reuse one parked relay; fan-out calls start more; none outlives
    # the run that started it.
    program = (
        "import asyncio\n"
        "for i in range(3):\n"
        "    await tools.echo({'i': i})\n"
        "values = await asyncio.gather(*[tools.echo({'i': i}) for i in range(8)])\n"
        "return [v['i'] for v in values]\n"
    )
    async with PythonRuntime() as runtime:
        result = await runtime.run(
            CodeRunRequest(program, bindings({"echo": echo}), AbortController().signal)
        )
        assert ok(result) == list(range(8))
        assert _relay_tasks() == []


def test_calls_relay_in_plain_tasks_under_asyncio_run() -> None:
    # Call frames are handed on from the socket's readiness callback, where no task is
    # current: under a plain ``asyncio.run`` (no anyio runner) an anyio spawn there
    # raised and the run hung until its wall-clock ceiling.
    names: list[str] = []

    async def echo(args: Any) -> Any:
        task = asyncio.current_task()
        names.append(task.get_name() if task is not None else "")
        return args

    program = (
        "import asyncio\n"
        "await tools.echo({'i': -1})\n"
        "values = await asyncio.gather(*[tools.echo({'i': i}) for i in range(8)])\n"
        "return [v['i'] for v in values]\n"
    )

    async def main() -> Any:
        async with PythonRuntime(Limits(max_wall_ms=30_000)) as runtime:
            request = CodeRunRequest(program, bindings({"echo": echo}), AbortController().signal)
            return await runtime.run(request)

    result = asyncio.run(main())
    assert ok(result) == list(range(8))
    assert len(names) == 9
    assert set(names) == {"sandbox call relay"}


async def test_settling_bindings_are_answered_from_the_settle_callback_not_a_relay() -> None:
    loop = asyncio.get_running_loop()
    relays_at_begin: list[int] = []

    async def awaited(args: Any) -> Any:
        raise AssertionError("a settling binding was awaited instead of begun")

    def begin(args: Any, settle: Any) -> None:
        relays_at_begin.append(len(_relay_tasks()))
        if args.get("fail"):
            loop.call_soon(settle, False, BindingCallError("refused here", "DENIED"))
        else:
            loop.call_soon(settle, True, {"twice": args["i"] * 2})

    def refuse(args: Any, settle: Any) -> None:
        raise BindingCallError("not now", "BUSY")

    functions = {
        "echo": SettlingBinding("echo", awaited, begin),
        "nope": SettlingBinding("nope", awaited, refuse),
    }
    program = (
        "out = [(await tools.echo({'i': i}))['twice'] for i in range(5)]\n"
        "for name, args in (('echo', {'fail': True}), ('nope', {})):\n"
        "    try:\n"
        "        await getattr(tools, name)(args)\n"
        "    except ToolCallError as e:\n"
        "        out.append(str(e))\n"
        "return out"
    )
    async with PythonRuntime(Limits(max_wall_ms=30_000)) as runtime:
        request = CodeRunRequest(
            program, [Binding("tools", functions, ErrorClass())], AbortController().signal
        )
        value = ok(await runtime.run(request))
    assert value[:5] == [0, 2, 4, 6, 8]
    assert "refused here" in value[5] and "not now" in value[6]
    assert relays_at_begin == [0] * 6  # no relay task was ever started for them
