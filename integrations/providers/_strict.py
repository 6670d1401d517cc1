"""OpenAI strict mode: the export of a parameter schema, and the way back for arguments.

Strict mode (Structured Outputs for function calling) constrains decoding to a subset of
JSON Schema in which every object is closed (``additionalProperties: false``) and lists
*every* property in ``required``. An optional property therefore cannot be left out by
the model; the documented way to keep it optional in meaning is to make it nullable, so
the model answers ``null`` for "not given". ``strict_parameters`` does that export and
``strip_strict_nulls`` undoes it on the model's arguments (using the *original* schema),
so the runtime's own validation sees the arguments the tool was written for.

What strict mode cannot express is refused (``JsonSchemaError`` listing every problem as
``<path>: <problem>``) rather than exported with a silently different meaning: keywords
outside OpenAI's documented subset, untyped ("any value") schemas, objects whose undeclared
properties have a schema (``additionalProperties: {...}``), property-less objects other than
the root, arrays without ``items``, ``$ref``, and schemas over the documented size limits.

An object that declares properties and merely tolerates others (``additionalProperties:
true``, as ``ask_user_question``'s questions do) is exported closed: the model may then send
only the declared properties, every one of which the tool accepts, so the export narrows
what can be sent without changing what a sent argument means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode.engine import JsonSchemaError
from codemode.engine.schema import validate_json_schema_value

__all__ = ["STRICT_LIMITS", "accepts_null", "strict_parameters", "strip_strict_nulls"]

_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})
_ANNOTATIONS = frozenset({"description", "title", "default", "examples"})
# OpenAI's documented strict-mode subset: types, anyOf, enum/const, objects and arrays,
# and these per-type constraints (string: pattern, format; number: multipleOf and the
# bounds; array: minItems, maxItems).
_CONSTRAINTS = frozenset(
    {
        "pattern",
        "format",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "minItems",
        "maxItems",
    }
)
_STRUCTURE = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const"}
)
_UNIONS = ("anyOf", "oneOf")
_ALLOWED = _STRUCTURE | _CONSTRAINTS | _ANNOTATIONS | frozenset(_UNIONS)
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)

#: The documented strict-mode size limits checked by ``strict_parameters``.
STRICT_LIMITS: Mapping[str, int] = {
    "properties": 5000,  # object properties in the whole schema
    "nesting": 10,  # levels of object nesting
    "enum_values": 1000,  # enum values in the whole schema
    "string_chars": 120_000,  # property names + enum values + const values, in characters
}

_NULL = {"type": "null"}


class _Walk:
    def __init__(self) -> None:
        self.violations: list[str] = []
        self.properties = 0
        self.enum_values = 0
        self.string_chars = 0
        self.deepest = 0

    def problem(self, at: str, text: str) -> None:
        self.violations.append(f"{at}: {text}")


def strict_parameters(
    parameters: Mapping[str, Any], *, label: str = "parameters"
) -> dict[str, Any]:
    """The strict-mode form of a tool's parameter schema (a new dict; the input is kept).

    Every object gets ``additionalProperties: false`` and all its properties in
    ``required``; a property that was optional becomes nullable (``type: [t, "null"]`` for
    scalars, ``anyOf: [..., {"type": "null"}]`` otherwise) unless it already accepted
    ``null``. ``oneOf`` is exported as ``anyOf`` (strict mode has no ``oneOf``; the runtime
    still enforces exactly-one when it validates the arguments). Raises
    ``JsonSchemaError`` naming every construct strict mode cannot express.
    """
    walk = _Walk()
    if not isinstance(parameters, Mapping):
        raise JsonSchemaError(
            f"OpenAI strict mode: {label}: the parameter schema must be a JSON object",
            [f"{label}: must be a JSON object"],
        )
    if parameters.get("type") != "object" or any(u in parameters for u in _UNIONS):
        walk.problem(label, 'the root must be a plain object schema (type "object", no anyOf)')
    out = _node(parameters, label, walk, depth=0, root=True)
    if walk.properties > STRICT_LIMITS["properties"]:
        walk.problem(
            label,
            f"{walk.properties} object properties exceed strict mode's limit of "
            f"{STRICT_LIMITS['properties']}",
        )
    if walk.deepest > STRICT_LIMITS["nesting"]:
        walk.problem(
            label,
            f"{walk.deepest} levels of object nesting exceed strict mode's limit of "
            f"{STRICT_LIMITS['nesting']}",
        )
    if walk.enum_values > STRICT_LIMITS["enum_values"]:
        walk.problem(
            label,
            f"{walk.enum_values} enum values exceed strict mode's limit of "
            f"{STRICT_LIMITS['enum_values']}",
        )
    if walk.string_chars > STRICT_LIMITS["string_chars"]:
        walk.problem(
            label,
            f"{walk.string_chars} characters of property names and enum/const values exceed "
            f"strict mode's limit of {STRICT_LIMITS['string_chars']}",
        )
    if walk.violations:
        raise JsonSchemaError(
            "OpenAI strict mode cannot express this schema: " + "; ".join(walk.violations),
            walk.violations,
        )
    return out


def _node(node: Any, at: str, walk: _Walk, *, depth: int, root: bool = False) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        walk.problem(at, "schema must be a JSON object")
        return {}
    unsupported = False
    for key in node:
        if key not in _ALLOWED:
            unsupported = True
            hint = " (resolve references before exporting)" if key in ("$ref", "$defs") else ""
            walk.problem(at, f'keyword "{key}" is not supported by OpenAI strict mode{hint}')
    if "format" in node and node["format"] not in _FORMATS:
        walk.problem(
            f"{at}.format",
            f"format {node['format']!r} is not supported by strict mode "
            f"(supported: {', '.join(sorted(_FORMATS))})",
        )
    # ``type`` first, then the node's own annotations and constraints in their order.
    out: dict[str, Any] = {"type": node["type"]} if "type" in node else {}
    out.update((k, v) for k, v in node.items() if k in _ANNOTATIONS | _CONSTRAINTS)

    for union in _UNIONS:
        if union in node:
            branches = node[union]
            if not isinstance(branches, list) or not branches:
                walk.problem(f"{at}.{union}", "must be a non-empty array of schemas")
                continue
            walked = [
                _node(b, f"{at}.{union}[{i}]", walk, depth=depth) for i, b in enumerate(branches)
            ]
            out["anyOf"] = [*out.get("anyOf", []), *walked]

    types = _types(node, at, walk)
    for keyword in ("enum", "const"):
        if keyword in node:
            out[keyword] = node[keyword]
            values = node[keyword] if keyword == "enum" else [node[keyword]]
            if isinstance(values, list):
                walk.enum_values += len(values) if keyword == "enum" else 0
                walk.string_chars += sum(len(v) for v in values if isinstance(v, str))
    # (After an unsupported keyword the node's meaning is unknown: no second report.)
    untyped = not types and not any(k in out for k in ("anyOf", "enum", "const"))
    if untyped and not unsupported and "type" not in node:
        walk.problem(at, "a schema without a type (any JSON value) cannot be expressed")

    if "object" in types:
        out.update(_object(node, at, walk, depth=depth, root=root))
    elif any(k in node for k in ("properties", "required", "additionalProperties")):
        walk.problem(at, 'object keywords need type "object"')
    if "array" in types:
        if "items" not in node:
            walk.problem(at, "an array without items (any item) cannot be expressed")
        else:
            out["items"] = _node(node["items"], f"{at}.items", walk, depth=depth)
    elif "items" in node:
        walk.problem(at, 'items needs type "array"')
    return out


def _types(node: Mapping[str, Any], at: str, walk: _Walk) -> list[str]:
    if "type" not in node:
        return []
    raw = node["type"]
    names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else None
    if names is None or not names or any(n not in _TYPES for n in names):
        walk.problem(f"{at}.type", f"unknown type {raw!r}")
        return []
    return list(names)


def _object(
    node: Mapping[str, Any], at: str, walk: _Walk, *, depth: int, root: bool
) -> dict[str, Any]:
    level = depth + 1
    walk.deepest = max(walk.deepest, level)
    properties = node.get("properties", {})
    if not isinstance(properties, Mapping):
        walk.problem(f"{at}.properties", "must be an object")
        properties = {}
    extra = node.get("additionalProperties")
    if extra is True and not properties:
        walk.problem(
            at, "a free-form object (no declared properties) cannot be expressed in strict mode"
        )
    elif extra not in (None, False, True):
        # A schema for the undeclared values: closing the object would lose what it allows.
        walk.problem(
            at,
            "an open object (additionalProperties with a schema) cannot be expressed: "
            "strict mode allows only the declared properties",
        )
    elif not properties and not root and node.get("additionalProperties") is not False:
        walk.problem(
            at, "a free-form object (no declared properties) cannot be expressed in strict mode"
        )
    required = node.get("required", [])
    if not isinstance(required, list):
        walk.problem(f"{at}.required", "must be an array of property names")
        required = []
    walk.properties += len(properties)
    walk.string_chars += sum(len(name) for name in properties)
    exported: dict[str, Any] = {}
    for name, sub in properties.items():
        where = f"{at}.properties.{name}"
        converted = _node(sub, where, walk, depth=level)
        if name not in required and not accepts_null(sub):
            converted = _nullable(converted)
        exported[name] = converted
    return {"properties": exported, "required": list(exported), "additionalProperties": False}


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` widened by ``null``, in the shape strict mode documents for optionals."""
    if "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], dict(_NULL)]}
    raw = node.get("type")
    names = [raw] if isinstance(raw, str) else list(raw) if isinstance(raw, list) else []
    if "const" in node or "object" in names or "array" in names:
        # A union keeps the object's/array's own keywords (and a const) intact.
        annotations: dict[str, Any] = {k: node[k] for k in ("description", "title") if k in node}
        inner = {k: v for k, v in node.items() if k not in annotations}
        return {"anyOf": [inner, dict(_NULL)], **annotations}
    out = dict(node)
    if names:
        out["type"] = [*names, "null"]
    if "enum" in node:
        out["enum"] = [*node["enum"], None]
    return out


def accepts_null(schema: Any) -> bool:
    """Whether ``schema`` (our subset, or the strict subset) admits the value ``null``."""
    if not isinstance(schema, Mapping):
        return False
    for union in _UNIONS:
        branches = schema.get(union)
        if isinstance(branches, list):
            return any(accepts_null(b) for b in branches)
    if "const" in schema:
        return schema["const"] is None
    raw = schema.get("type")
    if raw is not None:
        names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        if "null" not in names:
            return False
    if "enum" in schema:
        enum = schema["enum"]
        return isinstance(enum, list) and any(v is None for v in enum)
    return True  # typed null, or an untyped ("any value") schema


def strip_strict_nulls(parameters: Mapping[str, Any], arguments: Any) -> Any:
    """Undo the strict export on the model's ``arguments`` (returns a new value).

    ``parameters`` is the tool's *original* schema (as ``rt.schemas()`` gave it). A
    property that was optional and did not accept ``null`` is dropped when the model
    sent ``null`` for it — in nested objects, array items and union branches too.
    Required properties, and optional ones that accepted ``null`` all along, keep their
    ``null`` (for the latter, strict mode cannot tell "absent" from ``null``).
    Anything that does not fit the schema is left as it is for the runtime to report.
    """
    return _strip(parameters, arguments)


def _strip(schema: Any, value: Any) -> Any:
    if not isinstance(schema, Mapping):
        return value
    for union in _UNIONS:
        branches = schema.get(union)
        if isinstance(branches, list):
            # The branch the stripped value fits is the one the model meant; no fit
            # leaves the value for the runtime's own error message.
            for branch in branches:
                candidate = _strip(branch, value)
                if _fits(branch, candidate):
                    return candidate
            return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = schema.get("required", [])
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                out[key] = item
            elif item is None and key not in required and not accepts_null(sub):
                continue
            else:
                out[key] = _strip(sub, item)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_strip(schema["items"], item) for item in value]
    return value


def _fits(schema: Any, value: Any) -> bool:
    try:
        return not validate_json_schema_value(schema, value)
    except Exception:
        # A schema outside the runtime's subset cannot be judged here: take the branch.
        return True
