"""Bring an MCP tool's JSON Schema into the subset ``ToolRuntime.register`` enforces.

MCP servers publish full JSON Schema (pydantic's output, hand-written draft-07, ...);
codemode enforces a small subset (``codemode.engine.schema``: ``type`` with one name,
``oneOf``, ``properties``/``required``/``additionalProperties: bool``, ``items``,
scalar ``enum``/``const`` and the annotations). ``normalize_schema`` rewrites a schema
into that subset, one rule per keyword family:

- local references (``$ref: "#/$defs/X"``, ``#/definitions/X``, JSON-pointer paths into
  the same document) are inlined and ``$defs``/``definitions`` dropped; a recursive
  reference or a remote one is rejected (the subset has no references);
- bookkeeping keywords (``$schema``, ``$id``, ``$comment``, ``$anchor``, ...) and
  ``readOnly``/``writeOnly`` are dropped;
- constraint keywords codemode does not enforce (``minimum``, ``maxLength``, ``pattern``,
  ``format``, ``minItems``, ``uniqueItems``, ...) are dropped and their meaning is kept
  in the node's ``description`` (``"note id (minimum: 1)"``), so the SDK still tells
  the model; ``additionalProperties`` given as a schema becomes ``true`` with
  ``(values: <type>)``; ``deprecated: true`` becomes ``(deprecated)``;
- ``type: [a, b]`` becomes a ``oneOf`` of one branch per type (each branch keeps the
  keywords that apply to its type); ``anyOf`` becomes ``oneOf`` when its branches are
  mutually exclusive by type (``X | null``), and a one-branch ``anyOf``/``oneOf``/
  ``allOf`` is merged into its node; ``nullable: true`` (OpenAPI) becomes ``X | null``;
  an ``anyOf``/``oneOf`` whose branches only list ``required`` names ("give a or b") is
  dropped and noted as ``(requires a or b)``;
- a property listed in ``required`` but not declared is declared as any value;
- the boolean schema ``true`` becomes ``{}``.

Everything else cannot be represented and raises ``McpSchemaError`` naming the tool and
the keyword with its location (``not``, ``if``/``then``/``else``, ``patternProperties``,
``prefixItems``, an ``allOf`` of several schemas, an ``anyOf`` whose branches overlap,
the boolean schema ``false``, ...). The result is checked against the subset before it
is returned, so a schema this module accepts always registers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from codemode.engine import JsonSchemaError
from codemode.engine.schema import assert_supported_json_schema

__all__ = ["McpSchemaError", "normalize_schema"]

_SCALARS = ("string", "number", "integer", "boolean", "null")
_TYPES = (*_SCALARS, "array", "object")

# Kept as they are.
_ANNOTATIONS = ("title", "description", "default", "examples")
# Dropped without a trace: they carry no meaning for a caller.
_BOOKKEEPING = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "discriminator",  # OpenAPI: a hint for oneOf, which keeps its branches
        "xml",
        "externalDocs",
        "example",
    }
)
# Dropped, their meaning moved into the description: "(minimum: 1)".
_CONSTRAINTS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
)
# Keywords by the type they apply to (for splitting ``type: [..]``).
_OBJECT_KEYS = frozenset({"properties", "required", "additionalProperties"})
_ARRAY_KEYS = frozenset({"items"})
_SCALAR_KEYS = frozenset({"enum", "const"})
_KEYS_FOR_TYPE = {
    "object": _OBJECT_KEYS | {"minProperties", "maxProperties"},
    "array": _ARRAY_KEYS | {"minItems", "maxItems", "uniqueItems"},
    "string": _SCALAR_KEYS | {"minLength", "maxLength", "pattern", "format"},
    "number": _SCALAR_KEYS
    | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "integer": _SCALAR_KEYS
    | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "boolean": _SCALAR_KEYS,
    "null": _SCALAR_KEYS,
}
# What the subset accepts after this module's rewriting (plus the ones rewritten).
_HANDLED = frozenset(
    {
        "type",
        "oneOf",
        "anyOf",
        "allOf",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "nullable",
        "deprecated",
        *_ANNOTATIONS,
        *_CONSTRAINTS,
        *_BOOKKEEPING,
    }
)


class McpSchemaError(JsonSchemaError):
    """An MCP tool schema that codemode's schema subset cannot represent.

    ``tool`` names the tool, ``keyword`` the offending keyword and ``path`` where it is
    (``schema.properties.when``); the message says all three.
    """

    def __init__(self, tool: str, keyword: str, path: str, why: str) -> None:
        message = (
            f'MCP tool "{tool}": cannot import its schema: keyword "{keyword}" at {path} {why}'
        )
        super().__init__(message, [f"{path}: {why}"])
        self.tool = tool
        self.keyword = keyword
        self.path = path


def _render_constraint(keyword: str, value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return f"{keyword}: {shown}"


def _type_summary(schema: Any) -> str:
    """A short noun for a (normalised) schema: ``string``, ``array``, ``any``."""
    if isinstance(schema, Mapping):
        if isinstance(schema.get("type"), str):
            return str(schema["type"])
        if "oneOf" in schema and isinstance(schema["oneOf"], list):
            return " | ".join(_type_summary(b) for b in schema["oneOf"])
        if "enum" in schema and isinstance(schema["enum"], list):
            return " | ".join(json.dumps(v) for v in schema["enum"])
    return "any"


def _with_note(node: dict[str, Any], notes: list[str]) -> None:
    if not notes:
        return
    note = "(" + "; ".join(notes) + ")"
    description = node.get("description")
    node["description"] = f"{description} {note}" if isinstance(description, str) else note


class _Normalizer:
    def __init__(self, tool: str, root: Any) -> None:
        self.tool = tool
        self.root = root
        self.resolving: list[str] = []  # the $ref chain being inlined (cycle detection)

    def fail(self, keyword: str, path: str, why: str) -> McpSchemaError:
        return McpSchemaError(self.tool, keyword, path, why)

    # ------------------------------------------------------------- references

    def resolve(self, ref: Any, path: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise self.fail(
                "$ref", path, f"is not a local reference ({ref!r}); only #/... can be inlined"
            )
        node: Any = self.root
        pointer = ref[1:]
        if pointer:
            if not pointer.startswith("/"):
                raise self.fail("$ref", path, f"uses an anchor ({ref!r}); only #/... is supported")
            for raw in pointer[1:].split("/"):
                part = raw.replace("~1", "/").replace("~0", "~")
                if isinstance(node, Mapping) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    raise self.fail("$ref", path, f"points at nothing ({ref!r})")
        return node

    # ------------------------------------------------------------------ nodes

    def node(self, schema: Any, path: str) -> dict[str, Any]:
        if schema is True:
            return {}
        if schema is False:
            raise self.fail("false", path, "is the boolean schema false (no value allowed)")
        if not isinstance(schema, Mapping):
            raise self.fail("schema", path, "must be a JSON object")

        if "$ref" in schema:
            ref = schema["$ref"]
            if ref in self.resolving:
                raise self.fail(
                    "$ref", path, f"is recursive ({ref!r}); the subset has no references"
                )
            target = self.resolve(ref, path)
            self.resolving.append(ref)
            try:
                inlined = self.node(target, path)
            finally:
                self.resolving.pop()
            # Siblings of $ref (draft 2019+) refine it: annotations win over the target's.
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if rest:
                return self.merge(inlined, self.node(rest, path), path)
            return inlined

        for key in schema:
            if key not in _HANDLED:
                raise self.fail(key, path, "cannot be represented in codemode's schema subset")

        notes: list[str] = []
        out: dict[str, Any] = {}
        for key in _ANNOTATIONS:
            if key in schema:
                out[key] = schema[key]
        type_value = schema.get("type")
        # With ``type: [..]`` each constraint is noted on the branch of its type instead.
        if not isinstance(type_value, list):
            for key in _CONSTRAINTS:
                if key in schema:
                    notes.append(_render_constraint(key, schema[key]))
        if schema.get("deprecated") is True:
            notes.append("deprecated")

        if isinstance(type_value, list):
            body = self.split_types(schema, type_value, path)
        else:
            body = self.body(schema, type_value, path, notes)

        if "allOf" in schema:
            branches = schema["allOf"]
            if not isinstance(branches, list) or len(branches) != 1:
                raise self.fail(
                    "allOf", path, "combines several schemas; only a one-schema allOf is merged"
                )
            body = self.merge(self.node(branches[0], f"{path}.allOf[0]"), body, path)

        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                alternatives = _required_alternatives(schema[keyword])
                if alternatives is not None:
                    # "Give a or b": a constraint on which properties are present, which
                    # is not enforced; its meaning moves into the description.
                    notes.append(f"requires {alternatives}")
                    continue
                body = self.merge(self.union(schema, keyword, path), body, path)

        if schema.get("nullable") is True and body.get("type") != "null":
            body = {"oneOf": [body, {"type": "null"}]}

        # Annotations go on the outer node (valid next to oneOf too).
        out.update({k: v for k, v in body.items() if k not in out or k not in _ANNOTATIONS})
        for key in _ANNOTATIONS:
            if key in schema:
                out[key] = schema[key]
        _with_note(out, notes)
        return out

    def body(
        self, schema: Mapping[str, Any], type_value: Any, path: str, notes: list[str]
    ) -> dict[str, Any]:
        """The constraint keywords of a node with one (or no) type."""
        out: dict[str, Any] = {}
        if type_value is not None:
            out["type"] = type_value
        if "enum" in schema:
            out["enum"] = schema["enum"]
        if "const" in schema:
            out["const"] = schema["const"]
        object_like = type_value == "object" or (
            type_value is None and any(k in schema for k in _OBJECT_KEYS)
        )
        if object_like:
            out["type"] = "object"
            properties: dict[str, Any] = {}
            raw = schema.get("properties", {})
            if not isinstance(raw, Mapping):
                raise self.fail("properties", path, "must be an object")
            for name, sub in raw.items():
                properties[name] = self.node(sub, f"{path}.properties.{name}")
            required = schema.get("required")
            if required is not None:
                if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                    raise self.fail("required", path, "must be an array of property names")
                required = list(dict.fromkeys(required))
                for name in required:
                    # Required but undeclared: declared as any value, so it stays required.
                    properties.setdefault(name, {})
            if "properties" in schema or properties:
                out["properties"] = properties
            if required:
                out["required"] = required
            extra = schema.get("additionalProperties")
            if isinstance(extra, bool):
                out["additionalProperties"] = extra
            elif extra is not None:
                values = self.node(extra, f"{path}.additionalProperties")
                if values:  # ``{}``: any value, which an open object already allows
                    notes.append(f"values: {_type_summary(values)}")
        elif type_value is None and "items" in schema:
            out["type"] = "array"
        if out.get("type") == "array" and "items" in schema:
            items = schema["items"]
            if isinstance(items, list):
                raise self.fail("items", path, "is a tuple (array of schemas); not representable")
            out["items"] = self.node(items, f"{path}.items")
        for key in ("prefixItems", "contains"):
            if key in schema:
                raise self.fail(key, path, "cannot be represented in codemode's schema subset")
        return out

    def split_types(self, schema: Mapping[str, Any], types: list[Any], path: str) -> dict[str, Any]:
        """``type: [a, b]`` -> ``oneOf`` with one branch per type."""
        names = list(dict.fromkeys(types))
        for name in names:
            if name not in _TYPES:
                raise self.fail("type", path, f"lists an unknown type {name!r}")
        if len(names) == 1:
            return self.node({**schema, "type": names[0]}, path)
        branches = []
        for name in names:
            keys = _KEYS_FOR_TYPE[name]
            branch: dict[str, Any] = {"type": name}
            for key, value in schema.items():
                if key in keys:
                    branch[key] = value
            if "enum" in branch:
                kept = [v for v in branch["enum"] if _json_type_matches(v, name)]
                if kept:
                    branch["enum"] = kept
                else:
                    del branch["enum"]
            branches.append(self.node(branch, f"{path}.type[{name}]"))
        return {"oneOf": branches}

    def union(self, schema: Mapping[str, Any], keyword: str, path: str) -> dict[str, Any]:
        branches = schema[keyword]
        where = f"{path}.{keyword}"
        if not isinstance(branches, list) or not branches:
            raise self.fail(keyword, path, "must be a non-empty array of schemas")
        normal = [self.node(b, f"{where}[{i}]") for i, b in enumerate(branches)]
        # Flatten nested unions (``X | (Y | null)``).
        flat: list[dict[str, Any]] = []
        for branch in normal:
            if set(branch) <= {"oneOf", *_ANNOTATIONS} and "oneOf" in branch:
                flat.extend(branch["oneOf"])
            else:
                flat.append(branch)
        if len(flat) == 1:
            return flat[0]
        if keyword == "anyOf" and not _disjoint(flat):
            raise self.fail(
                "anyOf",
                path,
                "has branches that can match the same value; only type-disjoint anyOf "
                "(for example X | null) can become oneOf",
            )
        return {"oneOf": flat}

    def merge(self, base: dict[str, Any], extra: dict[str, Any], path: str) -> dict[str, Any]:
        """``base`` refined by ``extra`` (annotations of ``extra`` win; no conflicts)."""
        out = dict(base)
        for key, value in extra.items():
            if key in _ANNOTATIONS:
                out[key] = value
            elif key not in out:
                out[key] = value
            elif out[key] != value:
                if key == "type" and "oneOf" not in out:
                    raise self.fail("type", path, f"conflicts ({out[key]!r} vs {value!r})")
                if key == "properties":
                    out[key] = {**out[key], **value}
                elif key == "required":
                    out[key] = list(dict.fromkeys([*out[key], *value]))
                else:
                    raise self.fail(key, path, "is given twice with different values")
        if "oneOf" in out and "type" in out:
            # ``{type: object, anyOf: [...]}``: the type moves into the branches it fits.
            type_name = out.pop("type")
            kept = [b for b in out["oneOf"] if b.get("type") in (None, type_name)]
            if not kept:
                raise self.fail("type", path, f"{type_name!r} matches no branch of its union")
            out["oneOf"] = kept
            if len(kept) == 1:
                only = out.pop("oneOf")[0]
                out = {**only, **{k: v for k, v in out.items() if k in _ANNOTATIONS}}
        return out


def _required_alternatives(branches: Any) -> str | None:
    """``"a or b+c"`` when every branch only lists ``required`` names; else None."""
    if not isinstance(branches, list) or len(branches) < 2:
        return None
    options = []
    for branch in branches:
        if not isinstance(branch, Mapping) or set(branch) != {"required"}:
            return None
        names = branch["required"]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return None
        options.append("+".join(names))
    return " or ".join(options)


def _json_type_matches(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def _branch_types(branch: Mapping[str, Any]) -> set[str] | None:
    """The JSON types a normalised branch can match (None: any)."""
    if isinstance(branch.get("type"), str):
        name = branch["type"]
        return {"number", "integer"} if name in ("number", "integer") else {name}
    if "oneOf" in branch:
        out: set[str] = set()
        for sub in branch["oneOf"]:
            types = _branch_types(sub)
            if types is None:
                return None
            out |= types
        return out
    return None


def _disjoint(branches: list[dict[str, Any]]) -> bool:
    seen: set[str] = set()
    for branch in branches:
        types = _branch_types(branch)
        if types is None or types & seen:
            return False
        seen |= types
    return True


def normalize_schema(schema: Any, *, tool: str, root_object: bool = True) -> dict[str, Any]:
    """``schema`` rewritten into codemode's enforced subset (see the module docstring).

    ``root_object`` (input schemas): the root must describe an object; a missing or
    empty schema becomes ``{"type": "object", "properties": {}}``. Raises
    ``McpSchemaError`` naming ``tool`` and the keyword that cannot be represented.
    """
    if schema is None or (isinstance(schema, Mapping) and not schema and root_object):
        return {"type": "object", "properties": {}}
    normalizer = _Normalizer(tool, schema)
    out = normalizer.node(schema, "schema")
    if root_object:
        if out.get("type") is None and "oneOf" not in out:
            out["type"] = "object"
            out.setdefault("properties", {})
        if out.get("type") != "object":
            raise McpSchemaError(tool, "type", "schema", "must describe an object (tool arguments)")
    try:
        assert_supported_json_schema(out)
    except JsonSchemaError as exc:
        first = exc.violations[0] if exc.violations else str(exc)
        where, _, why = first.partition(": ")
        raise McpSchemaError(tool, "schema", where, f"is outside the subset: {why}") from exc
    return out
