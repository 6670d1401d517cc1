"""TypeScript type stripping: erase type-only syntax in place, keeping every position.

``strip_types(source)`` parses a program (the BODY of an async function, so top-level
``await`` and ``return`` work) with tree-sitter's TypeScript grammar and replaces every
type-only range with spaces. Line terminators inside erased ranges are kept, so every
character that survives stays at its line and column: ``len(out) == len(source)`` and
``out[i]`` is either ``source[i]``, a space, or a ``;`` inserted into an erased range
(the two transformed constructs below are the exception: they insert text).

Erased: interfaces, type aliases, annotations (parameters, returns, variables, fields,
``this`` parameters), type parameters and arguments (``<T,>`` arrows included),
``as``/``satisfies``, non-null ``!``, optional ``?``, definite ``!:``, the modifiers
``readonly``/``declare``/``abstract``/``override``/``public``/``private``/``protected``,
``implements`` clauses, overload signatures, abstract members, index signatures,
``declare`` statements, ``import type``/``export type``, type-only import/export
specifiers and namespaces that hold only types.

Transformed, because models write them and TypeScript emits plain JavaScript for them:

- constructor parameter properties (``constructor(private readonly x: number)``): the
  modifiers are erased and ``this.x = x;`` is inserted right after the body's ``{`` (in a
  derived class, right after the root-level ``super(...)`` statement, as ``tsc`` emits);
- ``enum`` and ``const enum``: the declaration becomes
  ``const E = (() => {const E = {}, ...; return E; })();`` with one
  ``const Member = <set>("Member", value);`` per member, written where the member was
  (numeric members get TypeScript's reverse mapping, members without an initializer
  count on from the previous one, initializers may name earlier members).

Inserted text never holds a line break and sits on the line of the construct it
replaces, so every line keeps its number; columns after an insertion shift on that line
only. Without enums or parameter properties the output is exactly as long as the source.

Not erasable (``TypeStripError`` naming the construct and line): namespaces with values,
``import x = require()`` and ``export =``, decorators (QuickJS has none), parameter
properties in a derived class whose ``super(...)`` call is not a root-level statement,
and value ``import``/``export`` declarations (a function body cannot hold them). Syntax
errors report the first error.

ASI: blanking a construct that ends a statement can let the next line join it
(``let a = b as T`` followed by a line starting with ``(``). When an erased range ends a
statement and the next significant character could continue an expression, a ``;`` is
written into the first column of the erased range.
"""

from __future__ import annotations

import bisect
import functools
import threading

import tree_sitter
import tree_sitter_typescript

__all__ = ["TypeStripError", "strip_types"]

# The program is parsed as the body of this wrapper so `return`/`await` parse; the
# wrapper adds exactly one line, which error positions subtract.
_PREFIX = b"async function __program__() {\n"
_SUFFIX = b"\n}"

_QUERY_SOURCE = """
[
  (type_annotation) (asserts_annotation) (type_predicate_annotation)
  (omitting_type_annotation) (adding_type_annotation) (opting_type_annotation)
  (type_parameters) (type_arguments) (implements_clause)
] @erase
[
  (interface_declaration) (type_alias_declaration) (function_signature)
  (ambient_declaration) (method_signature) (abstract_method_signature) (index_signature)
] @statement
[(as_expression) (satisfies_expression)] @cast
(non_null_expression) @non_null
[(required_parameter) (optional_parameter)] @param
(public_field_definition) @field
(method_definition) @method
(abstract_class_declaration) @abstract_class
(variable_declarator "!" @definite)
(enum_declaration) @enum
[(internal_module) (module)] @namespace
(import_statement) @import
(export_statement) @export
(decorator) @decorator
"""

# Nodes at whose end a statement (or class member) ends; a range ending one is an ASI
# candidate.
_STATEMENT_TYPES = frozenset(
    """
    expression_statement lexical_declaration variable_declaration return_statement
    throw_statement break_statement continue_statement do_statement public_field_definition
    export_statement import_statement interface_declaration type_alias_declaration
    function_signature ambient_declaration method_signature abstract_method_signature
    index_signature module internal_module
    """.split()
)
# Characters that can continue the previous line's expression or class member.
_HAZARDS = frozenset(b"([`+-/*,.?=<>%&|^")
_TYPE_ONLY_DECLS = frozenset(
    {"interface_declaration", "type_alias_declaration", "ambient_declaration", "function_signature"}
)
_MODIFIERS = frozenset({"accessibility_modifier", "override_modifier", "readonly"})
_LINE_TERMINATORS = frozenset("\n\r\u2028\u2029")
# Blanking table for ASCII ranges: every byte but CR/LF becomes a space.
_BLANK_ASCII = bytes(b if b in b"\r\n" else 0x20 for b in range(256))
# Erased nodes that can end a statement, by their parent's type (`let x: T`, `x!: T`,
# `const g = f<T>`); annotations elsewhere sit inside parameter lists or before bodies.
_TAIL_PARENTS = frozenset(
    {"variable_declarator", "public_field_definition", "instantiation_expression"}
)


class TypeStripError(Exception):
    """Non-erasable TypeScript or a syntax error, at the program's own 1-based line/column."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@functools.cache
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_typescript.language_typescript())


@functools.cache
def _query() -> tree_sitter.Query:
    return tree_sitter.Query(_language(), _QUERY_SOURCE)


# Parsers hold mutable state, so each thread gets its own (creating one is cheap, but
# caching keeps the per-call cost at the parse itself).
_local = threading.local()


def _parser() -> tree_sitter.Parser:
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = tree_sitter.Parser(_language())
    return parser


def strip_types(source: str) -> str:
    """Return ``source`` with type-only syntax blanked; raise ``TypeStripError`` otherwise."""
    return _Stripper(source).run()


# Names the enum transform introduces inside its arrow function; a member named like one
# of them would be shadowed by it, which no real program does.
_ENUM_SET = "__enum_set"
_ENUM_LAST = "__enum_last"


class _Stripper:
    __slots__ = ("_asi", "_ends", "_inserts", "_src", "_starts")

    def __init__(self, source: str) -> None:
        self._src = _PREFIX + source.encode("utf-8", "surrogatepass") + _SUFFIX
        # Erased ranges, kept sorted by start so containment checks are a bisect.
        self._starts: list[int] = []
        self._ends: list[int] = []
        # Start of an erased range -> the node whose end may end a statement (ASI check),
        # or None when TypeScript certainly ends the statement there.
        self._asi: dict[int, tree_sitter.Node | None] = {}
        # Text written before the source byte at an offset (transformed constructs), in
        # the order it was added.
        self._inserts: dict[int, list[bytes]] = {}

    # -- driver ---------------------------------------------------------------------

    def run(self) -> str:
        tree = _parser().parse(self._src)
        root = tree.root_node
        error = self._first_error(root) if root.has_error else None
        self._check_structure(root, error)
        if error is not None:
            self._raise_syntax_error(error)
        captures = tree_sitter.QueryCursor(_query()).captures(root)
        found = [
            (node.start_byte, -node.end_byte, node, getattr(self, "_on_" + name))
            for name, nodes in captures.items()
            for node in nodes
        ]
        found.sort(key=lambda item: (item[0], item[1]))
        for start, _, node, handler in found:
            if not self._covered(start):
                handler(node)
        return self._render()

    def _check_structure(self, root: tree_sitter.Node, error: tree_sitter.Node | None) -> None:
        # A stray `}` can close the wrapper early and leave the rest of the program at
        # top level, which tree-sitter parses without complaint.
        fn = root.named_children[0] if root.named_child_count else None
        if fn is not None and fn.type != "function_declaration":
            fn = None
        body = fn.child_by_field_name("body") if fn is not None else None
        if error is not None and (body is None or error.start_byte < body.end_byte):
            return  # the syntax error comes first
        if body is None or root.named_child_count != 1 or body.end_byte != len(self._src):
            at = body.end_byte - 1 if body is not None else len(_PREFIX)
            line, column = self._position(at)
            raise TypeStripError(
                f'SyntaxError: unexpected "}}" (line {line}, column {column})', line, column
            )

    @staticmethod
    def _first_error(root: tree_sitter.Node) -> tree_sitter.Node:
        node = root
        while not node.is_error and not node.is_missing:  # first error in document order
            child = next((c for c in node.children if c.has_error or c.is_missing), None)
            if child is None:
                break
            node = child
        return node

    def _raise_syntax_error(self, node: tree_sitter.Node) -> None:
        leaf = node
        while leaf.child_count and not node.is_missing:
            leaf = leaf.children[0]
        line, column = self._position(leaf.start_byte)
        if node.is_missing:
            what = f'missing "{node.type}"'
        elif not self._src[node.end_byte : len(self._src) - len(_SUFFIX)].strip():
            # The error runs to the end: something opened at `leaf` is never closed.
            what = "unexpected end of input"
        else:
            token = self._src[leaf.start_byte : leaf.end_byte].decode("utf-8", "replace")
            what = f'unexpected "{token[:20]}"'
        raise TypeStripError(f"SyntaxError: {what} (line {line}, column {column})", line, column)

    # -- positions and ranges -------------------------------------------------------

    def _position(self, offset: int) -> tuple[int, int]:
        """Map a byte offset in the wrapped source to the program's 1-based line/column."""
        offset = max(len(_PREFIX), min(offset, len(self._src) - len(_SUFFIX)))
        line_start = self._src.rfind(b"\n", 0, offset) + 1
        line = self._src.count(b"\n", len(_PREFIX), line_start) + 1
        column = len(self._src[line_start:offset].decode("utf-8", "replace")) + 1
        return line, column

    def _fail(self, node: tree_sitter.Node, construct: str, advice: str) -> None:
        line, column = self._position(node.start_byte)
        raise TypeStripError(f"{construct} is not supported (line {line}): {advice}", line, column)

    def _covered(self, offset: int) -> bool:
        i = bisect.bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self._ends[i]

    def _erase(
        self,
        start: int,
        end: int,
        owner: tree_sitter.Node | None = None,
        *,
        statement_end: bool = False,
    ) -> None:
        """Blank ``[start, end)``.

        ``owner`` ending a statement makes the range an ASI candidate; ``statement_end``
        says TypeScript ends the statement at ``end`` whatever tree-sitter thinks.
        """
        i = bisect.bisect_left(self._starts, start)
        self._starts.insert(i, start)
        self._ends.insert(i, end)
        if statement_end:
            self._asi[start] = None
        elif owner is not None:
            self._asi[start] = owner

    def _erase_node(self, node: tree_sitter.Node, asi: bool = False) -> None:
        self._erase(node.start_byte, node.end_byte, node if asi else None)

    @staticmethod
    def _ends_statement(node: tree_sitter.Node, end: int) -> bool:
        current: tree_sitter.Node | None = node
        while current is not None and current.end_byte == end:
            if current.type in _STATEMENT_TYPES:
                return True
            current = current.parent
        return False

    def _next_significant(self, offset: int) -> int:
        """The first byte after ``offset`` that is not blank, a comment or erased (-1 at end)."""
        src, n = self._src, len(self._src)
        while offset < n:
            i = bisect.bisect_right(self._starts, offset) - 1
            if i >= 0 and offset < self._ends[i]:
                offset = self._ends[i]
            elif src[offset] in b" \t\r\n\f\v":
                offset += 1
            elif src.startswith(b"//", offset):
                newline = src.find(b"\n", offset)
                offset = n if newline < 0 else newline
            elif src.startswith(b"/*", offset):
                close = src.find(b"*/", offset + 2)
                offset = n if close < 0 else close + 2
            else:
                return src[offset]
        return -1

    def _insert(self, offset: int, text: str) -> None:
        """Write ``text`` (no line breaks) before the source byte at ``offset``."""
        self._inserts.setdefault(offset, []).append(text.encode("utf-8", "surrogatepass"))

    def _copy(
        self, pieces: list[bytes], start: int, end: int, blank: bool, offsets: list[int]
    ) -> None:
        """Append ``src[start:end]`` (blanked when ``blank``), splicing insertions in.

        ``offsets`` are the insertion offsets, sorted (a bisect keeps this linear).
        """
        low = bisect.bisect_left(offsets, start)
        high = bisect.bisect_left(offsets, end, low)
        for cut in [*offsets[low:high], end]:
            if cut > start:
                chunk = self._src[start:cut]
                pieces.append(self._blank(chunk) if blank else chunk)
            if cut < end:
                pieces.extend(self._inserts[cut])
            start = cut

    @staticmethod
    def _blank(chunk: bytes) -> bytes:
        if chunk.isascii():
            return chunk.translate(_BLANK_ASCII)
        # One space per character, so columns after it do not move.
        text = chunk.decode("utf-8", "surrogatepass")
        return "".join(c if c in _LINE_TERMINATORS else " " for c in text).encode()

    def _render(self) -> str:
        src = self._src
        pieces: list[bytes] = []
        offsets = sorted(self._inserts)
        last = len(_PREFIX)
        for start, end in zip(self._starts, self._ends, strict=True):
            if end <= last:  # nested inside a range already blanked
                continue
            start = max(start, last)
            self._copy(pieces, last, start, False, offsets)
            semicolon = False
            if start in self._asi and self._next_significant(end) in _HAZARDS:
                owner = self._asi[start]
                semicolon = owner is None or self._ends_statement(owner, end)
            if semicolon:
                # Text inserted at `start` comes first; the `;` takes the first blanked column.
                pieces.extend(self._inserts.pop(start, ()))
                blanked: list[bytes] = []
                self._copy(blanked, start, end, True, offsets)
                if blanked:
                    blanked[0] = b";" + blanked[0][1:]
                pieces.extend(blanked)
            else:
                self._copy(pieces, start, end, True, offsets)
            last = end
        self._copy(pieces, last, len(src) - len(_SUFFIX), False, offsets)
        # An insertion at the very end (an enum closing the program) sits past the last byte.
        pieces.extend(self._inserts.get(len(src) - len(_SUFFIX), ()))
        return b"".join(pieces).decode("utf-8", "surrogatepass")

    @staticmethod
    def _token(node: tree_sitter.Node, kind: str) -> tree_sitter.Node | None:
        return next((c for c in node.children if c.type == kind), None)

    # -- capture handlers (named after the query's capture names) --------------------

    def _on_erase(self, node: tree_sitter.Node) -> None:
        parent = node.parent
        self._erase_node(node, asi=parent is not None and parent.type in _TAIL_PARENTS)

    def _on_statement(self, node: tree_sitter.Node) -> None:
        self._erase_node(node, asi=True)

    def _on_cast(self, node: tree_sitter.Node) -> None:
        keyword, type_node = node.children[1], node.children[-1]  # `expr as T`
        # tree-sitter is laxer than TypeScript here: it lets a type run on across a line
        # break into `[...]` and lets the next line's `(...)`/`[...]` apply to the cast.
        # TypeScript ends the type (and, by ASI, the statement) at that line break.
        cut = self._type_line_break(type_node)
        parent = node.parent
        follows_on_next_line = (
            parent is not None
            and parent.type in ("call_expression", "subscript_expression")
            and parent.children[0] == node
            and b"\n" in self._src[node.end_byte : parent.children[1].start_byte]
        )
        self._erase(
            keyword.start_byte,
            node.end_byte if cut is None else cut,
            node,
            statement_end=cut is not None or follows_on_next_line,
        )

    def _type_line_break(self, node: tree_sitter.Node) -> int | None:
        """Where TypeScript would end ``node`` at a line break before ``[``, if anywhere."""
        for child in node.children:
            if (
                node.type in ("array_type", "lookup_type")
                and child.type == "["
                and child.prev_sibling is not None
                and b"\n" in self._src[child.prev_sibling.end_byte : child.start_byte]
            ):
                return self._type_line_break(child.prev_sibling) or child.prev_sibling.end_byte
        # Only the rightmost spine can run on into the next line.
        return self._type_line_break(node.children[-1]) if node.child_count else None

    def _on_non_null(self, node: tree_sitter.Node) -> None:
        bang = node.children[-1]
        self._erase(bang.start_byte, bang.end_byte, node)

    def _on_definite(self, node: tree_sitter.Node) -> None:
        self._erase_node(node)

    def _on_param(self, node: tree_sitter.Node) -> None:
        modifiers = [c for c in node.children if c.type in _MODIFIERS]
        if modifiers:
            self._parameter_property(node, modifiers)
        pattern = node.child_by_field_name("pattern")
        if pattern is not None and pattern.type == "this":
            following = node.next_sibling
            end = following.end_byte if following is not None and following.type == "," else None
            self._erase(node.start_byte, end or node.end_byte)
        elif (question := self._token(node, "?")) is not None:
            self._erase_node(question)

    def _parameter_property(
        self, node: tree_sitter.Node, modifiers: list[tree_sitter.Node]
    ) -> None:
        """``constructor(private x: T)``: erase the modifiers, assign ``this.x = x;``."""
        pattern = node.child_by_field_name("pattern")
        params = node.parent
        method = params.parent if params is not None else None
        body = method.child_by_field_name("body") if method is not None else None
        name = method.child_by_field_name("name") if method is not None else None
        if (
            pattern is None
            or pattern.type != "identifier"
            or body is None
            or name is None
            or self._src[name.start_byte : name.end_byte] != b"constructor"
        ):
            self._fail(
                node,
                "a parameter property",
                "parameter properties need a plain name in a constructor with a body",
            )
        assert pattern is not None and body is not None and method is not None
        at = body.start_byte + 1  # after `{`
        class_node = method.parent.parent if method.parent is not None else None
        heritage = self._token(class_node, "class_heritage") if class_node is not None else None
        if heritage is not None and self._token(heritage, "extends_clause") is not None:
            statement = next((s for s in body.named_children if self._is_super_call(s)), None)
            if statement is None:
                self._fail(
                    node,
                    "a parameter property",
                    "in a derived class the constructor must call super(...) as a statement "
                    "of its own before the parameter properties can be assigned",
                )
            assert statement is not None
            at = statement.end_byte
            if self._src[at - 1 : at] != b";" and at not in self._inserts:
                self._insert(at, ";")  # `super()` ended by a line break: end it here
        for modifier in modifiers:
            self._erase_node(modifier)
        ident = self._src[pattern.start_byte : pattern.end_byte].decode("utf-8", "surrogatepass")
        self._insert(at, f"this.{ident} = {ident};")

    @staticmethod
    def _is_super_call(statement: tree_sitter.Node) -> bool:
        if statement.type != "expression_statement" or not statement.named_child_count:
            return False
        call = statement.named_children[0]
        callee = call.child_by_field_name("function") if call.type == "call_expression" else None
        return callee is not None and callee.type == "super"

    def _on_field(self, node: tree_sitter.Node) -> None:
        if self._token(node, "declare") or self._token(node, "abstract"):
            self._erase_node(node, asi=True)
            return
        for child in node.children:
            if child.type in _MODIFIERS or child.type in ("?", "!"):
                self._erase_node(child)

    def _on_method(self, node: tree_sitter.Node) -> None:
        for child in node.children:
            if child.type in ("accessibility_modifier", "override_modifier", "?"):
                self._erase_node(child)

    def _on_abstract_class(self, node: tree_sitter.Node) -> None:
        keyword = self._token(node, "abstract")
        if keyword is not None:
            self._erase_node(keyword)

    def _on_enum(self, node: tree_sitter.Node) -> None:
        """``enum E { A, B = "b" }`` -> ``const E = (() => {...; return E; })();``.

        Each member becomes a ``const`` where it stood, so initializers can name earlier
        members as TypeScript lets them, and every line keeps its number.
        """
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is None or body is None:
            self._fail(node, "enum", "an enum needs a name and a body")
        assert name is not None and body is not None
        enum = self._text(name)
        setter, last = _ENUM_SET, _ENUM_LAST
        self._erase(node.start_byte, body.start_byte + 1)
        self._insert(
            node.start_byte,
            f"const {enum} = (() => {{const {enum} = {{}}; let {last} = -1; "
            f"const {setter} = (k, v) => ({last} = v, {enum}[k] = v, "
            f'typeof v === "number" && ({enum}[v] = k), v);',
        )
        for member in body.named_children:
            if member.type == "comment":
                continue
            key_node = (
                member.child_by_field_name("name") if member.type == "enum_assignment" else member
            )
            if key_node is None:
                key_node = member.children[0]
            key = self._text(key_node)
            if key_node.type in ("string", "template_string"):
                quoted, declared = key, None
            else:
                quoted, declared = f'"{key}"', key if key != enum else None
            head = f"const {declared} = " if declared is not None else ""
            if member.type == "enum_assignment":
                value = member.child_by_field_name("value")
                if value is None:
                    value = member.children[-1]
                self._erase(member.start_byte, value.start_byte)
                self._insert(member.start_byte, f"{head}{setter}({quoted}, ")
                self._insert(value.end_byte, ");")
            else:
                self._erase_node(member)
                self._insert(member.start_byte, f"{head}{setter}({quoted}, {last} + 1);")
        for child in body.children:
            if child.type == ",":
                self._erase_node(child)
        close = body.children[-1]
        self._erase(close.start_byte, node.end_byte)
        self._insert(close.start_byte, f"return {enum}; }})();")

    def _text(self, node: tree_sitter.Node) -> str:
        return self._src[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")

    def _on_namespace(self, node: tree_sitter.Node) -> None:
        if not self._type_only_namespace(node):
            self._fail(
                node,
                "namespace",
                "TypeScript namespaces with values are not erasable — use a plain object",
            )
        parent = node.parent
        # `namespace N {}` parses as an expression statement wrapping the module node.
        if parent is not None and parent.type == "expression_statement":
            node = parent
        self._erase_node(node, asi=True)

    def _type_only_namespace(self, node: tree_sitter.Node) -> bool:
        body = node.child_by_field_name("body")
        for statement in body.named_children if body is not None else ():
            if statement.type == "expression_statement" and statement.named_child_count:
                statement = statement.named_children[0]
            if statement.type == "export_statement":
                declaration = statement.child_by_field_name("declaration")
                if declaration is None:
                    return False
                statement = declaration
            if statement.type in ("internal_module", "module"):
                if not self._type_only_namespace(statement):
                    return False
            elif statement.type not in _TYPE_ONLY_DECLS and statement.type not in (
                "comment",
                "empty_statement",
            ):
                return False
        return True

    def _on_import(self, node: tree_sitter.Node) -> None:
        if self._token(node, "type") is not None:  # `import type ...`
            self._erase_node(node, asi=True)
            return
        if self._token(node, "import_require_clause") is not None:
            self._fail(node, "import = require()", "use the tools object instead of modules")
        clause = self._token(node, "import_clause")
        named = self._token(clause, "named_imports") if clause is not None else None
        if clause is not None and named is not None and clause.named_child_count == 1:
            specifiers = [c for c in named.named_children if c.type == "import_specifier"]
            if specifiers and all(self._token(s, "type") for s in specifiers):
                self._erase_node(node, asi=True)  # only types: TypeScript elides it
                return
        self._fail(
            node,
            "an import declaration",
            "a program is the body of an async function and cannot import modules",
        )

    def _on_export(self, node: tree_sitter.Node) -> None:
        if self._token(node, "type") is not None:  # `export type {...}` / `export type *`
            self._erase_node(node, asi=True)
            return
        if self._token(node, "=") is not None:
            self._fail(node, "export =", "a program is the body of an async function")
        declaration = node.child_by_field_name("declaration")
        if declaration is not None and declaration.type in _TYPE_ONLY_DECLS:
            self._erase_node(node, asi=True)
            return
        if declaration is not None and declaration.type in ("internal_module", "module"):
            if self._type_only_namespace(declaration):
                self._erase_node(node, asi=True)
                return
        clause = self._token(node, "export_clause")
        if clause is not None and self._token(node, "from") is None:
            specifiers = [c for c in clause.named_children if c.type == "export_specifier"]
            if specifiers and all(self._token(s, "type") for s in specifiers):
                self._erase_node(node, asi=True)
                return
        self._fail(
            node,
            "an export declaration",
            "a program is the body of an async function — use return or console.log",
        )

    def _on_decorator(self, node: tree_sitter.Node) -> None:
        self._fail(node, "a decorator", "decorators are not available — call the function directly")
