"""The exception tree and how raised values become failure results."""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_support import call, error_text, raw_tool

import codemode.engine as engine
from codemode.engine import (
    AbortError,
    BindingCallError,
    CodeRunFailedError,
    HarnessError,
    JsonSchemaError,
    ToolArgsError,
    ToolNotFoundError,
    ToolOutputError,
    ToolRuntime,
    ToolTimeoutError,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (JsonSchemaError("m"), "UNSUPPORTED_SCHEMA"),
        (ToolArgsError("m"), "INVALID_ARGS"),
        (ToolOutputError("m"), "INVALID_TOOL_OUTPUT"),
        (ToolNotFoundError("m"), "UNKNOWN_TOOL"),
        (AbortError("m"), "ABORTED"),
        (AbortError("m", "ABORTED_BEFORE_DISPATCH"), "ABORTED_BEFORE_DISPATCH"),
        (ToolTimeoutError("m"), "TOOL_TIMEOUT"),
        (CodeRunFailedError("m"), "CODE_RUN_FAILED"),
        (HarnessError("m", "CUSTOM"), "CUSTOM"),
    ],
)
def test_harness_errors_carry_a_code_and_their_message(error: HarnessError, code: str) -> None:
    assert isinstance(error, HarnessError)
    assert isinstance(error, Exception)
    assert error.code == code
    assert error.message == "m"
    assert str(error) == "m"


def test_binding_call_error_is_outside_the_harness_tree() -> None:
    error = BindingCallError("sub-call failed", "UNKNOWN_TOOL")
    assert not isinstance(error, HarnessError)
    assert (error.message, error.code, str(error)) == (
        "sub-call failed",
        "UNKNOWN_TOOL",
        "sub-call failed",
    )
    assert BindingCallError("x").code is None


def test_every_public_name_is_exported_and_documented() -> None:
    expected = {
        "ToolRuntime", "Scope", "define_tool", "ToolDefinition", "ToolOutput", "ToolSchema",
        "ToolExecutionInput", "ToolExecution", "ToolRunContext", "ToolDispatchExecution",
        "ToolExecutionSuccess", "ToolExecutionFailure", "ToolFailure", "ToolErrorInfo",
        "Allow", "Deny", "Ask", "Accept", "Block", "CodeDispatchLog",
        "AbortController", "AbortSignal", "text",
        "CodeRuntime", "CodeRunRequest", "CodeRunResult", "CodeRunError", "Binding", "ErrorClass",
        "BindingCallError", "SessionLog", "MemorySessionLog", "SqliteSessionLog",
        "HarnessError", "JsonSchemaError", "ToolArgsError", "ToolOutputError",
        "ToolNotFoundError", "AbortError", "ToolTimeoutError", "CodeRunFailedError",
    }  # fmt: skip
    assert expected <= set(engine.__all__)
    assert engine.__all__ == sorted(engine.__all__, key=lambda n: (n[0].islower(), n))
    for name in engine.__all__:
        assert getattr(engine, name).__doc__, name


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot print")


class _Custom(HarnessError):
    pass


RAISED = {
    "plain": (RuntimeError("plain failure"), ("plain failure", None, None)),
    "value-error": (ValueError("bad value"), ("bad value", None, None)),
    "key-error": (KeyError("missing"), ("missing", None, None)),
    "empty-message": (RuntimeError(), ("RuntimeError", None, None)),
    "unprintable": (_Unprintable(), ("<unprintable thrown value>", None, None)),
    "harness": (HarnessError("harness failure", "SOME_CODE"), ("harness failure", "HarnessError", "SOME_CODE")),
    "subclass": (_Custom("custom failure", "CUSTOM"), ("custom failure", "_Custom", "CUSTOM")),
    "not-found": (ToolNotFoundError('unknown tool "x"'), ('unknown tool "x"', "ToolNotFoundError", "UNKNOWN_TOOL")),
}  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize(("error", "expected"), list(RAISED.values()), ids=list(RAISED))
async def test_raised_values_become_failures(
    error: BaseException, expected: tuple[Any, ...]
) -> None:
    async def body(_a: Any, _e: Any) -> Any:
        raise error

    rt = ToolRuntime()
    rt.register(raw_tool(body=body))
    result = await rt.execute(call("raw"))
    message = expected[0]
    assert error_text(result) == (*expected, f"Error: {message}")
    wire = result.to_json()
    assert set(wire) == {"isError", "error", "content"}
    if expected[1] is None:
        assert wire["error"] == {"message": message}
    else:
        assert wire["error"] == {
            "message": message,
            "info": {"name": expected[1], "code": expected[2]},
        }


@pytest.mark.anyio
async def test_base_exceptions_are_not_swallowed() -> None:
    async def body(_a: Any, _e: Any) -> Any:
        raise KeyboardInterrupt

    rt = ToolRuntime()
    rt.register(raw_tool(body=body))
    with pytest.raises(KeyboardInterrupt):
        await rt.execute(call("raw"))


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (HarnessError, "HARNESS_ERROR"),
        (JsonSchemaError, "UNSUPPORTED_SCHEMA"),
        (ToolArgsError, "INVALID_ARGS"),
        (ToolOutputError, "INVALID_TOOL_OUTPUT"),
        (ToolNotFoundError, "UNKNOWN_TOOL"),
        (AbortError, "ABORTED"),
        (ToolTimeoutError, "TOOL_TIMEOUT"),
        (CodeRunFailedError, "CODE_RUN_FAILED"),
    ],
)
def test_each_error_class_declares_its_code(cls: type[HarnessError], code: str) -> None:
    # Programs branch on the class attribute without constructing an error.
    assert cls.code == code
    assert cls("m").code == code


def test_an_instance_code_overrides_the_class_code() -> None:
    assert AbortError("m", "ABORTED_BEFORE_DISPATCH").code == "ABORTED_BEFORE_DISPATCH"
    assert AbortError.code == "ABORTED"
    assert BindingCallError.code is None
    assert BindingCallError("m", "X").code == "X"
