"""The enforced raw subset: what ``assert_supported_json_schema`` accepts and rejects."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.engine import JsonSchemaError
from codemode.engine.json import FrozenDict, dumps_compact
from codemode.engine.schema import assert_object_json_schema, assert_supported_json_schema


def violations(schema: Any, **kw: Any) -> list[str]:
    with pytest.raises(JsonSchemaError) as info:
        assert_supported_json_schema(schema, **kw)
    err = info.value
    assert err.code == "UNSUPPORTED_SCHEMA"
    assert str(err) == "unsupported JSON schema: " + "; ".join(err.violations)
    return err.violations


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"description": "any JSON", "title": "t", "default": {"a": [1]}, "examples": [1, "x"]},
        {"type": "string"},
        {"type": "integer", "enum": [1, 2.0, 3]},
        {"type": "number", "const": 1.5},
        {"type": "boolean", "enum": [True], "const": True},
        {"type": "null", "const": None},
        {"enum": ["a", 1, None, False]},
        {"const": "c"},
        {"type": "array"},
        {"type": "array", "items": {"type": "array", "items": {}}},
        {"type": "object"},
        {"type": "object", "properties": {}, "required": []},
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {}},
            "required": ["a"],
            "additionalProperties": False,
        },
        {"oneOf": [{"type": "string"}, {"type": "null"}], "description": "nullable"},
        {"oneOf": [{"oneOf": [{"type": "string"}, {"type": "null"}]}, {"type": "number"}]},
    ],
)
def test_accepted(schema: dict[str, Any]) -> None:
    frozen = assert_supported_json_schema(schema)
    assert frozen == schema
    assert isinstance(frozen, FrozenDict)
    assert frozen is not schema


def test_returned_copy_is_detached_from_the_caller() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    frozen = assert_supported_json_schema(schema)
    schema["properties"]["a"]["type"] = "number"
    assert frozen["properties"]["a"] == {"type": "string"}
    with pytest.raises(TypeError):
        frozen["properties"]["b"] = {}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (True, ["schema: schema must be a JSON object (boolean schemas are not supported)"]),
        ([], ["schema: schema must be a JSON object"]),
        ({"type": ["string", "null"]}, ["schema.type: type arrays are not supported; use oneOf"]),
        ({"type": "json"}, ['schema.type: unsupported type "json"']),
        ({"type": 3}, ["schema.type: must be a string"]),
        (
            {"$schema": "https://json-schema.org/draft/2020-12/schema"},
            ['schema: unsupported keyword "$schema"'],
        ),
        ({"type": "string", "minLength": 1}, ['schema: unsupported keyword "minLength"']),
        ({"type": "string", "format": "uri"}, ['schema: unsupported keyword "format"']),
        ({"properties": {}}, ['schema.properties: only allowed with type "object"']),
        ({"type": "array", "required": []}, ['schema.required: only allowed with type "object"']),
        ({"type": "string", "items": {}}, ['schema.items: only allowed with type "array"']),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            ["schema.additionalProperties: must be a boolean"],
        ),
        ({"type": "string", "enum": []}, ["schema.enum: must be a non-empty array"]),
        ({"type": "string", "enum": "a"}, ["schema.enum: must be a non-empty array"]),
        (
            {"type": "string", "enum": ["a", 1, None]},
            [
                'schema.enum[1]: 1 does not match type "string"',
                'schema.enum[2]: null does not match type "string"',
            ],
        ),
        ({"type": "integer", "enum": [1.5]}, ['schema.enum[0]: 1.5 does not match type "integer"']),
        ({"type": "integer", "const": True}, ['schema.const: true does not match type "integer"']),
        ({"type": "number", "const": False}, ['schema.const: false does not match type "number"']),
        (
            {"enum": [[1], {"a": 1}]},
            [
                "schema.enum[0]: [1] is not a scalar (string, number, boolean or null)",
                'schema.enum[1]: {"a":1} is not a scalar (string, number, boolean or null)',
            ],
        ),
        ({"enum": [float("nan")]}, ["schema.enum[0]: nan is not a finite JSON number"]),
        ({"const": -0.0}, ["schema.const: -0.0 is not lossless JSON"]),
        (
            {"type": "array", "enum": [1]},
            [
                "schema.enum: only allowed with a scalar type (string, number, integer, boolean, "
                "null) or no type"
            ],
        ),
        (
            {"type": "string", "enum": ["a", "b"], "const": "c"},
            ['schema.const: "c" is not one of the "enum" values'],
        ),
        ({"type": "integer", "enum": [1], "const": 1.0}, []),
        (
            {"type": "integer", "enum": [1], "const": True},
            ['schema.const: true does not match type "integer"'],
        ),
        ({"oneOf": [{"type": "string"}]}, ["schema.oneOf: must be an array of at least 2 schemas"]),
        ({"oneOf": {}}, ["schema.oneOf: must be an array of at least 2 schemas"]),
        (
            {"type": "string", "oneOf": [{}, {}]},
            ['schema: "oneOf" cannot be combined with "type"'],
        ),
        (
            {"type": "object", "required": ["a", "a", 3], "properties": {"a": {}}},
            [
                'schema.required[1]: duplicate property name "a"',
                "schema.required[2]: must be a string",
            ],
        ),
        (
            {"type": "object", "required": ["b"]},
            ['schema.required[0]: "b" is not a declared property'],
        ),
        (
            {"type": "object", "required": "a"},
            ["schema.required: must be an array of property names"],
        ),
        ({"type": "object", "properties": []}, ["schema.properties: must be an object"]),
        (
            {"description": 1, "title": None},
            ["schema.description: must be a string", "schema.title: must be a string"],
        ),
        ({"default": {"a": float("inf")}}, ["schema.default.a: inf is not a finite JSON number"]),
        ({"examples": [(1, 2)]}, ["schema.examples[0]: tuple is not a JSON value"]),
        ({1: "x"}, ["schema: key 1 is not a string"]),
        ({"type": "object", "properties": {1: {}}}, ["schema.properties: key 1 is not a string"]),
    ],
)
def test_rejected_with_exact_violations(schema: Any, expected: list[str]) -> None:
    if not expected:
        assert_supported_json_schema(schema)
    else:
        assert violations(schema) == expected


def test_all_violations_are_reported_with_nested_paths() -> None:
    schema = {
        "$id": "x",
        "type": "object",
        "properties": {
            "tags": {"type": ["string"], "items": {"type": "string", "pattern": "^a"}},
            "mode": {"type": "string", "enum": ["a", 2]},
            "pick": {"oneOf": [True, {"type": "date"}]},
            "list": {"type": "array", "items": {"type": "object", "required": ["z"]}},
        },
        "required": ["tags", "nope"],
    }
    assert violations(schema) == [
        'schema: unsupported keyword "$id"',
        'schema.required[1]: "nope" is not a declared property',
        "schema.properties.tags.type: type arrays are not supported; use oneOf",
        'schema.properties.tags.items: unsupported keyword "pattern"',
        'schema.properties.mode.enum[1]: 2 does not match type "string"',
        "schema.properties.pick.oneOf[0]: schema must be a JSON object (boolean schemas are not supported)",
        'schema.properties.pick.oneOf[1].type: unsupported type "date"',
        'schema.properties.list.items.required[0]: "z" is not a declared property',
    ]


def test_label_roots_the_paths() -> None:
    assert violations({"type": "strin"}, label="output.schema") == [
        'output.schema.type: unsupported type "strin"'
    ]


def test_cycles_are_rejected_not_looped() -> None:
    node: dict[str, Any] = {"type": "array"}
    node["items"] = node
    assert violations(node) == ["schema.items: cycle detected"]
    branch: dict[str, Any] = {"type": "object", "properties": {}}
    branch["properties"]["self"] = {"oneOf": [branch, {"type": "null"}]}
    assert violations(branch) == ["schema.properties.self.oneOf[0]: cycle detected"]


def test_shared_subschemas_are_not_cycles() -> None:
    shared = {"type": "string"}
    schema = {"type": "object", "properties": {"a": shared, "b": shared}}
    assert assert_supported_json_schema(schema) == schema


def test_python_containers_that_are_not_json_are_rejected() -> None:
    assert violations({"type": "object", "properties": {"a": ({"type": "string"},)}}) == [
        "schema.properties.a: schema must be a JSON object"
    ]
    assert violations({"type": "string", "enum": ("a",)}) == [
        "schema.enum: must be a non-empty array"
    ]


def test_five_thousand_deep_schema() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    # ``==`` on 5,000-deep dicts recurses in C; compare the iterative renderings instead.
    assert dumps_compact(assert_supported_json_schema(schema)) == dumps_compact(schema)
    bad: dict[str, Any] = {"type": "strin"}
    for _ in range(5000):
        bad = {"type": "object", "properties": {"a": bad}, "additionalProperties": False}
    (only,) = violations(bad)
    assert only == "schema" + ".properties.a" * 5000 + '.type: unsupported type "strin"'


class TestObjectRoot:
    def test_object_root_accepted(self) -> None:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
        assert assert_object_json_schema(schema) == schema

    @pytest.mark.parametrize(
        ("schema", "expected"),
        [
            ({}, ['schema: must declare type "object"']),
            ({"type": "array"}, ['schema.type: must be "object", not "array"']),
            (
                {"oneOf": [{"type": "object"}, {"type": "null"}]},
                ['schema: must declare type "object"'],
            ),
            (
                {"type": "string", "items": {}},
                [
                    'schema.type: must be "object", not "string"',
                    'schema.items: only allowed with type "array"',
                ],
            ),
            ({"type": "nope"}, ['schema.type: unsupported type "nope"']),
            (None, ["schema: schema must be a JSON object"]),
        ],
    )
    def test_non_object_roots_rejected(self, schema: Any, expected: list[str]) -> None:
        with pytest.raises(JsonSchemaError) as info:
            assert_object_json_schema(schema)
        assert info.value.violations == expected
