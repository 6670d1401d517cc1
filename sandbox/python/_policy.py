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
import re
from typing import Any, TypeVar

from RestrictedPython.transformer import (
    INSPECT_ATTRIBUTES,
    RestrictingNodeTransformer,
    copy_locations,
)

__all__ = [
    "GROUP_SITE",
    "MAIN",
    "OWN_READ_SITE",
    "OWN_WRITE_SITE",
    "READ_SITE",
    "SITE_TABLE",
    "SITE_TYPE",
    "WRITE_SITE",
    "NAMEDTUPLE_API",
    "READABLE_DUNDERS",
    "TOP_LEVEL_YIELD",
    "SandboxPolicy",
    "is_own_attribute",
]

MAIN = "__codemode_program__"

# The guard sites' globals (see ``_builtins``: "guard sites"); all end in ``_``, so no
# program can name them.
SITE_TYPE = "_type_"
SITE_TABLE = "_sites_"
READ_SITE = "_rs_"
WRITE_SITE = "_ws_"
OWN_READ_SITE = "_ors_"
OWN_WRITE_SITE = "_ows_"
READ_WRITE_SITE = "_rws_"
GROUP_SITE = "_gs_"

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


_CLASS_SCOPE = "_cm_class_scope"


class _ProgramFacts:
    """What one walk of the whole program finds (``_mark_class_scopes``)."""

    def __init__(self) -> None:
        # Names bound anywhere, and by an import: a name bound nowhere is a binding or
        # a builtin, an imported one a module proxy; neither is ever an object a site
        # would keep a verdict about, so they get none.
        self.bound: set[str] = set()
        self.imported: set[str] = set()
        # Names declared ``global``/``nonlocal`` anywhere (never stable).
        self.declared: set[str] = set()
        # Whether anything can run twice (a loop, a function, a comprehension).
        self.hot = False


def _mark_class_scopes(tree: ast.AST) -> _ProgramFacts:
    """Mark every node evaluated directly in a class body (``_CLASS_SCOPE``).

    Names there are looked up in the class namespace (``LOAD_NAME``), which a library
    metaclass may make a mapping with its own ``__getitem__``: guard sites, which read a
    name twice, are compiled only where names are fast locals, cells or globals. Bases,
    decorators and defaults belong to the enclosing scope; comprehensions in a class body
    count as class scope (their first iterable is).
    """
    facts = _ProgramFacts()
    bound, imported = facts.bound, facts.imported
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, in_class = todo.pop()
        if in_class:
            setattr(node, _CLASS_SCOPE, True)
        if isinstance(node, _HOT):
            facts.hot = True
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            facts.declared.update(node.names)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            imported.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            bound.add(node.name or "")
        elif isinstance(node, ast.MatchMapping):
            bound.add(node.rest or "")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        if isinstance(node, ast.ClassDef):
            outer: list[ast.AST] = [*node.bases, *node.keywords, *node.decorator_list]
            todo.extend((child, in_class) for child in outer)
            todo.extend((stmt, True) for stmt in node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            outer = [node.args]
            if not isinstance(node, ast.Lambda):
                outer.extend(node.decorator_list)
                if node.returns is not None:
                    outer.append(node.returns)
            todo.extend((child, in_class) for child in outer)
            body = node.body if isinstance(node.body, list) else [node.body]
            todo.extend((stmt, False) for stmt in body)
        else:
            todo.extend((child, in_class) for child in ast.iter_child_nodes(node))
    return facts


_STABLE = "_cm_stable"
_INTERNAL = "_cm_internal"
_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
               ast.SetComp, ast.DictComp, ast.GeneratorExp)  # fmt: skip
#: Code that may run many times: only there are guard sites worth their compile time.
_HOT = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
        ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)  # fmt: skip
#: Arguments (AST nodes) a method call site may copy into both of its branches.
_MAX_COPIED_ARGS = 40


def _scope_facts(body: list[ast.stmt], declared: set[str]) -> tuple[dict[str, int], dict[str, int]]:
    """How many bindings each name has in the scope of ``body`` (over-counted on doubt),
    and the last statement (index) that reads or writes each name's attributes or items.

    Bindings: stores, deletions, imports, definitions, handler and pattern captures and
    walrus targets (comprehensions are searched too, their own variables included); a
    name ``declared`` ``global`` or ``nonlocal`` anywhere in the program counts as bound
    twice. One walk; nested functions and classes are not entered (but their defaults,
    decorators and bases, which belong to this scope).
    """
    counts: dict[str, int] = dict.fromkeys(declared, 2)
    last_use: dict[str, int] = {}

    def bind(name: str | None) -> None:
        if name is not None:
            counts[name] = counts.get(name, 0) + 1

    for index, stmt in enumerate(body):
        todo: list[ast.AST] = [stmt]
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bind(node.name)
            if isinstance(node, ast.ClassDef):
                todo.extend([*node.bases, *node.keywords, *node.decorator_list])
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d)])
                if not isinstance(node, ast.Lambda):
                    todo.extend(node.decorator_list)
                continue
            if isinstance(node, ast.Name):
                if not isinstance(node.ctx, ast.Load):
                    bind(node.id)
            elif isinstance(node, (ast.Attribute, ast.Subscript)):
                if isinstance(node.value, ast.Name):
                    last_use[node.value.id] = index
            elif isinstance(node, ast.alias):
                bind(node.asname or node.name.split(".")[0])
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                bind(node.name)
            elif isinstance(node, ast.MatchMapping):
                bind(node.rest)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    bind(name)
            todo.extend(ast.iter_child_nodes(node))
    return counts, last_use


_GROUPED = "_cm_grouped"
_PLAIN = "_cm_plain"


def _site_kind(attr: str, store: bool) -> str | None:
    if is_own_attribute(attr):
        return "ow" if store else "o"
    if attr.startswith("_"):
        return None
    return "w" if store else "r"


def _code_free_reads(expr: ast.expr, name: str) -> list[ast.Attribute]:
    """The reads of ``name.attr`` that ``expr`` evaluates before it can run any code.

    Walks ``expr`` in CPython's order of evaluation and stops at the first operation
    that may call code (an operator, a call, a subscript, a comparison, anything not
    known here); names, constants and tuple/list displays run none.
    """
    reads: list[ast.Attribute] = []

    def walk(node: ast.expr) -> bool:  # False: code may run from here on
        if isinstance(node, (ast.Name, ast.Constant)):
            return True
        if isinstance(node, ast.Attribute):
            if (
                isinstance(node.value, ast.Name)
                and node.value.id == name
                and _site_kind(node.attr, store=False) is not None
            ):
                reads.append(node)
                return True
            return False
        if isinstance(node, ast.BinOp):
            walk(node.left) and walk(node.right)
            return False
        if isinstance(node, ast.UnaryOp):
            walk(node.operand)
            return False
        if isinstance(node, ast.Call):
            ok = walk(node.func)
            for arg in node.args:
                ok = ok and not isinstance(arg, ast.Starred) and walk(arg)
            for keyword in node.keywords:
                ok = ok and keyword.arg is not None and walk(keyword.value)
            return False
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(not isinstance(e, ast.Starred) and walk(e) for e in node.elts)
        return False

    walk(expr)
    return reads


def _group_plan(
    stmt: ast.Assign | ast.Expr, stable: dict[str, str], *, mark: bool
) -> tuple[str, list[tuple[str, str]]] | None:
    """Which stable name's sites in ``stmt`` can share one test (``mark``: mark them plain)."""
    target: ast.expr | None = None
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) != 1:
            return None
        target = stmt.targets[0]
    for name in stable:
        reads = _code_free_reads(stmt.value, name)
        spec = [(_site_kind(read.attr, store=False) or "", read.attr) for read in reads]
        members: list[ast.AST] = list(reads)
        if (
            isinstance(target, (ast.Attribute, ast.Subscript))
            and isinstance(target.value, ast.Name)
            and target.value.id == name
        ):
            kind = _site_kind(target.attr, store=True) if isinstance(target, ast.Attribute) else "w"
            if kind is not None:
                spec.append((kind, target.attr if isinstance(target, ast.Attribute) else ""))
                members.append(target)
        if len(members) >= 2:
            for member in members if mark else ():
                setattr(member, _PLAIN, True)
            return name, spec
    return None


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))


def _type_capture(tmp: str, name: str, where: ast.AST) -> ast.stmt:
    stmt = ast.Assign(targets=[_name(tmp, ast.Store())], value=_call(SITE_TYPE, _name(name)))
    setattr(stmt, _INTERNAL, True)
    return _located(stmt, where)


_N = TypeVar("_N", bound=ast.AST)


_T = TypeVar("_T")


def _copy_tree(tree: _T) -> _T:
    """A deep copy of an AST subtree or a list of them.

    ``copy.deepcopy`` treats each node as an arbitrary object (memo, reduce protocol);
    a node is only its ``__dict__`` of fields, locations and the policy's markers, whose
    values are nodes, lists of nodes or names, and immutable constants. The expression
    contexts (``Load``/``Store``/``Del``, stateless) and the constants are shared; every
    node and list is new. Measured: a tenth of the compile of a loop-heavy program.
    """
    AST, isinstance_ = ast.AST, isinstance
    contexts = (ast.Load, ast.Store, ast.Del)

    def copy_node(node: Any) -> Any:
        if isinstance_(node, contexts):
            return node
        new = node.__class__.__new__(node.__class__)
        target = new.__dict__
        for key, value in node.__dict__.items():
            if isinstance_(value, AST):
                value = copy_node(value)
            elif isinstance_(value, list):
                value = [copy_node(v) if isinstance_(v, AST) else v for v in value]
            target[key] = value
        return new

    value: Any = tree
    if isinstance_(value, list):
        return [copy_node(v) if isinstance_(v, AST) else v for v in value]  # type: ignore[return-value]
    return copy_node(value)  # type: ignore[no-any-return]


def _located(new: _N, old: ast.AST) -> _N:
    """``new`` with ``old``'s location on every node that has none.

    A node that has a location is a visited part of the program (or was located when
    it was made): its children have theirs, so the walk does not go into it.
    """
    todo: list[ast.AST] = [new]
    while todo:
        node = todo.pop()
        if "lineno" in node._attributes:
            if hasattr(node, "lineno"):
                continue
            ast.copy_location(node, old)
        todo.extend(ast.iter_child_nodes(node))
    return new


class SandboxPolicy(RestrictingNodeTransformer):
    """The restricting transformer used for every program (see module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sites: list[str] = []
        # Per statement being visited: the stable names of its scope and the local that
        # holds each one's type (``_mark_stable``).
        self._stable: list[dict[str, str]] = []
        # Inside a loop, a function or a comprehension (``_HOT``); names never worth a site.
        self._hot = 0
        self._bound_any: set[str] = set()
        self._imported: set[str] = set()
        self._declared: set[str] = set()
        self._any_hot = False

    def visit(self, node: ast.AST) -> Any:
        if getattr(node, _INTERNAL, False):
            return node
        if isinstance(node, _HOT):
            self._hot += 1
            try:
                return self._visit(node)
            finally:
                self._hot -= 1
        return self._visit(node)

    def _visit(self, node: ast.AST) -> Any:
        if isinstance(node, _NEW_SCOPES):
            mapping: dict[str, str] | None = {}
        else:
            mapping = getattr(node, _STABLE, None)
            if mapping is None:
                if isinstance(node, (ast.Assign, ast.Expr)) and self._stable and self._stable[-1]:
                    return self._visit_grouped(node)
                return super().visit(node)
        self._stable.append(mapping)  # type: ignore[arg-type]
        try:
            if isinstance(node, (ast.Assign, ast.Expr)) and mapping:
                return self._visit_grouped(node)
            return super().visit(node)
        finally:
            self._stable.pop()

    def _visit_grouped(self, node: ast.Assign | ast.Expr) -> Any:
        """A statement with several sites on one stable name: one test for all of them.

        ``p.x = p.x + p.y % 5`` becomes ``if T is _sN_: <the statement, plain>`` else
        ``<the statement with its sites>; _gs_(p, "_sN_", <what it reads and writes>)``.
        The group takes the reads that run before anything in the statement can run
        code (``_code_free_reads``), which the verdict requires to run none themselves
        (no ``property``), and the store, whose verdict no class write changes: so
        between the fresh test and the last grouped read, nothing can change a verdict.
        """
        if not self._hot or getattr(node, _CLASS_SCOPE, False) or getattr(node, _GROUPED, False):
            return super().visit(node)
        if _group_plan(node, self._stable[-1], mark=False) is None:
            return super().visit(node)
        plain = _copy_tree(node)
        plan = _group_plan(plain, self._stable[-1], mark=True)
        assert plan is not None
        name, spec = plan
        errors = len(self.errors)
        sited = super().visit(node)
        if len(self.errors) != errors or not isinstance(sited, ast.stmt):
            return sited
        setattr(plain, _GROUPED, True)
        fast = self.visit(plain)
        if not isinstance(fast, ast.stmt):
            return sited
        slot = self._new_site()
        pairs = ast.Tuple(
            elts=[
                ast.Tuple(elts=[ast.Constant(kind), ast.Constant(attr)], ctx=ast.Load())
                for kind, attr in spec
            ],
            ctx=ast.Load(),
        )
        fill = ast.Expr(value=_call(GROUP_SITE, _name(name), ast.Constant(slot), pairs))
        stmt = ast.If(test=self._same_type(name, slot), body=[fast], orelse=[sited, fill])
        return _located(ast.copy_location(stmt, node), node)

    def _mark_stable(self, params: list[str], body: list[ast.stmt]) -> list[ast.stmt]:
        """Find the names of a function scope whose value cannot change, and capture types.

        A parameter that is never bound in the body, or a name bound exactly once, by a
        plain assignment among the body's own statements, holds one object from then on
        (nothing else in the program can rebind a local; ``nonlocal`` counts as a
        binding). Its type is captured once in a local (``_tmpN = _type_(name)``), and
        the guard sites on it compare that local instead of calling ``type`` each time.
        """
        if not self._any_hot or not body:
            return body  # no loop or function anywhere: nothing runs twice
        bound, last_use = _scope_facts(body, self._declared)
        active: dict[str, str] = {}
        prelude: list[ast.stmt] = []
        used = set(last_use)
        for param in params:
            if param not in bound and param in used:
                active[param] = self.gen_tmp_name()
                prelude.append(_type_capture(active[param], param, body[0]))
        out: list[ast.stmt] = []
        start = 0
        if prelude:
            docstring = (
                isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            )
            out = [body[0], *prelude] if docstring else prelude
            start = 1 if docstring else 0
        for index in range(start, len(body)):
            stmt = body[index]
            setattr(stmt, _STABLE, dict(active))
            out.append(stmt)
            target = None
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target = stmt.target
            if (
                isinstance(target, ast.Name)
                and bound.get(target.id) == 1
                and target.id not in params
                and last_use.get(target.id, -1) > index
            ):
                active[target.id] = self.gen_tmp_name()
                out.append(_type_capture(active[target.id], target.id, stmt))
        return out

    def _stable_scope(self, node: Any) -> None:
        """``_mark_stable`` for a function definition's parameters and body."""
        args = node.args
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        node.body = self._mark_stable(params, node.body)

    # -- guard sites (see ``_builtins``: "guard sites") ---------------------------------

    def _site_ok(self, value: ast.expr, where: ast.AST) -> bool:
        """Whether ``value`` (already visited) may be read twice for a guard site."""
        return (
            isinstance(value, ast.Name)
            and self._hot > 0
            and value.id in self._bound_any
            and value.id not in self._imported
            and not getattr(value, _CLASS_SCOPE, False)
            and not getattr(where, _CLASS_SCOPE, False)
        )

    def _new_site(self) -> str:
        slot = f"_s{len(self._sites)}_"
        self._sites.append(slot)
        return slot

    def _same_type(self, name: str, slot: str) -> ast.expr:
        tmp = self._stable[-1].get(name) if self._stable else None
        left = _name(tmp) if tmp is not None else _call(SITE_TYPE, _name(name))
        return ast.Compare(left=left, ops=[ast.Is()], comparators=[_name(slot)])

    def _read(self, value: ast.expr, attr: str, guard: str, where: ast.AST) -> ast.expr:
        """``guard(value, attr)``, or its guard site when ``value`` is a plain name."""
        if not self._site_ok(value, where):
            return _located(_call(guard, value, ast.Constant(attr)), where)
        assert isinstance(value, ast.Name)
        slot = self._new_site()
        site = READ_SITE if guard == "_getattr_" else OWN_READ_SITE
        read = ast.IfExp(
            test=self._same_type(value.id, slot),
            body=ast.Attribute(value=_name(value.id), attr=attr, ctx=ast.Load()),
            orelse=_call(site, _name(value.id), ast.Constant(attr), ast.Constant(slot)),
        )
        read._cm_site = True  # type: ignore[attr-defined]  # read by visit_Call
        return _located(read, where)

    def visit_Call(self, node: ast.Call) -> Any:
        """``p.m(args)`` on a guard site: the call goes into both branches.

        ``(p.m if same_type else slow)(args)`` would build a bound method on every call;
        ``p.m(args) if same_type else slow(args)`` keeps CPython's method call. Only one
        branch runs, so the arguments are evaluated once, in the same order; they are
        copied only while small (nested method calls would double them at each level).
        """
        new: Any = super().visit_Call(node)
        func = getattr(new, "func", None)
        if not (isinstance(func, ast.IfExp) and getattr(func, "_cm_site", False)):
            return new
        parts: list[ast.AST] = [*new.args, *new.keywords]
        if sum(_size(part) for part in parts) > _MAX_COPIED_ARGS:
            return new
        fast = ast.Call(func=func.body, args=new.args, keywords=new.keywords)
        slow = ast.Call(
            func=func.orelse,
            args=_copy_tree(new.args),
            keywords=_copy_tree(new.keywords),
        )
        return _located(ast.IfExp(test=func.test, body=fast, orelse=slow), node)

    def _writable(self, value: ast.expr, guard: str, where: ast.AST) -> ast.expr:
        """``guard(value)`` (the target of a store), or its guard site."""
        if not self._site_ok(value, where):
            return _located(_call(guard, value), where)
        assert isinstance(value, ast.Name)
        slot = self._new_site()
        site = WRITE_SITE if guard == "_write_" else OWN_WRITE_SITE
        return _located(
            ast.IfExp(
                test=self._same_type(value.id, slot),
                body=_name(value.id),
                orelse=_call(site, _name(value.id), ast.Constant(slot)),
            ),
            where,
        )

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
        facts = _mark_class_scopes(node)
        self._bound_any, self._imported = facts.bound, facts.imported
        self._declared, self._any_hot = facts.declared, facts.hot
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
        if node.body:
            node.body = self._mark_stable([], node.body)
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
        if self._sites:
            # Every site's verdict starts empty, as a global the program cannot name.
            names = ast.Tuple(elts=[ast.Constant(s) for s in self._sites], ctx=ast.Load())
            register = ast.Expr(value=_call(SITE_TABLE, names))
            node.body.insert(0, _located(register, main))
        ast.fix_missing_locations(node)
        return node

    # -- async ----------------------------------------------------------------------------

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        self._stable_scope(node)
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        with self.print_info.new_print_scope():
            node = self.node_contents_visit(node)
            self.inject_print_collector(node)  # type: ignore[arg-type]
        return self._guard_exit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self._stable_scope(node)
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
        if getattr(node, _PLAIN, False):
            # A member of a statement's group (``_visit_grouped``): plain bytecode.
            value = self.visit(node.value)
            return _located(ast.Attribute(value=value, attr=node.attr, ctx=node.ctx), node)
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
                return self._read(self.visit(node.value), node.attr, "_own_getattr_", node)
            # ``self._x = v`` / ``del self._x``: only on the program's own objects.
            value = self.visit(node.value)
            if isinstance(node.ctx, ast.Store):
                node.value = self._writable(value, "_own_write_", node)
            else:
                node.value = copy_locations_call(_call("_own_write_", value), node)
            return node
        out: Any = super().visit_Attribute(node)
        if isinstance(out, ast.Call) and out.args and isinstance(out.func, ast.Name):
            # ``_getattr_(value, "attr")`` from RestrictedPython.
            return self._read(out.args[0], node.attr, "_getattr_", node)
        if isinstance(out, ast.Attribute) and isinstance(out.ctx, ast.Store):
            guarded = out.value
            if isinstance(guarded, ast.Call) and len(guarded.args) == 1:
                out.value = self._writable(guarded.args[0], "_write_", node)
        return out

    # -- subscripts -------------------------------------------------------------------

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        """Item reads compile to plain subscripts; stores to the write guard (or its site).

        ``_getitem_`` protects nothing (it is ``obj[key]``): what a subscript runs is the
        object's own ``__getitem__`` either way, and what it returns is an item the
        container holds, which the program could equally reach by iterating it.
        """
        if getattr(node, _PLAIN, False):
            node.value = self.visit(node.value)
            node.slice = self.visit(node.slice)
            return node
        new: Any = super().visit_Subscript(node)
        if isinstance(new, ast.Call):
            value, key = new.args
            return _located(ast.Subscript(value=value, slice=key, ctx=ast.Load()), node)
        if isinstance(new.ctx, ast.Store):
            guarded = new.value
            if isinstance(guarded, ast.Call) and len(guarded.args) == 1:
                new.value = self._writable(guarded.args[0], "_write_", node)
        return new

    # -- augmented assignment on items and attributes ---------------------------------

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        """``x += v`` stays a plain in-place operation; items and attributes are guarded.

        ``_inplacevar_`` protects nothing: it is ``operator.iadd`` and friends, which run
        the operand's own in-place method exactly as the bytecode does, and rebinding a
        name writes only the program's own variable. ``d[k] += v`` and ``self.n += v``
        become a guarded read, a plain in-place operation on a temporary and a guarded
        store, in CPython's order of evaluation.
        """
        target = node.target
        if isinstance(target, ast.Name):
            return self.node_contents_visit(node)
        value_tmp = self.gen_tmp_name()
        obj = self.visit(target.value)
        stable = self._stable[-1] if self._stable else {}
        if isinstance(obj, ast.Name) and obj.id in stable:
            # A stable name cannot be rebound while the value is computed: no temporary.
            obj_tmp, keep = obj.id, False
        else:
            obj_tmp, keep = self.gen_tmp_name(), True
        if isinstance(target, ast.Subscript):
            key = target.slice
            if isinstance(key, ast.Slice):
                key = _call(
                    "slice",
                    *(part or ast.Constant(None) for part in (key.lower, key.upper, key.step)),
                )
            key = self.visit(key)
            value = self.visit(node.value)
            key_tmp = self.gen_tmp_name()
            current: ast.expr = ast.Subscript(
                value=_name(obj_tmp), slice=_name(key_tmp), ctx=ast.Load()
            )
            store: ast.expr = ast.Subscript(
                value=self._writable(_name(obj_tmp), "_write_", node),
                slice=_name(key_tmp),
                ctx=ast.Store(),
            )
            stmts: list[ast.stmt] = [ast.Assign(targets=[_name(key_tmp, ast.Store())], value=key)]
        elif isinstance(target, ast.Attribute):
            attr = target.attr
            own = is_own_attribute(attr)
            if (attr.startswith("_") and not own) or attr in INSPECT_ATTRIBUTES:
                self.error(
                    node, f'"{attr}" is an invalid attribute name because it starts with "_".'
                )
                return node
            value = self.visit(node.value)
            read, write = ("_own_getattr_", "_own_write_") if own else ("_getattr_", "_write_")
            if not keep and self._site_ok(obj, node) and _size(value) <= _MAX_COPIED_ARGS:
                return self._fused_aug_assign(node, obj_tmp, attr, value, value_tmp, write)
            current = self._read(_name(obj_tmp), attr, read, node)
            store = ast.Attribute(
                value=self._writable(_name(obj_tmp), write, node), attr=attr, ctx=ast.Store()
            )
            stmts = []
        else:  # pragma: no cover - the grammar allows nothing else
            self.not_allowed(node)
            return node
        if keep:
            stmts.insert(0, ast.Assign(targets=[_name(obj_tmp, ast.Store())], value=obj))
        stmts += [
            ast.Assign(targets=[_name(value_tmp, ast.Store())], value=current),
            ast.AugAssign(target=_name(value_tmp, ast.Store()), op=node.op, value=value),
            ast.Assign(targets=[store], value=_name(value_tmp)),
        ]
        for stmt in stmts:
            ast.copy_location(stmt, node)
            _located(stmt, node)
        return stmts

    def _fused_aug_assign(
        self, node: ast.AugAssign, obj: str, attr: str, value: ast.expr, tmp: str, write: str
    ) -> list[ast.stmt]:
        """``self.n += v`` on a stable name: one site for the read and the write.

        ``if type(self) is _sN_: self.n += v`` (CPython's own bytecode), else the guarded
        read (``_rws_``, which records the type when the read needs no guard and the
        object is the program's own, so writable), the in-place operation and the
        guarded write. The test is fresh at each execution; between it and the read
        nothing runs, and a write verdict does not depend on anything a class write
        changes. ``v`` is copied into both branches; one runs.
        """
        slot = self._new_site()
        fast = ast.AugAssign(
            target=ast.Attribute(value=_name(obj), attr=attr, ctx=ast.Store()),
            op=node.op,
            value=value,
        )
        slow: list[ast.stmt] = [
            ast.Assign(
                targets=[_name(tmp, ast.Store())],
                value=_call(READ_WRITE_SITE, _name(obj), ast.Constant(attr), ast.Constant(slot)),
            ),
            ast.AugAssign(target=_name(tmp, ast.Store()), op=node.op, value=_copy_tree(value)),
            ast.Assign(
                targets=[ast.Attribute(value=_call(write, _name(obj)), attr=attr, ctx=ast.Store())],
                value=_name(tmp),
            ),
        ]
        stmt = ast.If(test=self._same_type(obj, slot), body=[fast], orelse=slow)
        return [_located(ast.copy_location(stmt, node), node)]

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
                    elts=[self.visit(_copy_tree(cls.cls)), ast.Constant(len(cls.patterns))],
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
