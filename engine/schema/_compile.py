"""Schemas compiled once into fast yes/no validators (the validator's fast path).

``compile_schema(schema)`` turns a schema into a tree of small closures, one per node,
each answering "is this value valid here?" with no path strings and no message lists.
The answer is exact where it is given: ``True`` means the message-producing walker of
``_validate`` would report nothing, ``False`` means it would report something.
Where the fast path will not decide, it raises ``Undecided`` (values nested deeper than
``MAX_DEPTH`` frames, cyclic values, schema shapes outside the subset that the walker
interprets in its own way, ``str``/``int`` subclasses inside ``enum``, an ``enum`` whose
message the walker could not render); callers then run the walker, which is iterative
and exact. ``oneOf`` counts matching branches, which is why "I don't know" is an
exception and never a ``False``.

``validator_for(schema)`` caches compiled validators (see "the cache" below): sealed
frozen schemas by identity, plain dicts by identity *and* JSON-strict content, so a
mutated schema is recompiled rather than served stale.

The compiled semantics mirror the walker's Python rules: ``bool`` is not
a number, an integral float is an integer, NaN/±inf/``-0.0``, ints past float range,
non-``str`` keys, tuples and dict/list subclasses are not lossless JSON; ``enum`` and
``const`` compare as JSON (``True`` is not ``1``, ``1`` is ``1.0``) through per-kind sets;
a node's children are checked even without ``type``, as the walker does.
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..json import FrozenDict, FrozenList, LosslessJsonError, _is_sealed, dumps_compact
from ._common import json_scalar_equal, number_problem

__all__ = ["CACHE_SIZE", "MAX_DEPTH", "Check", "Undecided", "compile_schema", "validator_for"]

Check = Callable[[Any], bool]

# Fast-path frames (compiled nodes plus nesting inside untyped subtrees) before handing
# the value to the iterative walker: far below the default recursion limit even when the
# caller is itself deep in the stack.
MAX_DEPTH = 100

_MAX_INT = int(sys.float_info.max)
_copysign = math.copysign


class Undecided(Exception):
    """The fast path leaves this value to the exact (message-producing) walker."""


def _undecided(value: Any) -> bool:
    raise Undecided


def _never(value: Any) -> bool:
    return False


# --- scalar kinds -----------------------------------------------------------------------


def _odd_scalar_ok(value: Any) -> bool:
    """Node-level losslessness for what the exact-type checks let through: subclasses."""
    if isinstance(value, str):
        return True
    if isinstance(value, (int, float)):  # bool was handled by the exact-type check
        return number_problem(value) is None
    return False


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _boolean(value: Any) -> bool:
    return value is True or value is False


def _null(value: Any) -> bool:
    return value is None


def _number(value: Any) -> bool:
    t = type(value)
    if t is float:
        # Finite (inf - inf and nan - nan are nan) and not -0.0.
        return value - value == 0.0 and (value != 0.0 or _copysign(1.0, value) > 0.0)
    if t is int:
        return -_MAX_INT <= value <= _MAX_INT or number_problem(value) is None
    if t is bool or not isinstance(value, (int, float)):
        return False
    return number_problem(value) is None


def _integer(value: Any) -> bool:
    t = type(value)
    if t is int:
        return -_MAX_INT <= value <= _MAX_INT or number_problem(value) is None
    if t is float:
        return (
            value - value == 0.0
            and (value != 0.0 or _copysign(1.0, value) > 0.0)
            and value.is_integer()
        )
    if t is bool or not isinstance(value, (int, float)):
        return False
    if number_problem(value) is not None:
        return False
    return isinstance(value, int) or bool(value.is_integer())


_SCALAR_CHECKS: dict[str, Check] = {
    "string": _string,
    "number": _number,
    "integer": _integer,
    "boolean": _boolean,
    "null": _null,
}
# A value of this exact type is valid for the plain (no enum/const) typed node: lets
# container loops skip the call for the commonest leaves.
_EXACT_OK: dict[str, type] = {"string": str, "boolean": bool, "null": type(None)}


def _scalar_ok(value: Any) -> bool:
    """An untyped node with a non-container value: any lossless JSON scalar."""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return -_MAX_INT <= value <= _MAX_INT or number_problem(value) is None
    if t is float:
        return value - value == 0.0 and (value != 0.0 or _copysign(1.0, value) > 0.0)
    if t is dict or t is list or t is FrozenDict or t is FrozenList:
        return False
    return _odd_scalar_ok(value)


def _untyped_node_ok(value: Any) -> bool:
    """The untyped node's own check (the walker's ``_untyped_problem``), children aside."""
    t = type(value)
    if t is dict or t is list or t is FrozenDict or t is FrozenList:
        return True
    return _scalar_ok(value)


def _is_object(value: Any) -> bool:
    t = type(value)
    return t is dict or t is FrozenDict


def _is_array(value: Any) -> bool:
    t = type(value)
    return t is list or t is FrozenList


# --- any lossless JSON (the untyped ``{}`` node and undeclared properties) --------------


def _any_ok(value: Any, depth: int) -> bool:
    """Whether ``value`` is lossless JSON; ``depth`` counts the frames already in use."""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return -_MAX_INT <= value <= _MAX_INT or number_problem(value) is None
    if t is float:
        return value - value == 0.0 and (value != 0.0 or _copysign(1.0, value) > 0.0)
    if (t is FrozenDict or t is FrozenList) and getattr(value, "_sealed", False) is True:
        return True  # a sealed snapshot is known lossless: no walk (deep or wide)
    if t is dict or t is FrozenDict:
        if depth >= MAX_DEPTH:
            raise Undecided  # deep or cyclic: the walker tracks ancestors
        depth += 1
        for key, child in value.items():
            if type(key) is not str and not isinstance(key, str):
                return False
            c = type(child)
            if c is not str and c is not bool and child is not None and not _any_ok(child, depth):
                return False
        return True
    if t is list or t is FrozenList:
        if depth >= MAX_DEPTH:
            raise Undecided
        depth += 1
        for child in value:
            c = type(child)
            if c is not str and c is not bool and child is not None and not _any_ok(child, depth):
                return False
        return True
    return _odd_scalar_ok(value)


def _any_at(depth: int) -> Check:
    def any_json(value: Any) -> bool:
        return _any_ok(value, depth)

    return any_json


# --- enum / const -------------------------------------------------------------------------


def _renders(value: Any) -> bool:
    try:
        dumps_compact(value)
    except LosslessJsonError:
        return False
    return True


def _membership(values: Any) -> Check:
    """JSON equality against any of ``values`` (the walker's ``json_scalar_equal``)."""
    if type(values) is not list and type(values) is not FrozenList:
        return _undecided
    strings: set[str] = set()
    numbers: set[int | float] = set()
    booleans: set[bool] = set()
    has_null = False
    renderable = True  # can the walker's "must be one of [...]" message be written?
    for item in values:
        t = type(item)
        if t is str:
            strings.add(item)
        elif t is bool:
            booleans.add(item)
        elif item is None:
            has_null = True
        elif t is int or t is float:
            # One JSON number type: 1 and 1.0 hash and compare equal, as they should.
            numbers.add(item)
            if renderable and not _scalar_ok(item):
                renderable = _renders(item)
        elif t is dict or t is list or t is FrozenDict or t is FrozenList:
            # Equal to nothing under json_scalar_equal, but part of the message.
            if renderable:
                renderable = _renders(item)
        else:
            return _undecided
    strs, nums, bools = frozenset(strings), frozenset(numbers), frozenset(booleans)
    items = tuple(values)

    def member(value: Any) -> bool:
        t = type(value)
        if t is str:
            return value in strs
        if t is int or t is float:
            return value in nums
        if t is bool:
            return value in bools
        if value is None:
            return has_null
        return any(json_scalar_equal(value, item) for item in items)

    if not renderable:
        # The walker's message for a miss cannot be written (NaN in ``enum``...): it
        # raises, so a miss here is the walker's to report, even inside a ``oneOf``.
        def unrenderable_member(value: Any) -> bool:
            if member(value):
                return True
            raise Undecided

        return unrenderable_member
    return member


# --- containers ---------------------------------------------------------------------------


def _undecided_object(value: Any) -> bool:
    if type(value) is not dict and type(value) is not FrozenDict:
        return False
    raise Undecided


def _undecided_array(value: Any) -> bool:
    if type(value) is not list and type(value) is not FrozenList:
        return False
    raise Undecided


def _object_node(node: dict[str, Any], depth: int) -> Check:
    """An exact JSON dict with ``properties``/``required``/``additionalProperties``."""
    properties = node.get("properties") or {}
    required = node.get("required") or ()
    if type(properties) is not dict and type(properties) is not FrozenDict:
        return _undecided_object
    if type(required) not in (list, FrozenList, tuple) or any(
        type(name) is not str for name in required
    ):
        return _undecided_object
    names = tuple(required)
    closed = node.get("additionalProperties") is False
    children: dict[str, tuple[type | None, Check]] = {}
    for key, sub in properties.items():
        if type(key) is not str:
            return _undecided_object
        if sub is not None:  # the walker reads ``properties.get(key)``: None is undeclared
            children[key] = (_exact_ok(sub), _compile(sub, depth + 1))
    get = children.get
    child_depth = depth + 1

    declared = tuple(children.items())

    def object_node(value: Any) -> bool:
        if type(value) is not dict and type(value) is not FrozenDict:
            return False
        for name in names:
            if name not in value:
                return False
        if not closed and type(value) is FrozenDict and getattr(value, "_sealed", False) is True:
            # A sealed snapshot is known lossless: undeclared keys need no look, so a
            # 10 MB object costs its declared properties only.
            for key, (exact, check) in declared:
                if key in value:
                    child = value[key]
                    if type(child) is not exact and not check(child):
                        return False
            return True
        for key, child in value.items():
            if type(key) is not str and not isinstance(key, str):
                return False
            entry = get(key)
            if entry is not None:
                if type(child) is not entry[0] and not entry[1](child):
                    return False
            elif closed:
                return False
            else:
                c = type(child)
                if (
                    c is not str
                    and c is not bool
                    and child is not None
                    and not _any_ok(child, child_depth)
                ):
                    return False
        return True

    return object_node


def _array_node(node: dict[str, Any], depth: int) -> Check:
    """An exact JSON list whose items match ``items``."""
    items = node.get("items")
    if type(items) is not dict and type(items) is not FrozenDict:
        # Absent, None or any non-dict: the walker reads it as the any-JSON node.
        if isinstance(items, dict):
            return _undecided_array

        def any_items(value: Any) -> bool:
            t = type(value)
            return (t is list or t is FrozenList) and _any_ok(value, depth)

        return any_items
    exact = _exact_ok(items)
    check = _compile(items, depth + 1)

    def array_node(value: Any) -> bool:
        if type(value) is not list and type(value) is not FrozenList:
            return False
        for child in value:
            if type(child) is not exact and not check(child):
                return False
        return True

    return array_node


def _untyped_containers(objects: Check, arrays: Check) -> Check:
    def untyped_node(value: Any) -> bool:
        t = type(value)
        if t is dict or t is FrozenDict:
            return objects(value)
        if t is list or t is FrozenList:
            return arrays(value)
        return _scalar_ok(value)

    return untyped_node


def _all_of(first: Check, *rest: Check) -> Check:
    if not rest:
        return first
    if len(rest) == 1:
        second = rest[0]

        def both(value: Any) -> bool:
            return first(value) and second(value)

        return both
    checks = (first, *rest)

    def every(value: Any) -> bool:
        for check in checks:
            if not check(value):
                return False
        return True

    return every


def _one_of(branches: tuple[Check, ...]) -> Check:
    def one_of(value: Any) -> bool:
        matched = False
        for branch in branches:
            if branch(value):
                if matched:
                    return False  # two branches match: invalid whatever the rest say
                matched = True
        return matched

    return one_of


# --- compilation ----------------------------------------------------------------------------


def _exact_ok(node: Any) -> type | None:
    """An exact value type that is always valid at ``node`` (a plain scalar type), or None."""
    if type(node) is not dict and type(node) is not FrozenDict:
        return None
    if "oneOf" in node or "enum" in node or "const" in node:
        return None
    type_name = node.get("type")
    return _EXACT_OK.get(type_name) if type(type_name) is str else None


def _compile(node: Any, depth: int) -> Check:
    if depth >= MAX_DEPTH:
        return _undecided
    t = type(node)
    if t is not dict and t is not FrozenDict:
        # The walker reads any non-dict node as ``{}``; dict subclasses are left to it.
        return _undecided if isinstance(node, dict) else _any_at(depth)

    if "oneOf" in node:
        branches = node["oneOf"]
        if type(branches) is not list and type(branches) is not FrozenList:
            return _undecided
        return _one_of(tuple(_compile(branch, depth + 1) for branch in branches))

    members: list[Check] = []
    if "enum" in node:
        members.append(_membership(node["enum"]))
    if "const" in node:
        members.append(_membership([node["const"]]))

    type_name = node.get("type")
    if isinstance(type_name, str):
        if type(type_name) is not str:
            return _undecided
        scalar = _SCALAR_CHECKS.get(type_name)
        if scalar is not None:
            # A scalar value has no children, so other keywords cannot matter.
            return _all_of(scalar, *members)
        if type_name == "object":
            if members:
                # enum/const on a container type: no container equals a scalar (and the
                # members are still consulted, as the walker does, in case they are odd).
                return _all_of(_is_object, *members)
            return _object_node(node, depth)
        if type_name == "array":
            if members:
                return _all_of(_is_array, *members)
            return _array_node(node, depth)
        return _never  # an unknown type name accepts nothing

    if members:
        # Untyped with enum/const: only scalars can be equal (containers never are).
        return _all_of(_untyped_node_ok, *members)
    if not any(k in node for k in ("properties", "required", "additionalProperties", "items")):
        return _any_at(depth)
    # Outside the subset, but the walker applies an untyped node's children rules too.
    return _untyped_containers(_object_node(node, depth), _array_node(node, depth))


def compile_schema(schema: Any) -> Check:
    """A fast validator for ``schema``: ``True`` valid, ``False`` invalid, or ``Undecided``.

    Never raises for any schema value; compilation is bounded by ``MAX_DEPTH`` (deeper
    parts of a schema compile to "undecided"). A ``RecursionError`` from a caller that is
    already deep in the stack is the caller's to handle, like ``Undecided``.
    """
    return _compile(schema, 0)


# --- the cache ------------------------------------------------------------------------------
#
# Keyed by ``id(schema)``, least recently used evicted first. An entry is
# ``(schema, None, check)`` for a sealed frozen schema (``snapshot`` output: immutable, so
# identity is enough; the strong reference keeps the id from being reused) or
# ``(None, shadow, check)`` for any other JSON dict: the id is only a hint there, and the
# entry is used only while the schema still equals ``shadow``, a private copy taken at
# compile time in which every bool and number is wrapped so that equality is JSON-strict
# (``True`` is not ``1``). A mutable schema changed after compilation therefore
# recompiles instead of meeting a stale validator, and no user dict is kept alive.

CACHE_SIZE = 1024
_cache: OrderedDict[int, tuple[Any, Any, Check]] = OrderedDict()


class _Exactly:
    """A shadow leaf equal only to a value of the same exact type (and equal value)."""

    __slots__ = ("kind", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.kind = type(value)

    def __eq__(self, other: object) -> bool:
        return type(other) is self.kind and other == self.value

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


def _shadow(node: Any, depth: int) -> Any:
    """A strict-equality copy of a plain JSON schema; raises ``Undecided`` otherwise."""
    t = type(node)
    if t is str or node is None:
        return node
    if t is bool or t is int or t is float:
        return _Exactly(node)
    if depth >= MAX_DEPTH:
        raise Undecided  # too deep (or cyclic) to compare cheaply: not cached
    if t is dict or t is FrozenDict:
        out: dict[str, Any] = {}
        for key, child in node.items():
            if type(key) is not str:
                raise Undecided
            out[key] = _shadow(child, depth + 1)
        return out
    if t is list or t is FrozenList:
        return [_shadow(child, depth + 1) for child in node]
    raise Undecided


# The two sealed schemas looked up last and their checks, (schema, check, schema, check):
# a call validates its arguments and then its value, so two identity tests answer most
# look-ups before the cache's dictionary and its LRU upkeep. Sealed schemas only (the
# same object is the same schema), held strongly (an id cannot be reused meanwhile), and
# replaced as one tuple, so a reader in another thread never pairs one schema with
# another's check.
_recent: tuple[Any, Any, Any, Any] = (None, None, None, None)


def validator_for(schema: Any) -> Check:
    """The compiled validator of ``schema``, from the cache when it is still valid there.

    May raise ``RecursionError`` when called near the recursion limit.
    """
    global _recent
    recent = _recent
    if schema is recent[0] and schema is not None:
        return recent[1]  # type: ignore[no-any-return]
    if schema is recent[2] and schema is not None:
        return recent[3]  # type: ignore[no-any-return]
    t = type(schema)
    if t is not dict and t is not FrozenDict:
        return compile_schema(schema)  # trivial: "any JSON" or undecided
    key = id(schema)
    entry = _cache.get(key)
    if entry is not None:
        if entry[0] is schema or (entry[1] is not None and entry[1] == schema):
            try:
                _cache.move_to_end(key)
            except KeyError:  # evicted meanwhile by another thread
                pass
            if entry[0] is schema:
                _recent = (schema, entry[2], recent[0], recent[1])
            return entry[2]
    check = compile_schema(schema)
    if t is FrozenDict and _is_sealed(schema):
        _cache[key] = (schema, None, check)
        _recent = (schema, check, recent[0], recent[1])
    else:
        try:
            _cache[key] = (None, _shadow(schema, 0), check)
        except Undecided:
            _cache.pop(key, None)  # never leave a stale entry under this id
            return check
    while len(_cache) > CACHE_SIZE:
        try:
            _cache.popitem(last=False)
        except KeyError:  # pragma: no cover - emptied by another thread
            break
    return check


def clear_cache() -> None:
    """Forget every compiled validator (tests; long-lived processes never need it)."""
    global _recent
    _cache.clear()
    _recent = (None, None, None, None)
