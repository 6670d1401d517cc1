"""Property tests over generated schemas, DSL specs and values (``tests/strategies.py``)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    dsl_specs,
    json_values,
    lossy_values,
    parameter_specs,
    supported_schemas,
    values_for,
)

from codemode.engine.json import dumps_compact, is_lossless, snapshot, thaw
from codemode.engine.schema import (
    assert_supported_json_schema,
    parameter_schema_spec_to_json_schema,
    validate_args,
    validate_json_schema_value,
    value_schema_spec_to_json_schema,
)


def _js_int(digits: str) -> int | float:
    number = int(digits)
    return number if abs(number) <= 2**53 else float(number)


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(supported_schemas())
def test_generated_schemas_are_supported(schema: dict[str, Any]) -> None:
    assert dumps_compact(assert_supported_json_schema(schema)) == dumps_compact(schema)


@SETTINGS
@given(st.data(), supported_schemas())
def test_generated_values_validate(data: st.DataObject, schema: dict[str, Any]) -> None:
    value = data.draw(values_for(schema))
    assert validate_json_schema_value(schema, value) == []
    # Validation sees the same thing in a frozen snapshot.
    assert validate_json_schema_value(schema, snapshot(value)) == []


@SETTINGS
@given(dsl_specs())
def test_dsl_compilation_is_deterministic(spec: dict[str, Any]) -> None:
    before = copy.deepcopy(spec)
    first = value_schema_spec_to_json_schema(spec)
    second = value_schema_spec_to_json_schema(copy.deepcopy(spec))
    assert spec == before  # the author's spec is not touched
    assert dumps_compact(first) == dumps_compact(second)
    assert_supported_json_schema(first)


@SETTINGS
@given(st.data(), dsl_specs())
def test_values_for_compiled_specs_validate(data: st.DataObject, spec: dict[str, Any]) -> None:
    schema = value_schema_spec_to_json_schema(spec)
    assert validate_json_schema_value(schema, data.draw(values_for(schema))) == []


@SETTINGS
@given(st.data(), parameter_specs())
def test_parameter_maps_compile_and_accept_generated_args(
    data: st.DataObject, spec_map: dict[str, Any]
) -> None:
    schema = parameter_schema_spec_to_json_schema(spec_map)
    again = parameter_schema_spec_to_json_schema(copy.deepcopy(spec_map))
    assert dumps_compact(schema) == dumps_compact(again)
    assert schema["type"] == "object"
    assert "additionalProperties" not in schema
    assert schema.get("required", []) == [k for k, v in spec_map.items() if v.get("required")]
    assert validate_args(schema, data.draw(values_for(schema))) == []


@SETTINGS
@given(json_values())
def test_snapshot_round_trips(value: Any) -> None:
    frozen = snapshot(value)
    assert frozen == value
    assert thaw(frozen) == value
    assert snapshot(frozen) == value
    assert is_lossless(value)
    text = dumps_compact(value)
    assert dumps_compact(frozen) == text
    # The text reads back as JavaScript would: every number a double, so ints stay exact in
    # the safe range (the strategy's) and floats round-trip through shortest-repr digits.
    assert json.loads(text, parse_int=_js_int) == value
    assert validate_json_schema_value({}, value) == []


@SETTINGS
@given(lossy_values())
def test_lossy_values_are_rejected_everywhere(value: Any) -> None:
    assert not is_lossless(value)
    violations = validate_json_schema_value({}, value)
    assert violations
    assert all(isinstance(v, str) for v in violations)


@SETTINGS
@given(supported_schemas(), st.one_of(json_values(), lossy_values()))
def test_validation_is_total(schema: dict[str, Any], value: Any) -> None:
    result = validate_json_schema_value(schema, value)
    assert isinstance(result, list)
    assert all(isinstance(v, str) for v in result)
