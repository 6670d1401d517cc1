"""Shared Hypothesis strategies: lossless JSON values, supported schemas, DSL specs, and
values generated to satisfy a given schema.

Import as ``from strategies import ...`` (``tests/`` is on ``sys.path`` through its
``conftest.py``).

``oneOf`` branches are generated with pairwise different JSON kinds (string, boolean,
null, number/integer, array, object) so that a value drawn from one branch matches
exactly that branch; the properties "generated values validate" rely on it.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "dsl_specs",
    "json_scalars",
    "json_values",
    "lossy_values",
    "parameter_specs",
    "schema_kind",
    "supported_schemas",
    "values_for",
]

SAFE_INT = 2**53

_keys = st.text(min_size=0, max_size=6)
_texts = st.text(max_size=12)
_finite_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
)
_ints = st.integers(min_value=-SAFE_INT, max_value=SAFE_INT)


def json_scalars() -> st.SearchStrategy[Any]:
    """``None``, booleans, strings, safe-range ints and finite floats other than -0.0."""
    return st.none() | st.booleans() | _texts | _ints | _finite_floats


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Any lossless JSON value (plain ``dict``/``list`` containers)."""
    return st.recursive(
        json_scalars(),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def lossy_values() -> st.SearchStrategy[Any]:
    """Values that are not lossless JSON, possibly nested inside JSON containers."""
    leaf = st.sampled_from(
        [math.nan, math.inf, -math.inf, -0.0, (1, 2), {1, 2}, b"x", object(), 10**400]
    ) | st.builds(lambda: {1: "int key"})
    return st.recursive(
        leaf,
        lambda children: (
            st.lists(children, min_size=1, max_size=3).map(lambda xs: [*xs])
            | st.dictionaries(_keys, children, min_size=1, max_size=3)
        ),
        max_leaves=5,
    )


# --- raw subset schemas -------------------------------------------------------------

_SCALAR_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": _texts,
    "number": _ints | _finite_floats,
    "integer": _ints | _ints.map(float),
    "boolean": st.booleans(),
    "null": st.none(),
}


def schema_kind(schema: dict[str, Any]) -> str | None:
    """The JSON kind a typed node accepts (number and integer are one kind), else None."""
    t = schema.get("type")
    return "number" if t == "integer" else t


@st.composite
def _annotations(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["description"] = draw(_texts)
    if draw(st.integers(0, 4)) == 0:
        out["title"] = draw(_texts)
    if draw(st.integers(0, 4)) == 0:
        out["default"] = draw(json_values(max_leaves=3))
    if draw(st.integers(0, 4)) == 0:
        out["examples"] = draw(st.lists(json_values(max_leaves=3), max_size=2))
    return out


@st.composite
def _scalar_schema(draw: st.DrawFn, *, dsl: bool) -> dict[str, Any]:
    type_name = draw(st.sampled_from([*_SCALAR_VALUES, None] if not dsl else [*_SCALAR_VALUES]))
    node: dict[str, Any] = {} if type_name is None else {"type": type_name}
    values = _SCALAR_VALUES[type_name] if type_name else json_scalars()
    if draw(st.booleans()):
        node["enum"] = draw(st.lists(values, min_size=1, max_size=4))
        if draw(st.booleans()):
            node["const"] = draw(st.sampled_from(node["enum"]))
    elif draw(st.booleans()) or type_name is None:
        node["const"] = draw(values)
    return {**node, **draw(_annotations())}


def _object_node(
    draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]], *, dsl: bool
) -> dict[str, Any]:
    props = draw(st.dictionaries(_keys, children, max_size=4))
    required = [k for k in props if draw(st.booleans())]
    node: dict[str, Any] = {"type": "object"}
    if dsl:
        node["additionalProperties"] = draw(st.booleans())
        node["properties"] = {
            k: ({**v, "required": True} if k in required else v) for k, v in props.items()
        }
        return node
    if props or draw(st.booleans()):
        node["properties"] = props
    if required:
        node["required"] = required
    if draw(st.booleans()):
        node["additionalProperties"] = draw(st.booleans())
    return node


@st.composite
def _container(
    draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]], *, dsl: bool
) -> dict[str, Any]:
    shape = draw(st.sampled_from(["array", "object", "oneOf"]))
    if shape == "array":
        node: dict[str, Any] = {"type": "array"}
        if draw(st.booleans()):
            node["items"] = draw(children)
    elif shape == "object":
        node = _object_node(draw, children, dsl=dsl)
    else:
        # ``{"type": "json"}`` (DSL) overlaps every branch, like an untyped raw node.
        typed = children.filter(lambda s: schema_kind(s) not in (None, "json"))
        branches = draw(st.lists(typed, min_size=2, max_size=3, unique_by=schema_kind))
        node = {"oneOf": branches}
    return {**node, **draw(_annotations())}


def supported_schemas(max_leaves: int = 8) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas inside the enforced raw subset (``assert_supported_json_schema`` accepts)."""
    base = _scalar_schema(dsl=False) | _annotations()
    return st.recursive(base, lambda c: _container(c, dsl=False), max_leaves=max_leaves)


def dsl_specs(max_leaves: int = 8) -> st.SearchStrategy[dict[str, Any]]:
    """Valid DSL value specs (``value_schema_spec_to_json_schema`` compiles them)."""
    base = _scalar_schema(dsl=True) | _annotations().map(lambda a: {"type": "json", **a})
    return st.recursive(base, lambda c: _container(c, dsl=True), max_leaves=max_leaves)


def parameter_specs() -> st.SearchStrategy[dict[str, Any]]:
    """Valid ``define_tool`` parameter maps (some properties ``required: True``)."""
    return st.dictionaries(
        _keys,
        st.tuples(dsl_specs(max_leaves=4), st.booleans()).map(
            lambda t: {**t[0], "required": True} if t[1] else t[0]
        ),
        max_size=4,
    )


# --- values satisfying a schema ------------------------------------------------------


@st.composite
def values_for(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """A value that satisfies the (raw subset) ``schema``."""
    if "oneOf" in schema:
        return draw(values_for(draw(st.sampled_from(schema["oneOf"]))))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    type_name = schema.get("type")
    if type_name is None:
        return draw(json_values(max_leaves=6))
    if type_name in _SCALAR_VALUES:
        return draw(_SCALAR_VALUES[type_name])
    if type_name == "array":
        return draw(st.lists(values_for(schema.get("items", {})), max_size=3))
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    out: dict[str, Any] = {}
    for name, sub in props.items():
        if name in required or draw(st.booleans()):
            out[name] = draw(values_for(sub))
    if schema.get("additionalProperties") is not False:
        extra = draw(
            st.dictionaries(_keys.filter(lambda k: k not in props), json_values(4), max_size=2)
        )
        out.update(extra)
    return out
