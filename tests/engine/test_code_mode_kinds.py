"""Code-run failures carry their kind machine-readably (``CodeRunFailedError.kind``,
``error.info.kind``, the wire form), and undeclared argument keys are named in the run's
logs with the closest declared key (issue 9 §7, issue 11 §4)."""

from __future__ import annotations

from typing import Any

import pytest
from code_mode_support import ScriptedRuntime, code_rt, run_code

import codemode.engine as engine
from codemode.engine import (
    ERROR_KINDS,
    CodeRunError,
    CodeRunFailedError,
    CodeRunRequest,
    CodeRunResult,
    ToolDefinition,
    ToolErrorInfo,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)

# ---------------------------------------------------------------- failure kinds


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(ERROR_KINDS))
async def test_every_kind_reaches_the_failure_info_and_the_wire(kind: str) -> None:
    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        return CodeRunResult(logs=["before"], error=CodeRunError(kind, "it failed"))

    rt = ToolRuntime(mode="code", code_runtime=ScriptedRuntime(behavior))
    result = await run_code(rt)
    assert result.is_error
    message = f"code run failed ({kind}): it failed\nCaptured output:\nbefore"
    assert result.error.message == message
    assert result.error.info == ToolErrorInfo("CodeRunFailedError", "CODE_RUN_FAILED", kind)
    assert result.to_json()["error"] == {
        "message": message,
        "info": {"name": "CodeRunFailedError", "code": "CODE_RUN_FAILED", "kind": kind},
    }


@pytest.mark.anyio
async def test_an_in_process_program_exception_has_kind_exception() -> None:
    async def program(tools: Any, print: Any) -> Any:
        raise ValueError("boom")

    rt, _ = code_rt(program)
    result = await run_code(rt)
    assert result.error.info is not None
    assert result.error.info.kind == "exception"


def test_code_run_failed_error_carries_its_kind() -> None:
    error = CodeRunFailedError("code run failed (forbidden): no", "forbidden")
    assert (error.code, error.kind, str(error)) == (
        "CODE_RUN_FAILED",
        "forbidden",
        "code run failed (forbidden): no",
    )
    # Raised by a host without a kind, it has none; other harness errors never do.
    assert CodeRunFailedError("m").kind is None
    assert engine.ToolArgsError("m").kind is None


@pytest.mark.anyio
async def test_a_host_raised_code_run_failure_without_kind_omits_it_on_the_wire() -> None:
    async def body(_args: Any, _ctx: Any) -> Any:
        raise CodeRunFailedError("host says no")

    rt = ToolRuntime()
    rt.register(
        define_tool(
            name="t",
            description="Fails.",
            parameters={},
            output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text("x")]),
            execute=body,
        )
    )
    result = await rt.execute(_call("t", {}))
    assert result.to_json()["error"]["info"] == {
        "name": "CodeRunFailedError",
        "code": "CODE_RUN_FAILED",
    }


def test_error_kind_is_exported_with_its_documentation() -> None:
    assert "ErrorKind" in engine.__all__ and "ERROR_KINDS" in engine.__all__
    assert engine.ErrorKind.__doc__ and "forbidden" in engine.ErrorKind.__doc__


# ---------------------------------------------------------------- unknown keys


def _reader(seen: list[Any]) -> Any:
    async def body(args: Any, _ctx: Any) -> Any:
        seen.append(dict(args))
        return "ok"

    return define_tool(
        name="read",
        description="Read.",
        parameters={
            "file_path": {"type": "string", "required": True},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
        },
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
        execute=body,
    )


@pytest.mark.anyio
async def test_unknown_keys_are_passed_on_and_named_once_with_the_closest_key() -> None:
    seen: list[Any] = []

    async def program(tools: Any, print: Any) -> Any:
        print("program output")
        await tools.read({"file_path": "a", "limt": 2})
        await tools.read({"file_path": "b", "limt": 3, "qqq": 1})
        return "done"

    rt, _ = code_rt(program)
    rt.register(_reader(seen))
    result = await run_code(rt)
    assert not result.is_error, result
    assert seen == [{"file_path": "a", "limt": 2}, {"file_path": "b", "limt": 3, "qqq": 1}]
    assert result.value == {
        "logs": [
            "program output",
            'read ignored unknown key "limt" (did you mean "limit"?)',
            'read ignored unknown key "qqq"',
        ],
        "result": "done",
    }


@pytest.mark.anyio
async def test_unknown_key_notes_reach_the_captured_output_of_a_failed_run() -> None:
    async def program(tools: Any, print: Any) -> Any:
        await tools.read({"file_path": "a", "ofset": 1})
        raise RuntimeError("later failure")

    rt, _ = code_rt(program)
    rt.register(_reader([]))
    result = await run_code(rt)
    assert result.error.message == (
        "code run failed (exception): RuntimeError: later failure\nCaptured output:\n"
        'read ignored unknown key "ofset" (did you mean "offset"?)'
    )


@pytest.mark.anyio
async def test_declared_keys_and_closed_schemas_give_no_note() -> None:
    async def body(args: Any, _ctx: Any) -> Any:
        return "ok"

    # A raw definition: its schema reaches ``run_code`` as written (closed to extras).
    closed = ToolDefinition(
        name="closed",
        description="Closed.",
        parameters={
            "type": "object",
            "properties": {"limit": {"type": "integer"}},
            "additionalProperties": False,
        },
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
        execute=body,
    )

    async def program(tools: Any, print: Any) -> Any:
        await tools.read({"file_path": "a", "limit": 1})
        await tools.closed({"limt": 1})
        return None

    rt, _ = code_rt(program)
    rt.register(_reader([]))
    rt.register(closed)
    result = await run_code(rt)
    assert result.value == {"logs": [], "result": None}


@pytest.mark.anyio
async def test_unknown_key_notes_are_capped() -> None:
    async def program(tools: Any, print: Any) -> Any:
        await tools.read({"file_path": "a", **{f"k{i}": i for i in range(50)}})
        return None

    rt, _ = code_rt(program)
    rt.register(_reader([]))
    result = await run_code(rt)
    logs = result.value["logs"]
    assert len(logs) == 21
    assert logs[0].startswith('read ignored unknown key "k0"')
    assert logs[-1] == "... and 30 more unknown keys ignored"


def _call(name: str, arguments: Any) -> Any:
    from pipeline_support import call

    return call(name, arguments)


@pytest.mark.anyio
async def test_odd_and_huge_unknown_keys_stay_one_short_line() -> None:
    async def program(tools: Any, print: Any) -> Any:
        await tools.read({"file_path": "a", "two\nlines": 1, "k" * 100_000: 2})
        return None

    rt, _ = code_rt(program)
    rt.register(_reader([]))
    result = await run_code(rt)
    assert result.value["logs"] == [
        'read ignored unknown key "two\\nlines"',
        'read ignored unknown key "' + "k" * 64 + '…"',
    ]
