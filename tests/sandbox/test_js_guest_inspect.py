"""console rendering: the guest's inspect port against Node's own util.inspect.

Each case is a JavaScript expression evaluated in both engines; the guest logs it with
``console.log`` and Node renders it with ``util.inspect(value, {depth: 4,
maxArrayLength: 100, maxStringLength: 10000})`` (strings raw), as a Node worker's console
does. Errors get a frame-less ``stack`` so both engines print the same text.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from test_js_guest import drive

NODE = shutil.which("node")

CASES = [
    # primitives
    "1",
    "-0",
    "1.5",
    "1e21",
    "NaN",
    "-Infinity",
    "true",
    "null",
    "undefined",
    "10n",
    "Symbol('s')",
    "Symbol()",
    "'top-level string is raw'",
    # strings inside containers: quoting, escapes, long lines, truncation
    "['str']",
    '["it\'s"]',
    "['say \"hi\"']",
    '["both \' and \\""]',
    "['back`tick\\'and\"']",
    "['a\\nb\\tc\\u0001\\u007f\\u0085']",
    "['é😀']",
    "['\\ud800x']",
    "['x'.repeat(100)]",
    "['line1\\nline2\\n' + 'y'.repeat(80)]",
    "{ s: 'z'.repeat(10005) }",
    "{ text: 'line one\\nline two\\nline three and some more text to push it over the edge' }",
    # objects and keys
    "{}",
    "{ a: 1 }",
    "{ a: { b: { c: { d: { e: { f: 1 } } } } } }",
    "{ 'a-b': 1, valid_id: 2, '1x': 3, $d: 4, 'ü': 5 }",
    "Object.create(null)",
    "Object.assign(Object.create(null), { a: 1 })",
    "{ __proto__: null, x: 1 }",
    "new (class Foo { constructor() { this.x = 1 } })()",
    "new (class Empty {})()",
    "{ a: 'x'.repeat(30), b: 'y'.repeat(30), c: 'z'.repeat(30) }",
    "{ list: [1, 2, 3], nested: { deep: [4, 5, { six: 6 }] } }",
    "{ a: { b: { c: {} } }, d: [1, { e: [2, { f: 3 }] }] }",
    "{ description: 'a fairly long string value that goes on', other: 'another long value here', third: 3 }",
    "{ ['a'.repeat(50)]: 1, ['b'.repeat(50)]: 2 }",
    "{ 'key with spaces': 1, 'key-with-dashes': 2, key_underscore: 3, 'café': 4, '0': 5, '12': 6 }",
    "{ 'quote\\'key': 1, 'dq\"key': 2, 'nl\\nkey': 3 }",
    "{ [Symbol('k')]: 1, plain: 2 }",
    "{ get g() { return 1 }, set s(v) {}, get gs() { return 1 }, set gs(v) {} }",
    "Object.defineProperty({}, 'hidden', { value: 1, enumerable: false })",
    "Object.assign(Object.create({ inherited: 1 }), { own: 2 })",
    "{ a: 1, b: 'two', c: [3], d: { e: null, f: undefined }, g: true }",
    "{ undef: undefined, nul: null, emptyStr: '', zero: 0, negZero: -0, f: false }",
    "{ [Symbol.toStringTag]: 'Custom' }",
    "{ a: 1, [Symbol.toStringTag]: 'Tagged' }",
    "Object.assign(Object.create(null), { [Symbol('x')]: 1 })",
    "(function () { return arguments })(1, 2)",
    "new (class WithAccessors { get x() { return 1 } constructor() { this.y = 2 } })()",
    # arrays: grouping, limits, holes, extra keys
    "[]",
    "[1, 2, 3]",
    "Array.from({ length: 30 }, (_, i) => i)",
    "Array.from({ length: 120 }, (_, i) => i * 3)",
    "Array.from({ length: 26 }, (_, i) => String.fromCharCode(97 + i).repeat(i % 4 + 1))",
    "[1, , 3]",
    "new Array(5)",
    "Object.assign([1, 2], { extra: true })",
    "Array.from({ length: 8 }, (_, i) => ({ i }))",
    "[1.5, -2, 300, 4e10, -0, 6, 7]",
    "['a', 1, 'b', 2, 'c', 3, 'd', 4]",
    "Array.from({ length: 101 }, (_, i) => 'item' + i)",
    "{ long: Array.from({ length: 10 }, (_, i) => 'value-number-' + i) }",
    "[undefined, null]",
    "[-1, -22, 333, -4444, 55555, -666666, 7, 8, 9, 10, 11, 12]",
    "[{ name: 'alpha', value: 1 }, { name: 'beta', value: 2 }, { name: 'gamma', value: 3 }]",
    "[[[[[[1]]]]]]",
    "[[1, [2, [3, [4, [5, [6]]]]]]]",
    "{ a: [{ b: { c: { d: { e: 1 } } } }] }",
    "Array.from({ length: 7 }, (_, i) => 'x'.repeat(i))",
    "Array.from({ length: 27 }, (_, i) => ({ id: i }))",
    "Array.from({ length: 16 }, (_, i) => i % 2 ? 'odd' : i)",
    "[[], {}, [[]], [{}]]",
    "['short', 'a bit longer', 'x', 'the longest string of them all', 'y', 'z', 'w']",
    "Array(3).fill({ same: 'ref' })",
    "Object.assign(Object.create(Array.prototype), { 0: 'a', length: 1 })",
    # functions and classes
    "[function named() {}, () => {}, async function af() {}, function* gen() {}, async () => {}, async function* ag() {}]",
    "class A {}",
    "class B extends Array {}",
    "class extends null {}",
    "Math.max",
    "Object.assign(function withProps() {}, { p: 1 })",
    "Object.defineProperty(function f() {}, 'name', { value: '' })",
    "{ fn: function () {}, arrow: () => 1, method() {}, async am() {}, *gm() {} }",
    # collections, dates, regexps, boxed primitives, binary data, promises
    "new Map([['a', 1], [{ x: 1 }, [1, 2]]])",
    "new Set([1, 'a', {}])",
    "new Map()",
    "new Set()",
    "{ m: new Map([[1, new Set([2])]]) }",
    "new Map(Array.from({ length: 105 }, (_, i) => [i, i]))",
    "new Set(Array.from({ length: 103 }, (_, i) => i))",
    "new Map([['k'.repeat(40), 'v'.repeat(40)], ['k2', 'v2']])",
    "new Map([[null, undefined], [NaN, -0], ['nested', new Map([['deep', [1, 2]]])]])",
    "{ l1: { l2: { l3: { l4: { m: new Map([[1, 2]]), s: new Set([1]), a: [1], o: { x: 1 } } } } } }",
    "{ l1: { l2: { l3: { l4: { l5: new (class Foo { constructor() { this.x = 1 } })(), n: Object.create(null) } } } } }",
    "new Date(0)",
    "new Date(NaN)",
    "/ab+c/gi",
    "[new Date(86400000), /x/, null]",
    "{ date: new Date(1e12), re: /[a-z]+/u, big: 12345678901234567890n, neg: -5n }",
    "new Number(3)",
    "new String('ab')",
    "new Boolean(false)",
    "Object(1n)",
    "Object(Symbol('q'))",
    "new Uint8Array([1, 2, 3])",
    "new Float64Array(2)",
    "new Uint8Array(150)",
    "new Int16Array([-1, 2, -3])",
    "new BigInt64Array(2)",
    "new ArrayBuffer(4)",
    "new WeakMap()",
    "new WeakSet()",
    "new Promise(() => {})",
    "Symbol('with description')",
    "[Symbol.iterator, Symbol.for('registered')]",
    # circular and shared references
    "(() => { const o = { name: 'o' }; o.self = o; return o })()",
    "(() => { const a = [1]; a.push(a); return a })()",
    "(() => { const x = {}; const y = { x }; x.y = y; return [x, y] })()",
    "(() => { const shared = { s: 1 }; return { a: shared, b: shared } })()",
    "(() => { const m = new Map(); m.set('self', m); return m })()",
    "(() => { const s = new Set(); s.add(s); return s })()",
    # errors (frame-less, so both engines agree)
    "Object.assign(new Error('boom'), { stack: 'Error: boom' })",
    "Object.assign(new TypeError('bad'), { stack: 'TypeError: bad', code: 'E_BAD' })",
    "{ err: Object.assign(new RangeError('deep'), { stack: 'RangeError: deep' }) }",
    "Object.assign(new Error('outer', { cause: 'because' }), { stack: 'Error: outer' })",
    "[Object.assign(new Error('in array'), { stack: 'Error: in array' })]",
    "(() => { const e = new Error('renamed'); e.name = 'CustomName'; e.stack = 'CustomName: renamed'; return e })()",
    "(() => { class ValidationError extends Error {}; const e = new ValidationError('sub'); e.stack = 'Error: sub'; return e })()",
]

_NODE_SCRIPT = """
const util = require('util');
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const opts = { depth: 4, maxArrayLength: 100, maxStringLength: 10000 };
const out = cases.map((src) => {
  const value = (0, eval)('(' + src + ')');
  return typeof value === 'string' ? value : util.inspect(value, opts);
});
process.stdout.write(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def rendered() -> tuple[list[str], list[str]]:
    if NODE is None:
        pytest.skip("node is not on PATH; inspect parity is checked against Node's util.inspect")
    proc = subprocess.run(
        [NODE, "-e", _NODE_SCRIPT],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    expected: list[str] = json.loads(proc.stdout)
    outcome = drive("\n".join(f"console.log(({case}));" for case in CASES))
    return outcome.logs, expected


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[:40] for c in CASES])
def test_console_renders_like_node(rendered: tuple[list[str], list[str]], index: int) -> None:
    ours, node = rendered
    assert len(ours) == len(CASES)
    assert ours[index] == node[index]


def test_console_arguments_are_joined_raw_and_inspected() -> None:
    program = "console.log('point', {x: 1, y: 2}, 'done', 3, ['a'], 'x\\ny', null)"
    assert drive(program).logs == ["point { x: 1, y: 2 } done 3 [ 'a' ] x\ny null"]


def test_errors_render_with_program_frames() -> None:
    program = """
    function inner() { return new TypeError('bad input') }
    const e = inner();
    e.code = 'E_INPUT';
    console.log(e);
    console.log({ wrapped: e });
    """
    assert drive(program).logs == [
        "TypeError: bad input\n    at inner (<program>:2)\n    at <program>:3 {\n  code: 'E_INPUT'\n}",
        "{\n  wrapped: TypeError: bad input\n      at inner (<program>:2)\n      at <program>:3 {\n"
        "    code: 'E_INPUT'\n  }\n}",
    ]
