"""Lossless JSON (``codemode.engine.json``): snapshots, freezing, JS-compatible rendering."""

from __future__ import annotations

import copy
import enum
import math
import pickle
from collections import OrderedDict
from typing import Any

import pytest

from codemode.engine.json import (
    FrozenDict,
    FrozenList,
    LosslessJsonError,
    dumps_compact,
    dumps_pretty,
    is_lossless,
    js_number,
    snapshot,
    thaw,
)


class TestSnapshot:
    @pytest.mark.parametrize("value", [None, True, False, "", "é", 0, -7, 2**80, 1.5, -2.25, 1e300])
    def test_scalars_pass_through(self, value: Any) -> None:
        assert snapshot(value) == value
        assert type(snapshot(value)) is type(value)

    def test_containers_are_frozen_copies(self) -> None:
        source: dict[str, Any] = {"a": [1, {"b": None}], "c": "x"}
        frozen = snapshot(source)
        assert frozen == source
        assert isinstance(frozen, FrozenDict)
        assert isinstance(frozen["a"], FrozenList)
        assert isinstance(frozen["a"][1], FrozenDict)
        source["a"][1]["b"] = 1
        assert frozen["a"][1]["b"] is None
        # The caller's object is never frozen.
        source["new"] = 1

    def test_unfrozen_snapshot_is_plain(self) -> None:
        out = snapshot({"a": [1]}, freeze=False)
        assert type(out) is dict
        assert type(out["a"]) is list

    @pytest.mark.parametrize(
        "mutate",
        [
            lambda d: d.__setitem__("k", 1),
            lambda d: d.__delitem__("a"),
            lambda d: d.update(k=1),
            lambda d: d.pop("a"),
            lambda d: d.popitem(),
            lambda d: d.setdefault("k", 1),
            lambda d: d.clear(),
            lambda d: d.__ior__({"k": 1}),
            lambda d: d["a"].append(1),
            lambda d: d["a"].extend([1]),
            lambda d: d["a"].insert(0, 1),
            lambda d: d["a"].__setitem__(0, 2),
            lambda d: d["a"].__delitem__(0),
            lambda d: d["a"].pop(),
            lambda d: d["a"].remove(1),
            lambda d: d["a"].sort(),
            lambda d: d["a"].reverse(),
            lambda d: d["a"].clear(),
            lambda d: d["a"].__iadd__([1]),
            lambda d: d["a"].__imul__(2),
        ],
    )
    def test_frozen_containers_refuse_mutation(self, mutate: Any) -> None:
        frozen = snapshot({"a": [1]})
        with pytest.raises(TypeError, match="frozen"):
            mutate(frozen)
        assert frozen == {"a": [1]}

    def test_copies_of_frozen_values_are_mutable(self) -> None:
        frozen = snapshot({"a": [1]})
        assert type(copy.copy(frozen)) is dict
        deep = copy.deepcopy(frozen)
        deep["a"].append(2)
        assert type(pickle.loads(pickle.dumps(frozen))) is dict
        thawed = thaw(frozen)
        thawed["a"].append(2)
        assert thawed == {"a": [1, 2]}
        assert frozen == {"a": [1]}

    def test_shared_references_are_allowed_and_copied(self) -> None:
        shared = [1, 2]
        frozen = snapshot({"a": shared, "b": shared})
        assert frozen == {"a": [1, 2], "b": [1, 2]}
        assert frozen["a"] is not shared

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            (math.nan, "value: nan is not a finite JSON number"),
            ([math.inf], "value[0]: inf is not a finite JSON number"),
            ({"a": -math.inf}, "value.a: -inf is not a finite JSON number"),
            ({"a": [-0.0]}, "value.a[0]: -0.0 is not lossless JSON"),
            ({"a": (1,)}, "value.a: tuple is not a JSON value"),
            ([{1, 2}], "value[0]: set is not a JSON value"),
            (b"x", "value: bytes is not a JSON value"),
            ({1: "x"}, "value: key 1 is not a string"),
            ({"a": OrderedDict()}, "value.a: OrderedDict is not a JSON value"),
            ([10**400], "value[0]: integer too large for a finite JSON number"),
        ],
    )
    def test_lossy_values_name_the_path(self, value: Any, message: str) -> None:
        with pytest.raises(LosslessJsonError) as info:
            snapshot(value)
        assert str(info.value) == message
        assert not is_lossless(value)

    def test_cycles(self) -> None:
        cyc: dict[str, Any] = {"a": []}
        cyc["a"].append(cyc)
        with pytest.raises(LosslessJsonError, match=r"^args\.a\[0\]: cycle detected$"):
            snapshot(cyc, label="args")

    def test_int_subclasses_are_normalised(self) -> None:
        class Level(enum.IntEnum):
            HIGH = 3

        out = snapshot({"level": Level.HIGH})
        assert type(out["level"]) is int
        assert out["level"] == 3

    def test_five_thousand_deep(self) -> None:
        value: Any = "leaf"
        for _ in range(5000):
            value = {"k": [value]}
        frozen = snapshot(value)
        assert is_lossless(value)
        assert dumps_compact(frozen) == dumps_compact(value)
        assert dumps_compact(frozen).count("[") == 5000


class TestJsNumber:
    """``String(n)`` in JavaScript."""

    @pytest.mark.parametrize(
        ("value", "text"),
        [
            (0, "0"),
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-3.0, "-3"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (-1.5e-7, "-1.5e-7"),
            (123.456, "123.456"),
            (1e20, "100000000000000000000"),
            (1.2345678901234568e20, "123456789012345680000"),
            (1e21, "1e+21"),
            (10**21, "1e+21"),
            (2**70, "1.1805916207174113e+21"),
            (10**20, "100000000000000000000"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (math.nan, "NaN"),
            (math.inf, "Infinity"),
            (-math.inf, "-Infinity"),
            (10**400, "Infinity"),
            (True, "true"),
        ],
    )
    def test_rendering(self, value: float, text: str) -> None:
        assert js_number(value) == text


class TestDumps:
    def test_compact(self) -> None:
        value = {"b": [1, 2.5, None, True, "x"], "a": {}, "c": []}
        assert dumps_compact(value) == '{"b":[1,2.5,null,true,"x"],"a":{},"c":[]}'

    def test_strings_like_json_stringify(self) -> None:
        assert dumps_compact('é\u2028\x00\x1f"\\\n\x7f') == '"é\u2028\\u0000\\u001f\\"\\\\\\n\x7f"'

    def test_lone_surrogates_are_escaped_and_pairs_joined(self) -> None:
        # Well-formed JSON.stringify: the output always encodes as UTF-8.
        text = dumps_compact(["\ud800", "a\udfffb", "\ud83d\ude00"])
        assert text == '["\\ud800","a\\udfffb","😀"]'
        text.encode("utf-8")

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ([math.nan], "nan is not a finite JSON number"),
            ({"a": math.inf}, "inf is not a finite JSON number"),
            ([10**400], "integer too large for a finite JSON number"),
            ({1: 2}, "key 1 is not a string"),
            ([(1, 2)], "tuple is not a JSON value"),
        ],
    )
    def test_refuses_values_json_cannot_carry(self, value: Any, message: str) -> None:
        with pytest.raises(LosslessJsonError, match=f"^{message}$"):
            dumps_compact(value)

    def test_cycles_raise_instead_of_looping(self) -> None:
        cyc: list[Any] = []
        cyc.append(cyc)
        with pytest.raises(LosslessJsonError, match="cycle detected"):
            dumps_compact(cyc)
        shared = [1]
        assert dumps_compact([shared, shared]) == "[[1],[1]]"

    def test_pretty(self) -> None:
        assert dumps_pretty({"a": [1, {"b": []}], "c": {}}) == (
            '{\n  "a": [\n    1,\n    {\n      "b": []\n    }\n  ],\n  "c": {}\n}'
        )
        assert dumps_pretty([1], indent=4) == "[\n    1\n]"
        assert dumps_pretty("x") == '"x"'

    def test_pretty_depth_limit(self) -> None:
        # Reference run_code rendering: 2-space indent, at most 10 characters of indent,
        # so containers at depth >= 5 render compact.
        value = {"a": {"b": {"c": {"d": {"e": {"f": [1, 2]}}}}}}
        assert dumps_pretty(value, 2, 10) == (
            '{\n  "a": {\n    "b": {\n      "c": {\n        "d": {\n'
            '          "e": {"f":[1,2]}\n        }\n      }\n    }\n  }\n}'
        )
