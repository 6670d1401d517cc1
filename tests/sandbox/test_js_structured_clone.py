"""``structuredClone`` exists in the QuickJS guest, as in Node (programs use it)."""

from __future__ import annotations

from test_js_guest import drive


def test_structured_clone_copies_plain_data_deeply() -> None:
    outcome = drive(
        "const src = { a: [1, { b: 2 }], s: 'x' };\n"
        "const copy = structuredClone(src);\n"
        "copy.a[1].b = 3;\n"
        "return [src.a[1].b, copy.a[1].b, copy.s];"
    )
    assert outcome.value == [2, 3, "x"]


def test_structured_clone_keeps_cycles_dates_maps_and_sets() -> None:
    outcome = drive(
        "const o = { d: new Date(0), m: new Map([['k', 1]]), s: new Set([1, 2]) };\n"
        "o.self = o;\n"
        "const c = structuredClone(o);\n"
        "return [c.self === c, c !== o, c.d.toISOString(), c.m.get('k'), c.s.size,\n"
        "        c.d instanceof Date];"
    )
    assert outcome.value == [True, True, "1970-01-01T00:00:00.000Z", 1, 2, True]


def test_structured_clone_refuses_functions_like_node() -> None:
    outcome = drive(
        "try { structuredClone({ f: () => 1 }); return 'cloned'; }\n"
        "catch (e) { return [e.name, e.message.endsWith('could not be cloned.')]; }"
    )
    assert outcome.value == ["DataCloneError", True]
