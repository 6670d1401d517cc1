"""The host stays flat under floods (issue 25, item 4): what a flooding or huge-argument
program costs the host's memory, counted with ``tracemalloc`` (every allocation of the
host process, the decode thread's included) around real runs of both guests.

- An output flood to the cap: the host holds the logs once while it runs; the failure
  message quotes a bounded head and tail of them (``max_quoted_output_chars``), so the
  logs are the only copy; quoting all of them (the reference message) is one more, and
  the runtime's result is the logs' only holder (freed with it, the cycle collector off).
- One huge argument: its frame is held at most twice (received payload and decoded
  value), never a third time as a separate copy of the value's bytes.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from sandbox_helpers import make_runner

from codemode.engine import AbortController, ToolExecutionInput, ToolRuntime
from codemode.sandbox import Limits, ProcessRuntime, PythonRuntime, TypeScriptRuntime

pytestmark = pytest.mark.anyio

MiB = 2**20
CAP = 8 * MiB
BIG = 8 * 10**6

FLOOD = {
    PythonRuntime: "while True:\n    print('A' * 10000)",
    TypeScriptRuntime: "while (true) console.log('A'.repeat(10000))",
}
BIG_ARG = {
    PythonRuntime: f"return await tools.size({{'blob': 'x' * {BIG}}})",
    TypeScriptRuntime: f"return await tools.size({{blob: 'x'.repeat({BIG})}})",
}
RUNTIMES = [PythonRuntime, TypeScriptRuntime]


@pytest.fixture
def traced() -> Iterator[None]:
    """``tracemalloc`` on and the cycle collector off: what is freed is freed by its
    reference count, as soon as its last holder lets go."""
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
        gc.enable()


async def held_after_release(before: int) -> int:
    """Traced bytes above ``before`` once the run's last holders have let go.

    A heavy frame is decoded on a worker thread, which drops its own reference to the
    decoded value one step after handing it to the loop; on a busy machine that step can
    come after the run has returned. The cycle collector stays off, so only reference
    counts free anything here: the wait cannot hide a value kept by a cycle or a holder.
    """
    held = tracemalloc.get_traced_memory()[0] - before
    with anyio.move_on_after(2):
        while held >= MiB:
            await anyio.sleep(0.005)
            held = tracemalloc.get_traced_memory()[0] - before
    return held


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_flood_s_logs_live_only_as_long_as_its_result(
    runtime: type[ProcessRuntime], traced: None
) -> None:
    async with runtime(Limits(pool_size=1, max_output_bytes=CAP)) as rt:
        run = make_runner(rt)
        await run("return 1")
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = await run(FLOOD[runtime])
        assert result.error is not None and result.error.kind == "output-limit"
        kept = sum(len(entry) for entry in result.logs)
        assert CAP - 20_000 < kept <= CAP
        current, peak = tracemalloc.get_traced_memory()
        # The logs once, plus frame buffers: never a second copy of them.
        assert peak - before < CAP + 2 * MiB
        assert current - before > CAP - 20_000
        del result
        # The supervisor handed its logs over: nothing else holds them (before, it
        # kept them until the cycle collector ran).
        assert await held_after_release(before) < MiB


async def _flood_through_run_code(
    runtime: type[ProcessRuntime], **options: Any
) -> tuple[str, int, int]:
    """A flood to the cap through ``run_code``: the result's text, the traced bytes
    before the run, and its traced peak. The result is released before returning."""
    async with runtime(Limits(pool_size=1, max_output_bytes=CAP)) as code_runtime:
        rt = ToolRuntime(mode="code", code_runtime=code_runtime, **options)
        scope = rt.scope("flood")

        async def execute(program: str) -> Any:
            return await rt.execute(
                ToolExecutionInput(
                    call_id="flood",
                    name="run_code",
                    arguments={"code": program, "description": "flood"},
                    signal=AbortController().signal,
                    agent=scope,
                )
            )

        assert not (await execute("return 1")).is_error
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = await execute(FLOOD[runtime])
        peak = tracemalloc.get_traced_memory()[1]
        assert result.is_error
        text = result.content[0]["text"]
        assert text.startswith("Error: code run failed (output-limit): outer output exceeded")
        assert result.error.message == text[len("Error: ") :]
        del result
        # Freed by its reference count, the cycle collector off: the run's context is
        # still kept in a cycle (the sub-dispatch driver and its worker callbacks), but
        # it lets go of its result once the pipeline froze it.
        assert await held_after_release(before) < MiB + len(text)
    return text, before, peak


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_flood_through_run_code_costs_its_logs_once(
    runtime: type[ProcessRuntime], traced: None
) -> None:
    quote = 64 * 1024
    text, before, peak = await _flood_through_run_code(runtime, max_quoted_output_chars=quote)
    body = text.split("\nCaptured output:\n", 1)[1]
    first, rest = body.split("\n[", 1)
    note, last = rest.split("]\n", 1)
    # The first and the last half of the quote, around a line that counts the rest.
    assert len(first) == quote // 2 and first.startswith("A" * 10000 + "\n")
    assert len(last) == quote // 2 and last.endswith("A")
    omitted = int(note.split(" ", 1)[0].replace(",", ""))
    assert note.endswith(f"(the quote keeps the first and the last {quote // 2:,})")
    # What the ledger kept: the cap less "[]", the commas and the quotes of each entry.
    assert CAP - 20_000 < omitted + quote < CAP
    # The logs once (they are the cap) and nothing near a second copy: before, the
    # message quoting them and the result's "Error: ..." text were two more.
    assert peak - before < CAP + 2 * MiB


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_an_unbounded_quote_keeps_the_reference_message_at_two_copies(
    runtime: type[ProcessRuntime], traced: None
) -> None:
    text, before, peak = await _flood_through_run_code(runtime, max_quoted_output_chars=None)
    assert "\nCaptured output:\nAAAA" in text and len(text) > CAP - 20_000
    assert "characters of captured output not quoted" not in text
    # The logs and the message quoting them, then the message and the result's
    # "Error: ..." text: two copies at any time (it was three: the join, the
    # concatenation and the result's text, with the logs still alive).
    assert peak - before < 2 * CAP + 2 * MiB


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_one_huge_argument_is_held_twice_at_most(
    runtime: type[ProcessRuntime], traced: None
) -> None:
    sizes: list[int] = []

    async def size(args: Any) -> Any:
        sizes.append(len(args["blob"]))
        return len(args["blob"])

    async with runtime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        await run("return 1")
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = await run(BIG_ARG[runtime], tools={"size": size})
        assert result.error is None, result.error
        assert result.value == BIG and sizes == [BIG]
        peak = tracemalloc.get_traced_memory()[1]
        # The received payload and the decoded string (a separate copy of the value's
        # JSON bytes made it three).
        assert peak - before < 2 * BIG + MiB
        del result
        assert await held_after_release(before) < MiB


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_repeated_short_entries_cost_their_list_slot_alone(
    runtime: type[ProcessRuntime], traced: None
) -> None:
    count = 100_000
    program = {
        PythonRuntime: f"for i in range({count}):\n    print('.')\nprint('end', {count})",
        TypeScriptRuntime: f"for (let i = 0; i < {count}; i++) console.log('.')\n"
        f"console.log('end', {count})",
    }[runtime]
    async with runtime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        await run("return 1")
        before = tracemalloc.get_traced_memory()[0]
        result = await run(program)
        assert result.error is None, result.error
        assert result.logs == ["."] * count + [f"end {count}"]
        # One shared string: each entry is its list slot (8 bytes), not ~58 bytes more.
        assert len({id(entry) for entry in result.logs[:count]}) == 1
        assert tracemalloc.get_traced_memory()[0] - before < count * 8 + 256 * 1024
