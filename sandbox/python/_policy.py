"""``SandboxPolicy``: RestrictedPython's transformer, made async-aware and model-friendly.

What changes relative to ``RestrictingNodeTransformer``:

- the program is the body of ``async def __codemode_program__()`` (built here, after the
  restrictions ran, so line numbers stay as written); top-level ``await``/``return`` work,
  and ``return <expr>`` at the top level is marked (``_ret_``) so that falling off the end
  (no value) differs from ``return None`` (a ``null`` value);
- ``async def``, ``await``, ``async for``/``async with`` and async comprehensions are allowed;
- single-underscore names (``_helper``) are allowed; dunders, RestrictedPython's guard
  names (``_getattr_``, ``_write_``, ... all end in ``_``), ``_print`` and ``_tmpN`` stay
  forbidden; a short list of dunder *methods* may be defined inside class bodies;
- ``d[k] += 1`` and ``self.n += 1`` are rewritten into guarded read-modify-write;
- annotated assignments (``x: int = 1``, dataclass fields) and ``nonlocal`` are allowed;
- a ``global x`` inside a function, where ``x`` is a top-level program variable, becomes
  ``nonlocal x`` (top-level variables are locals of the wrapper function);
- ``x.__class__.__name__`` becomes ``_typename_(x)``; ``__name__``, ``__qualname__``,
  ``__doc__``, ``__init__`` and ``__post_init__`` may be read as attributes;
- every ``except`` (and ``except*``) handler, ``finally`` block and ``__exit__`` method
  starts with ``_exc_guard_()``, which ends the run if the caught exception is a
  ``MemoryError``, a ``RecursionError`` or a guard denial: those are terminal, never
  caught;
- ``try``/``except*`` is allowed (the handlers are guarded like any other);
- ``self._x`` (a single-underscore, unmangled name) compiles to ``_own_getattr_`` /
  ``_own_write_``, which allow it on the program's own objects only: its functions, and
  classes (and their instances) whose bases are the program's own or built-in types, so
  a library object's private state (``random._os``, a ``Queue`` subclass's ``_loop``)
  stays out of reach;
- namedtuple's public API (``p._asdict()``, ``p._replace(...)``, ``P._fields``,
  ``P._make(...)``, ``P._field_defaults``) compiles to ``_nt_getattr_``, which serves
  those names on namedtuples only;
- ``match`` statements are allowed. Patterns are checked, not rewritten (the compiler
  accepts only names and dotted names there): capture names follow the variable rules,
  dotted names and class-pattern keywords the attribute rules. A case whose pattern has
  a class pattern gets a guard ``_match_guard_(...)`` that checks, before the body runs,
  the attribute names the positional sub-patterns read (``__match_args__``) and the
  values the case captured, exactly as ``_getattr_`` would.
"""

from __future__ import annotations

import ast
import copy
import re
from typing import Any

from RestrictedPython.transformer import (
    INSPECT_ATTRIBUTES,
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

__all__ = [
    "MAIN",
    "NAMEDTUPLE_API",
    "READABLE_DUNDERS",
    "TOP_LEVEL_YIELD",
    "SandboxPolicy",
    "is_own_attribute",
]

MAIN = "__codemode_program__"

TOP_LEVEL_YIELD = "'yield' is not allowed at the top level of the program"

NAMEDTUPLE_API = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})

READABLE_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__init__", "__post_init__"})

METHOD_DUNDERS = frozenset(
    """
    __init__ __post_init__ __repr__ __str__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__
    __hash__ __len__ __contains__ __iter__ __next__ __aiter__ __anext__ __getitem__
    __setitem__ __delitem__ __bool__ __call__ __enter__ __exit__ __aenter__ __aexit__
    __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__
    __floordiv__ __rfloordiv__ __mod__ __rmod__ __neg__ __pos__ __abs__
    """.split()
)

_TMP = re.compile(r"^_tmp\d+$")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _is_helper_name(name: str) -> bool:
    """``_x`` style names a program may bind: not dunder, not guard-like, not internal."""
    return (
        not name.startswith("__")
        and not name.endswith("_")
        and name != "_print"
        and not _TMP.match(name)
    )


def is_own_attribute(name: str) -> bool:
    """``_x``: a private attribute name a program may use on its own objects.

    Not dunders, not guard-like names (``_x_``), not name-mangled slots (``_C__x``) and
    not namedtuple's API (served by ``_nt_getattr_``); ``_own_getattr_`` and
    ``_own_write_`` decide at run time whose object it is.
    """
    return (
        name.startswith("_")
        and name != "_"
        and _is_helper_name(name)
        and "__" not in name
        and name not in NAMEDTUPLE_API
    )


def _name(id_: str, ctx: ast.expr_context | None = None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _call(func: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_name(func), args=list(args), keywords=[])


class _MainScope(ast.NodeVisitor):
    """Collects names bound in the wrapper's own scope; finds top-level ``yield``."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.yields: list[ast.AST] = []

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bound.add(node.id)

    def _scope(self, node: Any) -> None:
        if not isinstance(node, ast.Lambda):
            self.bound.add(node.name)
        for decorator in getattr(node, "decorator_list", []):
            self.visit(decorator)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scope

    def visit_alias(self, node: ast.alias) -> None:
        self.bound.add(node.asname or node.name.split(".")[0])

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_Yield(self, node: ast.AST) -> None:
        self.yields.append(node)

    visit_YieldFrom = visit_Yield


class _GlobalToNonlocal(ast.NodeTransformer):
    """Inside nested functions, ``global x`` for a top-level program variable -> nonlocal."""

    def __init__(self, bound: set[str]) -> None:
        self.bound = bound

    def visit_Global(self, node: ast.Global) -> Any:
        local = [n for n in node.names if n in self.bound]
        other = [n for n in node.names if n not in self.bound]
        out: list[ast.stmt] = []
        if local:
            out.append(ast.copy_location(ast.Nonlocal(names=local), node))
        if other:
            out.append(ast.copy_location(ast.Global(names=other), node))
        return out or ast.copy_location(ast.Pass(), node)


class _MarkReturns(ast.NodeTransformer):
    """``return <expr>`` in the wrapper's own scope -> ``return _ret_(<expr>)``."""

    def visit_Return(self, node: ast.Return) -> Any:
        if node.value is not None:
            node.value = copy_locations_call(_call("_ret_", node.value), node.value)
        return node

    def _skip(self, node: ast.AST) -> ast.AST:
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _skip


def copy_locations_call(new: ast.Call, old: ast.expr) -> ast.Call:
    """Give ``new`` (and its func name) the location of ``old``."""
    copy_locations(new, old)
    copy_locations(new.func, old)
    return new


class SandboxPolicy(RestrictingNodeTransformer):
    """The restricting transformer used for every program (see module docstring)."""

    # -- names -------------------------------------------------------------------------

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None:
            return
        if name.startswith("_") and name != "_":
            if _is_helper_name(name):
                return
            if (
                allow_magic_methods
                and name in METHOD_DUNDERS
                and getattr(node, "_cm_method", False)
            ):
                return
            self.error(node, f'"{name}" is an invalid variable name because it starts with "_"')
            return
        super().check_name(node, name, allow_magic_methods=False)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> Any:
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_Global(self, node: ast.Global) -> Any:
        for name in node.names:
            self.check_name(node, name)
        return node

    # -- module: wrap into the async main function ---------------------------------------

    def visit_Module(self, node: ast.Module) -> Any:
        node.body = [
            stmt
            for stmt in node.body
            if not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__")
        ]
        scope = _MainScope()
        for stmt in node.body:
            scope.visit(stmt)
        for found in scope.yields:
            self.error(found, TOP_LEVEL_YIELD)
        node.body = [stmt for stmt in node.body if not isinstance(stmt, ast.Global)]
        converter = _GlobalToNonlocal(scope.bound)
        for stmt in node.body:
            if isinstance(stmt, _SCOPES):
                converter.visit(stmt)
            else:
                for child in ast.walk(stmt):
                    if isinstance(child, _SCOPES):
                        converter.visit(child)
        node = super().visit_Module(node)  # type: ignore[assignment]
        marker = _MarkReturns()
        node.body = [marker.visit(stmt) for stmt in node.body]
        main = ast.AsyncFunctionDef(
            name=MAIN,
            args=ast.arguments(
                posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                kwarg=None, defaults=[],
            ),
            body=node.body or [ast.Pass()],
            decorator_list=[],
            returns=None,
            type_comment=None,
        )  # fmt: skip
        main.lineno, main.col_offset = 1, 0
        node.body = [main]
        ast.fix_missing_locations(node)
        return node

    # -- async ----------------------------------------------------------------------------

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        with self.print_info.new_print_scope():
            node = self.node_contents_visit(node)
            self.inject_print_collector(node)  # type: ignore[arg-type]
        return self._guard_exit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        return self._guard_exit(super().visit_FunctionDef(node))

    def _guard_exit(self, node: Any) -> Any:
        if node.name in ("__exit__", "__aexit__") and getattr(node, "_cm_method", False):
            node.body.insert(0, self._exc_guard(node.body[0]))
        return node

    def visit_Await(self, node: ast.Await) -> Any:
        return self.node_contents_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        return self.node_contents_visit(node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> Any:
        return self.visit_With(node)  # type: ignore[arg-type]

    def visit_comprehension(self, node: ast.comprehension) -> Any:
        if node.is_async:
            # ``_getiter_`` (iter) cannot take an async iterable.
            return self.node_contents_visit(node)
        return super().visit_comprehension(node)

    # -- classes ----------------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stmt._cm_method = True  # type: ignore[union-attr]  # read by check_name
        return super().visit_ClassDef(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self.node_contents_visit(node)

    # -- attributes -------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if isinstance(node.ctx, ast.Load):
            value = node.value
            if (
                node.attr == "__name__"
                and isinstance(value, ast.Attribute)
                and value.attr == "__class__"
                and isinstance(value.ctx, ast.Load)
            ):
                new = _call("_typename_", self.visit(value.value))
                copy_locations(new, node)
                copy_locations(new.func, node)
                return new
            if node.attr in READABLE_DUNDERS or node.attr in NAMEDTUPLE_API:
                guard = "_getattr_" if node.attr in READABLE_DUNDERS else "_nt_getattr_"
                new = _call(guard, self.visit(value), ast.Constant(node.attr))
                copy_locations(new, node)
                copy_locations(new.func, node)
                return new
        if is_own_attribute(node.attr):
            if isinstance(node.ctx, ast.Load):
                new = _call("_own_getattr_", self.visit(node.value), ast.Constant(node.attr))
                copy_locations(new, node)
                copy_locations(new.func, node)
                return new
            # ``self._x = v`` / ``del self._x``: only on the program's own objects.
            node.value = copy_locations_call(_call("_own_write_", self.visit(node.value)), node)
            return node
        return super().visit_Attribute(node)

    # -- augmented assignment on items and attributes ---------------------------------

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        target = node.target
        if isinstance(target, ast.Name):
            return super().visit_AugAssign(node)
        op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        obj_tmp = self.gen_tmp_name()
        if isinstance(target, ast.Subscript):
            obj = self.visit(target.value)
            key = target.slice
            if isinstance(key, ast.Slice):
                key = _call(
                    "slice",
                    *(part or ast.Constant(None) for part in (key.lower, key.upper, key.step)),
                )
            key = self.visit(key)
            value = self.visit(node.value)
            key_tmp = self.gen_tmp_name()
            current = _call("_getitem_", _name(obj_tmp), _name(key_tmp))
            store = ast.Subscript(
                value=_call("_write_", _name(obj_tmp)), slice=_name(key_tmp), ctx=ast.Store()
            )
            stmts: list[ast.stmt] = [
                ast.Assign(targets=[_name(obj_tmp, ast.Store())], value=obj),
                ast.Assign(targets=[_name(key_tmp, ast.Store())], value=key),
            ]
        elif isinstance(target, ast.Attribute):
            attr = target.attr
            own = is_own_attribute(attr)
            if (attr.startswith("_") and not own) or attr in INSPECT_ATTRIBUTES:
                self.error(
                    node, f'"{attr}" is an invalid attribute name because it starts with "_".'
                )
                return node
            obj = self.visit(target.value)
            value = self.visit(node.value)
            read, write = ("_own_getattr_", "_own_write_") if own else ("_getattr_", "_write_")
            current = _call(read, _name(obj_tmp), ast.Constant(attr))
            store = ast.Attribute(  # type: ignore[assignment]
                value=_call(write, _name(obj_tmp)), attr=attr, ctx=ast.Store()
            )
            stmts = [ast.Assign(targets=[_name(obj_tmp, ast.Store())], value=obj)]
        else:  # pragma: no cover - the grammar allows nothing else
            self.not_allowed(node)
            return node
        stmts.append(ast.Assign(targets=[store], value=_call("_inplacevar_", op, current, value)))
        for stmt in stmts:
            ast.copy_location(stmt, node)
            for child in ast.walk(stmt):
                if "lineno" in child._attributes and not hasattr(child, "lineno"):
                    ast.copy_location(child, node)
        return stmts

    # -- terminal limits --------------------------------------------------------------

    def _exc_guard(self, where: ast.AST) -> ast.Expr:
        stmt = ast.Expr(value=_call("_exc_guard_"))
        ast.copy_location(stmt, where)
        ast.copy_location(stmt.value, where)
        ast.copy_location(stmt.value.func, where)  # type: ignore[attr-defined]
        return stmt

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        node = super().visit_ExceptHandler(node)  # type: ignore[assignment]
        node.body.insert(0, self._exc_guard(node.body[0] if node.body else node))
        return node

    def visit_Try(self, node: ast.Try) -> Any:
        node = super().visit_Try(node)  # type: ignore[assignment]
        if node.finalbody:
            node.finalbody.insert(0, self._exc_guard(node.finalbody[0]))
        return node

    def visit_TryStar(self, node: ast.AST) -> Any:
        # RestrictedPython refuses ``except*`` wholesale; its handlers are ordinary
        # ``ExceptHandler`` nodes (guarded above) and the groups they bind expose only
        # public attributes, which go through ``_getattr_`` like any other.
        node = self.node_contents_visit(node)
        finalbody = node.finalbody  # type: ignore[attr-defined]
        if finalbody:
            finalbody.insert(0, self._exc_guard(finalbody[0]))
        return node

    # -- match statements ---------------------------------------------------------------

    def visit_Match(self, node: ast.Match) -> Any:
        node.subject = self.visit(node.subject)
        node.cases = [self.visit_match_case(case) for case in node.cases]
        return node

    def visit_match_case(self, node: ast.match_case) -> Any:
        classes: list[ast.MatchClass] = []
        captures: list[str] = []
        self._check_pattern(node.pattern, classes, captures)
        guard = self.visit(node.guard) if node.guard is not None else None
        if classes:
            specs = [
                ast.Tuple(
                    elts=[self.visit(copy.deepcopy(cls.cls)), ast.Constant(len(cls.patterns))],
                    ctx=ast.Load(),
                )
                for cls in classes
            ]
            values = [_name(name) for name in dict.fromkeys(captures)]
            check: ast.expr = _call(
                "_match_guard_",
                ast.Tuple(elts=specs, ctx=ast.Load()),  # type: ignore[arg-type]
                ast.Tuple(elts=values, ctx=ast.Load()),  # type: ignore[arg-type]
            )
            if guard is not None:
                check = ast.BoolOp(op=ast.And(), values=[check, guard])
            for child in ast.walk(check):
                if "lineno" in child._attributes:
                    ast.copy_location(child, node.pattern)
            guard = check
        node.guard = guard
        node.body = [self.visit(stmt) for stmt in node.body]
        node.body = [
            item for stmt in node.body for item in (stmt if isinstance(stmt, list) else [stmt])
        ]
        return node

    def _check_dotted(self, node: ast.expr) -> None:
        """A value or class in a pattern: a name or a dotted name, with legal parts."""
        while isinstance(node, ast.Attribute):
            self._check_attr(node, node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            self.check_name(node, node.id)

    def _check_attr(self, node: ast.AST, attr: str) -> None:
        if attr.startswith("_") and attr != "_":
            self.error(node, f'"{attr}" is an invalid attribute name because it starts with "_".')
        elif attr in INSPECT_ATTRIBUTES:
            self.error(node, f'"{attr}" is a restricted name that programs may not access')

    def _check_pattern(
        self, pattern: ast.pattern, classes: list[ast.MatchClass], captures: list[str]
    ) -> None:
        for node in ast.walk(pattern):
            if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name is not None:
                self.check_name(node, node.name)
                captures.append(node.name)
            elif isinstance(node, ast.MatchMapping):
                if node.rest is not None:
                    self.check_name(node, node.rest)
                    captures.append(node.rest)
                for key in node.keys:
                    self._check_dotted(key)
            elif isinstance(node, ast.MatchValue):
                self._check_dotted(node.value)
            elif isinstance(node, ast.MatchClass):
                self._check_dotted(node.cls)
                for attr in node.kwd_attrs:
                    self._check_attr(node, attr)
                classes.append(node)
