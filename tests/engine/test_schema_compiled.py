"""Compiled validators (``codemode.engine.schema._compile``): the fast path agrees with the walker.

``validate_json_schema_value`` answers a valid value from a validator compiled once per
schema and runs the message-producing walker (``_schema_validate._run``) only when that
validator says invalid or leaves the value to it (``Undecided``). These tests pin that
the compiled verdict is exact (``True`` exactly when the walker reports nothing, for
supported and for odd schemas alike), that JSON equality holds in ``enum``/``const``,
that the cache is bounded and never serves a validator for a schema that changed, and
that deep, cyclic and stack-starved calls still get the walker's answer.
"""

from __future__ import annotations

import enum
import math
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_scalars, json_values, lossy_values, supported_schemas, values_for

from codemode.engine import ToolOutput, define_tool, text
from codemode.engine.json import FrozenDict, _is_sealed, snapshot
from codemode.engine.schema import (
    assert_object_json_schema,
    assert_supported_json_schema,
    parameter_schema_spec_to_json_schema,
    validate_args,
    validate_json_schema_value,
    value_schema_spec_to_json_schema,
)
from codemode.engine.schema._compile import (
    CACHE_SIZE,
    MAX_DEPTH,
    Undecided,
    _cache,
    clear_cache,
    compile_schema,
    validator_for,
)
from codemode.engine.schema._validate import _run

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _walker(schema: Any, value: Any, path: str = "value") -> list[str]:
    return _run(schema, value, path, path or "value")


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("returned", fn())
    except Undecided:
        return ("undecided", None)
    except Exception as exc:  # the walker's own failures on malformed schemas
        return ("raised", type(exc))


def _assert_exact(schema: Any, value: Any) -> None:
    """The compiled verdict matches the walker, and the public result is the walker's."""
    walked = _outcome(lambda: _walker(schema, value))
    verdict = _outcome(lambda: compile_schema(schema)(value))
    if verdict == ("returned", True):
        assert walked == ("returned", []), (schema, value)
    elif verdict == ("returned", False):
        assert walked[0] == "raised" or walked[1], (schema, value)
    else:
        assert verdict == ("undecided", None), verdict
    assert _outcome(lambda: validate_json_schema_value(schema, value)) == walked
    sealed = snapshot_or(schema)
    assert _outcome(lambda: validate_json_schema_value(sealed, value)) == _outcome(
        lambda: _walker(sealed, value)
    )
    args_walked = _outcome(lambda: _run(schema, value, "", "arguments"))
    assert _outcome(lambda: validate_args(schema, value)) == args_walked


def snapshot_or(schema: Any) -> Any:
    """The sealed copy of ``schema`` when it is lossless JSON (exercises the id cache)."""
    try:
        return snapshot(schema)
    except Exception:
        return schema


# --- strategies -----------------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c"])
_TRICKY = st.sampled_from(
    [True, False, 0, 1, 1.0, 0.0, -0.0, 2, 2.5, math.nan, math.inf, 10**400, "", "a", None]
)


@st.composite
def _perturbed(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with a few nearby changes: bool/number swaps, dropped and extra keys."""
    if isinstance(value, dict):
        out = {k: draw(_perturbed(v)) for k, v in value.items() if draw(st.integers(0, 6))}
        if draw(st.integers(0, 4)) == 0:
            out[draw(_KEYS)] = draw(_TRICKY)
        return out
    if isinstance(value, list):
        return [draw(_perturbed(v)) for v in value]
    if draw(st.integers(0, 3)) == 0:
        return draw(_TRICKY)
    return value


def _wild_node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Nodes built from the subset's keywords with well- and ill-shaped values."""
    scalars_or_containers = json_scalars() | _TRICKY | st.just([]) | st.just({})
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(
                ["string", "number", "integer", "boolean", "null", "object", "array", "json"]
            )
            | st.sampled_from([["string", "null"], None, 1]),
            "enum": st.lists(scalars_or_containers, max_size=4) | st.sampled_from(["ab", 5, ()]),
            "const": scalars_or_containers,
            "oneOf": st.lists(children, max_size=3) | st.just("xy"),
            "properties": st.dictionaries(_KEYS, children | st.none(), max_size=3)
            | st.sampled_from([[1], [], None]),
            "required": st.lists(_KEYS, max_size=2) | st.sampled_from(["ab", [1], None]),
            "additionalProperties": st.sampled_from([True, False, 0, None]),
            "items": children | st.none(),
            "description": st.just("d"),
        },
    )


def wild_schemas() -> st.SearchStrategy[Any]:
    leaf = st.sampled_from([True, None, 1, [], {}]) | st.builds(lambda: OrderedDict(type="string"))
    return st.recursive(leaf | _wild_node(leaf), _wild_node, max_leaves=6)


def wild_values() -> st.SearchStrategy[Any]:
    leaf = _TRICKY | json_scalars() | st.sampled_from([(1,), OrderedDict(a=1), {1: 2}])
    return st.recursive(
        leaf,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(_KEYS, c, max_size=3),
        max_leaves=8,
    )


# --- the compiled verdict is exact -----------------------------------------------------------


@SETTINGS
@given(st.data(), supported_schemas())
def test_generated_values_and_near_misses(data: st.DataObject, schema: dict[str, Any]) -> None:
    value = data.draw(values_for(schema))
    assert compile_schema(schema)(value) is True
    assert validate_json_schema_value(schema, value) == []
    _assert_exact(schema, data.draw(_perturbed(value)))


@SETTINGS
@given(supported_schemas(), st.one_of(json_values(), lossy_values(), wild_values()))
def test_any_value_against_supported_schemas(schema: dict[str, Any], value: Any) -> None:
    _assert_exact(schema, value)


@SETTINGS
@given(wild_schemas(), wild_values())
def test_schemas_outside_the_subset_behave_as_the_walker(schema: Any, value: Any) -> None:
    # The validator's contract asks for supported schemas; with anything else it must still
    # do exactly what the walker did (including the walker's own exceptions).
    _assert_exact(schema, value)


@pytest.mark.parametrize(
    ("schema", "value", "valid"),
    [
        ({"enum": [1]}, True, False),
        ({"enum": [True]}, 1, False),
        ({"enum": [True]}, 1.0, False),
        ({"enum": [0]}, False, False),
        ({"enum": [False]}, 0, False),
        ({"enum": [1]}, 1.0, True),
        ({"enum": [1.0]}, 1, True),
        ({"enum": [None]}, False, False),
        ({"enum": [None]}, None, True),
        ({"enum": ["1"]}, 1, False),
        ({"enum": [0]}, -0.0, False),
        ({"enum": [0.0]}, 0, True),
        ({"enum": [2**53 + 1]}, float(2**53), False),
        ({"enum": [[1]]}, [1], False),
        ({"enum": [{}]}, {}, False),
        ({"const": True}, True, True),
        ({"const": 1}, True, False),
        ({"const": False}, 0, False),
        ({"type": "integer", "const": 3}, 3.0, True),
        ({"type": "number", "enum": [1.5, 2]}, 2, True),
        ({"type": "string", "enum": ["a"], "const": "a"}, "a", True),
        ({"type": "string", "enum": ["a"], "const": "b"}, "a", False),
        ({"type": "object", "enum": [{}]}, {}, False),
        ({"oneOf": [{"enum": [1]}, {"enum": [True]}]}, True, True),
        ({"oneOf": [{"enum": [1]}, {"enum": [1.0]}]}, 1, False),
    ],
)
def test_enum_and_const_use_json_equality(schema: dict[str, Any], value: Any, valid: bool) -> None:
    assert compile_schema(schema)(value) is valid
    assert (validate_json_schema_value(schema, value) == []) is valid
    _assert_exact(schema, value)


class _Level(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer", "enum": [1]}, _Level.ONE),
        ({"enum": [_Level.ONE]}, 1),
        ({"enum": ["a"]}, _Text("a")),
        ({"enum": [_Text("a")]}, "a"),
        ({"type": "string"}, _Text("a")),
        ({}, {_Text("k"): [_Text("v"), _Level.ONE]}),
        ({"type": "object", "properties": {"k": {"type": "string"}}}, {_Text("k"): 1}),
        ({"type": "number"}, True),
        ({"type": "integer"}, 2.0**80),
        ({"type": "integer"}, 10**400),
        ({}, -0.0),
        ({"type": "array"}, (1,)),
        ({"type": "object"}, OrderedDict(a=1)),
        ({"oneOf": [{}, {"type": "string"}]}, _Text("a")),
    ],
)
def test_subclasses_and_python_numbers(schema: dict[str, Any], value: Any) -> None:
    _assert_exact(schema, value)


def test_one_of_never_counts_an_undecided_branch_as_a_miss() -> None:
    # A value too deep for the fast path: the first branch cannot decide, so the oneOf
    # must not conclude "exactly one" from the second branch alone.
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    schema = {"oneOf": [{"type": "array"}, {"type": "array", "items": {"type": "array"}}]}
    with pytest.raises(Undecided):
        compile_schema(schema)(deep)
    assert validate_json_schema_value(schema, deep) == [
        '"value" must match exactly one oneOf branch (matched 2)'
    ]


# --- depth, cycles and the Python stack ------------------------------------------------------


def test_deep_values_go_to_the_walker() -> None:
    value: Any = None
    for _ in range(5000):
        value = {"k": [value]}
    with pytest.raises(Undecided):
        compile_schema({})(value)
    assert validate_json_schema_value({}, value) == []


def test_deep_schemas_compile_lazily_and_still_validate() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    frozen = snapshot(schema)
    assert validate_json_schema_value(frozen, []) == []
    assert validate_json_schema_value(frozen, [[["x"]]]) == ['"value[0][0][0]" must be an array']
    assert validate_json_schema_value(schema, [[[]]]) == []


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "array"},
        {"type": "array", "items": {"oneOf": [{"type": "array"}, {"type": "null"}]}},
    ],
)
def test_cyclic_values_with_fan_out_stay_cheap(schema: dict[str, Any]) -> None:
    # Two references to itself per level: a fast path without a depth bound would take
    # 2**depth steps before noticing anything.
    cyc: list[Any] = []
    cyc.extend([cyc, cyc])
    result = validate_json_schema_value(schema, cyc)
    assert result == _walker(schema, cyc)
    assert result


def test_validation_near_the_recursion_limit_falls_back_to_the_walker() -> None:
    schema = snapshot({"type": "object", "properties": {"a": {"type": "array"}}})
    value: dict[str, Any] = {"a": [1]}
    for _ in range(40):  # the fast path needs a frame per level; the walker does not
        value["a"] = [value["a"]]
    with pytest.raises(RecursionError):
        _probe_at_the_limit(lambda: compile_schema(schema)(value))
    results: list[list[str]] = []

    def validate() -> None:
        results.append(validate_json_schema_value(schema, value))
        results.append(validate_json_schema_value(schema, {"a": 1}))

    _probe_at_the_limit(validate)
    assert results == [[], ['"value.a" must be an array']]


def _probe_at_the_limit(fn: Callable[[], Any], headroom: int = 15) -> Any:
    """Call ``fn`` with only ``headroom`` frames left below the recursion limit."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]

    def descend(n: int) -> Any:
        return descend(n - 1) if n else fn()

    return descend(sys.getrecursionlimit() - depth - headroom)


# --- the cache ---------------------------------------------------------------------------------


def test_sealed_schemas_compile_once() -> None:
    schema = value_schema_spec_to_json_schema({"type": "string"})
    first = validator_for(schema)
    assert validator_for(schema) is first
    assert validate_json_schema_value(schema, "x") == []
    assert validator_for(schema) is first
    assert _cache[id(schema)][0] is schema  # held, so the id cannot be reused


def test_mutated_plain_schemas_are_recompiled() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "n": {"const": 1}},
        "additionalProperties": False,
    }
    assert validate_json_schema_value(schema, {"a": "x", "n": 1.0}) == []
    assert validate_json_schema_value(schema, {"a": "x", "z": 1}) == [
        '"value.z" is not a declared property (additionalProperties: false)'
    ]
    schema["additionalProperties"] = 0  # == False, but only ``False`` closes an object
    assert validate_json_schema_value(schema, {"a": "x", "z": 1}) == []
    schema["additionalProperties"] = False
    assert validate_json_schema_value(schema, {"a": "x", "z": 1}) != []
    schema["properties"]["n"]["const"] = True  # == 1, but not the same JSON
    assert validate_json_schema_value(schema, {"n": 1}) == ['"value.n" must be true']
    assert validate_json_schema_value(schema, {"n": True}) == []
    schema["properties"]["a"]["type"] = "number"
    assert validate_json_schema_value(schema, {"a": "x"}) == ['"value.a" must be a number']
    del schema["additionalProperties"]
    assert validate_json_schema_value(schema, {"a": 1, "z": 1}) == []
    schema["required"] = ["a"]
    assert validate_json_schema_value(schema, {}) == ['missing required property "value.a"']


def test_plain_schemas_are_not_kept_alive() -> None:
    clear_cache()
    for i in range(10):
        validate_json_schema_value({"type": "object", "required": [str(i)]}, {"0": 1})
    validate_json_schema_value(snapshot({"type": "string"}), "x")
    held = [entry[0] for entry in _cache.values() if entry[0] is not None]
    assert held and all(_is_sealed(schema) for schema in held)


def test_fresh_plain_schemas_per_call_stay_correct_and_bounded() -> None:
    clear_cache()
    for _ in range(5):
        schema = {"type": "string"}  # a fresh dict per call, often at a reused address
        assert validate_json_schema_value(schema, "x") == []
        assert validate_json_schema_value(schema, 1) == ['"value" must be a string']
    assert len(_cache) <= 5


def test_the_cache_is_a_bounded_lru() -> None:
    clear_cache()
    keep = snapshot({"type": "string"})
    kept = validator_for(keep)
    schemas = [snapshot({"type": "object", "required": [str(i)]}) for i in range(CACHE_SIZE + 50)]
    for schema in schemas:
        assert validate_json_schema_value(schema, {}) != []
        assert validate_json_schema_value(keep, "x") == []  # recently used: stays
    assert len(_cache) <= CACHE_SIZE
    assert validator_for(keep) is kept
    assert id(schemas[0]) not in _cache or _cache[id(schemas[0])][0] is not schemas[0]


def test_schemas_that_cannot_be_shadowed_are_still_validated() -> None:
    # Too deep (or not plain JSON) to compare cheaply: compiled per call, never cached.
    deep: dict[str, Any] = {}
    for _ in range(MAX_DEPTH + 10):
        deep = {"type": "object", "properties": {"k": deep}}
    assert validate_json_schema_value(deep, {"k": {"k": 1}}) == ['"value.k.k" must be an object']
    assert id(deep) not in _cache
    odd = {"type": "string", "description": ("not", "json")}
    assert validate_json_schema_value(odd, "x") == []
    assert id(odd) not in _cache
    nan_const = {"const": math.nan}  # never equal to its shadow: recompiled per call
    for value in (1, math.nan, "x"):
        _assert_exact(nan_const, value)


# --- the compilers return sealed schemas, so define_tool hits the cache ---------------------


def test_compiled_and_asserted_schemas_are_sealed() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(300):  # past snapshot's recursive fast path
        deep = {"type": "array", "items": deep}
    for schema in (
        parameter_schema_spec_to_json_schema({"a": {"type": "string", "required": True}}),
        value_schema_spec_to_json_schema({"type": "string"}),
        value_schema_spec_to_json_schema(
            {"type": "object", "additionalProperties": True, "properties": {}}
        ),
        assert_supported_json_schema({"type": "string"}),
        assert_supported_json_schema(deep),
        assert_object_json_schema({"type": "object"}),
    ):
        assert type(schema) is FrozenDict
        assert _is_sealed(schema)


def test_define_tool_parameters_and_output_hit_the_cache() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        return args["value"]

    tool = define_tool(
        name="echo",
        description="Echo.",
        parameters={"value": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
        execute=body,
    )
    assert _is_sealed(tool.parameters) and _is_sealed(tool.output.schema)
    assert validate_args(tool.parameters, {"value": "x"}) == []
    assert validate_json_schema_value(tool.output.schema, "x") == []
    assert _cache[id(tool.parameters)][0] is tool.parameters
    assert _cache[id(tool.output.schema)][0] is tool.output.schema
    assert validate_args(tool.parameters, {"value": 1}) == ['"value" must be a string']
    assert validate_args(tool.parameters, []) == ['"arguments" must be an object']
