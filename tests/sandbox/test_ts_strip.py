"""Type stripping: each erasable construct, each refusal, positions, ASI and a Node corpus."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from codemode.sandbox.typescript._strip import TypeStripError, strip_types

CORPUS = pathlib.Path(__file__).parent / "ts_corpus"
NODE = shutil.which("node")

# (source, expected) — every erased character becomes a space (or a `;` for ASI).
ERASED = [
    pytest.param(
        "interface A { x: number }\nf()", "                         \nf()", id="interface"
    ),
    pytest.param("type B<T> = T[];\nf()", "                \nf()", id="type-alias"),
    pytest.param("let x: number = 1", "let x         = 1", id="var-annotation"),
    pytest.param(
        "function f(a: string, b?: number): void {}",
        "function f(a        , b         )       {}",
        id="param-and-return",
    ),
    pytest.param("const g = f<string>(1)", "const g = f        (1)", id="call-type-args"),
    pytest.param("new Map<string, number>()", "new Map                ()", id="new-type-args"),
    pytest.param("const h = f<number>;", "const h = f        ;", id="instantiation"),
    pytest.param(
        "const id = <T,>(v: T): T => v", "const id =     (v   )    => v", id="arrow-generic"
    ),
    pytest.param(
        "function f<T extends object>(v: T) {}",
        "function f                  (v   ) {}",
        id="fn-generic",
    ),
    pytest.param("let y = x as any", "let y = x       ", id="as"),
    pytest.param("let y = x as unknown as T", "let y = x" + " " * 16, id="double-as"),
    pytest.param("let t = [1] as const", "let t = [1]         ", id="as-const"),
    pytest.param("let y = x satisfies T", "let y = x            ", id="satisfies"),
    pytest.param("let y = <any>x", "let y =      x", id="angle-assertion"),
    pytest.param("a!.b![0]!()", "a .b [0] ()", id="non-null"),
    pytest.param("let d!: number", "let d         ", id="definite"),
    pytest.param(
        "class C { private readonly a?: number; c!: number }",
        "class C {                  a         ; c          }",
        id="field-modifiers",
    ),
    pytest.param(
        "class C { declare b: string; x = 1 }",
        "class C {                  ; x = 1 }",
        id="declare-field",
    ),
    pytest.param(
        "class C { protected static s = 1; public m(): void {} }",
        "class C {           static s = 1;        m()       {} }",
        id="access-modifiers",
    ),
    pytest.param(
        "class C { override m(): void {} o?(): void {} }",
        "class C {          m()       {} o ()       {} }",
        id="override-and-optional-method",
    ),
    pytest.param(
        "class C<T> extends D<T> implements E, F {}",
        "class C    extends D                    {}",
        id="class-generics-implements",
    ),
    pytest.param(
        "abstract class A { abstract m(): void; abstract x: number; y = 1 }",
        "         class A {                   ;                   ; y = 1 }",
        id="abstract",
    ),
    pytest.param(
        "class C { m(a: number): void; m(a: any) {} }",
        "class C {                   ; m(a     ) {} }",
        id="method-overload",
    ),
    pytest.param(
        "class C { [k: string]: any; }", "class C {                 ; }", id="index-signature"
    ),
    pytest.param(
        "function f(a: number): string;\nfunction f(a: any) { return a }",
        "                              \nfunction f(a     ) { return a }",
        id="overload-signature",
    ),
    pytest.param(
        "function f(this: Window, a: number) {}",
        "function f(              a        ) {}",
        id="this-param",
    ),
    pytest.param(
        "function f(this: Window) {}", "function f(            ) {}", id="this-param-only"
    ),
    pytest.param(
        "function isS(x: unknown): x is string { return true }",
        "function isS(x         )              { return true }",
        id="type-predicate",
    ),
    pytest.param(
        "function a(x: unknown): asserts x is string {}",
        "function a(x         )                      {}",
        id="asserts",
    ),
    pytest.param(
        "declare const dd: number;\nf()", "                         \nf()", id="declare-const"
    ),
    pytest.param(
        "declare global { interface W {} }",
        "                                 ",
        id="declare-global",
    ),
    pytest.param("import type { X } from 'y';", "                           ", id="import-type"),
    pytest.param("import { type X, type Y } from 'y';", " " * 35, id="type-only-specifiers"),
    pytest.param("export type { Y };", "                  ", id="export-type"),
    pytest.param("export interface I {}", "                     ", id="export-interface"),
    pytest.param("namespace N { export type X = 1 }", " " * 33, id="type-only-namespace"),
    pytest.param(
        "try {} catch (e: unknown) {}", "try {} catch (e         ) {}", id="catch-annotation"
    ),
    pytest.param(
        "for (const k of ks as string[]) {}", "for (const k of ks            ) {}", id="for-of-as"
    ),
    pytest.param(
        "const o = { m<T>(v: T): T { return v } }",
        "const o = { m   (v   )    { return v } }",
        id="object-method",
    ),
    pytest.param("let s: 'é€😀' = 'é€😀'", "let s        = 'é€😀'", id="non-ascii"),
    pytest.param(
        "let m: {\n  a: number\n} = {a: 1}", "let m   \n           \n  = {a: 1}", id="multiline"
    ),
]

REFUSED = [
    pytest.param(
        "export enum E { A }",
        "an export declaration is not supported (line 1): a program is the body of an async "
        "function — use return or console.log",
        1,
        1,
        id="export-enum",
    ),
    pytest.param(
        "namespace N { export const x = 1 }",
        "namespace is not supported (line 1): TypeScript namespaces with values are not erasable — use a plain object",
        1,
        1,
        id="namespace",
    ),
    pytest.param(
        "module M { const y = 1 }",
        "namespace is not supported (line 1): TypeScript namespaces with values are not erasable — use a plain object",
        1,
        1,
        id="module",
    ),
    pytest.param(
        "class K extends B {\n  constructor(private x: number) { if (x) super() }\n}",
        "a parameter property is not supported (line 2): in a derived class the constructor "
        "must call super(...) as a statement of its own before the parameter properties can "
        "be assigned",
        2,
        15,
        id="parameter-property-nested-super",
    ),
    pytest.param(
        "class K { m(private x: number) {} }", None, 1, 13, id="parameter-property-not-ctor"
    ),
    pytest.param(
        "import x = require('y')",
        "import = require() is not supported (line 1): use the tools object instead of modules",
        1,
        1,
        id="import-require",
    ),
    pytest.param(
        "export = 1",
        "export = is not supported (line 1): a program is the body of an async function",
        1,
        1,
        id="export-assign",
    ),
    pytest.param(
        "@dec class W {}",
        "a decorator is not supported (line 1): decorators are not available — call the function directly",
        1,
        1,
        id="decorator",
    ),
    pytest.param(
        "import x from 'y'",
        "an import declaration is not supported (line 1): a program is the body of an async function and cannot import modules",
        1,
        1,
        id="import",
    ),
    pytest.param(
        "export const z = 1",
        "an export declaration is not supported (line 1): a program is the body of an async function — use return or console.log",
        1,
        1,
        id="export",
    ),
    pytest.param("let x = ;", 'SyntaxError: unexpected "=" (line 1, column 7)', 1, 7, id="syntax"),
    pytest.param(
        "let a = 1\nlet b = (1",
        "SyntaxError: unexpected end of input (line 2, column 1)",
        2,
        1,
        id="unclosed",
    ),
    pytest.param(
        "if (x) {\n  y()\n", 'SyntaxError: missing "}" (line 3, column 1)', 3, 1, id="missing-brace"
    ),
    pytest.param(
        "f()\n}\ng()\n{",
        'SyntaxError: unexpected "}" (line 2, column 1)',
        2,
        1,
        id="wrapper-escape",
    ),
]


@pytest.mark.parametrize(("source", "expected"), ERASED)
def test_erases_type_only_syntax(source: str, expected: str) -> None:
    assert strip_types(source) == expected


@pytest.mark.parametrize(("source", "message", "line", "column"), REFUSED)
def test_refuses_non_erasable_syntax(
    source: str, message: str | None, line: int, column: int
) -> None:
    with pytest.raises(TypeStripError) as caught:
        strip_types(source)
    if message is not None:
        assert caught.value.message == message
        assert str(caught.value) == message
    assert (caught.value.line, caught.value.column) == (line, column)


ASI = [
    pytest.param(
        "let a = b\ntype X = number\n(c)", "let a = b\n;              \n(c)", id="type-then-paren"
    ),
    pytest.param(
        "let a = b\ninterface I {}\n[1].map(f)",
        "let a = b\n;             \n[1].map(f)",
        id="interface-then-bracket",
    ),
    pytest.param(
        "let a = b\ninterface I {}\n`t`",
        "let a = b\n;             \n`t`",
        id="interface-then-template",
    ),
    pytest.param("let a = b as T\n(c)", "let a = b ;   \n(c)", id="as-then-paren"),
    pytest.param(
        "x = y satisfies Z\n[1].map(f)",
        "x = y ;          \n[1].map(f)",
        id="satisfies-then-bracket",
    ),
    pytest.param("x = y as A | B\n[1]", "x = y ;       \n[1]", id="union-then-bracket"),
    pytest.param("let a: T\n(c)", "let a;  \n(c)", id="annotation-then-paren"),
    pytest.param(
        'class C {\n  declare x: number\n  ["k"]() {}\n}',
        'class C {\n  ;                \n  ["k"]() {}\n}',
        id="declare-field-then-computed",
    ),
    pytest.param(
        "class C {\n  x: number\n  [k]() {}\n}",
        "class C {\n  x;       \n  [k]() {}\n}",
        id="field-then-computed",
    ),
    # No `;` where nothing could join, or where TypeScript itself continues the line.
    pytest.param(
        "let a = b\ntype X = number\nf()", "let a = b\n               \nf()", id="no-hazard"
    ),
    pytest.param("let u = v!\n(w)", "let u = v \n(w)", id="non-null-call-continues"),
    pytest.param("f<T>\n(x)", "f   \n(x)", id="type-args-call-continues"),
    pytest.param("let a = (b as T)\n(c)", "let a = (b     )\n(c)", id="parenthesized"),
]


@pytest.mark.parametrize(("source", "expected"), ASI)
def test_guards_asi_hazards(source: str, expected: str) -> None:
    assert strip_types(source) == expected


def _assert_positions_kept(source: str, out: str) -> None:
    assert len(out) == len(source)
    for i, (before, after) in enumerate(zip(source, out, strict=True)):
        if before in "\n\r\u2028\u2029":
            assert after == before, i
        elif after != before:
            assert after in " ;", (i, before, after)
    assert len(out.splitlines()) == len(source.splitlines())


CORPUS_FILES = sorted(CORPUS.glob("*.ts"))


# Corpus files with transformed constructs: text is inserted, so only lines are kept.
TRANSFORMED_CORPUS = {"enums_and_parameter_properties"}


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_positions_are_preserved(path: pathlib.Path) -> None:
    source = path.read_text()
    out = strip_types(source)
    if path.stem not in TRANSFORMED_CORPUS:
        _assert_positions_kept(source, out)
        return
    assert out.count("\n") == source.count("\n")
    for before, after in zip(source.split("\n"), out.split("\n"), strict=True):
        if not any(word in before for word in ("enum", "constructor(", "super(", "}")):
            assert after.rstrip() == before.rstrip() or not after.strip(), (before, after)


@pytest.mark.parametrize(("source", "expected"), [*ERASED, *ASI])
def test_unit_cases_preserve_positions(source: str, expected: str) -> None:
    _assert_positions_kept(source, strip_types(source))


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_stripping_is_idempotent(path: pathlib.Path) -> None:
    once = strip_types(path.read_text())
    assert strip_types(once) == once


def test_keeps_crlf_and_unicode_line_separators() -> None:
    source = "let a: {\r\n  b: number\u2028} = x\r\nf()"
    out = strip_types(source)
    assert out == "let a   \r\n           \u2028  = x\r\nf()"


_HARNESS_HEAD = """\
const tools = new Proxy({}, { get: (_, name) => async (args) => name === "read_file"
  ? { text: `contents of ${args.path}\\nline 2` } : { tool: name, args } });
(async function __program__() {
"""
_HARNESS_TAIL = """
})().then((v) => { if (v !== undefined) console.log("return:", JSON.stringify(v)); },
  (e) => { console.log("threw:", e && e.message); });
"""


@pytest.mark.skipif(NODE is None, reason="node is not on PATH; the corpus runs under Node")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_runs_identically_under_node(path: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # The expected outputs were produced once with TypeScript's own transpiler (tsc 5.9,
    # ES2022, useDefineForClassFields) and checked by hand; Node 20 cannot strip types.
    # enums_and_parameter_properties.out was written by hand from TypeScript's semantics
    # (numeric reverse mapping, integer keys first, assignments after `super`).
    script = tmp_path / f"{path.stem}.js"
    script.write_text(_HARNESS_HEAD + strip_types(path.read_text()) + _HARNESS_TAIL)
    assert NODE is not None
    proc = subprocess.run(
        [NODE, str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.stderr == ""
    assert proc.stdout == path.with_suffix(".out").read_text()


# Transformed constructs: the output is plain JavaScript, every line keeps its number
# (what runs is checked in QuickJS in test_ts_runtime.py).
TRANSFORMED = [
    pytest.param(
        "class P {\n  constructor(private readonly x: number, public y = 2) {}\n}",
        "class P {\n  constructor(                 x        ,        y = 2) {"
        "this.x = x;this.y = y;}\n}",
        id="parameter-properties",
    ),
    pytest.param(
        "class Q extends P {\n  constructor(protected z: string) {\n    super(1)\n  }\n}",
        "class Q extends P {\n  constructor(          z        ) {\n    super(1);this.z = z;\n  }\n}",
        id="parameter-property-after-super",
    ),
    pytest.param(
        "enum E {\n  A,\n  B = 5,\n}",
        "const E = (() => {const E = {}; let __enum_last = -1; const __enum_set = (k, v) => "
        '(__enum_last = v, E[k] = v, typeof v === "number" && (E[v] = k), v);        \n'
        '  const A = __enum_set("A", __enum_last + 1);  \n'
        '  const B = __enum_set("B",     5); \nreturn E; })(); ',
        id="enum",
    ),
]


@pytest.mark.parametrize(("source", "expected"), TRANSFORMED)
def test_transforms_parameter_properties_and_enums(source: str, expected: str) -> None:
    out = strip_types(source)
    assert out == expected
    assert out.count("\n") == source.count("\n")
    assert strip_types(out) == out  # plain JavaScript: nothing left to strip


def test_transformed_code_keeps_later_lines_in_place() -> None:
    source = (
        "const enum Dir { Up = 1,\n  Down }\nclass C { constructor(public a: T) {} }\nf(x as T)"
    )
    lines = strip_types(source).split("\n")
    assert len(lines) == 4
    assert lines[3] == "f(x     )"
