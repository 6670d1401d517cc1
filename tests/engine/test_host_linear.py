"""Snapshot, freeze and validation cost memory linear in a value's size, whatever its depth.

Error paths are built lazily (only for the message of a failure), so doubling a value's
depth or width at most about doubles the peak traced memory of ``snapshot`` + validation,
on valid values and on values that fail at their deepest point. (Eager paths made a
200,000-deep argument cost the host gigabytes: each level's path string repeats every
level above it.)
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_scalars

from codemode.engine.json import LosslessJsonError, snapshot
from codemode.engine.schema._validate import validate_args, validate_json_schema_value

SLOW = settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
RATIO = 2.2

# The leaf at the bottom of a value: a lossless scalar, or -0.0 (a failure at the deepest
# point, whose path is the longest there is).
leaves = st.one_of(json_scalars(), st.just(-0.0))
keys = st.text(min_size=1, max_size=6)


def nest(depth: int, leaf: Any, key: str | None) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if key is None else {key: value}
    return value


def peak_bytes(value: Any) -> int:
    """Peak traced memory of snapshot (frozen and thawed) and validation of ``value``."""
    # A full collection empties CPython's free lists: otherwise the first few thousand
    # tuples and lists come from them untraced, and small sizes look cheaper than they are.
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for freeze in (True, False):
            try:
                snapshot(value, freeze=freeze)
            except LosslessJsonError:
                pass
        validate_json_schema_value({}, value)
        validate_args({"type": "object"}, {"v": value})
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@SLOW
@given(
    depth=st.integers(min_value=1_000, max_value=2_000),
    leaf=leaves,
    key=st.one_of(st.none(), keys),
)
def test_peak_memory_is_linear_in_depth(depth: int, leaf: Any, key: str | None) -> None:
    small = peak_bytes(nest(depth, leaf, key))
    large = peak_bytes(nest(2 * depth, leaf, key))
    assert large <= RATIO * small, (small, large)


@SLOW
@given(
    width=st.integers(min_value=1_000, max_value=4_000),
    item=st.one_of(leaves, st.builds(nest, st.integers(1, 4), leaves, st.one_of(st.none(), keys))),
    as_object=st.booleans(),
)
def test_peak_memory_is_linear_in_width(width: int, item: Any, as_object: bool) -> None:
    def wide(n: int) -> Any:
        items = [item] * n  # shared references are lossless (and copied by snapshot)
        if as_object:
            return {f"k{i}": v for i, v in enumerate(items)}
        return list(items)

    small = peak_bytes(wide(width))
    large = peak_bytes(wide(2 * width))
    assert large <= RATIO * small, (small, large)


@pytest.mark.parametrize("key", [None, "k"])
def test_deep_failures_still_name_the_full_path(key: str | None) -> None:
    value = nest(3_000, -0.0, key)
    step = "[0]" if key is None else ".k"
    with pytest.raises(LosslessJsonError) as info:
        snapshot(value)
    assert str(info.value) == "value" + step * 3_000 + ": -0.0 is not lossless JSON"
    (problem,) = validate_json_schema_value({}, value)
    assert problem == f'"value{step * 3_000}" must be a lossless JSON value'
