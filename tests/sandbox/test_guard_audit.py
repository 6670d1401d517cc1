"""The guard audit: escapes through allow-listed callables, and the audit table itself.

The first group are regression tests for callables the audit found unsafe (each program
is ours, written against this sandbox, and each ran to the bad outcome before its fix).
They run in real workers. The second group checks the audit table (``_audit``) covers
every name a program can reach, so that allowing a new name without classifying it fails.
"""

from __future__ import annotations

import builtins
import dis
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sandbox_helpers import Run, err, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.python import _audit, _builtins, _modules

pytestmark = pytest.mark.anyio

_HOSTNAME = Path("/etc/hostname")
_HOST_SECRET = _HOSTNAME.read_text().strip() if _HOSTNAME.exists() else ""


async def test_singledispatch_register_does_not_evaluate_string_annotations(run: Run) -> None:
    # typing.get_type_hints would eval the annotation in the program's globals without
    # the guards: the class it builds carries a host file's contents back.
    program = """
import functools
@functools.singledispatch
def f(x):
    return "base"
def g(x: "(lambda b: b.type('Leak', (), {'v': b.open('/etc/hostname').read()}))(getattr.__globals__['builtins'])"):
    return "leak"
try:
    f.register(g)
except TypeError as e:
    return "refused: " + str(e)
return [getattr(k, "v", None) for k in f.registry]
"""
    value = ok(await run(program))
    assert isinstance(value, str), value
    assert "annotations are not evaluated in the sandbox" in value, value
    if _HOST_SECRET:
        assert _HOST_SECRET not in value


async def test_singledispatchmethod_register_does_not_evaluate_string_annotations(
    run: Run,
) -> None:
    program = """
import functools
class C:
    @functools.singledispatchmethod
    def f(self, x):
        return "base"
    @f.register
    def _(self, x: "getattr.__globals__['builtins'].__name__"):
        return "leak"
return C().f(1)
"""
    assert "annotations are not evaluated in the sandbox" in err(await run(program))


async def test_singledispatch_still_dispatches_on_classes_and_annotations(run: Run) -> None:
    program = """
import functools
@functools.singledispatch
def kind(x):
    return "other"
@kind.register
def _(x: int):
    return "int"
@kind.register(str)
def _(x):
    return "str"
@kind.register
def _(x: list | tuple):
    return "seq"
class C:
    @functools.singledispatchmethod
    def f(self, x):
        return "base"
    @f.register
    def _(self, x: float):
        return "float"
return [kind(1), kind("a"), kind([1]), kind(()), kind(None), C().f(1.5), C().f(1)]
"""
    assert ok(await run(program)) == ["int", "str", "seq", "seq", "other", "float", "base"]


# Denials are terminal (kind ``forbidden``): each attempt is its own run.
_FORMAT_BYPASSES = [
    # UserString.format delegates to the real str.format of .data, whose field lookups
    # skipped the attribute guard.
    'collections.UserString("{0.__class__.__mro__}").format(1)',
    'collections.UserString.format(collections.UserString("{0.__class__}"), 1)',
    'collections.UserString("{a.__class__}").format_map({"a": 1})',
    # super(S, s).format is the real str.format (or UserString.format) bound to s.
    'super(S, S("{0.__class__.__mro__}")).format(1)',
    'super(S, S).format("{0.__class__.__mro__}", 1)',
    'super(U, U("{0.__class__.__mro__}")).format(1)',
    'super(S, S("{a.__class__}")).format_map({"a": 1})',
]
_FORMAT_PRELUDE = """
import collections
class S(str):
    pass
class U(collections.UserString):
    pass
"""


@pytest.mark.parametrize("expression", _FORMAT_BYPASSES)
async def test_format_field_lookups_go_through_the_guards(run: Run, expression: str) -> None:
    message = err(await run(f"{_FORMAT_PRELUDE}return {expression}"), "forbidden")
    assert '"__class__" is an invalid attribute name' in message


async def test_guarded_formats_still_format(run: Run) -> None:
    program = _FORMAT_PRELUDE + (
        'return [collections.UserString("{0}-{x}").format(1, x=2), '
        'super(S, S("{0}!")).format(1), U("{k}").format_map({"k": 3})]'
    )
    assert ok(await run(program)) == ["1-2", "1!", "3"]


@pytest.mark.parametrize(
    "program",
    [
        # dataclass() on a host class turned its annotated private slots into fields that
        # asdict() read past the guards (handing out the host's binding closure).
        "import dataclasses\ndataclasses.dataclass(type(tools))\nreturn repr(dataclasses.asdict(tools))",
        "import dataclasses, json\ndataclasses.dataclass(type(json))\nreturn repr(dataclasses.astuple(json))",
        "import functools\nfunctools.total_ordering(type(tools))\nreturn 'rewrote a host class'",
    ],
)
async def test_class_rewriters_refuse_foreign_classes(run: Run, program: str) -> None:
    assert "can only be applied to the program's own classes" in err(
        await run(program), "forbidden"
    )


async def test_class_rewriters_still_work_on_program_classes(run: Run) -> None:
    program = """
import dataclasses, functools
@dataclasses.dataclass(frozen=True)
class P:
    x: int = 1
@functools.total_ordering
class V:
    def __init__(self, n):
        self.n = n
    def __eq__(self, other):
        return self.n == other.n
    def __lt__(self, other):
        return self.n < other.n
return [dataclasses.asdict(P(2)), V(2) >= V(1)]
"""
    assert ok(await run(program)) == [{"x": 2}, True]


async def test_copy_of_a_renamed_method_is_not_an_unguarded_getattr(run: Run) -> None:
    # copy.copy(bound method) reconstructs it as getattr(self, func.__name__); wraps()
    # could give a function any __name__ (a namedtuple's typename may be a dunder).
    program = """
import collections, copy, functools
N = collections.namedtuple("__class__", "a")
def m(self):
    return 1
try:
    m = functools.wraps(N)(m)
except TypeError as e:
    return "refused: " + str(e)
class C:
    pass
C.m = m
got = copy.copy(C().m)
return "copy returned the class" if isinstance(got, type) else "copy returned a method"
"""
    assert (
        ok(await run(program))
        == "refused: functools.wraps() cannot copy a dunder __name__ in the sandbox"
    )


async def test_copy_of_a_method_still_works(run: Run) -> None:
    program = """
import copy
class C:
    def __init__(self):
        self.n = 2
    def m(self):
        return self.n
c = C()
m = copy.copy(c.m)
d = copy.deepcopy([c.m])[0]
return [m(), d(), copy.copy([1, 2]), copy.deepcopy({"a": [1]})]
"""
    assert ok(await run(program)) == [2, 2, [1, 2], {"a": [1]}]


async def test_enum_functional_api_cannot_define_dunder_methods(run: Run) -> None:
    # A dunder member became a method: an __exit__ that swallows MemoryError without the
    # terminal-limit guard every program-written __exit__ gets.
    program = """
import enum
try:
    E = enum.Enum("E", [("A", 1), ("__enter__", lambda s: s), ("__exit__", lambda *a: True)])
except ValueError as e:
    return "refused: " + str(e)
with E.A:
    b = bytearray(1 << 40)
return "survived a MemoryError"
"""
    assert ok(await run(program)).startswith("refused: enum member names may not start with")


async def test_enum_functional_api_still_works(run: Run) -> None:
    program = """
import enum
Color = enum.Enum("Color", "RED GREEN")
Perm = enum.Flag("Perm", [("R", 4), ("W", 2)])
Level = enum.IntEnum("Level", {"LOW": 1, "HIGH": 2})
class Shape(enum.Enum):
    SQUARE = enum.auto()
    CIRCLE = enum.auto()
return [Color.RED.name, Color(2).name, (Perm.R | Perm.W).value, Level.HIGH + 1,
        Shape.CIRCLE.value, isinstance(Color.RED, enum.Enum), [c.name for c in Color]]
"""
    assert ok(await run(program)) == ["RED", "GREEN", 6, 3, 2, True, ["RED", "GREEN"]]


@pytest.mark.parametrize(
    "expression",
    [
        'operator.attrgetter("__class__")(1)',
        'operator.attrgetter("real.__class__")(1)',
        'operator.methodcaller("__reduce_ex__", 2)(1)',
        'operator.attrgetter("gi_frame")(i for i in [])',
        'operator.setitem(type(tools).__init__, "x", 1)',
    ],
)
async def test_operator_getters_and_setters_go_through_the_guards(
    run: Run, expression: str
) -> None:
    err(await run(f"import operator\nreturn {expression}"), "forbidden")


async def test_operator_getters_still_work(run: Run) -> None:
    program = """
import operator
d = {}
operator.setitem(d, "k", 1)
return [operator.attrgetter("real", "imag")(3), operator.methodcaller("upper")("a"), d]
"""
    assert ok(await run(program)) == [[3, 0], "A", {"k": 1}]


@pytest.mark.parametrize(
    "expression",
    [
        # __init__ is readable (for super().__init__), but a host object's bound
        # initialiser rewrote its private state: a module proxy's table, the bindings'
        # call function.
        'json.__init__("json", {"dumps": lambda x: "hijacked"})',
        'type(json).__init__(json, "json", {"dumps": lambda x: "hijacked"})',
        "super(type(json), json).__init__",
        'type(tools).__init__(tools, "tools", [], print)',
    ],
)
async def test_host_objects_cannot_be_reinitialised(run: Run, expression: str) -> None:
    program = f"import json\n{expression}\nreturn json.dumps(1)"
    message = err(await run(program), "forbidden")
    assert "cannot be re-initialised" in message or '"__init__" of' in message, message


async def test_program_initialisers_still_work(run: Run) -> None:
    program = """
class E(ValueError):
    def __init__(self, m):
        super().__init__(m)
        ValueError.__init__(self, m + "!")
class D(dict):
    def __init__(self):
        dict.__init__(self, a=1)
return [str(E("x")), D()]
"""
    assert ok(await run(program)) == ["x!", {"a": 1}]


# -- the audit table ---------------------------------------------------------------------


class _Printer:
    def _call_print(self, *args: object, **kwargs: object) -> None:
        pass


def _exported(module: str) -> dict[str, object]:
    """What ``import module`` gives a program (per-run modules bound to a dummy run)."""
    from codemode.sandbox.python._asyncio import make_asyncio

    importer = _modules.make_importer({"asyncio": make_asyncio(lambda exc: None)})
    proxy = importer(module, {"_print_": lambda _: _Printer()}, None, ("x",), 0)
    return {name: getattr(proxy, name) for name in dir(proxy)}


def test_every_allowed_module_name_is_classified() -> None:
    unclassified = []
    for module in _modules.ALLOWED_MODULES:
        for name in _exported(module):
            if f"{module}.{name}" not in _audit.AUDIT:
                unclassified.append(f"{module}.{name}")
    assert not unclassified, f"allowed but not classified in _audit.AUDIT: {unclassified}"


def test_every_builtin_is_classified() -> None:
    table = _builtins.make_builtins(lambda *a, **k: None)
    missing = [f"builtins.{n}" for n in table if f"builtins.{n}" not in _audit.AUDIT]
    assert not missing, f"builtins not classified in _audit.AUDIT: {missing}"


def test_audit_verdicts_are_known_and_reasoned() -> None:
    for key, (verdict, reason) in _audit.AUDIT.items():
        assert verdict in _audit.VERDICTS, key
        assert len(reason) > 10, key


def test_removed_names_are_not_reachable() -> None:
    for key, (verdict, _reason) in _audit.AUDIT.items():
        module, name = key.rsplit(".", 1)
        if verdict != "removed":
            continue
        if module == "builtins":
            table = _builtins.make_builtins(lambda *a, **k: None)
            assert name not in table, key
        else:
            assert name not in _exported(module), key


def test_wrapped_names_are_not_the_originals() -> None:
    import importlib

    for key, (verdict, _reason) in _audit.AUDIT.items():
        module, name = key.rsplit(".", 1)
        if verdict != "wrapped" or module == "builtins":
            continue
        real = getattr(importlib.import_module(module), name)
        assert _exported(module)[name] is not real, key


def test_no_exported_value_is_a_module_metaclass_or_eval_like_builtin() -> None:
    dangerous = {id(getattr(builtins, n)) for n in ("eval", "exec", "compile", "open")}
    dangerous |= {id(builtins.__import__), id(builtins.globals), id(builtins.vars)}
    for module in _modules.ALLOWED_MODULES:
        for name, value in _exported(module).items():
            assert not isinstance(value, types.ModuleType), (module, name)
            assert id(value) not in dangerous, (module, name)
            if isinstance(value, type):
                assert not issubclass(value, type), f"{module}.{name} is a metaclass"


# -- the second net: an audit hook in every Python worker ----------------------------------


@pytest.fixture(scope="module")
async def raw_runtime() -> AsyncIterator[PythonRuntime]:
    # The test-only raw guest shares the fork server (and so the audit hook) with the
    # Python guest; its code can impersonate program frames, as an escape would.
    guests = {
        "python": "codemode.sandbox.python._guest",
        "raw": "codemode.sandbox.worker._raw_guest",
    }
    async with PythonRuntime(Limits(max_compute_ms=10_000), _guests=guests) as runtime:
        yield runtime


async def _raw(runtime: PythonRuntime, program: str) -> Any:
    request = CodeRunRequest(program, [], AbortController().signal)
    with anyio.fail_after(50):
        return ok(await runtime._run_guest(request, "raw"))


async def test_code_evaluation_under_program_frames_is_refused(raw_runtime: PythonRuntime) -> None:
    # What any future evaluating callable would do: eval() called with program code on
    # the stack. The library's own generators (dataclass, namedtuple) keep working.
    program = """
source = '''
def evaluate():
    out = []
    for attempt in [lambda: eval("1 + 1"), lambda: exec("x = 1"), lambda: compile("1", "s", "eval")]:
        try:
            out.append("ran: " + type(attempt()).__name__)
        except AttributeError as e:  # DeniedAccess: terminal for real programs
            out.append(str(e))
    return out
def generate():
    import collections, dataclasses, typing
    @dataclasses.dataclass
    class P:
        x: int = 1
    N = collections.namedtuple("N", "a b")
    class T(typing.NamedTuple):
        y: "int" = 2
    return [P().x, N(1, 2).b, T().y, typing.List["x"] is not None]
'''
namespace = {}
exec(compile(source, "<program>", "exec"), namespace)
outside = eval("2 + 2")
result = [namespace["evaluate"](), namespace["generate"](), outside]
"""
    assert await _raw(raw_runtime, program) == [
        [
            "compile() of code is not allowed in the sandbox",
            "compile() of code is not allowed in the sandbox",
            "compile() of code is not allowed in the sandbox",
        ],
        [1, 2, 2, True],
        4,
    ]


# -- a static walk: which exported callables can reach code evaluation ----------------------

# Names whose presence in a reachable code object means "may evaluate or import by
# string, or look attributes up by string": a "safe" verdict must say how it is handled.
# The builtins count only when loaded as the builtin (re.compile is not compile).
_BUILTIN_PRIMITIVES = {"eval": "eval", "exec": "exec", "compile": "compile", "__import__": "import"}
_PRIMITIVES = {
    "get_type_hints": "eval",
    "_eval_type": "eval",
    "_evaluate": "eval",
    "import_module": "import",
    "vformat": "format",
    "attrgetter": "getattr",
    "methodcaller": "getattr",
}
_CONSTRUCTORS = ("__init__", "__new__", "__call__", "__init_subclass__", "__set_name__")


def _codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out.extend(_codes(const))
    return out


def _functions_of(value: object, *, all_methods: bool) -> list[types.FunctionType]:
    if isinstance(value, types.FunctionType):
        return [value]
    if isinstance(value, (classmethod, staticmethod)):
        return _functions_of(value.__func__, all_methods=all_methods)
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset) if isinstance(f, types.FunctionType)]
    if isinstance(value, type):
        out: list[types.FunctionType] = []
        for cls in value.__mro__:
            if cls.__module__ == "builtins":
                continue
            for name, member in vars(cls).items():
                if all_methods or name in _CONSTRUCTORS:
                    out.extend(_functions_of(member, all_methods=False))
        return out
    if all_methods and not isinstance(value, (types.BuiltinFunctionType, types.ModuleType)):
        # An exported instance (a special form, a UUID, a wrapper): its class's methods.
        return _functions_of(type(value), all_methods=True)
    call = vars(type(value)).get("__call__")
    return [call] if isinstance(call, types.FunctionType) else []


def _reaches(value: object) -> set[str]:
    """Primitives named anywhere in the Python code ``value`` can run (C code not seen)."""
    found: set[str] = set()
    seen: set[int] = set()
    todo = _functions_of(value, all_methods=True)
    while todo:
        function = todo.pop()
        if id(function.__code__) in seen:
            continue
        seen.add(id(function.__code__))
        cells = [c.cell_contents for c in function.__closure__ or () if _cell_set(c)]
        for referenced in cells:
            todo.extend(_functions_of(referenced, all_methods=False))
        for code in _codes(function.__code__):
            for instruction in dis.get_instructions(code):
                name = instruction.argval
                if (
                    instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME")
                    and name in _BUILTIN_PRIMITIVES
                    and function.__globals__.get(name, getattr(builtins, name))
                    is getattr(builtins, name)
                ):
                    found.add(_BUILTIN_PRIMITIVES[name])
            modules = [
                value
                for value in (function.__globals__.get(n) for n in code.co_names)
                if isinstance(value, types.ModuleType)
            ]
            for name in code.co_names:
                if name in _PRIMITIVES:
                    found.add(_PRIMITIVES[name])
                target = function.__globals__.get(name)
                if target is not None:
                    todo.extend(_functions_of(target, all_methods=False))
                for module in modules:  # ``dataclasses.dataclass(...)``: module attributes
                    todo.extend(_functions_of(getattr(module, name, None), all_methods=False))
    return found


def _cell_set(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def test_static_walk_every_evaluating_export_is_accounted_for() -> None:
    unexplained = []
    for module in _modules.ALLOWED_MODULES:
        for name, value in _exported(module).items():
            verdict, reason = _audit.AUDIT[f"{module}.{name}"]
            for primitive in sorted(_reaches(value)):
                if verdict == "safe" and primitive not in reason:
                    unexplained.append(f"{module}.{name} reaches {primitive}: {reason}")
    assert not unexplained, "\n".join(unexplained)


def test_static_walk_sees_the_known_escape() -> None:
    import functools
    import typing

    assert "eval" in _reaches(functools.singledispatch)
    assert "eval" in _reaches(typing.get_type_hints)
    assert "exec" in _reaches(_modules.module_table("dataclasses")["dataclass"])


async def test_file_and_process_access_under_program_frames_is_refused(
    raw_runtime: PythonRuntime,
) -> None:
    # An escape's payload runs under the program's frames: with the real open/os in
    # hand it still reads and lists nothing.
    program = """
import os
source = '''
def probe():
    out = []
    for attempt in [lambda: open("/etc/hostname").read(), lambda: os.listdir("/"),
                    lambda: os.scandir("/etc"), lambda: os.system("true")]:
        try:
            out.append("ran: " + type(attempt()).__name__)
        except AttributeError as e:  # DeniedAccess: terminal for real programs
            out.append(str(e))
    return out
'''
namespace = {"os": os}
exec(compile(source, "<program>", "exec"), namespace)
try:  # outside program frames the hook is dormant (the kernel layers may still refuse)
    os.listdir("/")
    outside = "not refused by the hook"
except OSError:
    outside = "not refused by the hook"
except AttributeError:
    outside = "refused by the hook"
result = [namespace["probe"](), outside]
"""
    assert await _raw(raw_runtime, program) == [
        [
            "open is not allowed in the sandbox",
            "os.listdir is not allowed in the sandbox",
            "os.scandir is not allowed in the sandbox",
            "os.system is not allowed in the sandbox",
        ],
        "not refused by the hook",
    ]
