"""The author DSL: compilation to the raw subset and definition-time author errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from codemode.engine import JsonSchemaError
from codemode.engine.json import FrozenDict, dumps_compact
from codemode.engine.schema import (
    assert_supported_json_schema,
    parameter_schema_spec_to_json_schema,
    value_schema_spec_to_json_schema,
)


def spec_errors(spec: Any, *, params: bool = False) -> list[str]:
    compile_ = parameter_schema_spec_to_json_schema if params else value_schema_spec_to_json_schema
    with pytest.raises(JsonSchemaError) as info:
        compile_(spec)
    err = info.value
    assert err.code == "UNSUPPORTED_SCHEMA"
    assert str(err) == "unsupported JSON schema: " + "; ".join(err.violations)
    return err.violations


class TestParameters:
    def test_compiles_to_an_open_object_root(self) -> None:
        compiled = parameter_schema_spec_to_json_schema(
            {
                "path": {"type": "string", "description": "File path.", "required": True},
                "limit": {"type": "integer"},
                "mode": {"type": "string", "enum": ["a", "b"], "required": True},
            }
        )
        assert compiled == {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path."},
                "limit": {"type": "integer"},
                "mode": {"type": "string", "enum": ["a", "b"]},
            },
            "required": ["path", "mode"],
        }
        assert "additionalProperties" not in compiled
        assert list(compiled) == ["type", "properties", "required"]
        assert list(compiled["properties"]) == ["path", "limit", "mode"]

    def test_required_is_omitted_when_empty(self) -> None:
        assert parameter_schema_spec_to_json_schema({"a": {"type": "json"}}) == {
            "type": "object",
            "properties": {"a": {}},
        }
        assert parameter_schema_spec_to_json_schema({}) == {"type": "object", "properties": {}}

    def test_result_is_frozen_and_detached(self) -> None:
        spec: dict[str, Any] = {"a": {"type": "array", "items": {"type": "string"}}}
        compiled = parameter_schema_spec_to_json_schema(spec)
        assert isinstance(compiled, FrozenDict)
        spec["a"]["items"]["type"] = "number"
        assert compiled["properties"]["a"]["items"] == {"type": "string"}
        with pytest.raises(TypeError):
            compiled["properties"]["b"] = {}

    def test_author_errors(self) -> None:
        assert spec_errors(
            {
                "a": {"type": "string", "required": False},
                "b": {},
                "c": {"type": "object", "properties": {}, "required": ["x"]},
                "d": {"type": "string", "format": "uri"},
                "e": "string",
                1: {"type": "string"},
            },
            params=True,
        ) == [
            "parameters: key 1 is not a string",
            "parameters.a.required: must be true (omit it for an optional property)",
            'parameters.b: a bare {} is not a value spec; use {"type": "json"} for any JSON',
            'parameters.c.required: object-level "required" lists are not supported; '
            'mark each property with "required": true',
            'parameters.c: object specs must declare "additionalProperties": true or false',
            'parameters.d: unsupported keyword "format"',
            "parameters.e: value spec must be a JSON object",
        ]

    def test_root_must_be_a_map(self) -> None:
        assert spec_errors([], params=True) == [
            "parameters: must be an object mapping property names to value specs"
        ]

    def test_required_one_is_not_true(self) -> None:
        assert spec_errors({"a": {"type": "string", "required": 1}}, params=True) == [
            "parameters.a.required: must be true (omit it for an optional property)"
        ]

    def test_label(self) -> None:
        with pytest.raises(JsonSchemaError) as info:
            parameter_schema_spec_to_json_schema({"a": {"type": "str"}}, label="tool.params")
        assert info.value.violations == ['tool.params.a.type: unsupported type "str"']


class TestValueSpecs:
    @pytest.mark.parametrize(
        ("spec", "compiled"),
        [
            ({"type": "string"}, {"type": "string"}),
            ({"type": "null", "title": "nothing"}, {"type": "null", "title": "nothing"}),
            (
                {"type": "integer", "enum": [1, 2], "const": 2},
                {"type": "integer", "enum": [1, 2], "const": 2},
            ),
            ({"type": "json"}, {}),
            ({"type": "json", "description": "anything"}, {"description": "anything"}),
            ({"description": "first", "type": "json"}, {"description": "first"}),
            ({"type": "array"}, {"type": "array"}),
            (
                {"type": "array", "description": "d", "items": {"type": "number"}},
                {"type": "array", "description": "d", "items": {"type": "number"}},
            ),
            (
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "logs": {"type": "array", "items": {"type": "string"}, "required": True},
                        "result": {"type": "json"},
                    },
                    "description": "run_code output",
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "logs": {"type": "array", "items": {"type": "string"}},
                        "result": {},
                    },
                    "required": ["logs"],
                    "description": "run_code output",
                },
            ),
            (
                {"type": "object", "additionalProperties": True},
                {"type": "object", "additionalProperties": True},
            ),
            (
                {"oneOf": [{"type": "string"}, {"type": "null"}], "default": None},
                {"oneOf": [{"type": "string"}, {"type": "null"}], "default": None},
            ),
            (
                {"type": "string", "default": "x", "examples": ["a", "b"]},
                {"type": "string", "default": "x", "examples": ["a", "b"]},
            ),
        ],
    )
    def test_compiles(self, spec: dict[str, Any], compiled: dict[str, Any]) -> None:
        out = value_schema_spec_to_json_schema(spec)
        assert out == compiled
        assert dumps_compact(out) == dumps_compact(compiled)  # key order too
        assert_supported_json_schema(out)

    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            ({}, ['schema: a bare {} is not a value spec; use {"type": "json"} for any JSON']),
            ({"description": "x"}, ['schema: must declare "type" or "oneOf"']),
            ({"type": "str"}, ['schema.type: unsupported type "str"']),
            (
                {"type": ["string", "null"]},
                ["schema.type: type arrays are not supported; use oneOf"],
            ),
            ({"type": None}, ["schema.type: must be a string"]),
            (
                {"type": "string", "oneOf": [{"type": "string"}, {"type": "null"}]},
                ['schema: "type" cannot be combined with "oneOf"'],
            ),
            (
                {"oneOf": [{"type": "string"}]},
                ["schema.oneOf: must be an array of at least 2 value specs"],
            ),
            (
                {"oneOf": [{"type": "string"}, {}]},
                [
                    'schema.oneOf[1]: a bare {} is not a value spec; use {"type": "json"} for any JSON'
                ],
            ),
            (
                {"type": "object"},
                ['schema: object specs must declare "additionalProperties": true or false'],
            ),
            (
                {"type": "object", "additionalProperties": {"type": "string"}},
                ["schema.additionalProperties: must be true or false"],
            ),
            (
                {"type": "string", "items": {"type": "string"}},
                ['schema: "items" is not allowed with type "string"'],
            ),
            ({"type": "array", "enum": [[1]]}, ['schema: "enum" is not allowed with type "array"']),
            ({"type": "json", "const": 1}, ['schema: "const" is not allowed with type "json"']),
            (
                {"oneOf": [{"type": "string"}, {"type": "null"}], "enum": ["a"]},
                ['schema: "enum" is not allowed with "oneOf"'],
            ),
            (
                {"type": "string", "required": True},
                ['schema.required: only allowed on an object property (as "required": true)'],
            ),
            (
                {"type": "string", "enum": ["a", 1]},
                ['schema.enum[1]: 1 does not match type "string"'],
            ),
            (
                {"type": "integer", "enum": [True, 2.5]},
                [
                    'schema.enum[0]: true does not match type "integer"',
                    'schema.enum[1]: 2.5 does not match type "integer"',
                ],
            ),
            ({"type": "boolean", "enum": []}, ["schema.enum: must be a non-empty array"]),
            (
                {"type": "string", "enum": ["a"], "const": "b"},
                ['schema.const: "b" is not one of the "enum" values'],
            ),
            (
                {"type": "number", "const": float("nan")},
                ["schema.const: nan is not a finite JSON number"],
            ),
            (
                {"type": "string", "default": {"a": {1, 2}}},
                ["schema.default.a: set is not a JSON value"],
            ),
            ({"type": "string", "description": 3}, ["schema.description: must be a string"]),
            ({"type": "string", "pattern": "^a"}, ['schema: unsupported keyword "pattern"']),
            ("string", ["schema: value spec must be a JSON object"]),
        ],
    )
    def test_author_errors(self, spec: Any, expected: list[str]) -> None:
        assert spec_errors(spec) == expected

    def test_all_nested_errors_are_reported(self) -> None:
        spec = {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {}}},
                "pick": {"oneOf": [{"type": "string", "required": True}, {"type": "nul"}]},
                "meta": {"type": "object", "additionalProperties": True, "required": ["a"]},
            },
        }
        assert spec_errors(spec) == [
            'schema.properties.items.items: object specs must declare "additionalProperties": true or false',
            'schema.properties.pick.oneOf[0].required: only allowed on an object property (as "required": true)',
            'schema.properties.pick.oneOf[1].type: unsupported type "nul"',
            'schema.properties.meta.required: object-level "required" lists are not supported; '
            'mark each property with "required": true',
        ]

    def test_cycles_are_author_errors(self) -> None:
        spec: dict[str, Any] = {"type": "array"}
        spec["items"] = spec
        assert spec_errors(spec) == ["schema.items: cycle detected"]
        props: dict[str, Any] = {}
        obj = {"type": "object", "additionalProperties": True, "properties": props}
        props["self"] = obj
        assert spec_errors(obj) == ["schema.properties.self: cycle detected"]

    def test_shared_subspecs_compile_twice(self) -> None:
        shared = {"type": "string", "required": True}
        out = parameter_schema_spec_to_json_schema({"a": shared, "b": shared})
        assert out["properties"] == {"a": {"type": "string"}, "b": {"type": "string"}}
        assert out["required"] == ["a", "b"]

    def test_label(self) -> None:
        with pytest.raises(JsonSchemaError) as info:
            value_schema_spec_to_json_schema({"type": "object"}, label="output.schema")
        assert info.value.violations == [
            'output.schema: object specs must declare "additionalProperties": true or false'
        ]

    def test_compilation_is_deterministic_and_does_not_mutate_the_spec(self) -> None:
        spec = {
            "type": "object",
            "additionalProperties": True,
            "properties": {"b": {"type": "string", "required": True}, "a": {"type": "json"}},
        }
        before = copy.deepcopy(spec)
        first = value_schema_spec_to_json_schema(spec)
        second = value_schema_spec_to_json_schema(copy.deepcopy(spec))
        assert spec == before
        assert dumps_compact(first) == dumps_compact(second)
        assert dumps_compact(first) == (
            '{"type":"object","additionalProperties":true,'
            '"properties":{"b":{"type":"string"},"a":{}},"required":["b"]}'
        )

    def test_five_thousand_deep_spec(self) -> None:
        spec: dict[str, Any] = {"type": "string"}
        for _ in range(5000):
            spec = {"type": "array", "items": spec}
        compiled = value_schema_spec_to_json_schema(spec)
        assert dumps_compact(compiled) == dumps_compact(spec)
        bad: dict[str, Any] = {"type": "json", "const": 1}
        for _ in range(5000):
            bad = {"type": "object", "additionalProperties": False, "properties": {"k": bad}}
        (only,) = spec_errors(bad)
        assert (
            only == "schema" + ".properties.k" * 5000 + ': "const" is not allowed with type "json"'
        )
