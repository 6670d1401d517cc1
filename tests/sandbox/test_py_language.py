"""Python syntax models use that RestrictedPython refuses by default, run through the guards.

``match`` statements (class patterns read attributes: the names and the captured values
pass the attribute guard), ``try``/``except*`` with ``ExceptionGroup``, and namedtuple's
underscore-named public API.
"""

from __future__ import annotations

import sys

import pytest
from sandbox_helpers import Run, err, ok

from codemode.sandbox.python._objects import match_guard

pytestmark = pytest.mark.anyio


async def test_match_statements(run: Run) -> None:
    program = """
from dataclasses import dataclass
from collections import namedtuple

@dataclass
class Point:
    x: int
    y: int

Pair = namedtuple('Pair', 'left right')

class Color:
    RED = 'red'

def describe(value):
    match value:
        case {'op': 'add', 'args': [a, b]}:
            return f'add {a + b}'
        case {'op': op, **rest}:
            return f'op {op} {sorted(rest)}'
        case [first, *others] if len(others) > 1:
            return f'seq {first} +{len(others)}'
        case Point(0, 0):
            return 'origin'
        case Point(x=0, y=y):
            return f'y-axis {y}'
        case Point(x, y) if x == y:
            return f'diagonal {x}'
        case Point(x=px) as p:
            return f'point {px} {p.y}'
        case Pair(left, Pair(right=inner)):
            return f'nested {left} {inner}'
        case Color.RED:
            return 'red'
        case int(n) | float(n) if n < 0:
            return f'negative {n}'
        case str() as s:
            return f'text {s}'
        case None:
            return 'none'
        case _:
            return 'other'

cases = [{'op': 'add', 'args': [1, 2]}, {'op': 'neg', 'x': 1, 'y': 2}, [1, 2, 3], Point(0, 0),
         Point(0, 5), Point(3, 3), Point(1, 2), Pair(1, Pair(2, 3)), 'red', -2.5, 'hi', None, 7]
return [describe(c) for c in cases]
"""
    assert ok(await run(program)) == [
        "add 3", "op neg ['x', 'y']", "seq 1 +2", "origin", "y-axis 5", "diagonal 3",
        "point 1 2", "nested 1 3", "red", "negative -2.5", "text hi", "none", "other",
    ]  # fmt: skip


async def test_match_class_patterns_cannot_read_private_attributes(run: Run) -> None:
    # A dataclass field ``_secret`` lands in ``__match_args__``: a positional pattern
    # would read it without ``_getattr_``, so the case is refused (terminal).
    program = """
from dataclasses import dataclass
@dataclass
class Box:
    _secret: int
match Box(1):
    case Box(value):
        return value
"""
    message = err(await run(program), "forbidden")
    assert message.endswith(
        'AttributeError: "_secret" is an invalid attribute name because it starts with "_"'
    ), message


async def test_match_keyword_patterns_follow_the_attribute_rules(run: Run) -> None:
    program = "match 1:\n    case int(__class__=c):\n        return c"
    message = err(await run(program), "forbidden")
    assert '"__class__" is an invalid attribute name' in message


def test_match_guard_refuses_forbidden_captures() -> None:
    # Captured values are checked like ``_getattr_`` results (a module is never handed out).
    with pytest.raises(AttributeError, match="'module' objects are not accessible"):
        match_guard((), (1, sys))
    assert match_guard(((int, 1),), (1, "x")) is True


async def test_except_star_and_exception_groups(run: Run) -> None:
    program = """
out = []
try:
    raise ExceptionGroup('batch', [ValueError('v1'), TypeError('t1'), ValueError('v2')])
except* ValueError as group:
    out.append(['values', [str(e) for e in group.exceptions], group.message])
except* TypeError as group:
    out.append(['types', len(group.exceptions)])
try:
    try:
        raise ExceptionGroup('outer', [KeyError('k'), ValueError('v')])
    except* KeyError:
        out.append('keys handled')
except ExceptionGroup as rest:
    out.append(['rest', [type(e).__name__ for e in rest.exceptions]])
eg = ExceptionGroup('g', [ValueError(1), KeyError(2)])
match_, rest = eg.split(ValueError)
out.append([len(match_.exceptions), len(rest.exceptions)])
return out
"""
    assert ok(await run(program)) == [
        ["values", ["v1", "v2"], "batch"],
        ["types", 1],
        "keys handled",
        ["rest", ["ValueError"]],
        [1, 1],
    ]


async def test_except_star_handlers_keep_limits_terminal(run: Run) -> None:
    program = """
def deep(n):
    return deep(n + 1)
try:
    try:
        deep(0)
    except RecursionError as e:
        raise ExceptionGroup('wrapped', [e])
except* RecursionError:
    pass
return 'survived'
"""
    assert "RecursionError" in err(await run(program), "recursion")


async def test_namedtuple_public_api(run: Run) -> None:
    program = """
from collections import namedtuple
from typing import NamedTuple
P = namedtuple('P', 'x y', defaults=[0])
class Q(NamedTuple):
    a: int
    b: str = 'b'
p = P(1, 2)
q = Q(5)
return [p._asdict(), p._replace(x=9), P._fields, P._make([3, 4]), P._field_defaults,
        q._asdict(), Q._fields, q._replace(b='z')]
"""
    assert ok(await run(program)) == [
        {"x": 1, "y": 2}, [9, 2], ["x", "y"], [3, 4], {"y": 0},
        {"a": 5, "b": "b"}, ["a", "b"], [5, "z"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    "program",
    [
        "class T(tuple):\n    pass\nT()._asdict",
        "(1, 2)._fields",
        "import json\njson._make",
        "x = {}\nx._replace",
    ],
)
async def test_namedtuple_names_stay_private_elsewhere(run: Run, program: str) -> None:
    assert "is an invalid attribute name" in err(await run(program), "forbidden")
