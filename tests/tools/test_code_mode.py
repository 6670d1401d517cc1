"""Programs see canonical values: the tools driven from ``run_code`` through the pipeline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from codemode.engine import (
    AbortController,
    BindingCallError,
    CodeRunError,
    CodeRunRequest,
    CodeRunResult,
    MemorySessionLog,
    ToolExecutionInput,
    ToolRuntime,
)
from codemode.tools import FsObservationPolicy, default_tools

pytestmark = pytest.mark.anyio

Script = Callable[[Mapping[str, Callable[[Any], Awaitable[Any]]]], Awaitable[Any]]


class ScriptRuntime:
    """A stand-in ``CodeRuntime``: the "program" is a Python coroutine given the bindings."""

    language = "python"
    isolation = "in-process"

    def __init__(self, script: Script) -> None:
        self.script = script

    async def run(self, request: CodeRunRequest) -> CodeRunResult:
        [binding] = [b for b in request.bindings if b.global_name == "tools"]
        try:
            value = await self.script(binding.functions)
        except BindingCallError as exc:
            return CodeRunResult(error=CodeRunError("exception", exc.message))
        return CodeRunResult(value=value)


async def run_program(workspace: Path, tmp_path: Path, script: Script) -> Any:
    policy = FsObservationPolicy()
    rt = ToolRuntime(mode="code", code_runtime=ScriptRuntime(script))
    for tool in default_tools(
        workspace,
        output_dir=tmp_path / "out",
        fs_policy=policy,
        glob_max_results=2,
        grep_max_matches=2,
    ):
        rt.register(tool)
    policy.install(rt)
    agent = rt.scope("agent", session=MemorySessionLog())
    return await rt.execute(
        ToolExecutionInput(
            call_id="run-1",
            name="run_code",
            arguments={"code": "(script)", "description": "Exercise the tools"},
            signal=AbortController().signal,
            agent=agent,
        )
    )


async def test_values_not_renderings(workspace: Path, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def script(tools: Mapping[str, Callable[[Any], Awaitable[Any]]]) -> Any:
        await tools["write"]({"file_path": "src/a.txt", "content": "alpha\nbeta\n"})
        await tools["write"]({"file_path": "src/b.txt", "content": "alpha\n"})
        await tools["write"]({"file_path": "src/c.txt", "content": "alpha\n"})
        seen["read"] = await tools["read"]({"file_path": "src/a.txt"})
        seen["edit"] = await tools["edit"](
            {"file_path": "src/a.txt", "old_string": "beta", "new_string": "gamma"}
        )
        seen["glob"] = await tools["glob"]({"pattern": "*.txt"})
        seen["grep"] = await tools["grep"]({"pattern": "alpha"})
        seen["bash"] = await tools["bash"]({"command": "cat src/a.txt", "description": "Show a"})
        try:
            await tools["read"]({"file_path": "missing.txt"})
        except BindingCallError as exc:
            seen["error"] = (exc.message, exc.code)
        return "done"

    result = await run_program(workspace, tmp_path, script)
    assert not result.is_error, result.to_json()
    assert seen["read"]["lines"] == [{"number": 1, "text": "alpha"}, {"number": 2, "text": "beta"}]
    assert seen["edit"]["after"] == "alpha\ngamma\n"
    # Every match comes back to the program, even past the inline caps.
    assert sorted(seen["glob"]["paths"]) == ["src/a.txt", "src/b.txt", "src/c.txt"]
    assert len(seen["grep"]["matches"]) == 3
    assert seen["bash"]["stdout"]["text"] == "alpha\ngamma\n"
    assert seen["error"] == (
        f'cannot read "{workspace / "missing.txt"}": not found',
        "FS_NOT_FOUND",
    )
    # Nested calls never spill.
    assert not (tmp_path / "out" / "spill").exists()


async def test_policy_applies_to_nested_calls(workspace: Path, tmp_path: Path) -> None:
    (workspace / "keep.txt").write_text("original\n")

    async def script(tools: Mapping[str, Callable[[Any], Awaitable[Any]]]) -> Any:
        try:
            await tools["write"]({"file_path": "keep.txt", "content": "clobbered"})
        except BindingCallError as exc:
            return exc.message
        return "written"

    result = await run_program(workspace, tmp_path, script)
    assert "without reading it first" in str(result.to_json())
    assert (workspace / "keep.txt").read_text() == "original\n"
