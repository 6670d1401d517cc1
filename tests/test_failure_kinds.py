"""Every failure kind the real sandboxes produce reaches the host machine-readably
(``error.info.kind``) through the public API, in both languages. Kinds the
guests do not produce yet are covered with a scripted runtime in
``tests/engine/test_code_mode_kinds.py``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from codemode.engine import (
    AbortController,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

LIMITS = Limits(
    max_compute_ms=1000,
    max_wall_ms=20_000,
    max_output_bytes=4096,
    max_memory_bytes=128 * 2**20,
    pool_size=1,
)

PYTHON = {
    "exception": "raise ValueError('boom')",
    "timeout": "while True:\n    pass",
    "memory": "x = []\nwhile True:\n    x.append(' ' * 10**6)",
    "output-limit": "while True:\n    print('x' * 100)",
    "invalid-output": "return {1, 2}",
    "abort": "await tools.stop({})\nreturn 'not reached'",
}
TYPESCRIPT = {
    "exception": "throw new Error('boom');",
    "timeout": "while (true) {}",
    "memory": "const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20));",
    "output-limit": "for (;;) console.log('x'.repeat(100));",
    "invalid-output": "return new Map();",
    "abort": "await tools.stop({}); return 'not reached';",
}


def _stop_tool(controller: AbortController) -> Any:
    """A tool that aborts the enclosing ``run_code`` call, as a user pressing stop would."""

    async def body(_args: Any, ctx: Any) -> Any:
        controller.abort("user pressed stop")
        await ctx.signal.wait()
        return None

    return define_tool(
        name="stop",
        description="Abort the run.",
        parameters={},
        output=ToolOutput(schema={"type": "null"}, render=lambda a, v: [text("stopped")]),
        execute=body,
    )


async def _run(code_runtime: Any, program: str) -> Any:
    rt = ToolRuntime(mode="code", code_runtime=code_runtime)
    controller = AbortController()
    rt.register(_stop_tool(controller))
    return await rt.execute(
        ToolExecutionInput(
            call_id="call-1",
            name="run_code",
            arguments={"code": program, "description": "Fail on purpose"},
            signal=controller.signal,
        )
    )


def _assert_kind(result: Any, kind: str) -> None:
    assert result.is_error, result
    assert result.error.info is not None
    assert (result.error.info.code, result.error.info.kind) == ("CODE_RUN_FAILED", kind)
    assert result.error.message.startswith(f"code run failed ({kind}): ")
    assert result.to_json()["error"]["info"]["kind"] == kind


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(PYTHON))
async def test_python_failure_kinds(kind: str) -> None:
    async with PythonRuntime(LIMITS) as runtime:
        _assert_kind(await _run(runtime, PYTHON[kind]), kind)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(TYPESCRIPT))
async def test_typescript_failure_kinds(kind: str) -> None:
    async with TypeScriptRuntime(LIMITS) as runtime:
        _assert_kind(await _run(runtime, TYPESCRIPT[kind]), kind)


@pytest.mark.anyio
async def test_a_worker_that_cannot_start_is_worker_exit() -> None:
    # 16 MiB is below what a Python worker maps at start-up (the CLI refuses it up
    # front; the library reports the dead worker).
    limits = Limits(max_memory_bytes=16 * 2**20, pool_size=1)
    with anyio.fail_after(60):
        async with PythonRuntime(limits) as runtime:
            _assert_kind(await _run(runtime, "return 1"), "worker-exit")
