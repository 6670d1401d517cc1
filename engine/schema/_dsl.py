"""The author DSL of ``define_tool``, compiled once to the enforced raw subset.

Value specs::

    {"type": "string" | "number" | "integer" | "boolean" | "null", "enum"?, "const"?}
    {"type": "array", "items"?: spec}
    {"type": "object", "properties"?: {name: spec & {"required"?: True}},
     "additionalProperties": True | False}            # mandatory, unlike raw schemas
    {"type": "json"}                                  # any lossless JSON -> {}
    {"oneOf": [spec, spec, ...]}                      # two or more branches

plus the annotations ``description``, ``title``, ``default``, ``examples`` anywhere
(lossless JSON; ``default`` is documentation, never applied). Compilation keeps the
author's key order, drops per-property ``required: True`` and inserts the ``required``
list right after ``properties`` (the order the catalog's published schemas use, so compiled DSL tools
serialise byte for byte like them). Every author
error is collected with its path and raised as one ``JsonSchemaError``.
"""

from __future__ import annotations

from typing import Any

from .._errors import JsonSchemaError
from ..json import snapshot
from ._common import (
    ANNOTATIONS,
    SCALAR_TYPES,
    At,
    check_annotations,
    check_scalar_keywords,
    check_type_value,
    is_json_dict,
    is_json_list,
)
from ._subset import schema_violations

__all__ = ["parameter_schema_spec_to_json_schema", "value_schema_spec_to_json_schema"]

_DSL_TYPES = (*SCALAR_TYPES, "array", "object", "json")
_ALLOWED: dict[str, frozenset[str]] = {
    **{t: frozenset({"type", "enum", "const", *ANNOTATIONS}) for t in SCALAR_TYPES},
    "array": frozenset({"type", "items", *ANNOTATIONS}),
    "object": frozenset({"type", "properties", "additionalProperties", *ANNOTATIONS}),
    "json": frozenset({"type", *ANNOTATIONS}),
    "oneOf": frozenset({"oneOf", *ANNOTATIONS}),
}
_KNOWN = frozenset().union(*_ALLOWED.values(), {"required"})

# A pending spec: (spec, location, output dict to fill, may carry ``required: True``).
_Task = tuple[Any, At, dict[str, Any], bool]


def _kind(spec: dict[str, Any], here: At, out: list[str]) -> str | None:
    """Which DSL form ``spec`` is ("string", ..., "json", "oneOf"), or None if unknowable."""
    has_type, has_one_of = "type" in spec, "oneOf" in spec
    if has_type and has_one_of:
        out.append(f'{here}: "type" cannot be combined with "oneOf"')
    if has_one_of:
        return "oneOf"
    if not has_type:
        if not spec:
            out.append(
                f'{here}: a bare {{}} is not a value spec; use {{"type": "json"}} for any JSON'
            )
        else:
            out.append(f'{here}: must declare "type" or "oneOf"')
        return None
    return check_type_value(spec["type"], _DSL_TYPES, here, out)


def _check_keys(
    spec: dict[str, Any], kind: str | None, here: At, as_property: bool, out: list[str]
) -> None:
    allowed = _ALLOWED.get(kind or "", _KNOWN)
    for key in spec:
        if not isinstance(key, str):
            out.append(f"{here}: key {key!r} is not a string")
        elif key == "required":
            _check_required_flag(spec["required"], kind, here.key("required"), as_property, out)
        elif key not in _KNOWN:
            out.append(f'{here}: unsupported keyword "{key}"')
        elif key not in allowed and not (key == "type" and kind == "oneOf"):
            form = '"oneOf"' if kind == "oneOf" else f'type "{kind}"'
            out.append(f'{here}: "{key}" is not allowed with {form}')
    if kind in SCALAR_TYPES:
        check_scalar_keywords(spec, kind, here, out)
    check_annotations(spec, here, out)
    if kind == "object":
        if "additionalProperties" not in spec:
            out.append(f'{here}: object specs must declare "additionalProperties": true or false')
        elif not isinstance(spec["additionalProperties"], bool):
            out.append(f"{here.key('additionalProperties')}: must be true or false")


def _check_required_flag(
    value: Any, kind: str | None, where: At, as_property: bool, out: list[str]
) -> None:
    if as_property and value is True:
        return
    if isinstance(value, (list, tuple)) and kind == "object":
        out.append(
            f'{where}: object-level "required" lists are not supported; '
            'mark each property with "required": true'
        )
    elif as_property:
        out.append(f"{where}: must be true (omit it for an optional property)")
    else:
        out.append(f'{where}: only allowed on an object property (as "required": true)')


def _compile_node(
    spec: Any, here: At, target: dict[str, Any], as_property: bool, out: list[str]
) -> list[_Task]:
    """Check one spec, fill ``target`` with its compiled keys, return its child specs."""
    if not is_json_dict(spec):
        out.append(f"{here}: value spec must be a JSON object")
        return []
    kind = _kind(spec, here, out)
    _check_keys(spec, kind, here, as_property, out)
    allowed = _ALLOWED.get(kind or "", _KNOWN)
    children: list[_Task] = []
    for key, value in spec.items():
        if key == "required" or (key == "type" and kind == "json") or key not in allowed:
            continue
        if key == "properties":
            target[key] = _properties(value, here.key(key), children, out)
            required = _required_names(value)
            if required:
                target["required"] = required
        elif key == "items":
            target[key] = {}
            children.append((value, here.key(key), target[key], False))
        elif key == "oneOf":
            where = here.key(key)
            if not is_json_list(value) or len(value) < 2:
                out.append(f"{where}: must be an array of at least 2 value specs")
            branches = list(value) if is_json_list(value) else []
            target[key] = [{} for _ in branches]
            children.extend(
                (b, where.index(i), target[key][i], False) for i, b in enumerate(branches)
            )
        else:
            target[key] = value
    return children


def _required_names(properties: Any) -> list[str]:
    if not is_json_dict(properties):
        return []
    return [
        name
        for name, sub in properties.items()
        if isinstance(name, str) and is_json_dict(sub) and sub.get("required") is True
    ]


def _properties(value: Any, at: At, children: list[_Task], out: list[str]) -> dict[str, Any]:
    compiled: dict[str, Any] = {}
    if not is_json_dict(value):
        out.append(f"{at}: must be an object of property specs")
        return compiled
    for name, sub in value.items():
        if not isinstance(name, str):
            out.append(f"{at}: key {name!r} is not a string")
            continue
        compiled[name] = {}
        children.append((sub, at.key(name), compiled[name], True))
    return compiled


def _compile(roots: list[_Task], out: list[str]) -> None:
    active: set[int] = set()
    stack: list[_Task | int] = list(reversed(roots))
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            active.discard(item)
            continue
        spec, here, target, as_property = item
        if id(spec) in active:
            out.append(f"{here}: cycle detected")
            continue
        children = _compile_node(spec, here, target, as_property, out)
        if is_json_dict(spec):
            active.add(id(spec))
            stack.append(id(spec))
        stack.extend(reversed(children))


def _finish(compiled: dict[str, Any], violations: list[str], label: str) -> dict[str, Any]:
    if not violations:
        # The DSL is a front end to the subset, so its output must pass the same check.
        violations = schema_violations(compiled, label=label)
    if violations:
        raise JsonSchemaError("unsupported JSON schema: " + "; ".join(violations), violations)
    frozen: dict[str, Any] = snapshot(compiled)
    return frozen


def value_schema_spec_to_json_schema(spec: Any, *, label: str = "schema") -> dict[str, Any]:
    """Compile one value spec (an output schema, an item, a branch) to a raw schema.

    Returns a deep-frozen raw subset schema; ``{"type": "json"}`` becomes ``{}`` (plus
    annotations). Raises ``JsonSchemaError`` listing every author error, paths rooted at
    ``label``.
    """
    out: list[str] = []
    compiled: dict[str, Any] = {}
    _compile([(spec, At(None, label), compiled, False)], out)
    return _finish(compiled, out, label)


def parameter_schema_spec_to_json_schema(
    spec_map: Any, *, label: str = "parameters"
) -> dict[str, Any]:
    """Compile a ``define_tool`` parameter map ``{name: spec & {"required"?: True}}``.

    Returns ``{"type": "object", "properties": {...}, "required": [...]}`` (``required``
    omitted when empty; no ``additionalProperties``, so the root stays open), deep-frozen.
    Raises ``JsonSchemaError`` listing every author error, paths rooted at ``label``.
    """
    out: list[str] = []
    properties: dict[str, Any] = {}
    compiled: dict[str, Any] = {"type": "object", "properties": properties}
    roots: list[_Task] = []
    if not is_json_dict(spec_map):
        out.append(f"{label}: must be an object mapping property names to value specs")
    else:
        for name, sub in spec_map.items():
            if not isinstance(name, str):
                out.append(f"{label}: key {name!r} is not a string")
                continue
            properties[name] = {}
            roots.append((sub, At(None, label).key(name), properties[name], True))
        required = _required_names(spec_map)
        if required:
            compiled["required"] = required
    _compile(roots, out)
    return _finish(compiled, out, label)
