"""``codemode.engine.testing.InProcessRuntime``: the in-process ``CodeRuntime`` double."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from codemode.engine import (
    AbortController,
    Binding,
    BindingCallError,
    CodeRunRequest,
    CodeRuntime,
    ErrorClass,
)
from codemode.engine.testing import NO_VALUE, InProcessRuntime, ToolCallError


def request(
    functions: dict[str, Any] | None = None, *, program: str = "p", signal: Any = None
) -> CodeRunRequest:
    return CodeRunRequest(
        program=program,
        bindings=[Binding("tools", functions or {}, ErrorClass("ToolCallError", "toolName"))],
        signal=signal if signal is not None else AbortController().signal,
    )


def test_is_a_code_runtime() -> None:
    runtime = InProcessRuntime()
    assert isinstance(runtime, CodeRuntime)
    assert (runtime.language, runtime.isolation) == ("python", "in-process")
    assert InProcessRuntime(language="typescript").language == "typescript"


@pytest.mark.anyio
async def test_programs_are_selected_by_text_with_a_default() -> None:
    async def default(tools: Any, print: Any) -> Any:
        return "default"

    async def special(tools: Any, print: Any) -> Any:
        return "special"

    runtime = InProcessRuntime(default, programs={"special": special})
    assert (await runtime.run(request(program="special"))).value == "special"
    assert (await runtime.run(request(program="other"))).value == "default"
    runtime.register("late", special)
    assert (await runtime.run(request(program="late"))).value == "special"
    assert runtime.runs == 3


@pytest.mark.anyio
async def test_no_program_for_the_text_is_an_exception_result() -> None:
    result = await InProcessRuntime().run(request())
    assert (result.error.kind, result.error.message) == (
        "exception",
        "no program registered for this text",
    )


@pytest.mark.anyio
async def test_print_records_one_entry_per_line() -> None:
    async def program(tools: Any, print: Any) -> Any:
        print("a", 1, None)
        print("two\nlines")
        print()
        print("x", "y", sep="-")
        print("no newline", end="")
        print("keeps\r and \u2028 inside")
        return NO_VALUE

    result = await InProcessRuntime(program).run(request())
    assert result.logs == [
        "a 1 None",
        "two",
        "lines",
        "",
        "x-y",
        "no newline",
        "keeps\r and \u2028 inside",
    ]
    assert not result.has_value and result.error is None


@pytest.mark.anyio
@pytest.mark.parametrize("value", [None, 0, "", [], {"k": [1, 2.5]}])
async def test_any_json_return_value_is_kept_exactly(value: Any) -> None:
    async def program(tools: Any, print: Any) -> Any:
        return value

    result = await InProcessRuntime(program).run(request())
    assert result.has_value and result.value == value


@pytest.mark.anyio
async def test_exceptions_and_lossy_values_are_result_fields() -> None:
    async def raises(tools: Any, print: Any) -> Any:
        print("partial")
        raise KeyError("k")

    async def lossy(tools: Any, print: Any) -> Any:
        return {1, 2}

    failed = await InProcessRuntime(raises).run(request())
    assert failed.logs == ["partial"]
    assert (failed.error.kind, failed.error.message) == ("exception", "KeyError: 'k'")
    invalid = await InProcessRuntime(lossy).run(request())
    assert (invalid.error.kind, invalid.error.message) == (
        "invalid-output",
        "program completion must be lossless JSON",
    )


@pytest.mark.anyio
async def test_bindings_by_attribute_and_subscript_and_errors() -> None:
    calls: list[Any] = []

    async def echo(args: Any) -> Any:
        calls.append(args)
        return args

    async def fail(args: Any) -> Any:
        raise BindingCallError("it failed", "SOME_CODE")

    async def program(tools: Any, print: Any) -> Any:
        out = [await tools.echo({"a": 1}), await tools["my-tool"]({"b": 2})]
        try:
            await tools.fail({})
        except ToolCallError as exc:
            out.append([exc.toolName, exc.tool_name, exc.message, exc.code, str(exc)])
        for probe in (lambda: tools.missing, lambda: tools["missing"]):
            try:
                probe()
            except (AttributeError, KeyError) as exc:
                out.append(type(exc).__name__)
        out.append(hasattr(tools, "missing"))
        return out

    runtime = InProcessRuntime(program)
    result = await runtime.run(request({"echo": echo, "my-tool": echo, "fail": fail}))
    assert result.value == [
        {"a": 1},
        {"b": 2},
        ["fail", "fail", "it failed", "SOME_CODE", "it failed"],
        "AttributeError",
        "KeyError",
        False,
    ]
    assert calls == [{"a": 1}, {"b": 2}]


@pytest.mark.anyio
async def test_calling_a_binding_without_arguments_passes_nothing() -> None:
    received: list[Any] = []

    async def probe(*args: Any) -> Any:
        received.append(args)
        return None

    async def program(tools: Any, print: Any) -> Any:
        await tools.probe()
        return NO_VALUE

    await InProcessRuntime(program).run(request({"probe": probe}))
    (args,) = received
    assert len(args) == 1 and args[0] is NO_VALUE


@pytest.mark.anyio
async def test_pre_aborted_signal_runs_nothing() -> None:
    ran: list[bool] = []

    async def program(tools: Any, print: Any) -> Any:
        ran.append(True)

    controller = AbortController()
    controller.abort("stop")
    runtime = InProcessRuntime(program)
    result = await runtime.run(request(signal=controller.signal))
    assert (result.logs, result.error.kind, result.error.message) == ([], "abort", "stop")
    assert ran == []


@pytest.mark.anyio
async def test_abort_during_the_run_stops_the_program() -> None:
    controller = AbortController()
    reached: list[str] = []

    async def program(tools: Any, print: Any) -> Any:
        print("started")
        controller.abort("user-cancel")
        await anyio.sleep(1)
        reached.append("after sleep")

    with anyio.fail_after(1):
        result = await InProcessRuntime(program).run(request(signal=controller.signal))
    assert result.logs == ["started"]
    assert (result.error.kind, result.error.message) == ("abort", "user-cancel")
    assert reached == []


@pytest.mark.anyio
async def test_seam_misuse_raises() -> None:
    runtime = InProcessRuntime()
    with pytest.raises(ValueError, match='reserved binding global "console"'):
        await runtime.run(
            CodeRunRequest(
                program="p", bindings=[Binding("console", {})], signal=AbortController().signal
            )
        )
    with pytest.raises(ValueError, match='binding global "lambda" is not a usable identifier'):
        await runtime.run(
            CodeRunRequest(
                program="p", bindings=[Binding("lambda", {})], signal=AbortController().signal
            )
        )
