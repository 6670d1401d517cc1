"""How a run's supervisor ends: a settled run stops its reader instead of cancelling.

A run settled by a frame (the program's completion, an output overflow) or by a signal
while its reader waits has nothing left to interrupt: the reader returns by itself and
the run's task group ends without a cancellation (a cancel delivery, one more event-loop
turn and the scope's unwinding on every run). Anything else still cancels.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

pytestmark = pytest.mark.anyio


@pytest.fixture
def cancels(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts cancel-scope cancels of anyio's asyncio backend (the real method runs)."""
    from anyio._backends import _asyncio as backend

    calls: list[int] = []
    real = backend.CancelScope.cancel

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(backend.CancelScope, "cancel", counted)
    return calls


@pytest.mark.parametrize("runtime_class", [PythonRuntime, TypeScriptRuntime])
async def test_a_completed_run_ends_without_a_cancellation(
    runtime_class: Any, cancels: list[int]
) -> None:
    async with runtime_class() as runtime:
        await runtime.run(CodeRunRequest("return 1", [], AbortController().signal))
        cancels.clear()
        for value in range(5):
            result = await runtime.run(
                CodeRunRequest(f"return {value}", [], AbortController().signal)
            )
            assert ok(result) == value
        assert cancels == []


async def test_an_abort_while_the_reader_waits_ends_the_run_at_once(
    cancels: list[int],
) -> None:
    started = anyio.Event()

    async def wait(args: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    controller = AbortController()
    async with PythonRuntime(Limits(max_wall_ms=60_000)) as runtime:
        request = CodeRunRequest(
            "await tools.wait({})\nreturn 1", bindings({"wait": wait}), controller.signal
        )
        results: list[Any] = []
        done = anyio.Event()

        async def run() -> None:
            results.append(await runtime.run(request))
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(20):
                await started.wait()
            controller.abort("enough")
            with anyio.fail_after(5):
                await done.wait()
        assert results[0].error is not None and results[0].error.kind == "abort"
        assert "enough" in results[0].error.message


async def test_a_timeout_still_ends_a_busy_run() -> None:
    async with PythonRuntime(Limits(max_wall_ms=300)) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(
                CodeRunRequest("while True:\n    pass\n", [], AbortController().signal)
            )
        assert result.error is not None and result.error.kind == "timeout"
