"""``run_code`` itself: argument validation, the call card, output and rendering,
program failures, bindings, and what a failing sub-call looks like to the program
(reference §3.2, §3.4, §3.5, §4.3)."""

from __future__ import annotations

from typing import Any

import pytest
from code_mode_support import ScriptedRuntime, code_rt, echo_tool, error_text, run_code

from codemode.engine import (
    AbortController,
    CodeRunError,
    CodeRunRequest,
    CodeRunResult,
    Deny,
    ErrorClass,
    HarnessError,
    MemorySessionLog,
    ToolExecutionInput,
    ToolRuntime,
)
from codemode.engine.policies import TimeoutPolicy
from codemode.engine.testing import NO_VALUE, ToolCallError

# ------------------------------------------------------------- argument checks


@pytest.mark.anyio
async def test_missing_description_is_invalid_args() -> None:
    rt, runtime = code_rt()
    result = await rt.execute(
        ToolExecutionInput(
            call_id="c", name="run_code", arguments={"code": "x"}, signal=AbortController().signal
        )
    )
    assert result.error.message == 'invalid arguments: missing required property "description"'
    assert (result.error.info.name, result.error.info.code) == ("ToolArgsError", "INVALID_ARGS")
    assert runtime.runs == 0


@pytest.mark.anyio
async def test_non_object_arguments_are_invalid_args() -> None:
    rt, _ = code_rt()
    result = await rt.execute(
        ToolExecutionInput(
            call_id="c", name="run_code", arguments="x", signal=AbortController().signal
        )
    )
    assert result.error.message == 'invalid arguments: "arguments" must be an object'


@pytest.mark.anyio
@pytest.mark.parametrize("blank", ["", "   ", "\n\t", "\u00a0\u3000\ufeff\u2028"])
async def test_blank_description_is_a_plain_error(blank: str) -> None:
    rt, runtime = code_rt()
    result = await run_code(rt, description=blank)
    assert result.error.message == "invalid description: expected a non-empty string"
    assert result.error.info is None
    assert error_text(result) == "Error: invalid description: expected a non-empty string"
    assert runtime.runs == 0


@pytest.mark.anyio
@pytest.mark.parametrize("kept", ["\x1c", "\x85", "a"])
async def test_description_blankness_follows_js_trim(kept: str) -> None:
    rt, runtime = code_rt(program=None)
    result = await run_code(rt, description=kept)
    # Not blank for JS trim (Python's str.strip would call U+001C/U+0085 blank): the
    # run proceeds (and fails only because no program is registered).
    assert result.error.message == (
        "code run failed (exception): no program registered for this text"
    )
    assert runtime.runs == 1


@pytest.mark.anyio
async def test_description_is_checked_before_the_runtime() -> None:
    rt = ToolRuntime(mode="code")
    result = await run_code(rt, description=" ")
    assert result.error.message == "invalid description: expected a non-empty string"


@pytest.mark.anyio
async def test_missing_runtime_at_execution_is_a_structured_error() -> None:
    rt = ToolRuntime(mode="code")
    result = await run_code(rt)
    assert result.is_error
    assert "requires a code runtime" in error_text(result)
    assert 'mode "code"' in result.error.message


@pytest.mark.anyio
async def test_missing_runtime_names_the_scopes_mode() -> None:
    rt = ToolRuntime(mode="native")
    scope = rt.scope("agent")
    scope.present_as("both")
    result = await run_code(rt, agent=scope)
    assert 'mode "both" requires a code runtime' in result.error.message


# ------------------------------------------------------------------ call card


def test_present_call_card() -> None:
    rt, _ = code_rt()
    definition = rt.get("run_code")
    assert definition is not None and definition.present_call is not None
    assert definition.present_call({"code": "return 1", "description": "Return one"}) == {
        "card": "generic",
        "title": "Return one",
        "kind": "execute",
        "rawInput": "return 1",
    }
    assert definition.present_call({"code": "return 1"}) is None


# ------------------------------------------------------------ output, rendering


def scripted(result: CodeRunResult, mode: str = "code") -> tuple[ToolRuntime, ScriptedRuntime]:
    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        return result

    runtime = ScriptedRuntime(behavior)
    return ToolRuntime(mode=mode, code_runtime=runtime), runtime


NO_OUTPUT = "(run_code completed with no output)"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("result", "value", "rendered"),
    [
        (CodeRunResult(logs=["printed"]), {"logs": ["printed"]}, "printed"),
        (CodeRunResult(logs=[], value="returned"), {"logs": [], "result": "returned"}, "returned"),
        (
            CodeRunResult(logs=["printed"], value="returned"),
            {"logs": ["printed"], "result": "returned"},
            "printed\nreturned",
        ),
        (CodeRunResult(logs=["a", "", "b"]), {"logs": ["a", "", "b"]}, "a\n\nb"),
        (CodeRunResult(logs=[]), {"logs": []}, NO_OUTPUT),
        (CodeRunResult(logs=[], value=""), {"logs": [], "result": ""}, NO_OUTPUT),
        (CodeRunResult(logs=["x"], value=""), {"logs": ["x"], "result": ""}, "x"),
        (CodeRunResult(logs=[""]), {"logs": [""]}, NO_OUTPUT),
        (CodeRunResult(logs=[], value=None), {"logs": [], "result": None}, "null"),
    ],
)
async def test_output_value_and_rendering(result: CodeRunResult, value: Any, rendered: str) -> None:
    rt, _ = scripted(result)
    outcome = await run_code(rt)
    assert not outcome.is_error
    assert outcome.value == value
    assert list(outcome.content) == [{"type": "text", "text": rendered}]
    assert outcome.meta is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ({"n": 42, "ok": True}, '{\n  "n": 42,\n  "ok": true\n}'),
        ([], "[]"),
        ({}, "{}"),
        (["x", 2], '[\n  "x",\n  2\n]'),
        (
            {"outer": [{"inner": True}]},
            '{\n  "outer": [\n    {\n      "inner": true\n    }\n  ]\n}',
        ),
        ({"e": [], "o": {}}, '{\n  "e": [],\n  "o": {}\n}'),
        (True, "true"),
        ("raw\nstring", "raw\nstring"),
        ({"s": 'é\n"q"'}, '{\n  "s": "é\\n\\"q\\""\n}'),
        # Numbers as JS String(n): what a JSON reader expects, never Python's repr.
        (3, "3"),
        (3.0, "3"),
        (-1.5, "-1.5"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1.5e-10, "1.5e-10"),
        (123456789012345680000.0, "123456789012345680000"),
        (2**53, "9007199254740992"),
        ([1.0, 2.5, 100.0], "[\n  1,\n  2.5,\n  100\n]"),
    ],
)
async def test_value_rendering(value: Any, rendered: str) -> None:
    rt, _ = scripted(CodeRunResult(logs=[], value=value))
    assert error_text(await run_code(rt)) == rendered


@pytest.mark.anyio
async def test_containers_at_depth_five_render_compact() -> None:
    value = {"a": {"b": {"c": {"d": {"e": {"f": [1, {"g": 2}], "h": []}}}}}}
    rt, _ = scripted(CodeRunResult(logs=["log"], value=value))
    assert error_text(await run_code(rt)) == (
        "log\n"
        "{\n"
        '  "a": {\n'
        '    "b": {\n'
        '      "c": {\n'
        '        "d": {\n'
        '          "e": {"f":[1,{"g":2}],"h":[]}\n'
        "        }\n"
        "      }\n"
        "    }\n"
        "  }\n"
        "}"
    )


@pytest.mark.anyio
async def test_deep_values_render_without_recursion_and_linear_indentation() -> None:
    value: Any = {"pair": ["leaf", 2]}
    for _ in range(5000):
        value = [value]
    rt, _ = scripted(CodeRunResult(logs=[], value=value))
    rendered = error_text(await run_code(rt))
    assert rendered.startswith("[\n  [\n    [")
    assert '"leaf"' in rendered and rendered.endswith("]")
    assert max(len(line) - len(line.lstrip(" ")) for line in rendered.splitlines()) <= 10
    assert len(rendered) < 11_000


# ----------------------------------------------------------- program failures


@pytest.mark.anyio
async def test_failed_run_carries_kind_message_and_captured_output() -> None:
    rt, _ = scripted(
        CodeRunResult(
            logs=["captured before failure", "second"],
            error=CodeRunError("output-limit", "outer output exceeded 8 bytes"),
        )
    )
    result = await run_code(rt)
    message = (
        "code run failed (output-limit): outer output exceeded 8 bytes\n"
        "Captured output:\ncaptured before failure\nsecond"
    )
    assert result.error.message == message
    assert (result.error.info.name, result.error.info.code) == (
        "CodeRunFailedError",
        "CODE_RUN_FAILED",
    )
    assert list(result.content) == [{"type": "text", "text": f"Error: {message}"}]


@pytest.mark.anyio
async def test_captured_output_past_the_quote_bound_is_quoted_head_and_tail() -> None:
    logs = ["first line", *(f"line {i:05d}" for i in range(10_000)), "last line"]
    rt, _ = scripted(CodeRunResult(logs=logs, error=CodeRunError("timeout", "too slow")))
    rt.max_quoted_output_chars = 100
    result = await run_code(rt)
    joined = "\n".join(logs)
    header = "code run failed (timeout): too slow\nCaptured output:\n"
    assert result.error.message == (
        f"{header}{joined[:50]}\n"
        f"[{len(joined) - 100:,} more characters of captured output not quoted"
        f" (the quote keeps the first and the last 50)]\n{joined[-50:]}"
    )
    assert list(result.content) == [{"type": "text", "text": f"Error: {result.error.message}"}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("limit", "quoted"),
    [(None, True), (2**20, True), (22, True), (21, False)],
)
async def test_the_quote_bound_counts_the_joining_newlines(limit: int | None, quoted: bool) -> None:
    logs = ["é" * 10, "😀" * 11]  # 22 characters joined; non-ASCII counts as characters
    rt = ToolRuntime(
        mode="code",
        code_runtime=scripted(CodeRunResult(logs=logs, error=CodeRunError("exception", "E")))[1],
        max_quoted_output_chars=limit,
    )
    message = (await run_code(rt)).error.message
    whole = "code run failed (exception): E\nCaptured output:\n" + "\n".join(logs)
    assert (message == whole) is quoted
    if not quoted:
        assert message.endswith("(the quote keeps the first and the last 10)]\n" + "😀" * 10)
        assert "\nCaptured output:\n" + "é" * 10 + "\n[2 more characters" in message


@pytest.mark.parametrize("bad", [0, 1, -5, 2.5, True, "100"])
def test_the_quote_bound_must_be_none_or_an_integer_of_two_or_more(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_quoted_output_chars"):
        ToolRuntime(mode="native", max_quoted_output_chars=bad)


@pytest.mark.anyio
async def test_failed_run_without_logs_has_no_captured_section() -> None:
    rt, _ = scripted(
        CodeRunResult(
            logs=[], error=CodeRunError("timeout", "compute budget exhausted (300ms busy)")
        )
    )
    result = await run_code(rt)
    assert (
        result.error.message == "code run failed (timeout): compute budget exhausted (300ms busy)"
    )


@pytest.mark.anyio
async def test_program_exception_in_the_in_process_runtime() -> None:
    async def program(tools: Any, print: Any) -> Any:
        print("got this far")
        raise ValueError("boom")

    rt, _ = code_rt(program)
    result = await run_code(rt)
    assert result.error.message == (
        "code run failed (exception): ValueError: boom\nCaptured output:\ngot this far"
    )


@pytest.mark.anyio
async def test_a_runtime_that_raises_becomes_a_plain_error_result() -> None:
    async def behavior(request: CodeRunRequest) -> CodeRunResult:
        raise RuntimeError("backend exploded")

    rt = ToolRuntime(mode="code", code_runtime=ScriptedRuntime(behavior))
    result = await run_code(rt)
    assert result.error.message == "backend exploded"
    assert result.error.info is None


@pytest.mark.anyio
async def test_lossy_completion_value_is_invalid_output() -> None:
    async def program(tools: Any, print: Any) -> Any:
        return {"x": float("nan")}

    rt, _ = code_rt(program)
    result = await run_code(rt)
    assert result.error.message == (
        "code run failed (invalid-output): program completion must be lossless JSON"
    )


# ------------------------------------------------------------------- bindings


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["code", "both"])
async def test_bindings_are_the_calling_scopes_view_minus_run_code(mode: str) -> None:
    rt = ToolRuntime(mode=mode, code_runtime=ScriptedRuntime())
    runtime = rt.code_runtime
    for name in ("echo", "hidden", "kept"):
        rt.register(echo_tool(name))
    scope = rt.scope("agent")
    scope.restrict(deny=["hidden"])
    scope.register(echo_tool("scoped"))
    await run_code(rt, agent=scope)
    await run_code(rt)
    scoped_request, global_request = runtime.requests
    assert len(scoped_request.bindings) == 1
    binding = scoped_request.bindings[0]
    assert binding.global_name == "tools"
    assert binding.error_class == ErrorClass("ToolCallError", "toolName")
    assert list(binding.functions) == ["echo", "kept", "scoped"]
    assert list(global_request.bindings[0].functions) == ["echo", "hidden", "kept"]
    assert scoped_request.program == "program"


@pytest.mark.anyio
async def test_sub_calls_are_re_resolved_at_start() -> None:
    disposers: dict[str, Any] = {}

    async def program(tools: Any, print: Any) -> Any:
        first = await tools.ephemeral({"value": "a"})
        disposers["ephemeral"]()
        try:
            await tools.ephemeral({"value": "b"})
        except ToolCallError as exc:
            return [first, exc.toolName, exc.message, exc.code]
        return "unreachable"

    rt, _ = code_rt(program)
    disposers["ephemeral"] = rt.register(echo_tool("ephemeral"))
    result = await run_code(rt)
    assert result.value["result"] == [
        "ephemeral:a",
        "ephemeral",
        'unknown tool "ephemeral"',
        "UNKNOWN_TOOL",
    ]


@pytest.mark.anyio
async def test_a_tool_registered_mid_run_is_not_bound() -> None:
    async def program(tools: Any, print: Any) -> Any:
        rt.register(echo_tool("late"))
        try:
            _ = tools.late
        except AttributeError as exc:
            return str(exc)
        return "bound"

    rt, _ = code_rt(program)
    result = await run_code(rt)
    assert result.value["result"] == 'unknown binding "tools.late"'


# ------------------------------------------------- failing sub-calls in the program


class Fussy(HarnessError):
    pass


@pytest.mark.anyio
async def test_failing_sub_calls_reach_the_program_as_tool_call_errors() -> None:
    async def fail(args: Any, ctx: Any) -> Any:
        raise ValueError("deliberate failure")

    async def fussy(args: Any, ctx: Any) -> Any:
        raise Fussy("fussy says no", "FUSSY")

    async def slow(args: Any, ctx: Any) -> Any:
        await ctx.signal.wait()  # cooperative: the timeout policy's deadline aborts it
        return "late"

    async def program(tools: Any, print: Any) -> Any:
        seen = []
        for name, args in [
            ("fail", {"value": "x"}),
            ("fussy", {"value": "x"}),
            ("echo", {}),
            ("denied", {"value": "x"}),
            ("slow", {"value": "x"}),
        ]:
            try:
                await tools[name](args)
            except ToolCallError as exc:
                assert isinstance(exc, Exception) and str(exc) == exc.message
                seen.append([exc.toolName, exc.tool_name, exc.message, exc.code])
        return seen

    rt, _ = code_rt(program)
    rt.register(echo_tool("fail", body=fail))
    rt.register(echo_tool("fussy", body=fussy))
    rt.register(echo_tool("echo"))
    rt.register(echo_tool("denied"))
    slow_tool = echo_tool("slow", body=slow)
    import msgspec

    rt.register(msgspec.structs.replace(slow_tool, timeout_ms=30))
    TimeoutPolicy().install(rt)

    async def deny(exec_: Any, next_: Any) -> Any:
        return Deny("not on my watch") if exec_.name == "denied" else await next_()

    rt.on("tools/pre-execute", deny)
    result = await run_code(rt)
    assert result.value["result"] == [
        ["fail", "fail", "deliberate failure", None],
        ["fussy", "fussy", "fussy says no", "FUSSY"],
        ["echo", "echo", 'invalid arguments: missing required property "value"', "INVALID_ARGS"],
        ["denied", "denied", "not on my watch", None],
        ["slow", "slow", "tool call timed out after 30ms", "TOOL_TIMEOUT"],
    ]


@pytest.mark.anyio
async def test_uncaught_tool_call_error_fails_the_run() -> None:
    async def program(tools: Any, print: Any) -> Any:
        await tools.echo({})

    rt, _ = code_rt(program)
    rt.register(echo_tool("echo"))
    result = await run_code(rt)
    assert result.error.message == (
        'code run failed (exception): ToolCallError: invalid arguments: missing required property "value"'
    )


@pytest.mark.anyio
async def test_post_execute_value_replacement_reaches_the_program_content_does_not() -> None:
    from codemode.engine import Accept, text

    async def program(tools: Any, print: Any) -> Any:
        return [await tools.by_value({"value": "a"}), await tools.by_content({"value": "b"})]

    rt, _ = code_rt(program)
    rt.register(echo_tool("by_value"))
    rt.register(echo_tool("by_content"))

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        if exec_.name == "by_value":
            return Accept(value="replaced")
        if exec_.name == "by_content":
            return Accept(content=[text("only the content")])
        return await next_()

    rt.on("tools/post-execute", post)
    assert (await run_code(rt)).value["result"] == ["replaced", "by_content:b"]


@pytest.mark.anyio
async def test_sub_results_carry_no_meta_and_values_are_canonical() -> None:
    from codemode.engine import ToolOutput, define_tool, text

    async def body(args: Any, ctx: Any) -> Any:
        return {"n": 1}

    tool = define_tool(
        name="meta",
        description="Has presentation meta.",
        parameters={},
        output=ToolOutput(
            schema={"type": "object", "additionalProperties": True},
            render=lambda a, v: [text("m")],
            presentation_meta=lambda a, v: {"shown": True},
        ),
        execute=body,
    )
    metas: list[Any] = []

    async def program(tools: Any, print: Any) -> Any:
        return await tools.meta({})

    rt, _ = code_rt(program, mode="both")
    rt.register(tool)
    rt.on("tools/result", lambda exec_, result: metas.append((exec_.name, result.meta)))
    result = await run_code(rt)
    assert result.value == {"logs": [], "result": {"n": 1}}
    assert metas == [("meta", None), ("run_code", None)]


@pytest.mark.anyio
async def test_python_and_typescript_runtimes_run_the_same_way() -> None:
    async def program(tools: Any, print: Any) -> Any:
        print("hi")
        return await tools.echo({"value": "v"})

    for language in ("python", "typescript"):
        rt, runtime = code_rt(program, language=language)
        rt.register(echo_tool("echo"))
        scope = rt.scope("a", session=MemorySessionLog())
        result = await run_code(rt, agent=scope)
        assert result.value == {"logs": ["hi"], "result": "echo:v"}
        assert runtime.runs == 1
    _ = NO_VALUE
