"""The enforced raw JSON Schema subset (``assert_supported_json_schema``).

A supported node is a JSON object using only ``type`` (one of seven names), ``oneOf``,
``properties``/``required``/``additionalProperties`` (``type: "object"`` only), ``items``
(``type: "array"`` only), ``enum``/``const`` (scalar types, or no type) and the
annotations ``description``, ``title``, ``default``, ``examples``. ``oneOf`` stands
alone (annotations aside), as in the DSL. Everything else is rejected rather than
accepted unenforced: boolean schemas, type arrays, ``$schema``/``$ref``/``$defs``,
``pattern``, ``minimum``, ``format`` and so on. An empty (annotation-only) node means
any lossless JSON value.

Every violation is collected (``<schema path>: <problem>``) and raised together as one
``JsonSchemaError``. The walk is iterative and detects cycles.
"""

from __future__ import annotations

from typing import Any

from .._errors import JsonSchemaError
from ..json import snapshot
from ._common import (
    SCALAR_TYPES,
    SUBSET_KEYWORDS,
    TYPES,
    At,
    check_annotations,
    check_scalar_keywords,
    check_type_value,
    is_json_dict,
    is_json_list,
)

__all__ = [
    "assert_object_json_schema",
    "assert_supported_json_schema",
    "schema_violations",
]

_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties")
# Keywords that give a node its own constraints; ``oneOf`` may not be mixed with them.
_CONSTRAINTS = ("type", *_OBJECT_KEYWORDS, "items", "enum", "const")


def _check_node(node: dict[str, Any], here: At, out: list[str]) -> list[tuple[Any, At]]:
    """Report this node's own violations; return its child schemas with their locations."""
    children: list[tuple[Any, At]] = []
    for key in node:
        if not isinstance(key, str):
            out.append(f"{here}: key {key!r} is not a string")
        elif key not in SUBSET_KEYWORDS:
            out.append(f'{here}: unsupported keyword "{key}"')

    type_name: str | None = None
    type_valid = True
    if "type" in node:
        type_name = check_type_value(node["type"], TYPES, here, out)
        type_valid = type_name is not None

    if "oneOf" in node:
        for other in _CONSTRAINTS:
            if other in node:
                out.append(f'{here}: "oneOf" cannot be combined with "{other}"')
        branches = node["oneOf"]
        where = here.key("oneOf")
        if not is_json_list(branches) or len(branches) < 2:
            out.append(f"{where}: must be an array of at least 2 schemas")
        if is_json_list(branches):
            children.extend((b, where.index(i)) for i, b in enumerate(branches))

    # With an invalid ``type`` the intended type is unknown, so placement is not judged.
    if type_valid:
        for keyword in _OBJECT_KEYWORDS:
            if keyword in node and type_name != "object":
                out.append(f'{here.key(keyword)}: only allowed with type "object"')
        if "items" in node and type_name != "array":
            out.append(f'{here.key("items")}: only allowed with type "array"')
        for keyword in ("enum", "const"):
            if keyword in node and type_name not in (None, *SCALAR_TYPES):
                out.append(
                    f"{here.key(keyword)}: only allowed with a scalar type "
                    "(string, number, integer, boolean, null) or no type"
                )
        if type_name in (None, *SCALAR_TYPES):
            check_scalar_keywords(node, type_name, here, out)
    else:
        check_scalar_keywords(node, None, here, out)

    properties: Any = node.get("properties")
    declared: dict[str, Any] = {}
    if "properties" in node:
        where = here.key("properties")
        if not is_json_dict(properties):
            out.append(f"{where}: must be an object")
        else:
            declared = properties
            for name, sub in properties.items():
                if not isinstance(name, str):
                    out.append(f"{where}: key {name!r} is not a string")
                else:
                    children.append((sub, where.key(name)))

    if "required" in node:
        _check_required(node["required"], declared, here.key("required"), out)

    if "additionalProperties" in node and not isinstance(node["additionalProperties"], bool):
        out.append(f"{here.key('additionalProperties')}: must be a boolean")

    if "items" in node:
        children.append((node["items"], here.key("items")))

    check_annotations(node, here, out)
    return children


def _check_required(required: Any, declared: dict[str, Any], at: At, out: list[str]) -> None:
    if not is_json_list(required):
        out.append(f"{at}: must be an array of property names")
        return
    seen: set[str] = set()
    for i, name in enumerate(required):
        if not isinstance(name, str):
            out.append(f"{at.index(i)}: must be a string")
            continue
        if name in seen:
            out.append(f'{at.index(i)}: duplicate property name "{name}"')
        elif name not in declared:
            out.append(f'{at.index(i)}: "{name}" is not a declared property')
        seen.add(name)


def schema_violations(schema: Any, *, label: str = "schema") -> list[str]:
    """Every reason ``schema`` is outside the supported subset, in document order."""
    out: list[str] = []
    active: set[int] = set()
    # Work items: (node, location) to visit, or an int id leaving the ancestor set.
    stack: list[tuple[Any, At] | int] = [(schema, At(None, label))]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            active.discard(item)
            continue
        node, here = item
        if not is_json_dict(node):
            hint = " (boolean schemas are not supported)" if isinstance(node, bool) else ""
            out.append(f"{here}: schema must be a JSON object{hint}")
            continue
        if id(node) in active:
            out.append(f"{here}: cycle detected")
            continue
        active.add(id(node))
        stack.append(id(node))
        stack.extend(reversed(_check_node(node, here, out)))
    return out


def _raise(violations: list[str]) -> None:
    if violations:
        raise JsonSchemaError("unsupported JSON schema: " + "; ".join(violations), violations)


def assert_supported_json_schema(schema: Any, *, label: str = "schema") -> dict[str, Any]:
    """Check ``schema`` against the enforced subset and return a deep-frozen copy.

    Raises ``JsonSchemaError("unsupported JSON schema: <v1>; <v2>", violations)`` listing
    every violation as ``<path>: <problem>``, paths rooted at ``label``.
    """
    _raise(schema_violations(schema, label=label))
    frozen: dict[str, Any] = snapshot(schema)
    return frozen


def assert_object_json_schema(schema: Any, *, label: str = "schema") -> dict[str, Any]:
    """Like ``assert_supported_json_schema``, and the root must be ``type: "object"``.

    Tool parameters and structured outputs that must be objects use this.
    """
    violations: list[str] = []
    if is_json_dict(schema):
        if "type" not in schema:
            violations.append(f'{label}: must declare type "object"')
        elif isinstance(schema["type"], str) and schema["type"] in TYPES:
            if schema["type"] != "object":
                violations.append(f'{label}.type: must be "object", not "{schema["type"]}"')
    violations.extend(schema_violations(schema, label=label))
    _raise(violations)
    frozen: dict[str, Any] = snapshot(schema)
    return frozen
