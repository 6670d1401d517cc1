"""Value validation: exact messages, paths, Python number rules, totality, depth."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import pytest

from codemode.engine.json import snapshot
from codemode.engine.schema import (
    parameter_schema_spec_to_json_schema,
    validate_args,
    validate_json_schema_value,
    value_schema_spec_to_json_schema,
)

OBJ = {
    "type": "object",
    "properties": {
        "x": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "a": {
            "type": "object",
            "properties": {"b": {"type": "string"}},
            "required": ["b"],
        },
    },
    "required": ["x"],
}


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "string"}, 1, ['"value" must be a string']),
        ({"type": "number"}, "1", ['"value" must be a number']),
        ({"type": "number"}, math.nan, ['"value" must be a finite JSON number']),
        ({"type": "number"}, -math.inf, ['"value" must be a finite JSON number']),
        ({"type": "number"}, -0.0, ['"value" must be a lossless JSON value']),
        ({"type": "number"}, 10**400, ['"value" must be a finite JSON number']),
        ({"type": "integer"}, 1.5, ['"value" must be an integer']),
        ({"type": "integer"}, math.inf, ['"value" must be a finite JSON number']),
        ({"type": "boolean"}, 0, ['"value" must be a boolean']),
        ({"type": "null"}, 0, ['"value" must be null']),
        ({"type": "object"}, [], ['"value" must be an object']),
        ({"type": "array"}, {}, ['"value" must be an array']),
        ({"type": "array"}, (1, 2), ['"value" must be an array']),
        (
            {"type": "string", "enum": ["red", "green"]},
            "blue",
            ['"value" must be one of ["red","green"]'],
        ),
        ({"enum": [1, "a", None, True]}, [1], ['"value" must be one of [1,"a",null,true]']),
        ({"type": "string", "const": "c"}, "d", ['"value" must be "c"']),
        ({"const": 1.5}, 2, ['"value" must be 1.5']),
        ({"const": None}, False, ['"value" must be null']),
        (
            {"oneOf": [{"type": "string"}, {"type": "number"}]},
            None,
            ['"value" must match exactly one oneOf branch (matched 0)'],
        ),
        (
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            3,
            ['"value" must match exactly one oneOf branch (matched 2)'],
        ),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 3.5, []),
        ({}, object(), ['"value" must be a lossless JSON value']),
        ({}, {"a": [1, {"b": math.nan}]}, ['"value.a[1].b" must be a finite JSON number']),
        ({}, {1: "x"}, ['"value" must be a lossless JSON value']),
        ({}, OrderedDict(a=1), ['"value" must be a lossless JSON value']),
        ({"type": "object"}, OrderedDict(a=1), ['"value" must be a lossless JSON value']),
        ({}, {"k": {1, 2}}, ['"value.k" must be a lossless JSON value']),
    ],
)
def test_messages(schema: dict[str, Any], value: Any, expected: list[str]) -> None:
    assert validate_json_schema_value(schema, value) == expected


def test_paths_from_the_value_root() -> None:
    value = {"x": "1", "tags": ["a", 2, "c", None], "a": {}}
    assert validate_json_schema_value(OBJ, value) == [
        '"value.x" must be a number',
        '"value.tags[1]" must be a string',
        '"value.tags[3]" must be a string',
        'missing required property "value.a.b"',
    ]
    assert validate_json_schema_value(OBJ, value, "out") == [
        '"out.x" must be a number',
        '"out.tags[1]" must be a string',
        '"out.tags[3]" must be a string',
        'missing required property "out.a.b"',
    ]


def test_missing_comes_first_then_keys_in_value_order() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert validate_json_schema_value(schema, {"z": 1, "a": 2}) == [
        'missing required property "value.b"',
        '"value.z" is not a declared property (additionalProperties: false)',
        '"value.a" must be a string',
    ]


def test_open_objects_allow_extra_keys_but_they_must_be_lossless() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert validate_json_schema_value(schema, {"a": "x", "extra": [1, {"b": None}]}) == []
    assert validate_json_schema_value(schema, {"extra": [math.nan]}) == [
        '"value.extra[0]" must be a finite JSON number'
    ]


def test_none_is_null_not_missing() -> None:
    # Python has no ``undefined``: only an absent key is missing.
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    assert validate_json_schema_value(schema, {"a": None}) == []
    assert validate_json_schema_value(schema, {}) == ['missing required property "value.a"']


class TestPythonNumbers:
    """Where Python differs from JS: bool is an int subclass, ints are unbounded."""

    @pytest.mark.parametrize("type_name", ["integer", "number"])
    @pytest.mark.parametrize("value", [True, False])
    def test_bool_is_never_a_number(self, type_name: str, value: bool) -> None:
        noun = "an integer" if type_name == "integer" else "a number"
        assert validate_json_schema_value({"type": type_name}, value) == [f'"value" must be {noun}']

    @pytest.mark.parametrize("value", [1.0, -3.0, 1e20, 2.0**60])
    def test_integral_floats_are_integers(self, value: float) -> None:
        # As in JSON (and the suite's "a float with zero fractional part is an integer").
        assert validate_json_schema_value({"type": "integer"}, value) == []

    def test_big_ints_are_integers(self) -> None:
        assert validate_json_schema_value({"type": "integer"}, 2**80) == []

    def test_enum_and_const_compare_as_json(self) -> None:
        assert validate_json_schema_value({"enum": [1]}, 1.0) == []
        assert validate_json_schema_value({"enum": [1]}, True) == ['"value" must be one of [1]']
        assert validate_json_schema_value({"enum": [True]}, 1) == ['"value" must be one of [true]']
        assert validate_json_schema_value({"const": 0}, False) == ['"value" must be 0']
        assert validate_json_schema_value({"const": 0}, -0.0) == [
            '"value" must be a lossless JSON value'
        ]

    def test_int_subclasses_are_numbers(self) -> None:
        import enum

        class Level(enum.IntEnum):
            LOW = 1

        assert validate_json_schema_value({"type": "integer", "enum": [1]}, Level.LOW) == []


class TestArgs:
    SCHEMA = parameter_schema_spec_to_json_schema(
        {
            "description": {"type": "string", "required": True},
            "x": {"type": "number"},
            "opts": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"deep": {"type": "array", "items": {"type": "boolean"}}},
            },
        }
    )

    def test_root_problem_is_labelled_arguments(self) -> None:
        assert validate_args(self.SCHEMA, None) == ['"arguments" must be an object']
        assert validate_args(self.SCHEMA, []) == ['"arguments" must be an object']
        assert validate_args(self.SCHEMA, {1: 2}) == ['"arguments" must be a lossless JSON value']

    def test_nested_keys_are_bare(self) -> None:
        assert validate_args(self.SCHEMA, {"x": "1", "opts": {"deep": [True, 1], "k": 0}}) == [
            'missing required property "description"',
            '"x" must be a number',
            '"opts.deep[1]" must be a boolean',
            '"opts.k" is not a declared property (additionalProperties: false)',
        ]

    def test_root_is_open(self) -> None:
        assert validate_args(self.SCHEMA, {"description": "d", "anything": [1]}) == []

    def test_valid_frozen_arguments(self) -> None:
        args = snapshot({"description": "d", "opts": {"deep": [False]}})
        assert validate_args(self.SCHEMA, args) == []

    def test_raw_closed_root(self) -> None:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        assert validate_args(schema, {"k": 1}) == [
            '"k" is not a declared property (additionalProperties: false)'
        ]


class TestOneOf:
    NULLABLE = value_schema_spec_to_json_schema(
        {
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"kind": {"type": "string", "const": "new", "required": True}},
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"type": "string", "const": "existing", "required": True},
                        "id": {"type": "integer", "required": True},
                    },
                },
            ]
        }
    )

    def test_discriminated_union(self) -> None:
        assert validate_json_schema_value(self.NULLABLE, {"kind": "new"}) == []
        assert validate_json_schema_value(self.NULLABLE, {"kind": "existing", "id": 2}) == []
        assert validate_json_schema_value(self.NULLABLE, {"kind": "existing"}) == [
            '"value" must match exactly one oneOf branch (matched 0)'
        ]

    def test_nested_path(self) -> None:
        schema = {
            "type": "array",
            "items": {"oneOf": [{"type": "string"}, {"type": "null"}]},
        }
        assert validate_json_schema_value(schema, ["a", None, 3]) == [
            '"value[2]" must match exactly one oneOf branch (matched 0)'
        ]


class TestTotality:
    def test_cyclic_values_are_reported(self) -> None:
        cyc: dict[str, Any] = {}
        cyc["self"] = cyc
        assert validate_json_schema_value({}, cyc) == ['"value.self" must be a lossless JSON value']
        schema = {"type": "object", "properties": {"self": {"type": "object"}}}
        assert validate_json_schema_value(schema, cyc) == [
            '"value.self" must be a lossless JSON value'
        ]
        lst: list[Any] = []
        lst.append(lst)
        assert validate_json_schema_value({"type": "array", "items": {}}, lst) == [
            '"value[0]" must be a lossless JSON value'
        ]

    def test_shared_references_are_fine(self) -> None:
        shared = [1, 2]
        assert validate_json_schema_value({}, {"a": shared, "b": shared}) == []

    @pytest.mark.parametrize(
        "value", [object(), (1,), {1, 2}, b"x", math.nan, -0.0, 10**400, print, {None: 1}]
    )
    def test_any_value_yields_a_list_of_strings(self, value: Any) -> None:
        for schema in (OBJ, {}, {"type": "string"}, {"oneOf": [{}, {"type": "null"}]}):
            result = validate_json_schema_value(schema, value)
            assert isinstance(result, list)
            assert all(isinstance(v, str) for v in result)
            assert result


class TestDepth:
    def test_five_thousand_deep_value(self) -> None:
        schema: dict[str, Any] = {"type": "string"}
        value: Any = "leaf"
        for _ in range(5000):
            schema = {"type": "array", "items": schema}
            value = [value]
        assert validate_json_schema_value(schema, value) == []
        bad: Any = 1
        for _ in range(5000):
            bad = [bad]
        assert validate_json_schema_value(schema, bad) == [
            '"value' + "[0]" * 5000 + '" must be a string'
        ]

    def test_five_thousand_deep_untyped_value(self) -> None:
        value: Any = None
        for _ in range(5000):
            value = {"k": value}
        assert validate_json_schema_value({}, value) == []

    def test_five_thousand_deep_one_of(self) -> None:
        schema: dict[str, Any] = {"type": "string"}
        for i in range(5000):
            schema = {"oneOf": [schema, {"type": "integer", "const": i}]}
        assert validate_json_schema_value(schema, "x") == []
        assert validate_json_schema_value(schema, 2500) == []
        assert validate_json_schema_value(schema, None) == [
            '"value" must match exactly one oneOf branch (matched 0)'
        ]
