"""Code mode presentation: wire schemas per mode, the run_code schema per language,
missing/unknown runtimes, present_as, prompt sections, and the executor collapse
(reference §3.1, §3.2, §3.10, §4.3)."""

from __future__ import annotations

from typing import Any

import pytest
from code_mode_support import ScriptedRuntime, echo_tool, error_text

from codemode.engine import (
    AbortController,
    Allow,
    MemorySessionLog,
    ToolExecutionInput,
    ToolRuntime,
    ToolSchema,
    text,
)
from codemode.engine.testing import InProcessRuntime
from codemode.sdk_gen import render_sdk

TS_DESCRIPTION = (
    "Execute a TypeScript program against the available tools. Takes two required arguments: "
    "`code`, the BODY of an async function (erasable syntax only; top-level `await` and "
    "`return` work), and `description`, a short summary of what the program does. Call tools "
    "as `await tools.name(args)` per the declarations in the system prompt. Only what you "
    "print or return is program output — curate it. Image-bearing subtool results are "
    "attached after the run."
)
PY_DESCRIPTION = (
    "Execute a Python program against the available tools. Takes two required arguments: "
    "`code`, the BODY of an async function (top-level `await` and `return` work), and "
    "`description`, a short summary of what the program does. Call tools as "
    "`await tools.name(args)` per the declarations in the system prompt. Use `print(...)` "
    "and/or `return <value>` for program output — curate it. Image-bearing subtool results "
    "are attached after the run."
)
DESCRIPTION_PARAM = (
    "Clear, concise description of what this program does in active voice, 5-10 words "
    '(shown in the UI). Examples: "Count TODO markers across packages"; "Read failing test '
    'and its fixture"; "Rename config key in every cordis.yml".'
)
CODE_ONLY = (
    "`run_code` is the only tool you can call directly — a tool call naming any other tool "
    "fails. Reach every tool the SDK declares below from inside the program."
)


def run_code_parameters(code_description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": code_description},
            "description": {"type": "string", "description": DESCRIPTION_PARAM},
        },
        "required": ["code", "description"],
    }


TS_SCHEMA = ToolSchema(
    "run_code",
    TS_DESCRIPTION,
    run_code_parameters("The program: the body of an async TypeScript function."),
)
PY_SCHEMA = ToolSchema(
    "run_code",
    PY_DESCRIPTION,
    run_code_parameters("The program: the body of an async Python function."),
)


def rt_with(mode: str, language: str | None = "typescript", **kwargs: Any) -> ToolRuntime:
    runtime = None if language is None else ScriptedRuntime(language=language)
    rt = ToolRuntime(mode=mode, code_runtime=runtime, **kwargs)
    rt.register(echo_tool("echo"))
    rt.register(echo_tool("zeta"))
    return rt


def names(schemas: list[ToolSchema]) -> list[str]:
    return [s.name for s in schemas]


# ----------------------------------------------------------------- wire schemas


def test_native_sends_every_schema_and_needs_no_runtime() -> None:
    rt = rt_with("native", language=None)
    assert names(rt.schemas()) == ["echo", "zeta"]
    assert rt.get("run_code") is None
    assert rt.system_prompt_sections() == {"tools:code-only": "", "tools:sdk": ""}


def test_code_sends_only_run_code() -> None:
    rt = rt_with("code")
    assert rt.schemas() == [TS_SCHEMA]


def test_both_sends_every_schema_then_run_code_last() -> None:
    rt = rt_with("both")
    schemas = rt.schemas()
    assert names(schemas) == ["echo", "zeta", "run_code"]
    assert schemas[-1] == TS_SCHEMA
    # A tool registered later still lands before run_code.
    rt.register(echo_tool("late"))
    assert names(rt.schemas()) == ["echo", "zeta", "late", "run_code"]


def test_wire_schemas_carry_exactly_name_description_parameters() -> None:
    rt = rt_with("both")
    echo = rt.schemas()[0]
    assert echo.to_json() == {
        "name": "echo",
        "description": "Echo tool echo.",
        "parameters": {
            "type": "object",
            "properties": {"value": {"type": "string"}},
            "required": ["value"],
        },
    }


@pytest.mark.parametrize(
    ("language", "expected"), [("typescript", TS_SCHEMA), ("python", PY_SCHEMA)]
)
def test_run_code_schema_per_runtime_language(language: str, expected: ToolSchema) -> None:
    rt = rt_with("code", language=language)
    assert rt.schemas() == [expected]
    definition = rt.get("run_code")
    assert definition is not None
    assert (definition.description, dict(definition.parameters)) == (
        expected.description,
        expected.parameters,
    )
    assert "additionalProperties" not in definition.parameters


def test_run_code_flavour_is_read_lazily_from_the_runtime() -> None:
    rt = rt_with("code", language="typescript")
    assert rt.schemas() == [TS_SCHEMA]
    rt.code_runtime = ScriptedRuntime(language="python")
    assert rt.schemas() == [PY_SCHEMA]


def test_get_degrades_to_the_typescript_flavour_without_a_runtime() -> None:
    rt = rt_with("code", language=None)
    definition = rt.get("run_code")
    assert definition is not None
    assert definition.description == TS_DESCRIPTION
    assert dict(definition.parameters) == TS_SCHEMA.parameters


def test_run_code_output_schema_and_no_extras() -> None:
    definition = rt_with("code").get("run_code")
    assert definition is not None
    assert definition.output.schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
        "required": ["logs"],
    }
    assert definition.is_concurrency_safe is None
    assert definition.timeout_ms is None
    assert definition.finalize_content is None
    assert definition.present_result is None
    assert definition.output.presentation_meta is None


@pytest.mark.parametrize("mode", ["code", "both"])
def test_code_modes_without_a_runtime_fail_every_assembly(mode: str) -> None:
    rt = rt_with(mode, language=None)
    with pytest.raises(RuntimeError, match="requires a code runtime") as schemas_error:
        rt.schemas()
    assert f'mode "{mode}"' in str(schemas_error.value)
    with pytest.raises(RuntimeError, match="requires a code runtime"):
        rt.system_prompt_sections()


@pytest.mark.parametrize("mode", ["code", "both"])
def test_unknown_runtime_language_fails_every_assembly(mode: str) -> None:
    rt = rt_with(mode, language="ruby")
    message = (
        'no SDK renderer registered for runtime language "ruby" (known: "typescript", "python")'
    )
    with pytest.raises(RuntimeError) as schemas_error:
        rt.schemas()
    assert message in str(schemas_error.value)
    with pytest.raises(RuntimeError) as sections_error:
        rt.system_prompt_sections()
    assert message in str(sections_error.value)


def test_native_scope_under_a_code_deployment_needs_no_runtime() -> None:
    rt = rt_with("code", language=None)
    scope = rt.scope("native-agent")
    scope.present_as("native")
    assert names(rt.schemas(scope)) == ["echo", "zeta"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_max_parallel_sub_calls_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(
        ValueError,
        match=r"^ToolRuntime\(max_parallel_sub_calls=\.\.\.\) must be a positive integer$",
    ):
        ToolRuntime(max_parallel_sub_calls=bad)


def test_max_parallel_sub_calls_defaults_to_ten() -> None:
    assert ToolRuntime().max_parallel_sub_calls == 10
    assert ToolRuntime(max_parallel_sub_calls=1).max_parallel_sub_calls == 1


# --------------------------------------------------------------------- present_as


def test_present_as_nearest_declaring_scope_wins() -> None:
    rt = rt_with("native")
    preset = rt.scope("preset")
    agent = rt.scope("agent", parent=preset)
    sibling = rt.scope("sibling")
    dispose_preset = preset.present_as("code")
    assert names(rt.schemas(agent)) == ["run_code"]
    assert names(rt.schemas(sibling)) == ["echo", "zeta"]
    dispose_agent = agent.present_as("both")
    assert names(rt.schemas(agent)) == ["echo", "zeta", "run_code"]
    assert names(rt.schemas(preset)) == ["run_code"]
    dispose_agent()
    assert names(rt.schemas(agent)) == ["run_code"]
    dispose_preset()
    assert names(rt.schemas(agent)) == ["echo", "zeta"]


def test_present_as_one_declaration_per_scope() -> None:
    rt = rt_with("native")
    scope = rt.scope("agent")
    scope.present_as("code")
    with pytest.raises(ValueError) as error:
        scope.present_as("both")
    assert str(error.value) == (
        'tools.presentAs("both") conflicts with "code" already declared for this scope; '
        "one composition selects one presentation"
    )


# ---------------------------------------------------------------------- sections


def test_code_only_section_exact_text_only_under_code() -> None:
    rt = rt_with("native")
    code_scope, both_scope = rt.scope("c"), rt.scope("b")
    code_scope.present_as("code")
    both_scope.present_as("both")
    assert rt.system_prompt_sections(code_scope)["tools:code-only"] == CODE_ONLY
    assert rt.system_prompt_sections(both_scope)["tools:code-only"] == ""
    assert rt.system_prompt_sections()["tools:code-only"] == ""


def sdk_for(rt: ToolRuntime, scope: Any, language: str, tool_names: list[str]) -> str:
    tools = [
        {
            "name": d.name,
            "description": d.description,
            "parameters": d.parameters,
            "output_schema": d.output.schema,
        }
        for d in (rt.get(n, scope) for n in tool_names)
        if d is not None
    ]
    return render_sdk(tools, language)


@pytest.mark.parametrize("language", ["typescript", "python"])
@pytest.mark.parametrize("mode", ["code", "both"])
def test_sdk_section_renders_the_calling_scopes_view(mode: str, language: str) -> None:
    rt = rt_with(mode, language=language)
    sdk = rt.system_prompt_sections()["tools:sdk"]
    assert sdk == render_sdk(
        [
            {
                "name": n,
                "description": f"Echo tool {n}.",
                "parameters": {
                    "type": "object",
                    "properties": {"value": {"type": "string"}},
                    "required": ["value"],
                },
                "output_schema": {"type": "string"},
            }
            for n in ("echo", "zeta")
        ],
        language,
    )
    assert "run_code" not in sdk.split("available tools", 1)[-1]


def test_sdk_section_is_live_restrictions_and_scoped_tools() -> None:
    rt = rt_with("code")
    scope = rt.scope("agent")
    before = rt.system_prompt_sections(scope)["tools:sdk"]
    assert "zeta" in before

    lift = scope.restrict(deny=["zeta"])
    restricted = rt.system_prompt_sections(scope)["tools:sdk"]
    assert "zeta" not in restricted and "echo" in restricted
    assert restricted == sdk_for(rt, scope, "typescript", ["echo"])
    # The global view is not affected by the scope's restriction.
    assert "zeta" in rt.system_prompt_sections()["tools:sdk"]

    unregister = scope.register(echo_tool("scoped_only"))
    scoped = rt.system_prompt_sections(scope)["tools:sdk"]
    assert scoped == sdk_for(rt, scope, "typescript", ["echo", "scoped_only"])
    assert "scoped_only" not in rt.system_prompt_sections()["tools:sdk"]

    unregister()
    lift()
    assert rt.system_prompt_sections(scope)["tools:sdk"] == before


def test_sdk_section_is_byte_identical_across_assemblies() -> None:
    rt = rt_with("code")
    assert rt.system_prompt_sections() == rt.system_prompt_sections()


def test_sdk_section_follows_a_global_registration_immediately() -> None:
    rt = rt_with("both")
    dispose = rt.register(echo_tool("fresh"))
    assert "fresh" in rt.system_prompt_sections()["tools:sdk"]
    dispose()
    assert "fresh" not in rt.system_prompt_sections()["tools:sdk"]


# ------------------------------------------------------------- executor collapse

ROUTE = (
    'unknown tool "echo": only `run_code` is callable directly — call `echo` from inside '
    "a `run_code` program instead"
)


def direct(name: str = "echo", *, agent: Any = None, aborted: bool = False, **kw: Any) -> Any:
    controller = AbortController()
    if aborted:
        controller.abort("gone")
    return ToolExecutionInput(
        call_id="direct-1",
        name=name,
        arguments=kw.get("arguments", {"value": "x"}),
        signal=controller.signal,
        agent=agent,
    )


def collapse_rt(mode: str = "code") -> tuple[ToolRuntime, list[str], list[Any]]:
    seen: list[str] = []
    results: list[Any] = []
    rt = ToolRuntime(mode=mode, code_runtime=InProcessRuntime())

    def finalize(exec_: Any, result: Any) -> Any:
        seen.append("finalize")
        return None

    tool = echo_tool("echo")
    import msgspec

    rt.register(msgspec.structs.replace(tool, finalize_content=finalize))

    async def pre(exec_: Any, next_: Any) -> Any:
        seen.append(f"pre {exec_.name}")
        return await next_()

    async def wrap(exec_: Any, next_: Any) -> Any:
        seen.append(f"execute {exec_.name}")
        return await next_()

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        seen.append(f"post {exec_.name}")
        return await next_()

    def guard(exec_: Any) -> None:
        seen.append(f"guard {exec_.name}")

    rt.on("tools/pre-execute", pre)
    rt.on("tools/execute", wrap)
    rt.on("tools/post-execute", post)
    rt.on("tools/result", lambda exec_, result: results.append((exec_.name, result)))
    rt.guard(guard)
    return rt, seen, results


@pytest.mark.anyio
async def test_collapse_denies_a_visible_tool_before_any_policy() -> None:
    rt, seen, results = collapse_rt()
    result = await rt.execute(direct())
    assert result.is_error
    assert result.error.message == ROUTE
    assert (result.error.info.name, result.error.info.code) == ("ToolNotFoundError", "UNKNOWN_TOOL")
    assert error_text(result) == f"Error: {ROUTE}"
    # No pre-execute, guard, tools/execute, body, post-execute, nor finalize_content;
    # tools/result still fires once.
    assert seen == []
    assert results == [("echo", result)]


@pytest.mark.anyio
async def test_pre_aborted_collapsed_call_is_aborted_before_dispatch() -> None:
    rt, seen, results = collapse_rt()
    result = await rt.execute(direct(aborted=True))
    assert result.error.message == "tool call aborted before dispatch"
    assert result.error.info.code == "ABORTED_BEFORE_DISPATCH"
    assert seen == ["finalize"]
    assert len(results) == 1


@pytest.mark.anyio
async def test_collapsed_call_with_lossy_arguments_reports_the_arguments() -> None:
    rt, _, _ = collapse_rt()
    result = await rt.execute(direct(arguments={"value": float("nan")}))
    assert result.error.message == "tool execution arguments must be losslessly JSON-serializable"


@pytest.mark.anyio
async def test_unknown_names_take_the_ordinary_path_under_code() -> None:
    rt, seen, _ = collapse_rt()
    result = await rt.execute(direct("missing"))
    assert result.error.message == 'unknown tool "missing"'
    assert result.error.info.code == "UNKNOWN_TOOL"
    assert seen[:3] == ["pre missing", "guard missing", "execute missing"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["native", "both"])
async def test_native_and_both_are_not_collapsed(mode: str) -> None:
    rt, seen, _ = collapse_rt(mode)
    result = await rt.execute(direct())
    assert not result.is_error
    assert result.value == "echo:x"
    assert seen == ["pre echo", "guard echo", "execute echo", "post echo", "finalize"]


@pytest.mark.anyio
async def test_collapse_follows_the_scope_effective_mode() -> None:
    rt, _, _ = collapse_rt("native")
    coder, plain = rt.scope("coder"), rt.scope("plain")
    coder.present_as("code")
    assert (await rt.execute(direct(agent=coder))).error.message == ROUTE
    assert (await rt.execute(direct(agent=plain))).value == "echo:x"


def test_execution_mode_is_exclusive_for_collapsed_names() -> None:
    rt = ToolRuntime(mode="code", code_runtime=InProcessRuntime())
    rt.register(echo_tool("fast", parallel=True))
    collapsed = direct("fast")
    nested = ToolExecutionInput(
        call_id="n", name="fast", arguments={"value": "x"}, signal=collapsed.signal, parent=object()
    )
    assert rt.execution_mode(collapsed) == "exclusive"
    assert rt.execution_mode(nested) == "parallel"
    run_code = ToolExecutionInput(
        call_id="r",
        name="run_code",
        arguments={"code": "", "description": "d"},
        signal=collapsed.signal,
    )
    assert rt.execution_mode(run_code) == "exclusive"


@pytest.mark.anyio
async def test_run_code_is_not_dispatchable_for_a_native_scope() -> None:
    rt = rt_with("native")
    result = await rt.execute(
        ToolExecutionInput(
            call_id="x",
            name="run_code",
            arguments={"code": "", "description": "d"},
            signal=AbortController().signal,
        )
    )
    assert result.error.message == 'unknown tool "run_code"'


def test_run_code_cannot_be_registered_or_restricted() -> None:
    rt = rt_with("code")
    import msgspec

    impostor = msgspec.structs.replace(echo_tool("x"), name="run_code")
    with pytest.raises(ValueError, match="reserved for the Code Mode presentation transport"):
        rt.register(impostor)
    scope = rt.scope("agent", session=MemorySessionLog())
    with pytest.raises(ValueError, match="reserved for the Code Mode presentation transport"):
        scope.register(impostor)
    with pytest.raises(
        ValueError, match='cannot name reserved Code Mode presentation transport "run_code"'
    ):
        scope.restrict(allow=["run_code"])
    assert rt.get("run_code", scope) is rt.get("run_code")
    _ = (Allow, text)
