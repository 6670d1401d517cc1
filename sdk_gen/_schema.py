"""The enforced JSON Schema subset, as far as the SDK renderers need it.

Both renderers validate a whole schema tree once and then trust it, exactly like the
reference (`assertSupportedJsonSchema` before rendering): any violation anywhere degrades
the *whole* tree to ``unknown`` (TypeScript) or ``Any`` (Python). The engine owns the
authoritative validator with its path-qualified messages; ``sdk_gen`` must stay stdlib-only
and cannot import it, so this module re-checks the same rules and answers only yes/no.

Subset: keywords ``type`` (one string), ``oneOf`` (at least two branches),
``properties``, ``required`` (declared names only), ``additionalProperties`` (boolean),
``items``, ``enum`` (non-empty, type-matching scalars), ``const`` (type-matching, inside
``enum`` when both are present), plus the annotations ``description``/``title`` (strings)
and ``default``/``examples`` (lossless JSON). Keywords must sit on the type they belong to;
``oneOf`` stands alone. One extension follows our engine's validator rather than the
reference: ``enum``/``const`` without a ``type`` (scalars of any type) are accepted, so a
schema the engine registers never renders as ``unknown``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["is_schema_record", "is_supported_schema", "properties_of"]

_CONSTRAINTS: Final = frozenset(
    {"type", "oneOf", "properties", "required", "additionalProperties", "items", "enum", "const"}
)
_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples"})
_SCALAR_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "null"})
_TYPES: Final = _SCALAR_TYPES | {"object", "array"}
_MAX_INT_BITS: Final = 14_000  # about 4,200 decimal digits
# Keywords that only make sense under a `type` (and so are invalid beside `oneOf` or on an
# annotation-only node), with the types each one may appear on.
_TYPED_KEYWORDS: Final[Mapping[str, frozenset[str]]] = {
    "properties": frozenset({"object"}),
    "required": frozenset({"object"}),
    "additionalProperties": frozenset({"object"}),
    "items": frozenset({"array"}),
    "enum": _SCALAR_TYPES,
    "const": _SCALAR_TYPES,
}


def is_schema_record(value: object) -> bool:
    """Whether ``value`` is a JSON object: a mapping whose keys are all strings."""
    # `type(...) is dict` first: an ABC isinstance check is slow and a render makes
    # thousands of these.
    if type(value) is not dict and not isinstance(value, Mapping):
        return False
    for key in value:  # a loop, not all(genexpr): this runs for every node of every schema
        if not isinstance(key, str):
            return False
    return True


def _is_json_array(value: object) -> bool:
    # Strings and bytes are sequences too, but never JSON arrays.
    return isinstance(value, (list, tuple))


def _is_json_number(value: object) -> bool:
    """A lossless JSON number: not a bool, finite, and not negative zero."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        # CPython refuses to print ints past 4300 digits by default, so a larger one
        # could be neither serialised nor rendered: treat it as outside the subset.
        return value.bit_length() <= _MAX_INT_BITS
    if isinstance(value, float):
        return math.isfinite(value) and not (value == 0 and math.copysign(1.0, value) < 0)
    return False


def _scalar_matches(schema_type: str | None, value: object) -> bool:
    """Whether ``value`` is a JSON scalar of ``schema_type`` (None: any scalar type)."""
    if schema_type is None:
        return value is None or isinstance(value, bool | str) or _is_json_number(value)
    if schema_type == "string":
        return isinstance(value, str)
    if schema_type == "number":
        return _is_json_number(value)
    if schema_type == "integer":
        # JSON has one number type: `2.0` is an integer exactly as `Number.isInteger(2.0)`.
        if isinstance(value, float):
            return _is_json_number(value) and value.is_integer()
        return _is_json_number(value)
    if schema_type == "boolean":
        return isinstance(value, bool)
    return value is None  # "null"


def _scalar_equal(left: object, right: object) -> bool:
    """JSON equality of two scalars: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return left == right


def _is_lossless_json(root: object) -> bool:
    """Whether an annotation value is plain, acyclic, lossless JSON data."""
    stack: list[tuple[object, bool]] = [(root, True)]
    on_path: set[int] = set()
    while stack:
        value, entering = stack.pop()
        if not entering:
            on_path.discard(id(value))
            continue
        if value is None or isinstance(value, (bool, str)) or _is_json_number(value):
            continue
        if isinstance(value, float | int):
            return False  # NaN, infinities, -0.0
        if isinstance(value, list | tuple):
            children: list[object] = list(value)
        elif isinstance(value, Mapping) and is_schema_record(value):
            children = list(value.values())
        else:
            return False
        if id(value) in on_path:
            return False
        on_path.add(id(value))
        stack.append((value, False))
        stack.extend((child, True) for child in children)
    return True


def properties_of(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``properties`` map of a validated object node (absent means empty)."""
    properties = node.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _node_is_valid(node: Mapping[str, Any], children: list[object]) -> bool:
    """Check one schema object's own keywords, appending the sub-schemas to visit."""
    for key, value in node.items():
        if key in _ANNOTATIONS:
            # A string (every description) is lossless JSON: no walk for it.
            if not isinstance(value, str) and not _is_lossless_json(value):
                return False
        elif key not in _CONSTRAINTS:
            return False
    for key in ("description", "title"):
        if key in node and not isinstance(node[key], str):
            return False
    has_type, has_one_of = "type" in node, "oneOf" in node
    if has_one_of:
        # `oneOf` stands alone (annotations aside).
        if any(key in node for key in _CONSTRAINTS - {"oneOf"}):
            return False
        branches = node["oneOf"]
        if not _is_json_array(branches) or len(branches) < 2:
            return False
        children.extend(branches)
        return True
    if not has_type:
        # Untyped: annotation-only (any JSON value), or an `enum`/`const` of scalars of
        # any type, which our engine's subset accepts.
        if any(key in node for key in _TYPED_KEYWORDS if key not in ("enum", "const")):
            return False
        return _scalar_is_valid(node, None)
    schema_type = node["type"]
    if not isinstance(schema_type, str) or schema_type not in _TYPES:
        return False
    for key, types in _TYPED_KEYWORDS.items():
        if key in node and schema_type not in types:
            return False
    if schema_type == "object":
        return _object_is_valid(node, children)
    if schema_type == "array":
        if "items" in node:
            children.append(node["items"])
        return True
    return _scalar_is_valid(node, schema_type)


def _object_is_valid(node: Mapping[str, Any], children: list[object]) -> bool:
    if "properties" in node:
        if not is_schema_record(node["properties"]):
            return False
        children.extend(node["properties"].values())
    if "required" in node:
        required = node["required"]
        declared = properties_of(node)
        if not _is_json_array(required):
            return False
        if not all(isinstance(name, str) and name in declared for name in required):
            return False
    return "additionalProperties" not in node or isinstance(node["additionalProperties"], bool)


def _scalar_is_valid(node: Mapping[str, Any], schema_type: str | None) -> bool:
    enum_valid = False
    if "enum" in node:
        allowed = node["enum"]
        enum_valid = (
            _is_json_array(allowed)
            and len(allowed) > 0
            and all(_scalar_matches(schema_type, entry) for entry in allowed)
        )
        if not enum_valid:
            return False
    if "const" in node:
        value = node["const"]
        if not _scalar_matches(schema_type, value):
            return False
        if enum_valid and not any(_scalar_equal(value, entry) for entry in node["enum"]):
            return False
    return True


def is_supported_schema(schema: object) -> bool:
    """Whether ``schema`` lies entirely inside the enforced JSON Schema subset.

    Total: never raises, whatever the input (cycles, non-string keys, NaN, foreign
    objects). The walk uses an explicit stack so deep trees cannot exhaust recursion;
    shared sub-schemas are fine, a schema that contains itself is not.
    """
    stack: list[tuple[object, bool]] = [(schema, True)]
    on_path: set[int] = set()
    try:
        while stack:
            node, entering = stack.pop()
            if not entering:
                on_path.discard(id(node))
                continue
            if not is_schema_record(node):
                return False
            assert isinstance(node, Mapping)
            if id(node) in on_path:
                return False
            children: list[object] = []
            if not _node_is_valid(node, children):
                return False
            on_path.add(id(node))
            stack.append((node, False))
            stack.extend((child, True) for child in reversed(children))
    except Exception:
        # A hostile mapping (raising __getitem__, __iter__, __eq__) is simply unsupported.
        return False
    return True
