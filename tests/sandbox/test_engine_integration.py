"""``PythonRuntime`` behind the engine's ``run_code``: sub-calls re-enter the pipeline."""

from __future__ import annotations

from typing import Any

import pytest
from sandbox_helpers import add_tool

from codemode.engine import (
    AbortController,
    CodeRuntime,
    MemorySessionLog,
    ToolExecutionInput,
    ToolRuntime,
)
from codemode.sandbox import PythonRuntime

pytestmark = pytest.mark.anyio


async def _run_code(runtime: PythonRuntime, code: str) -> tuple[Any, MemorySessionLog]:
    rt = ToolRuntime(mode="code", code_runtime=runtime)
    rt.register(add_tool())
    session = MemorySessionLog()
    agent = rt.scope("agent", session=session)
    result = await rt.execute(
        ToolExecutionInput(
            call_id="call-1",
            name="run_code",
            arguments={"code": code, "description": "Add some numbers"},
            signal=AbortController().signal,
            agent=agent,
        )
    )
    return result, session


async def test_is_a_code_runtime(runtime: PythonRuntime) -> None:
    assert isinstance(runtime, CodeRuntime)


async def test_sub_calls_go_through_the_pipeline(runtime: PythonRuntime) -> None:
    code = """
import asyncio
x = await tools.add({'a': 1, 'b': 2})
pair = await asyncio.gather(tools.add({'a': x, 'b': 10}), tools.add({'a': 0, 'b': 0}))
try:
    await tools.add({'a': 'one'})
except ToolCallError as e:
    print(e.toolName, e.code)
return {'x': x, 'pair': pair}
"""
    result, session = await _run_code(runtime, code)
    assert not result.is_error, result
    assert result.value == {"logs": ["add INVALID_ARGS"], "result": {"x": 3, "pair": [13, 0]}}
    types = [event["type"] for event in session.events]
    assert sorted(types) == ["tool/code-dispatch"] * 4 + ["tool/code-dispatch-start"] * 4


async def test_program_failure_becomes_code_run_failed(runtime: PythonRuntime) -> None:
    result, _ = await _run_code(runtime, "print('working')\nraise ValueError('boom')")
    assert result.is_error
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert result.error.message == (
        "code run failed (exception): Traceback (most recent call last):\n"
        "  line 2, in <program>\n    raise ValueError('boom')\nValueError: boom\n"
        "Captured output:\nworking"
    )
