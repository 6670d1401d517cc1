"""define_tool: the DSL-authored form with argument validation inside the body."""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_support import call, error_text, raw_tool

from codemode.engine import (
    JsonSchemaError,
    ToolDefinition,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)

STRING_OUT = ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)])


def _tool(parameters: dict[str, Any], body: Any = None, **kwargs: Any) -> ToolDefinition:
    async def default(args: Any, _exec: Any) -> Any:
        return "ok"

    return define_tool(
        name="t",
        description="A tool.",
        parameters=parameters,
        output=kwargs.pop("output", STRING_OUT),
        execute=body or default,
        **kwargs,
    )


def test_parameters_compile_to_an_open_object_schema() -> None:
    tool = _tool(
        {
            "path": {"type": "string", "description": "Where.", "required": True},
            "limit": {"type": "integer"},
        }
    )
    assert isinstance(tool, ToolDefinition)
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where."},
            "limit": {"type": "integer"},
        },
        "required": ["path"],
    }
    assert "additionalProperties" not in tool.parameters
    optional_only = _tool({"limit": {"type": "integer"}})
    assert "required" not in optional_only.parameters
    assert tool.output.schema == {"type": "string"}
    assert _tool({}, output=ToolOutput(schema={"type": "json"}, render=len)).output.schema == {}


@pytest.mark.parametrize(
    ("parameters", "output_schema"),
    [
        ({"x": {}}, {"type": "string"}),
        ({"x": {"type": "string", "required": False}}, {"type": "string"}),
        ({"x": {"type": "object", "properties": {}}}, {"type": "string"}),
        ({}, {}),
        ({}, {"type": "object", "additionalProperties": False, "required": ["a"]}),
        ({}, {"type": "string", "oneOf": [{"type": "string"}, {"type": "null"}]}),
    ],
    ids=[
        "bare-param",
        "required-false",
        "object-without-ap",
        "bare-output",
        "object-required",
        "type-and-oneof",
    ],
)
def test_malformed_dsl_fails_at_definition_time(parameters: Any, output_schema: Any) -> None:
    with pytest.raises(JsonSchemaError) as excinfo:
        _tool(parameters, output=ToolOutput(schema=output_schema, render=len))
    assert str(excinfo.value).startswith("unsupported JSON schema: ")


@pytest.mark.anyio
async def test_arguments_are_validated_inside_the_body() -> None:
    seen: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        seen.append(args)
        return "ok"

    rt = ToolRuntime()
    rt.register(
        _tool(
            {
                "name": {"type": "string", "required": True},
                "count": {"type": "integer", "required": True},
                "mode": {"type": "string", "enum": ["a", "b"]},
            },
            body,
        )
    )
    bad = await rt.execute(call("t", arguments={"name": 1, "mode": "c"}))
    assert error_text(bad) == (
        'invalid arguments: missing required property "count"; "name" must be a string; '
        '"mode" must be one of ["a","b"]',
        "ToolArgsError",
        "INVALID_ARGS",
        'Error: invalid arguments: missing required property "count"; "name" must be a '
        'string; "mode" must be one of ["a","b"]',
    )
    assert seen == []
    # Open root: extra keys are allowed; defaults are not synthesised.
    ok = await rt.execute(call("t", arguments={"name": "n", "count": 2, "extra": [1]}))
    assert ok.value == "ok"  # type: ignore[union-attr]
    assert seen == [{"name": "n", "count": 2, "extra": [1]}]
    not_object = await rt.execute(call("t", arguments=None))
    assert error_text(not_object)[0] == 'invalid arguments: "arguments" must be an object'


@pytest.mark.anyio
async def test_bool_is_not_an_integer() -> None:
    rt = ToolRuntime()
    rt.register(_tool({"n": {"type": "integer", "required": True}}))
    result = await rt.execute(call("t", arguments={"n": True}))
    assert error_text(result)[0] == 'invalid arguments: "n" must be an integer'
    assert not (await rt.execute(call("t", arguments={"n": 3}))).is_error


@pytest.mark.anyio
async def test_raw_definitions_get_no_argument_validation() -> None:
    seen: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        seen.append(args)
        return None

    rt = ToolRuntime()
    rt.register(raw_tool(body=body))
    result = await rt.execute(call("raw", arguments="not even an object"))
    assert not result.is_error
    assert seen == ["not even an object"]


def test_classifier_and_presenters_are_soft_validated() -> None:
    calls: list[str] = []

    def classify(_args: Any) -> Any:
        calls.append("classify")
        return "truthy"

    def present_call(args: Any) -> Any:
        calls.append("present_call")
        return {"card": "generic", "title": args["path"]}

    def present_result(args: Any, result: Any) -> Any:
        calls.append("present_result")
        return {"card": "generic", "title": f"{args['path']}: {result['isError']}"}

    tool = _tool(
        {"path": {"type": "string", "required": True}},
        is_concurrency_safe=classify,
        present_call=present_call,
        present_result=present_result,
    )
    invalid = {"path": 3}
    assert tool.is_concurrency_safe(invalid) is False  # type: ignore[misc]
    assert tool.present_call(invalid) is None  # type: ignore[misc]
    assert tool.present_result(invalid, {"isError": False}) is None  # type: ignore[misc]
    assert calls == []
    valid = {"path": "a.txt"}
    assert tool.is_concurrency_safe(valid) == "truthy"  # type: ignore[misc]
    assert tool.present_call(valid) == {"card": "generic", "title": "a.txt"}  # type: ignore[misc]
    assert tool.present_result(valid, {"isError": True}) == {  # type: ignore[misc]
        "card": "generic",
        "title": "a.txt: True",
    }
    assert calls == ["classify", "present_call", "present_result"]
    rt = ToolRuntime()
    rt.register(tool)
    # A truthy non-True classification is still exclusive.
    assert rt.execution_mode(call("t", arguments=valid)) == "exclusive"


def test_optional_hooks_pass_through() -> None:
    def finalize(_e: Any, _r: Any) -> None:
        return None

    tool = _tool({}, timeout_ms=250, finalize_content=finalize)
    assert tool.timeout_ms == 250
    assert tool.finalize_content is finalize
    bare = _tool({})
    assert bare.is_concurrency_safe is None
    assert bare.present_call is None and bare.present_result is None
    assert bare.timeout_ms is None and bare.finalize_content is None


def test_output_render_and_meta_are_kept() -> None:
    def render(_a: Any, v: Any) -> Any:
        return [text(v)]

    def meta(_a: Any, v: Any) -> Any:
        return {"v": v}

    tool = _tool(
        {}, output=ToolOutput(schema={"type": "string"}, render=render, presentation_meta=meta)
    )
    assert tool.output.render is render
    assert tool.output.presentation_meta is meta
