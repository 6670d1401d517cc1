"""Route every value a program's ``catch`` clause receives through the prelude's guard.

QuickJS lets JavaScript catch its out-of-memory errors, and when memory is so short that
it cannot allocate the error object it throws ``null`` instead (no error, no stack hook).
To keep a memory failure terminal, ``guard_catches`` rewrites each ``catch`` clause so
its block starts by handing the caught value to a guard function, which flags the run
(the prelude does the same for promise rejection handlers and uncaught values):

    catch (e) {          ->  catch (e) {G(e);
    catch {              ->  catch (E) {G(E);
    catch ({ message }) {  ->  catch (E) {let { message } = G(E);

``G`` and ``E`` are per-run random names a program cannot guess or shadow. Only text is
inserted within lines (never a line break), so line numbers stay the program's own;
a destructuring pattern that spans lines is left alone. Code run through ``eval`` or
``new Function`` is not rewritten.
"""

from __future__ import annotations

import functools
import threading

import tree_sitter
import tree_sitter_typescript

__all__ = ["guard_catches"]

_PREFIX = b"async function __program__() {\n"
_SUFFIX = b"\n}"


@functools.cache
def _language_and_query() -> tuple[tree_sitter.Language, tree_sitter.Query]:
    language = tree_sitter.Language(tree_sitter_typescript.language_typescript())
    return language, tree_sitter.Query(language, "(catch_clause) @catch")


_local = threading.local()  # parsers hold mutable state: one per thread


def _query() -> tuple[tree_sitter.Parser, tree_sitter.Query]:
    language, query = _language_and_query()
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = tree_sitter.Parser(language)
    return parser, query


def guard_catches(program: str, guard: str, caught: str) -> str:
    """Return ``program`` with every ``catch`` block calling ``guard`` on its value first.

    ``caught`` names the catch parameter introduced where the clause has none (or has a
    pattern). A program that does not parse is returned unchanged; QuickJS reports it.
    """
    if "catch" not in program:
        return program
    parser, query = _query()
    source = _PREFIX + program.encode("utf-8", "surrogatepass") + _SUFFIX
    tree = parser.parse(source)
    if tree.root_node.has_error:
        return program
    clauses = tree_sitter.QueryCursor(query).captures(tree.root_node).get("catch", [])
    edits: list[tuple[int, int, bytes]] = []  # (start, end, replacement) in `source`
    for clause in clauses:
        body = clause.child_by_field_name("body")
        if body is None:
            continue
        parameter = clause.child_by_field_name("parameter")
        after_brace = body.start_byte + 1
        if parameter is None:
            keyword_end = clause.children[0].end_byte
            edits.append((keyword_end, keyword_end, f" ({caught})".encode()))
            edits.append((after_brace, after_brace, f"{guard}({caught});".encode()))
        elif parameter.type == "identifier":
            name = source[parameter.start_byte : parameter.end_byte].decode()
            edits.append((after_brace, after_brace, f"{guard}({name});".encode()))
        else:
            pattern = source[parameter.start_byte : parameter.end_byte]
            if b"\n" in pattern or b"\r" in pattern:
                continue
            edits.append((parameter.start_byte, parameter.end_byte, caught.encode()))
            binding = b"let " + pattern + f" = {guard}({caught});".encode()
            edits.append((after_brace, after_brace, binding))
    if not edits:
        return program
    edits.sort(key=lambda edit: edit[0])
    pieces: list[bytes] = []
    last = len(_PREFIX)
    for start, end, replacement in edits:
        pieces += (source[last:start], replacement)
        last = end
    pieces.append(source[last : len(source) - len(_SUFFIX)])
    return b"".join(pieces).decode("utf-8", "surrogatepass")
