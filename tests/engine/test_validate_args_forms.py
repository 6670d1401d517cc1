"""``validate_args`` takes the DSL parameter map or
the compiled raw schema, with identical results."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.engine.schema import parameter_schema_spec_to_json_schema, validate_args

SPEC: dict[str, Any] = {
    "x": {"type": "number", "required": True},
    "tags": {"type": "array", "items": {"type": "string"}},
    "type": {"type": "string"},
}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (None, ['"arguments" must be an object']),
        ([], ['"arguments" must be an object']),
        ({}, ['missing required property "x"']),
        ({"x": "a"}, ['"x" must be a number']),
        ({"x": 1, "tags": ["a", 2]}, ['"tags[1]" must be a string']),
        ({"x": 1, "type": 3}, ['"type" must be a string']),
        ({"x": True}, ['"x" must be a number']),
        ({"x": 1, "extra": {"open": "root"}}, []),
    ],
)
def test_dsl_map_and_compiled_schema_agree(args: Any, expected: list[str]) -> None:
    compiled = parameter_schema_spec_to_json_schema(SPEC)
    assert validate_args(SPEC, args) == expected
    assert validate_args(compiled, args) == expected


def test_raw_schemas_without_a_type_stay_raw() -> None:
    # Not a map of specs: validated as the raw schema it is, at the "arguments" root.
    assert validate_args({"enum": [1, 2]}, 3) == ['"arguments" must be one of [1,2]']
    assert validate_args({"enum": [1, 2]}, 2) == []
