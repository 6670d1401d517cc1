"""OpenAI strict mode: the export keeps optional properties optional (nullable), the way
back strips exactly those nulls, and what strict mode cannot express is refused."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from codemode.engine import JsonSchemaError
from codemode.engine.schema import validate_json_schema_value
from codemode.integrations.providers import (
    STRICT_LIMITS,
    accepts_null,
    strict_parameters,
    strip_strict_nulls,
)

NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Text."},
        "limit": {"type": "integer"},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "exact": {"const": "yes"},
        "maybe": {"type": "null"},
        "nullable_opt": {"oneOf": [{"type": "string"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "filter": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "since": {"type": "string"},
                "deep": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                    "required": ["x"],
                },
            },
            "required": [],
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
                "required": ["id"],
            },
        },
        "either": {
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                    "required": ["path"],
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"url": {"type": "string"}},
                    "required": ["url"],
                },
            ]
        },
    },
    "required": ["query"],
}


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            found.append(node)
        for value in node.values():
            found.extend(_objects(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_objects(value))
    return found


def test_every_object_is_closed_and_lists_every_property_as_required() -> None:
    strict = strict_parameters(NESTED)
    objects = _objects(strict)
    assert len(objects) == 6  # root, filter, deep, items[*], both union branches
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])


def test_optional_properties_become_nullable_in_the_documented_shapes() -> None:
    props = strict_parameters(NESTED)["properties"]
    assert props["query"] == {"type": "string", "description": "Text."}  # required: unchanged
    assert props["limit"] == {"type": ["integer", "null"]}
    assert props["kind"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert props["exact"] == {"anyOf": [{"const": "yes"}, {"type": "null"}]}
    assert props["maybe"] == {"type": "null"}  # accepted null already: left as it is
    assert props["nullable_opt"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    }
    assert props["filter"]["anyOf"][1] == {"type": "null"}
    deep = props["filter"]["anyOf"][0]["properties"]["deep"]["anyOf"][0]
    assert deep["properties"] == {"x": {"type": "integer"}, "y": {"type": ["integer", "null"]}}
    item = props["items"]["anyOf"][0]["items"]
    assert item["properties"]["note"] == {"type": ["string", "null"]}
    # oneOf is strict mode's anyOf (plus the null branch of an optional property).
    assert [b.get("type") for b in props["either"]["anyOf"]] == ["object", "object", "null"]


def test_the_input_schema_is_not_modified() -> None:
    before = copy.deepcopy(NESTED)
    strict_parameters(NESTED)
    assert before == NESTED


def _fill_nulls(schema: dict[str, Any], value: Any) -> Any:
    """What a strict-mode model sends for ``value``: null for every absent property."""
    if "oneOf" in schema:
        for branch in schema["oneOf"]:
            if not validate_json_schema_value(branch, value):
                return _fill_nulls(branch, value)
        return value
    if isinstance(value, dict) and "properties" in schema:
        return {
            name: _fill_nulls(sub, value[name]) if name in value else None
            for name, sub in schema["properties"].items()
        }
    if isinstance(value, list) and "items" in schema:
        return [_fill_nulls(schema["items"], v) for v in value]
    return value


VALUES = [
    {"query": "q"},
    {"query": "q", "limit": 2, "kind": "a", "tags": ["x"]},
    {"query": "q", "filter": {}, "items": [{"id": 1}, {"id": 2, "note": "n"}]},
    {"query": "q", "filter": {"deep": {"x": 1}}, "either": {"path": "p"}},
    {"query": "q", "either": {"url": "u"}, "exact": "yes", "maybe": None},
    {"query": "q", "nullable_opt": "s", "either": {"path": "p", "line": 3}},
]


@pytest.mark.parametrize("value", VALUES)
def test_what_the_model_sends_in_strict_mode_comes_back_as_the_original(value: Any) -> None:
    assert validate_json_schema_value(NESTED, value) == []
    strict = strict_parameters(NESTED)
    sent = _fill_nulls(NESTED, value)
    # The strict schema accepts what the model sends (checked by an independent validator)
    jsonschema.Draft202012Validator(strict).validate(sent)
    # ... which the original does not, until the stand-in nulls are stripped.
    assert sent == value or validate_json_schema_value(NESTED, sent) != []
    restored = strip_strict_nulls(NESTED, sent)
    assert validate_json_schema_value(NESTED, restored) == []
    # Optional properties that accepted null all along come back as null: strict mode
    # cannot tell "absent" from null for them (documented); nothing else differs.
    ambiguous = {k for k, s in NESTED["properties"].items() if accepts_null(s) and k not in value}
    assert {k for k in restored if k not in value} == ambiguous
    assert {k: v for k, v in restored.items() if k in value} == value


def test_nulls_that_mean_something_are_kept() -> None:
    sent = {"query": None, "maybe": None, "nullable_opt": None, "limit": None}
    # query is required (null stays, for the runtime to reject); maybe/nullable_opt
    # accepted null all along; limit was optional and not nullable: dropped.
    assert strip_strict_nulls(NESTED, sent) == {"query": None, "maybe": None, "nullable_opt": None}


def test_values_that_fit_nothing_are_left_for_the_runtime() -> None:
    assert strip_strict_nulls(NESTED, "not an object") == "not an object"
    odd = {"query": "q", "either": {"neither": None}, "unknown": None}
    assert strip_strict_nulls(NESTED, odd) == odd


def test_accepts_null() -> None:
    assert accepts_null({"type": "null"})
    assert accepts_null({"oneOf": [{"type": "string"}, {"type": "null"}]})
    assert accepts_null({"enum": ["a", None]})
    assert accepts_null({"const": None})
    assert accepts_null({})
    assert not accepts_null({"type": "string"})
    assert not accepts_null({"type": ["string", "null"], "enum": ["a"]})
    assert not accepts_null({"enum": ["a"]})


def test_a_tool_without_parameters_exports_an_empty_closed_object() -> None:
    assert strict_parameters({"type": "object"}) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def _refusal(schema: Any) -> list[str]:
    with pytest.raises(JsonSchemaError) as info:
        strict_parameters(schema)
    assert str(info.value).startswith("OpenAI strict mode cannot express this schema: ")
    return info.value.violations


@pytest.mark.parametrize(
    ("prop", "problem"),
    [
        ({"type": "string", "minLength": 1}, 'keyword "minLength" is not supported'),
        ({"type": "string", "format": "uri"}, "format 'uri' is not supported"),
        ({"allOf": [{"type": "string"}]}, 'keyword "allOf" is not supported'),
        ({"$ref": "#/$defs/x"}, "resolve references before exporting"),
        ({}, "a schema without a type (any JSON value) cannot be expressed"),
        ({"type": "array"}, "an array without items"),
        ({"type": "object"}, "a free-form object (no declared properties)"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "integer"},
            },
            "an open object",
        ),
        ({"type": "object", "additionalProperties": True}, "a free-form object"),
        ({"type": "strin"}, "unknown type 'strin'"),
    ],
)
def test_refusals_name_the_place_and_the_construct(prop: Any, problem: str) -> None:
    violations = _refusal({"type": "object", "properties": {"p": prop}})
    assert len(violations) == 1
    assert violations[0].startswith("parameters.properties.p")
    assert problem in violations[0]


def test_an_object_tolerating_extra_properties_is_exported_closed() -> None:
    # The catalogue's ask_user_question: declared properties, extras tolerated. Closing the
    # object narrows what the model may send; everything it can send stays valid.
    item = {
        "type": "object",
        "additionalProperties": True,
        "properties": {"id": {"type": "string"}, "note": {"type": "string"}},
        "required": ["id"],
    }
    exported = strict_parameters(
        {"type": "object", "properties": {"qs": {"type": "array", "items": item}}, "required": ["qs"]}
    )
    items = exported["properties"]["qs"]["items"]
    assert items["additionalProperties"] is False
    assert items["required"] == ["id", "note"]
    assert items["properties"]["note"] == {"type": ["string", "null"]}


def test_every_problem_is_reported_at_once() -> None:
    violations = _refusal(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 3},
                "b": {"type": "array", "items": {"type": "object", "properties": {"c": {}}}},
            },
        }
    )
    assert violations == [
        'parameters.properties.a: keyword "maxLength" is not supported by OpenAI strict mode',
        "parameters.properties.b.items.properties.c: a schema without a type (any JSON value) "
        "cannot be expressed",
    ]


def test_the_root_must_be_an_object() -> None:
    violations = _refusal({"anyOf": [{"type": "object"}, {"type": "object"}]})
    assert violations[0].startswith("parameters: the root must be a plain object schema")


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", "properties": {"leaf": {"type": "string"}}}
    for _ in range(levels - 1):
        node = {"type": "object", "properties": {"n": node}, "required": ["n"]}
    return node


def test_nesting_limit() -> None:
    assert strict_parameters(_nested(STRICT_LIMITS["nesting"]))
    violations = _refusal(_nested(STRICT_LIMITS["nesting"] + 1))
    assert violations == [
        "parameters: 11 levels of object nesting exceed strict mode's limit of 10"
    ]


def test_size_limits() -> None:
    many = {f"p{i}": {"type": "string"} for i in range(STRICT_LIMITS["properties"] + 1)}
    assert "5001 object properties exceed" in _refusal({"type": "object", "properties": many})[0]
    enum = {"type": "string", "enum": [f"v{i}" for i in range(STRICT_LIMITS["enum_values"] + 1)]}
    violations = _refusal({"type": "object", "properties": {"e": enum}})
    assert violations == ["parameters: 1001 enum values exceed strict mode's limit of 1000"]
    long = {"type": "string", "enum": ["x" * 60_001, "y" * 60_000]}
    assert (
        "characters of property names" in _refusal({"type": "object", "properties": {"e": long}})[0]
    )


def test_a_strict_export_is_json() -> None:
    strict = strict_parameters(NESTED)
    assert json.loads(json.dumps(strict)) == strict
