"""The public JSON-Schema-Test-Suite (draft 2020-12) against the enforced subset.

For every test group: if its schema is inside the subset, ``assert_supported_json_schema``
accepts it and every case's ``valid`` equals ``validate_json_schema_value(...) == []``;
otherwise the schema is rejected. Which groups are inside the subset is decided by a
small independent oracle (``_outside_subset``) so that a checker that rejected
everything could not pass.

The suite declares its dialect with a root ``$schema`` (and two groups carry a
``$comment``). The subset does not include those keywords — code mode rejects
unknown keywords rather than carry them unenforced (see ``test_schema_subset.py``) — so
this harness strips them from the root before use, as ``SOURCE.txt`` prescribes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode.engine import JsonSchemaError
from codemode.engine.schema import assert_supported_json_schema, validate_json_schema_value

# Vendored under tests/data (see its README and SOURCE.txt): the suite reads nothing
# outside the checkout.
SUITE = Path(__file__).resolve().parents[1] / "data" / "json-schema-test-suite" / "draft2020-12"

_SUBSET = {
    "type",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
}
_ANNOTATIONS = {"description", "title", "default", "examples"}
_TYPES = {"string", "number", "integer", "boolean", "null", "array", "object"}
_HARNESS_STRIPPED = ("$schema", "$comment")

# Cases where the suite and our Python rules disagree: (file, group, case) ->
# reason. Python-specific rules (bool is not an integer, 1.0 is an integer) happen to agree
# with draft 2020-12, so nothing is listed today; keep this tiny and explained.
DISAGREEMENTS: dict[tuple[str, str, str], str] = {}


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def _matches(value: Any, type_name: str | None) -> bool:
    if type_name is None or not _is_scalar(value):
        return _is_scalar(value)
    if type_name in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return type_name == "number" or float(value).is_integer()
    expected = {"string": str, "boolean": bool, "null": type(None)}[type_name]
    return isinstance(value, expected)


def _outside_subset(schema: Any) -> str | None:
    """Why a suite schema is outside the subset (first reason found), or None."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if not isinstance(node, dict):
            return "boolean schemas are not supported"
        if unknown := sorted(set(node) - _SUBSET - _ANNOTATIONS):
            return f"keywords outside the subset: {unknown}"
        type_name = node.get("type")
        if "type" in node and not (isinstance(type_name, str) and type_name in _TYPES):
            return "type must be one type name"
        if "oneOf" in node:
            if len(node["oneOf"]) < 2 or set(node) & (_SUBSET - {"oneOf"}):
                return "oneOf needs two branches and stands alone"
            pending.extend(node["oneOf"])
        if {"properties", "required", "additionalProperties"} & set(node) and type_name != "object":
            return "object keywords need type object"
        if not isinstance(node.get("additionalProperties", False), bool):
            return "additionalProperties must be a boolean"
        if not set(node.get("required", [])) <= set(node.get("properties", {})):
            return "required must name declared properties"
        if "items" in node:
            if type_name != "array":
                return "items needs type array"
            pending.append(node["items"])
        if type_name in ("object", "array") and {"enum", "const"} & set(node):
            return "enum/const need a scalar type"
        if "enum" in node and not (
            node["enum"] and all(_matches(v, type_name) for v in node["enum"])
        ):
            return "enum must be a non-empty list of matching scalars"
        if "const" in node and not _matches(node["const"], type_name):
            return "const must be a matching scalar"
        pending.extend(node.get("properties", {}).values())
    return None


def _groups() -> list[Any]:
    params = []
    for file in sorted(SUITE.glob("*.json")):
        for group in json.loads(file.read_text(encoding="utf-8")):
            schema = group["schema"]
            if isinstance(schema, dict):
                schema = {k: v for k, v in schema.items() if k not in _HARNESS_STRIPPED}
            params.append(
                pytest.param(file.stem, group, schema, id=f"{file.stem}: {group['description']}")
            )
    return params


def test_suite_is_present() -> None:
    assert len(list(SUITE.glob("*.json"))) == 9


@pytest.mark.parametrize(("file", "group", "schema"), _groups())
def test_group(file: str, group: dict[str, Any], schema: Any) -> None:
    reason = _outside_subset(schema)
    if reason is not None:
        with pytest.raises(JsonSchemaError) as info:
            assert_supported_json_schema(schema)
        assert info.value.violations, reason
        assert str(info.value).startswith("unsupported JSON schema: ")
        return
    assert_supported_json_schema(schema)
    for case in group["tests"]:
        key = (file, group["description"], case["description"])
        violations = validate_json_schema_value(schema, case["data"])
        expected = case["valid"]
        if key in DISAGREEMENTS:
            expected = not expected
        assert (violations == []) is expected, (case["description"], violations)


def _typed_variant(schema: Any) -> tuple[dict[str, Any], type] | None:
    """The group's schema with the root ``type`` the subset requires, or None.

    Many suite groups use ``properties``/``required``/``items`` without ``type`` and
    expect other kinds of instance to pass ("ignores arrays"). The subset places these
    keywords under ``type: "object"``/``"array"`` only, so the variant adds that type at
    the root; a case stays valid iff it was valid and its instance has that kind.
    """
    if not isinstance(schema, dict) or "type" in schema:
        return None
    if {"properties", "required", "additionalProperties"} & set(schema):
        variant, kind = {"type": "object", **schema}, dict
    elif "items" in schema:
        variant, kind = {"type": "array", **schema}, list
    else:
        return None
    return (variant, kind) if _outside_subset(variant) is None else None


def _typed_groups() -> list[Any]:
    return [
        pytest.param(*p.values[:2], *variant, id=p.id)
        for p in _groups()
        if (variant := _typed_variant(p.values[2])) is not None
    ]


@pytest.mark.parametrize(("file", "group", "schema", "kind"), _typed_groups())
def test_group_with_root_type_added(
    file: str, group: dict[str, Any], schema: dict[str, Any], kind: type
) -> None:
    assert_supported_json_schema(schema)
    for case in group["tests"]:
        expected = case["valid"] and isinstance(case["data"], kind)
        violations = validate_json_schema_value(schema, case["data"])
        assert (violations == []) is expected, (case["description"], violations)


def test_subset_covers_a_meaningful_share_of_the_suite() -> None:
    assert len(_typed_groups()) >= 6
    inside = [p for p in _groups() if _outside_subset(p.values[2]) is None]
    cases = sum(len(p.values[1]["tests"]) for p in inside)
    # Guards the oracle itself: the subset keeps a real part of the suite in play.
    assert len(inside) >= 25
    assert cases >= 120
