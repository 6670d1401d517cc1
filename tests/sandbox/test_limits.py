"""Every limit is terminal: compute, wall clock, memory, recursion, output, sub-calls."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest
from sandbox_helpers import Run, bindings, err, make_runner, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime

pytestmark = pytest.mark.anyio

LIMITS = Limits(
    max_compute_ms=400,
    max_wall_ms=3_000,
    max_memory_bytes=192 * 2**20,
    max_output_bytes=1_000,
    max_sub_calls=50,
)


@pytest.fixture(scope="module")
async def tight() -> AsyncIterator[PythonRuntime]:
    async with PythonRuntime(LIMITS) as rt:
        yield rt


@pytest.fixture
def trun(tight: PythonRuntime) -> Run:
    return make_runner(tight)


# -- compute budget and wall clock ------------------------------------------------------


async def test_hot_loop_dies_even_with_a_pending_slow_binding(trun: Run) -> None:
    started = time.monotonic()
    result = await trun(
        "pending = tools.slow({'seconds': 30})\nprint('spinning')\nwhile True:\n    pass"
    )
    assert err(result, "timeout") == "compute budget exhausted (400ms busy)"
    assert result.logs == ["spinning"]
    assert time.monotonic() - started < 2.5


async def test_awaiting_a_slow_binding_accrues_no_compute(trun: Run) -> None:
    # 1.5 s of waiting is well past the 400 ms compute budget.
    assert ok(await trun("return await tools.slow({'seconds': 1.5, 'value': 'done'})")) == "done"


async def test_wall_clock_ceiling(trun: Run) -> None:
    started = time.monotonic()
    result = await trun("import asyncio\nawait asyncio.sleep(60)")
    assert err(result, "timeout") == "wall-clock ceiling reached (3000ms)"
    assert 2.9 < time.monotonic() - started < 5


@pytest.mark.parametrize(
    "catcher",
    [
        "except BaseException",
        "except Exception",
        "except",
        "except (SystemExit, KeyboardInterrupt, Exception)",
    ],
)
async def test_compute_limit_cannot_be_caught(trun: Run, catcher: str) -> None:
    program = f"while True:\n    try:\n        while True:\n            pass\n    {catcher}:\n        print('caught')"
    result = await trun(program)
    assert err(result, "timeout") == "compute budget exhausted (400ms busy)"
    assert result.logs == []


async def test_slow_regex_is_a_compute_timeout(trun: Run) -> None:
    result = await trun("import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')")
    assert err(result, "timeout").startswith("compute budget exhausted")


# -- memory ---------------------------------------------------------------------------


MEMORY = "memory limit exceeded (201326592 bytes)"


@pytest.fixture(scope="module")
async def roomy() -> AsyncIterator[PythonRuntime]:
    # The memory limit of ``tight`` with compute to spare: growing to 192 MiB in 1 MB
    # steps is ~140 ms of page faults on an idle machine and passed 400 ms of CPU on a
    # loaded one, where the compute budget then fired first.
    limits = msgspec.structs.replace(LIMITS, max_compute_ms=20_000, max_wall_ms=30_000)
    async with PythonRuntime(limits) as rt:
        yield rt


@pytest.fixture
def mrun(roomy: PythonRuntime) -> Run:
    return make_runner(roomy)


async def test_memory_bomb(mrun: Run) -> None:
    result = await mrun("print('start')\nx = []\nwhile True:\n    x.append('a' * 1_000_000)")
    assert err(result, "memory") == MEMORY
    assert result.logs == ["start"]


@pytest.mark.parametrize(
    "catcher", ["except MemoryError", "except Exception", "except BaseException", "except"]
)
async def test_memory_limit_cannot_be_caught(mrun: Run, catcher: str) -> None:
    program = (
        "x = []\ntry:\n    while True:\n        x.append('a' * 1_000_000)\n"
        f"{catcher}:\n    x = None\n    print('survived')\n    return 'survived'"
    )
    result = await mrun(program)
    assert err(result, "memory") == MEMORY
    assert result.logs == []


async def test_single_huge_allocation_cannot_be_caught(trun: Run) -> None:
    result = await trun("try:\n    s = 'a' * 10**12\nexcept MemoryError:\n    return 'survived'")
    assert err(result, "memory") == MEMORY


async def test_memory_error_in_finally_and_gather(trun: Run) -> None:
    program = "try:\n    s = bytearray(10**12)\nfinally:\n    return 'swallowed'"
    assert err(await trun(program), "memory") == MEMORY
    program = (
        "import asyncio\nasync def bomb():\n    return bytearray(10**12)\n"
        "r = await asyncio.gather(bomb(), return_exceptions=True)\nreturn 'survived'"
    )
    assert err(await trun(program), "memory") == MEMORY


async def test_memory_error_in_context_manager_exit(trun: Run) -> None:
    program = (
        "class Swallow:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n"
        "with Swallow():\n    s = bytearray(10**12)\nreturn 'survived'"
    )
    assert err(await trun(program), "memory") == MEMORY


# -- recursion ------------------------------------------------------------------------


async def test_recursion_bomb(trun: Run) -> None:
    message = err(await trun("def f(n):\n    return f(n + 1)\nf(0)"), "recursion")
    assert message.startswith(
        "Traceback (most recent call last):\n  line 3, in <program>\n    f(0)\n"
        "  line 2, in f\n    return f(n + 1)\n"
    )
    assert "  [Previous line repeated " in message
    assert message.endswith("RecursionError: maximum recursion depth exceeded")


async def test_recursion_limit_cannot_be_caught(trun: Run) -> None:
    program = (
        "def f(n):\n    return f(n + 1)\nfor _ in range(3):\n    try:\n        f(0)\n"
        "    except RecursionError:\n        print('caught')\nreturn 'survived'"
    )
    result = await trun(program)
    assert err(result, "recursion").endswith("RecursionError: maximum recursion depth exceeded")
    assert result.logs == []


# -- output ledger --------------------------------------------------------------------


async def test_output_flood(trun: Run) -> None:
    result = await trun("while True:\n    print('flood flood flood')")
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"
    # 49 whole entries of 19 bytes + 48 commas + "[]" fill 981 bytes; the 50th entry
    # gets the remaining 18 bytes after its comma: 16 characters and the quotes.
    assert result.logs[:49] == ["flood flood flood"] * 49
    assert result.logs[49] == "flood flood floo" and len(result.logs) == 50


async def test_huge_single_line(trun: Run) -> None:
    result = await trun("print('x' * 10_000_000)")
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"
    assert result.logs == ["x" * 996]


async def test_value_too_large(trun: Run) -> None:
    result = await trun("print('kept')\nreturn 'v' * 5_000")
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"
    assert result.logs == ["kept"]


async def test_diagnostic_counts_towards_the_ledger(trun: Run) -> None:
    result = await trun("raise ValueError('e' * 2_000)")
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"


async def test_ledger_boundary_is_exact() -> None:
    # Output metering counts JSON bytes: logs ["abc"] (7 bytes) + value "xy" (4 bytes).
    async with PythonRuntime(Limits(max_output_bytes=11, pool_size=1)) as rt:
        run = make_runner(rt)
        result = await run("print('abc')\nreturn 'xy'")
        assert result.logs == ["abc"] and ok(result) == "xy"
    async with PythonRuntime(Limits(max_output_bytes=10, pool_size=1)) as rt:
        run = make_runner(rt)
        result = await run("print('abc')\nreturn 'xy'")
        assert err(result, "output-limit") == "outer output exceeded 10 bytes"
        assert result.logs == ["abc"]
    async with PythonRuntime(Limits(max_output_bytes=7, pool_size=1)) as rt:
        run = make_runner(rt)
        assert ok(await run("return '€'")) == "€"  # 2 quotes + 3 UTF-8 bytes + 2 for []


# -- sub-calls ------------------------------------------------------------------------


async def test_sub_call_limit_is_terminal(trun: Run) -> None:
    program = (
        "n = 0\nfor i in range(100):\n    try:\n        await tools.echo({'i': i})\n"
        "        n += 1\n    except Exception:\n        pass\nreturn n"
    )
    assert err(await trun(program), "sub-call-limit") == "sub-call limit reached (50 calls per run)"


# -- abort, disposal, dead workers ------------------------------------------------------


async def test_abort_mid_run(trun: Run) -> None:
    controller = AbortController()

    async def abort_soon() -> None:
        await anyio.sleep(0.3)
        controller.abort("user pressed stop")

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_soon)
        result = await trun("print('before')\nawait tools.slow({})", signal=controller.signal)
    assert err(result, "abort") == "user pressed stop"
    assert result.logs == ["before"]


async def test_abort_during_a_hot_loop(trun: Run) -> None:
    controller = AbortController()

    async def abort_soon() -> None:
        await anyio.sleep(0.1)
        controller.abort()

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_soon)
        result = await trun("while True:\n    pass", signal=controller.signal)
    assert err(result, "abort") == "This operation was aborted"


async def test_worker_killed_externally(tight: PythonRuntime) -> None:
    run = make_runner(tight)

    async def kill_worker() -> None:
        for _ in range(500):
            if tight.processes().worker_pids:
                break
            await anyio.sleep(0.01)
        await anyio.sleep(0.2)
        for pid in tight.processes().worker_pids:
            os.kill(pid, signal.SIGKILL)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_worker)
        result = await run("print('working')\nawait tools.slow({})")
    assert err(result, "worker-exit") == "worker exited with code -9 before completing"
    assert result.logs == ["working"]
    assert ok(await run("return 'next run works'")) == "next run works"


async def test_disposal_aborts_in_flight_runs() -> None:
    runtime = PythonRuntime(Limits(pool_size=1))
    results = []
    run = make_runner(runtime)

    async def in_flight() -> None:
        results.append(await run("print('started')\nawait tools.slow({})"))

    async with anyio.create_task_group() as tg:
        async with runtime:
            tg.start_soon(in_flight)
            for _ in range(500):
                if runtime.processes().worker_pids:
                    break
                await anyio.sleep(0.01)
            await anyio.sleep(0.1)
    assert err(results[0], "abort") == "runtime disposed"
    with pytest.raises(RuntimeError, match=r"PythonRuntime.run\(\) after disposal"):
        await runtime.run(CodeRunRequest("return 1", bindings(), AbortController().signal))


# -- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_compute_ms": 0}, "Limits.max_compute_ms must be a positive number"),
        ({"max_wall_ms": -1}, "Limits.max_wall_ms must be a positive number"),
        ({"max_output_bytes": float("nan")}, "Limits.max_output_bytes must be a positive number"),
        ({"max_memory_bytes": True}, "Limits.max_memory_bytes must be a positive number"),
        ({"max_sub_calls": "10"}, "Limits.max_sub_calls must be a positive number"),
        ({"pool_size": 0}, "Limits.pool_size must be a positive number"),
        ({"max_output_bytes": 3}, "Limits.max_output_bytes must be at least 4"),
        ({"max_frame_bytes": 10}, "Limits.max_frame_bytes must be at least 65536"),
        ({"max_memory_bytes": 1.5}, "Limits.max_memory_bytes must be an integer"),
    ],
)
def test_limits_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_limits_defaults() -> None:
    limits = Limits()
    assert (limits.max_compute_ms, limits.max_wall_ms) == (60_000, 600_000)
    assert (limits.max_output_bytes, limits.max_memory_bytes) == (64 * 2**20, 512 * 2**20)
    assert limits.frame_bytes == 65 * 2**20


async def test_run_validates_bindings(tight: PythonRuntime) -> None:
    from codemode.engine import Binding

    with pytest.raises(ValueError, match='reserved binding global "console"'):
        await tight.run(
            CodeRunRequest("return 1", [Binding("console", {})], AbortController().signal)
        )
    with pytest.raises(ValueError, match='binding global "_getattr_" is not a usable identifier'):
        await tight.run(
            CodeRunRequest("return 1", [Binding("_getattr_", {})], AbortController().signal)
        )
