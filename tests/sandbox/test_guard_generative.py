"""Generative guard test: programs composed from allowed names and attribute chains.

Hypothesis walks the reachable object graph the way a program can: it starts from an
allowed builtin or module attribute and takes up to ``_STEPS`` steps, each one a small
program (compiled by the real ``SandboxPolicy``, run with the real guards, builtins and
importer) that reads an attribute (``getattr`` with a public or a dangerous name), calls
the value (no argument, a literal, a program function or class, another value held),
indexes it, iterates it or formats it. Every value a program obtains, including the
exceptions it catches and their arguments, is checked: never a module, frame, code
object, traceback, metaclass, a globals or the real builtins dict, an unguarded builtin,
or a host function (one defined outside the sandbox-facing modules).

The programs run **in-process** with the same guard policy as the worker (the objects
must be inspected by trusted code after each step, and a worker round trip per step would
make a useful number of examples too slow for two shared cores). Steps that would block
or allocate without bound (``time.sleep``, infinite iterators as arguments, large
numbers) are skipped.
"""

from __future__ import annotations

import builtins
import csv
import decimal
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.sandbox.python import _builtins, _modules, _stdlib
from codemode.sandbox.python._asyncio import make_asyncio
from codemode.sandbox.python._guest import compile_program
from codemode.sandbox.python._objects import _Namespace
from codemode.sandbox.python._policy import MAIN

_STEPS = 6
_PYTHON_DIR = Path(_builtins.__file__).resolve().parent
_SANDBOX_DIR = _PYTHON_DIR.parent
# Host code that programs may legitimately hold functions of: the guards and the
# sandbox versions of library callables are what programs are meant to call.
_PROGRAM_FACING = {
    str((_PYTHON_DIR / name).resolve())
    for name in ("_builtins.py", "_modules.py", "_stdlib.py", "_asyncio.py")
}
_UNGUARDED = {
    id(getattr(builtins, name))
    for name in """
    eval exec compile open __import__ globals vars locals getattr setattr delattr type
    input breakpoint memoryview dir print
    """.split()
}

_DANGEROUS_NAMES = """
__class__ __globals__ __dict__ __self__ __func__ __wrapped__ __closure__ __code__
__builtins__ __init__ __subclasses__ __base__ __bases__ __mro__ __reduce_ex__ __module__
__name__ __qualname__ __doc__ __getattribute__ __get__ __call__ __annotations__
__defaults__ __kwdefaults__ __traceback__ __context__ __cause__ __loader__ __spec__
gi_frame gi_code cr_frame cr_await ag_frame f_back f_globals f_locals f_builtins tb_frame
tb_next obj func args keywords register dispatch registry dispatcher fget fset data
default_factory maps parents cache_info cache_parameters format format_map mro send
throw close exceptions value name
""".split()

_ARGS = [
    "1",
    '"x"',
    '"__class__"',
    '"__globals__"',
    '"{0.__class__}"',
    '"{0.__init__.__globals__}"',
    '"{0[0]}"',
    '"real.__class__"',
    '"a.b"',
    '"int"',
    "\"__import__('os')\"",
    "[1, 2]",
    '{"a": 1}',
    "f",
    "C",
    "C()",
    "C().m",
    "tools",
    "None",
]

_KEYS = ["0", "-1", '"a"', '"__builtins__"', '"_getattr_"']

_PRELUDE = """
def f(x: "int"):
    return x
class C:
    def m(self):
        return 1
"""


def _host_call(name: str, payload: Any) -> Any:
    """The host side of ``tools.x(...)`` in these programs: must never be reachable."""
    return None


class _Printer:
    def _call_print(self, *args: Any, **kwargs: Any) -> None:
        pass


def _make_env(held: list[Any]) -> dict[str, Any]:
    printer = _Printer()
    importer = _modules.make_importer({"asyncio": make_asyncio(lambda exc: None)})
    env = _builtins.make_guards(
        print_factory=lambda _getattr: printer, exc_guard=lambda: None, returned=lambda v: v
    )
    env["__builtins__"] = _builtins.make_builtins(importer)
    env["tools"] = _Namespace("tools", ["echo"], _host_call)
    env["held"] = held
    return env


def _run(source: str, env: dict[str, Any]) -> None:
    code = compile_program(source)
    assert not isinstance(code, str), f"{code}\n{source}"
    exec(code, env)
    coroutine = env[MAIN]()
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()


def _module_names(module: str) -> dict[str, Any]:
    if module == "asyncio":  # the guest's per-run facade
        proxy = make_asyncio(lambda exc: None)
        return {name: getattr(proxy, name) for name in dir(proxy)}
    return _modules.module_table(module)


def _roots() -> list[str]:
    table = _builtins.make_builtins(lambda *a, **k: None)
    roots = [f"v = {name}" for name in table if not name.startswith("_")]
    for module in _modules.ALLOWED_MODULES:
        alias = module.replace(".", "_")
        roots.append(f"import {module} as {alias}\nv = {alias}")
        exported = _module_names(module)
        names = sorted(set(exported) | _stdlib.PER_RUN_NAMES.get(module, frozenset()))
        roots.extend(f"from {module} import {name} as v" for name in names)
    return roots


def _callable_roots(modules: tuple[str, ...]) -> list[tuple[str, str]]:
    roots = []
    if "builtins" in modules:
        table = _builtins.make_builtins(lambda *a, **k: None)
        roots = [("", n) for n, value in table.items() if callable(value) and n[0] != "_"]
    for module in modules:
        if module == "builtins" or module not in _modules.ALLOWED_MODULES:
            continue
        exported = _module_names(module)
        for name, value in sorted(exported.items()):
            if callable(value) and value is not _stdlib.sleep:
                roots.append((f"from {module} import {name} as fn\n", "fn"))
    return roots


_ROOTS = _roots()
# Half of the draws come from here: the objects an attacker starts from (the bindings,
# the program's own functions and classes, host-built wrappers) and the callables that
# take arbitrary objects and reflect on them. Uniform draws over ~1,000 names rarely
# chain three of these.
_FOCUS_ROOTS = [
    "v = tools", "v = tools.echo", "v = print", "v = f", "v = C", "v = C()", "v = C().m",
    "v = type(tools)", "v = type(tools.echo)", "v = type(print)", "v = type(f)",
    "v = getattr", "v = 'x'.format", "v = ToolCallError", "v = [].append",
    "import json\nv = type(json)", "import functools\nv = functools.singledispatch(f)",
    "import functools\nv = functools.partial(f, 1)", "import functools\nv = functools.lru_cache(f)",
]  # fmt: skip
_FOCUS_MODULES = ("builtins", "copy", "dataclasses", "functools", "operator", "typing", "enum",
                  "collections", "pprint", "traceback", "string", "asyncio")  # fmt: skip
_CALLABLE_ROOTS = _callable_roots(("builtins", *_modules.ALLOWED_MODULES))
_FOCUS_CALLABLES = _callable_roots(_FOCUS_MODULES)


def _is_host_function(value: Any) -> bool:
    if isinstance(value, types.MethodType):
        return _is_host_function(value.__func__)
    if not isinstance(value, types.FunctionType):
        return False
    if value is _host_call:
        return True
    filename = str(Path(value.__code__.co_filename).resolve())
    if filename in _PROGRAM_FACING:
        return False
    return filename.startswith(str(_SANDBOX_DIR)) or "/engine/" in filename


def _violation(value: Any) -> str | None:
    if isinstance(value, (types.ModuleType, types.FrameType, types.CodeType)):
        return f"a {type(value).__name__} object"
    if isinstance(value, types.TracebackType):
        return "a traceback object"
    if isinstance(value, dict) and (
        value is builtins.__dict__ or "__builtins__" in value or "_getattr_" in value
    ):
        return "a globals or builtins dict"
    if id(value) in _UNGUARDED and any(value is getattr(builtins, n) for n in dir(builtins)):
        return f"the unguarded builtin {value!r}"
    if (
        isinstance(value, type)
        and issubclass(value, type)
        and not _builtins.is_program_defined(value)
    ):
        return f"the metaclass {value!r}"
    if _is_host_function(value):
        return f"the host function {value!r}"
    return None


def _reachable(value: Any) -> Iterator[Any]:
    """``value`` and what a program reaches from it without another attribute step."""
    yield value
    if isinstance(value, BaseException):
        yield from value.args
    if isinstance(value, (list, tuple)):
        yield from value[:20]
    if isinstance(value, dict):
        for key, item in list(value.items())[:20]:
            yield key
            yield item


def _usable_argument(value: Any) -> bool:
    # Infinite iterators (itertools.count) or large numbers as arguments only make
    # list()/bytearray() run out of time or memory in this process.
    if hasattr(type(value), "__next__"):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return abs(value) <= 1000
    return not isinstance(value, (str, bytes)) or len(value) <= 1000


def _step(data: st.DataObject, held: list[Any]) -> str | None:
    index = len(held) - 1
    current = held[index]
    kind = data.draw(
        st.sampled_from(["attr", "attr", "call", "call", "apply", "apply", "item", "iter", "fmt"])
    )
    target = f"held[{index}]"
    if kind == "attr":
        public = sorted(n for n in _safe_dir(current) if not n.startswith("_"))
        pool = public + _DANGEROUS_NAMES if public else _DANGEROUS_NAMES
        return f"v = getattr({target}, {data.draw(st.sampled_from(pool))!r})"
    if kind == "call":
        if not callable(current) or current is _stdlib.sleep:
            return None
        choices = list(_ARGS) + [
            f"held[{i}]" for i, value in enumerate(held) if _usable_argument(value)
        ]
        arity = data.draw(st.integers(0, 2))
        args = [data.draw(st.sampled_from(choices)) for _ in range(arity)]
        return f"v = {target}({', '.join(args)})"
    if kind == "apply":
        # Another allowed callable applied to what the walk holds (type(tools), then
        # dataclasses.dataclass(...), then dataclasses.asdict(held[0]) ...).
        imports, fn = data.draw(
            st.one_of(st.sampled_from(_FOCUS_CALLABLES), st.sampled_from(_CALLABLE_ROOTS))
        )
        held_args = [f"held[{i}]" for i, value in enumerate(held) if _usable_argument(value)]
        if not held_args:
            return None
        args = [data.draw(st.sampled_from(held_args))]
        if data.draw(st.booleans()):
            args.append(data.draw(st.sampled_from(_ARGS + held_args)))
        return f"{imports}v = {fn}({', '.join(args)})"
    if kind == "item":
        key = data.draw(st.sampled_from(_KEYS))
        return f"v = {target}[{key}]"
    if kind == "iter":
        if not _usable_argument(current) and not hasattr(type(current), "__next__"):
            return None
        return f"v = next(iter({target}))"
    template = data.draw(st.sampled_from(["{0}", "{0!r}", "{0.__class__}", "{0[0]}", "{0.real}"]))
    return f"v = {template!r}.format({target})"


def _safe_dir(value: Any) -> list[str]:
    try:
        return list(dir(value))
    except Exception:
        return []


def _program(body: str) -> str:
    lines = "\n".join("    " + line for line in body.splitlines())
    return f"{_PRELUDE}try:\n{lines}\nexcept BaseException as e:\n    v = e\nheld.append(v)\n"


@pytest.fixture
def quiet_process_state() -> Iterator[None]:
    """Process-wide state the walk may change through allowed calls, restored after."""
    limit = csv.field_size_limit()
    dialects = set(csv.list_dialects())
    with decimal.localcontext():
        yield
    csv.field_size_limit(limit)
    for name in set(csv.list_dialects()) - dialects:
        csv.unregister_dialect(name)


@settings(
    # More for a hunt: GUARD_WALK_EXAMPLES=20000 pytest tests/sandbox/test_guard_generative.py
    max_examples=int(os.environ.get("GUARD_WALK_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_no_program_obtains_a_forbidden_object(
    quiet_process_state: None, data: st.DataObject
) -> None:
    held: list[Any] = []
    env = _make_env(held)
    trail = [data.draw(st.one_of(st.sampled_from(_FOCUS_ROOTS), st.sampled_from(_ROOTS)))]
    _run(_program(trail[0]), env)
    for _ in range(data.draw(st.integers(1, _STEPS))):
        for value in _reachable(held[-1]):
            problem = _violation(value)
            assert problem is None, f"obtained {problem} via:\n" + "\n".join(trail)
        step = _step(data, held)
        if step is None:
            break
        trail.append(step)
        _run(_program(step), env)
    for value in _reachable(held[-1]):
        problem = _violation(value)
        assert problem is None, f"obtained {problem} via:\n" + "\n".join(trail)


def test_the_walk_detects_a_forbidden_object() -> None:
    # The checker itself: an unguarded environment must be caught at once.
    assert _violation(types) is not None
    assert _violation(builtins.__dict__) is not None
    assert _violation(builtins.open) is not None
    assert _violation(_host_call) is not None
    assert _violation(type) is not None
    assert _violation(_stdlib.copy_) is None
    assert _violation(len) is None


# -- one hop, exhaustively ---------------------------------------------------------------

# The callables that take arbitrary objects and reflect on them, copy them, rewrite them
# or look names up in them: each is applied to every focus root (and a second argument),
# and every dangerous name is read from each result.
_REFLECTIVE = {
    "builtins": "type getattr dir iter next super isinstance repr format property "
    "classmethod staticmethod list dict",
    "copy": "copy deepcopy",
    "dataclasses": "dataclass fields asdict astuple replace is_dataclass",
    "functools": "singledispatch singledispatchmethod wraps partial total_ordering "
    "lru_cache cached_property reduce cmp_to_key",
    "operator": "attrgetter methodcaller itemgetter call setitem",
    "typing": "final cast runtime_checkable overload NamedTuple TypedDict",
    "enum": "unique Enum",
    "collections": "namedtuple UserString ChainMap defaultdict",
    "pprint": "pformat saferepr",
    "traceback": "format_exception",
    "string": "Template capwords",
    "json": "dumps",
}
_SECOND = [None, "tools", '"__class__"', "f"]


def _reflective_callables() -> list[tuple[str, str]]:
    out = []
    for module, names in _REFLECTIVE.items():
        for name in names.split():
            if module == "builtins":
                out.append(("", name))
            else:
                out.append((f"from {module} import {name} as fn\n", "fn"))
    return out


def _check_new(held: list[Any], start: int, trail: str) -> None:
    for value in held[start:]:
        for reached in _reachable(value):
            problem = _violation(reached)
            assert problem is None, f"obtained {problem} via:\n{trail}"


def test_one_hop_over_reflective_callables(quiet_process_state: None) -> None:
    held: list[Any] = []
    env = _make_env(held)
    for root in _FOCUS_ROOTS:
        _run(_program(root), env)
    roots = len(held)
    _check_new(held, 0, "the roots")
    names = repr(_DANGEROUS_NAMES)
    sweep = (
        "base = held[{0}]\nfor n in {1}:\n    try:\n        held.append(getattr(base, n))\n"
        "    except BaseException as e:\n        held.append(e)\n"
    )
    for index in range(roots):
        _run(sweep.format(index, names), env)
        _check_new(held, roots, f"{_FOCUS_ROOTS[index]}\nthen getattr")
        del held[roots:]
    for imports, fn in _reflective_callables():
        for index in range(roots):
            for second in _SECOND:
                args = f"held[{index}]" + (f", {second}" if second else "")
                step = f"{imports}v = {fn}({args})"
                _run(_program(step), env)
                _run(sweep.format(len(held) - 1, names), env)
                _check_new(held, roots, f"{_FOCUS_ROOTS[index]}\n{step}\nthen getattr")
                del held[roots:]
