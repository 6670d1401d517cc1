"""Registration, exact disposers, tools/change, restrictions and views (reference §2.5)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pipeline_support import call, echo_tool, error_text, raw_tool

from codemode.engine import (
    JsonSchemaError,
    ToolDefinition,
    ToolOutput,
    ToolRuntime,
    ToolSchema,
    define_tool,
    text,
)

RESERVED = (
    'tool name "run_code" is reserved for the Code Mode presentation transport and cannot be '
    "registered or shadowed"
)
EMPTY_FILTER = (
    "Scope.restrict() is a no-op: pass `allow` and/or `deny` (an empty filter is almost "
    "always a materialized-empty-config bug)"
)
RESTRICT_RUN_CODE = (
    'Scope.restrict() cannot name reserved Code Mode presentation transport "run_code"; '
    "restrict end-capability tools instead"
)


def _names(rt: ToolRuntime, scope: Any = None) -> list[str]:
    return [s.name for s in rt.schemas(scope)]


def _message(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


# --- registration errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        None,
        {"schema": {}, "render": lambda _a, _v: []},
        ToolOutput(schema={}, render="not callable"),  # type: ignore[arg-type]
        ToolOutput(schema={}, render=lambda _a, _v: [], presentation_meta=42),  # type: ignore[arg-type]
    ],
    ids=["missing", "dict", "render-not-callable", "meta-not-callable"],
)
def test_register_requires_an_output_declaration(output: Any) -> None:
    rt = ToolRuntime()
    definition = ToolDefinition(
        name="bad", description="d", parameters={"type": "object"}, output=output, execute=len
    )
    with pytest.raises(TypeError) as excinfo:
        rt.register(definition)
    assert (
        _message(excinfo) == 'tool "bad" must declare output { schema, render, presentationMeta? }'
    )
    with pytest.raises(TypeError) as excinfo:
        define_tool(name="bad", description="d", parameters={}, output=None, execute=len)  # type: ignore[arg-type]
    assert (
        _message(excinfo) == 'tool "bad" must declare output { schema, render, presentationMeta? }'
    )
    assert rt.get("bad") is None


def test_unsupported_output_schema_is_rejected_at_register() -> None:
    rt = ToolRuntime()
    bad = raw_tool(schema={"type": ["string", "null"]})
    with pytest.raises(JsonSchemaError) as excinfo:
        rt.register(bad)
    assert _message(excinfo).startswith("unsupported JSON schema: ")
    assert excinfo.value.code == "UNSUPPORTED_SCHEMA"
    assert rt.get("raw") is None


@pytest.mark.parametrize("timeout", [0, -1, -0.5, math.nan, math.inf, -math.inf, True, False, "5"])
def test_timeout_ms_must_be_positive_and_finite(timeout: Any) -> None:
    rt = ToolRuntime()
    with pytest.raises(TypeError) as excinfo:
        rt.register(raw_tool(timeout_ms=timeout))
    assert _message(excinfo) == 'tool "raw" timeout_ms must be a positive finite number'
    with pytest.raises(TypeError):
        rt.register(echo_tool(timeout_ms=timeout))


@pytest.mark.parametrize("timeout", [1, 0.5, 5000, 10**6])
def test_valid_timeouts_register(timeout: Any) -> None:
    rt = ToolRuntime()
    rt.register(raw_tool(timeout_ms=timeout))
    assert rt.get("raw").timeout_ms == timeout  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["native", "code", "both"])
def test_run_code_is_reserved_in_every_mode_and_every_layer(mode: str) -> None:
    rt = ToolRuntime(mode=mode)
    for target in (rt, rt.scope("agent")):
        with pytest.raises(ValueError) as excinfo:
            target.register(raw_tool("run_code"))
        assert _message(excinfo) == RESERVED
        with pytest.raises(ValueError):
            target.register(echo_tool("run_code"))


def test_duplicate_messages_differ_for_global_and_scoped_layers() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    with pytest.raises(ValueError) as excinfo:
        rt.register(echo_tool())
    assert _message(excinfo) == (
        'tool "echo" is already registered (for a per-agent variant, register through that '
        "agent's `Scope.register` instead)"
    )
    agent = rt.scope("agent")
    agent.register(echo_tool())  # shadowing a global is fine
    with pytest.raises(ValueError) as excinfo:
        agent.register(echo_tool())
    assert _message(excinfo) == 'tool "echo" is already registered in this scope'


def test_register_rejects_non_definitions() -> None:
    rt = ToolRuntime()
    with pytest.raises(TypeError):
        rt.register({"name": "x"})  # type: ignore[arg-type]


# --- disposers and tools/change --------------------------------------------------------------


def test_disposers_are_exact_and_idempotent() -> None:
    rt = ToolRuntime()
    changes: list[int] = []
    rt.on("tools/change", lambda: changes.append(1))
    dispose_echo = rt.register(echo_tool())
    rt.register(echo_tool("other"))
    assert _names(rt) == ["echo", "other"]
    assert changes == [1, 1]
    dispose_echo()
    assert _names(rt) == ["other"]
    assert changes == [1, 1, 1]
    rt.register(echo_tool())  # a new registration under the same name
    dispose_echo()  # the old disposer is spent: it must not remove the new one
    assert _names(rt) == ["other", "echo"]
    assert len(changes) == 4


def test_tools_change_is_unfiltered_and_covers_every_mutation() -> None:
    rt = ToolRuntime()
    agent = rt.scope("agent")
    other = rt.scope("other")
    seen: list[str] = []
    other.on("tools/change", lambda: seen.append("other-scope"))
    rt.register(echo_tool())
    off_scoped = agent.register(echo_tool("mine"))
    off_restrict = agent.restrict(deny=["echo"])
    off_mode = agent.present_as("both")
    off_guard = agent.guard(lambda _e: None)
    assert len(seen) == 4  # guards do not emit
    off_guard()
    off_restrict()
    off_mode()
    off_scoped()
    assert len(seen) == 7


def test_a_throwing_change_listener_rolls_the_addition_back() -> None:
    rt = ToolRuntime()
    agent = rt.scope("agent")
    rt.register(echo_tool())

    def veto() -> None:
        raise RuntimeError("vetoed")

    off = rt.on("tools/change", veto)
    with pytest.raises(RuntimeError, match="vetoed"):
        rt.register(echo_tool("new"))
    assert rt.get("new") is None
    with pytest.raises(RuntimeError, match="vetoed"):
        agent.restrict(deny=["echo"])
    assert rt.get("echo", agent) is not None
    with pytest.raises(RuntimeError, match="vetoed"):
        agent.present_as("both")
    assert rt.mode_for(agent) == "native"
    off()
    rt.register(echo_tool("new"))
    agent.present_as("both")  # the rolled-back declaration left no conflict behind
    assert rt.get("new") is not None


def test_disposal_still_happens_when_a_change_listener_throws() -> None:
    rt = ToolRuntime()
    dispose = rt.register(echo_tool())

    def veto() -> None:
        raise RuntimeError("vetoed")

    rt.on("tools/change", veto)
    dispose()
    assert rt.get("echo") is None


# --- restrict ------------------------------------------------------------------------------


def test_restrict_is_scope_only() -> None:
    rt = ToolRuntime()
    assert not hasattr(rt, "restrict")
    assert not hasattr(rt, "present_as")


def test_restrict_error_messages() -> None:
    rt = ToolRuntime()
    agent = rt.scope("agent")
    with pytest.raises(ValueError) as excinfo:
        agent.restrict()
    assert _message(excinfo) == EMPTY_FILTER
    with pytest.raises(ValueError) as excinfo:
        agent.restrict(allow=["run_code"])
    assert _message(excinfo) == RESTRICT_RUN_CODE
    with pytest.raises(ValueError) as excinfo:
        agent.restrict(deny=["a"])
    assert _message(excinfo) == (
        'Scope.restrict() names unknown global tool "a"; known global tools: (none)'
    )
    rt.register(echo_tool("zeta"))
    rt.register(echo_tool("alpha"))
    agent.register(echo_tool("own"))
    with pytest.raises(ValueError) as excinfo:
        agent.restrict(allow=["alpha", "own"], deny=["b"])
    assert _message(excinfo) == (
        'Scope.restrict() names unknown global tools "own", "b"; known global tools: alpha, zeta'
    )


def test_restriction_filter_is_snapshotted_and_allow_empty_hides_everything() -> None:
    rt = ToolRuntime()
    for name in ("a", "b", "c"):
        rt.register(echo_tool(name))
    agent = rt.scope("agent")
    allow = ["a", "b"]
    agent.restrict(allow=allow)
    allow.append("c")
    assert _names(rt, agent) == ["a", "b"]
    other = rt.scope("other")
    off = other.restrict(allow=[])
    assert _names(rt, other) == []
    off()
    assert _names(rt, other) == ["a", "b", "c"]


def test_restrictions_intersect_down_the_chain() -> None:
    rt = ToolRuntime()
    for name in ("a", "b", "c"):
        rt.register(echo_tool(name))
    preset = rt.scope("preset")
    agent = rt.scope("agent", parent=preset)
    sibling = rt.scope("sibling", parent=preset)
    preset.restrict(allow=["a", "b"])
    agent.restrict(deny=["b"])
    assert _names(rt, preset) == ["a", "b"]
    assert _names(rt, agent) == ["a"]
    assert _names(rt, sibling) == ["a", "b"]
    assert _names(rt) == ["a", "b", "c"]
    # An agent may only name what it inherits: "c" is still known (pre-restriction).
    agent.restrict(deny=["c"])
    assert rt.get("b", agent) is None
    assert rt.get("b", sibling) is not None


@pytest.mark.anyio
async def test_out_of_view_execution_is_an_unknown_tool() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    agent = rt.scope("agent")
    agent.restrict(deny=["echo"])
    result = await rt.execute(call(agent=agent))
    assert error_text(result)[:3] == ('unknown tool "echo"', "ToolNotFoundError", "UNKNOWN_TOOL")
    assert not (await rt.execute(call())).is_error


def test_ancestor_registrations_are_restrictable_and_own_ones_are_not_filtered() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool("g"))
    preset = rt.scope("preset")
    preset.register(echo_tool("p"))
    agent = rt.scope("agent", parent=preset)
    agent.register(echo_tool("own"))
    agent.restrict(allow=["p"])
    assert _names(rt, agent) == ["p", "own"]
    with pytest.raises(ValueError, match='unknown global tool "own"'):
        agent.restrict(deny=["own"])


# --- views ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_shadowing_keeps_the_inherited_position() -> None:
    rt = ToolRuntime()

    def tool(name: str, label: str) -> Any:
        async def body(_a: Any, _e: Any) -> Any:
            return label

        return echo_tool(name, body=body)

    for name in ("a", "b", "c"):
        rt.register(tool(name, f"global-{name}"))
    preset = rt.scope("preset")
    preset.register(tool("b", "preset-b"))
    preset.register(tool("d", "preset-d"))
    agent = rt.scope("agent", parent=preset)
    agent.register(tool("a", "agent-a"))
    agent.register(tool("e", "agent-e"))
    assert _names(rt, agent) == ["a", "b", "c", "d", "e"]
    labels = {}
    for name in ("a", "b", "c", "d", "e"):
        result = await rt.execute(call(name, agent=agent))
        labels[name] = result.value  # type: ignore[union-attr]
    assert labels == {
        "a": "agent-a",
        "b": "preset-b",
        "c": "global-c",
        "d": "preset-d",
        "e": "agent-e",
    }
    # Shadowing a restricted-away inherited name: the own entry joins at the end.
    agent2 = rt.scope("agent2", parent=preset)
    agent2.restrict(deny=["a"])
    agent2.register(tool("a", "agent2-a"))
    assert _names(rt, agent2) == ["b", "c", "d", "a"]
    assert rt.get("a", agent2).description == "Echo (a)."  # type: ignore[union-attr]


def test_get_resolves_through_the_scope() -> None:
    rt = ToolRuntime()
    definition = echo_tool()
    rt.register(definition)
    agent = rt.scope("agent")
    own = echo_tool()
    agent.register(own)
    assert rt.get("echo") is definition
    assert rt.get("echo", agent) is own
    assert rt.get("nope") is None
    assert rt.get("run_code") is None


def test_schemas_are_exactly_name_description_parameters() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool(is_concurrency_safe=lambda _a: True, timeout_ms=10))
    (schema,) = rt.schemas()
    assert isinstance(schema, ToolSchema)
    assert ToolSchema.__struct_fields__ == ("name", "description", "parameters")
    assert schema.to_json() == {
        "name": "echo",
        "description": "Echo (echo).",
        "parameters": {
            "type": "object",
            "properties": {"value": {"type": "string"}},
            "required": ["value"],
        },
    }
    # A detached copy: mutating it does not reach the registry.
    schema.parameters["properties"]["injected"] = {}  # type: ignore[index]
    assert "injected" not in rt.schemas()[0].parameters["properties"]


def test_raw_definitions_keep_their_parameter_schema_verbatim() -> None:
    rt = ToolRuntime()
    params = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}}
    rt.register(
        ToolDefinition(
            name="mcp",
            description="An MCP tool.",
            parameters=params,
            output=ToolOutput(schema={}, render=lambda _a, _v: [text("x")]),
            execute=len,  # type: ignore[arg-type]
        )
    )
    assert rt.schemas()[0].parameters == params


# --- execution_mode -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("classifier", "mode"),
    [
        (lambda _a: True, "parallel"),
        (lambda _a: False, "exclusive"),
        (lambda _a: 1, "exclusive"),
        (lambda _a: "yes", "exclusive"),
        (lambda _a: None, "exclusive"),
        (lambda _a: 1 / 0, "exclusive"),
        (None, "exclusive"),
    ],
    ids=["true", "false", "one", "truthy-str", "none", "raises", "no-classifier"],
)
def test_execution_mode_is_fail_closed(classifier: Any, mode: str) -> None:
    rt = ToolRuntime()
    rt.register(raw_tool(is_concurrency_safe=classifier))
    assert rt.execution_mode(call("raw", arguments={})) == mode


def test_execution_mode_of_unknown_hidden_and_invalid_calls() -> None:
    rt = ToolRuntime()
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        seen.append(args)
        return True

    rt.register(echo_tool(is_concurrency_safe=classify))
    agent = rt.scope("agent")
    agent.restrict(deny=["echo"])
    assert rt.execution_mode(call()) == "parallel"
    assert rt.execution_mode(call("ghost")) == "exclusive"
    assert rt.execution_mode(call(agent=agent)) == "exclusive"
    # define_tool validates first: invalid arguments never reach the classifier.
    assert rt.execution_mode(call(arguments={"value": 3})) == "exclusive"
    assert rt.execution_mode(call(arguments="raw string")) == "exclusive"
    assert seen == [{"value": "hi"}]


def test_classifier_follows_the_scope_view() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool(is_concurrency_safe=lambda _a: True))
    agent = rt.scope("agent")
    agent.register(echo_tool())
    assert rt.execution_mode(call()) == "parallel"
    assert rt.execution_mode(call(agent=agent)) == "exclusive"
