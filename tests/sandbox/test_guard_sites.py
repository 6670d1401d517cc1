"""Guard sites: the guards' verdicts cached per access site, and the ways around them.

``p.x``, ``p.x = v`` and ``d[k] = v`` on a plain name compile to a type test against a
per-site global and, on a miss, the guard (see ``sandbox/python/_builtins.py``, "guard
sites"). Each technique an attacker would try against the fast path -- warm a site with
an object it may take, then hand it one the guard refuses; rebind the name between the
test and the access; shadow the names the test uses; change the class the verdict was
about -- must still end in the guard's denial. The in-process tests below count the
guard calls the compiled code makes (the same compile path and guards as the worker).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
from sandbox_helpers import Run, err, ok

from codemode.sandbox.python import _builtins, _modules
from codemode.sandbox.python._asyncio import make_asyncio
from codemode.sandbox.python._builtins import PROGRAM_MODULE
from codemode.sandbox.python._guest import compile_program
from codemode.sandbox.python._objects import own_getattr, own_write
from codemode.sandbox.python._policy import MAIN

pytestmark = pytest.mark.anyio

_CLASS = "class C:\n    def __init__(self):\n        self.x = 0\n        self._x = 0\n"

# Each warms a site with the program's own object, then hands it one the guard refuses.
WARMED_THEN_REFUSED = [
    pytest.param(
        _CLASS + "def put(o, v):\n    o.x = v\nput(C(), 1)\nput(C(), 2)\nimport json\nput(json, 3)",
        "'ModuleProxy' objects cannot be modified",
        id="attribute-write",
    ),
    pytest.param(
        "def put(o, k, v):\n    o[k] = v\nput({}, 'a', 1)\nput({}, 'a', 2)\nput(tools, 'a', 3)",
        "objects cannot be modified",
        id="item-write",
    ),
    pytest.param(
        _CLASS + "def peek(o):\n    return o._x\npeek(C())\npeek(C())\nimport json\npeek(json)",
        '"_x" is an invalid attribute name',
        id="private-read",
    ),
    pytest.param(
        _CLASS + "def poke(o):\n    o._x = 1\npoke(C())\npoke(C())\nimport json\npoke(json)",
        "private attributes of 'ModuleProxy' objects cannot be modified",
        id="private-write",
    ),
    pytest.param(
        "class O:\n    obj = 1\ndef get(o):\n    return o.obj\nget(O())\nget(O())\n"
        "try:\n    None.nothing\nexcept AttributeError as e:\n    get(e)",
        '"obj" of AttributeError',
        id="read-by-name-obj",
    ),
    pytest.param(
        "class O:\n    def send(self, v):\n        return v\n"
        "def get(o):\n    return o.send\nget(O())\nget(O())\n"
        "async def f():\n    pass\nget(f())",
        '"send" of coroutines',
        id="read-by-name-send",
    ),
    pytest.param(
        "class N:\n    numerator = 0\ndef bump(o):\n    o.numerator += 1\n"
        "bump(N())\nbump(N())\nimport fractions\nbump(fractions.Fraction(1, 2))",
        "'Fraction' objects cannot be modified",
        id="augmented-attribute",
    ),
    pytest.param(
        _CLASS + "def bump(o):\n    o._x += 1\nbump(C())\nbump(C())\nimport json\nbump(json)",
        '"_x" is an invalid attribute name',
        id="augmented-private",
    ),
    pytest.param(
        "def bump(o, k):\n    o[k] += 1\nbump({'a': 1}, 'a')\nbump({'a': 1}, 'a')\n"
        "import collections\nbump(collections.ChainMap({'a': 1}), 'a')",
        "'ChainMap' objects cannot be modified",
        id="augmented-item",
    ),
    pytest.param(
        _CLASS + "c = C()\ntry:\n    c.missing\nexcept AttributeError as e:\n    e.obj",
        '"obj" of AttributeError',
        id="fast-path-miss-hands-no-object",
    ),
]


@pytest.mark.parametrize(("program", "fragment"), WARMED_THEN_REFUSED)
async def test_a_warmed_site_still_refuses_what_the_guard_refuses(
    run: Run, program: str, fragment: str
) -> None:
    message = err(await run(program + "\nreturn 'escaped'"), "forbidden")
    assert fragment in message, message


# Each binds ``o`` to the program's object, warms the site on it in a loop, then rebinds
# ``o`` (to the json module proxy) in a way the compiler must see.
_LOOP = "for i in range(4):\n    o.x = i\n    if i == 2:\n        {rebind}\n"
REBINDINGS = {
    "nonlocal": "def swap():\n    nonlocal o\n    o = json\no = C()\n"
    + _LOOP.format(rebind="swap()"),
    "global-becomes-nonlocal": "def swap():\n    global o\n    o = json\no = C()\n"
    + _LOOP.format(rebind="swap()"),
    "walrus": "o = C()\n" + _LOOP.format(rebind="(o := json)"),
    "for-target": "o = C()\n" + _LOOP.format(rebind="for o in [json]:\n            pass"),
    "except-as": "o = C()\n"
    + _LOOP.format(
        rebind="try:\n            raise ValueError\n        except ValueError as o:\n"
        "            pass\n        o = json"
    ),
    "import-as": "o = C()\n" + _LOOP.format(rebind="import json as o"),
    "del-and-rebind": "o = C()\n" + _LOOP.format(rebind="del o\n        o = json"),
    "parameter": "def f(o):\n"
    + "".join("    " + line + "\n" for line in _LOOP.format(rebind="o = json").splitlines())
    + "f(C())\n",
    "comprehension-walrus": "o = C()\n" + _LOOP.format(rebind="[(o := json) for _ in [1]]"),
}


@pytest.mark.parametrize("how", sorted(REBINDINGS))
async def test_rebinding_a_name_between_accesses_is_seen(run: Run, how: str) -> None:
    program = _CLASS + "import json\n" + REBINDINGS[how] + "return 'escaped'"
    message = err(await run(program), "forbidden")
    assert "cannot be modified" in message, (program, message)


async def test_shadowing_the_names_a_site_tests_changes_nothing(run: Run) -> None:
    program = (
        _CLASS + "type = lambda o: C\ndict = C\nisinstance = lambda *a: True\n"
        "def put(o):\n    o.x = 1\nput(C())\nput(C())\nput(tools)\nreturn 'escaped'"
    )
    assert "objects cannot be modified" in err(await run(program), "forbidden")


@pytest.mark.parametrize(
    "name", ["_s0_", "_type_", "_rs_", "_ws_", "_ors_", "_ows_", "_rws_", "_sites_"]
)
async def test_programs_cannot_name_the_sites(run: Run, name: str) -> None:
    for program in (f"{name} = 1", f"x = {name}", f"def f({name}):\n    pass"):
        message = err(await run(program), "forbidden")
        assert f'"{name}" is an invalid variable name' in message


# -- what the elided guards did, the plain bytecode does ------------------------------------


async def test_in_place_operators_keep_their_semantics(run: Run) -> None:
    program = (
        "a = [1]\nb = a\na += [2]\n"  # list.__iadd__: in place, same object
        "t = (1,)\nu = t\nt += (2,)\n"  # tuple: a new object
        "class V:\n    def __init__(self):\n        self.n = []\n"
        "v = V()\nw = v.n\nv.n += [3]\n"
        "d = {'k': [0]}\nk = d['k']\nd['k'] += [4]\n"
        "s = 'x'\ns *= 3\n"
        "return [a is b, a, t is u, u, w is v.n, w, k is d['k'], k, s]"
    )
    assert ok(await run(program)) == [True, [1, 2], False, [1], True, [3], True, [0, 4], "xxx"]


async def test_augmented_items_evaluate_in_cpythons_order(run: Run) -> None:
    program = (
        "log = []\n"
        "def f(tag, value):\n    log.append(tag)\n    return value\n"
        "d = {'k': 1}\n"
        "f('obj', d)[f('key', 'k')] += f('value', 2)\n"
        "class P:\n    def __init__(self):\n        self.n = 1\n"
        "p = P()\nf('obj2', p).n += f('value2', 3)\n"
        "return [log, d, p.n]"
    )
    assert ok(await run(program)) == [["obj", "key", "value", "obj2", "value2"], {"k": 3}, 4]


async def test_a_method_call_site_evaluates_its_arguments_once(run: Run) -> None:
    program = (
        "calls = []\n"
        "def arg(v):\n    calls.append(v)\n    return v\n"
        "class P:\n    def m(self, a, b=0):\n        return a + b\n"
        "p = P()\n"
        "out = [p.m(arg(i), b=arg(10)) for i in range(3)]\n"
        "for i in range(3):\n    out.append(p.m(arg(i)))\n"
        "return [out, calls]"
    )
    assert ok(await run(program)) == [
        [10, 11, 12, 0, 1, 2],
        [0, 10, 1, 10, 2, 10, 0, 1, 2],
    ]


async def test_subscripts_still_run_the_objects_own_methods(run: Run) -> None:
    program = (
        "class D(dict):\n    def __getitem__(self, k):\n        return 'own:' + k\n"
        "d = D(a=1)\n"
        "return [d['a'], [1, 2, 3][1:], 'abc'[-1], tools['echo'] is not None]"
    )
    assert ok(await run(program)) == ["own:a", [2, 3], "c", True]


async def test_class_bodies_docstrings_and_super_keep_working(run: Run) -> None:
    program = (
        "d = {'a': 1}\n"
        "class Base:\n    def __init__(self, n):\n        self.n = n\n"
        "class C(Base):\n"
        "    k = d.get('a')\n"
        "    d['b'] = 2\n"
        "    def __init__(self, n):\n"
        '        """Doc of C."""\n'
        "        super().__init__(n)\n"
        "        self.m = self.n * 2\n"
        "c = C(3)\n"
        "return [C.k, d, c.n, c.m, C.__init__.__doc__]"
    )
    assert ok(await run(program)) == [1, {"a": 1, "b": 2}, 3, 6, "Doc of C."]


async def test_grouped_statements_print_and_call_as_written(run: Run) -> None:
    program = (
        "class P:\n"
        "    def __init__(self):\n        self.x = 1\n        self.y = 2\n"
        "    def show(self):\n        print(self.x, self.y)\n        return [self.x, self.y]\n"
        "p = P()\nout = []\n"
        "for i in range(3):\n"
        "    print(p.x, p.y)\n"
        "    out.append(p.show())\n"
        "    p.x, p.y = p.y, p.x + p.y\n"
        "return out"
    )
    result = await run(program)
    assert ok(result) == [[1, 2], [2, 3], [3, 5]]
    assert result.logs == ["1 2", "1 2", "2 3", "2 3", "3 5", "3 5"]


# -- the verdicts themselves, counted in-process ---------------------------------------------


class _Counted:
    """A run's globals (as the generative test builds them) with counting guards."""

    def __init__(self, *names: str) -> None:
        # Reads are counted for these attribute names only (not the program's imports).
        self.names = frozenset(names)
        # Library code that looks up a class's module (dataclasses) finds an empty one,
        # as in the worker (``_guest.serve``).
        sys.modules.setdefault(PROGRAM_MODULE, types.ModuleType(PROGRAM_MODULE))
        importer = _modules.make_importer({"asyncio": make_asyncio(lambda exc: None)})
        self.env = _builtins.make_guards(
            print_factory=lambda _getattr: None, exc_guard=lambda: None, returned=lambda v: v
        )
        self.env["__builtins__"] = _builtins.make_builtins(importer)
        self.env["_own_getattr_"] = own_getattr
        self.env["_own_write_"] = own_write
        self.calls: dict[str, int] = {}
        for name in ("_getattr_", "_write_", "_own_getattr_", "_own_write_"):
            self.env[name] = self._count(name, self.env[name])

    def _count(self, name: str, guard: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            if len(args) < 2 or args[1] in self.names:
                self.calls[name] = self.calls.get(name, 0) + 1
            return guard(*args)

        return counted

    def run(self, source: str) -> Any:
        code = compile_program(source)
        assert not isinstance(code, tuple), code
        exec(code, self.env)
        coroutine = self.env[MAIN]()
        try:
            coroutine.send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the program awaited")


def test_the_dict_str_loop_calls_each_guard_once_per_site() -> None:
    counted = _Counted("get")
    counted.run(
        "d = {}\nfor i in range(2000):\n    k = 'k' + str(i % 100)\n"
        "    d[k] = d.get(k, 0) + len(k)\n"
    )
    assert counted.calls == {"_getattr_": 1, "_write_": 1}


def test_own_class_sites_call_each_guard_once() -> None:
    counted = _Counted("x", "_y", "step")
    counted.run(
        "class P:\n    def __init__(self):\n        self.x = 0\n        self._y = 0\n"
        "    def step(self, i):\n        self.x += i\n        self._y = self._y + self.x\n"
        "p = P()\nfor i in range(500):\n    p.step(i)\n    p.x = p.x % 7\n"
    )
    # __init__: 2 writes; step: x read+write, _y write+read, x read; loop: step, x write+read.
    assert counted.calls == {"_write_": 3, "_getattr_": 4, "_own_write_": 2, "_own_getattr_": 1}


@pytest.mark.parametrize(
    ("make", "attr"),
    [
        pytest.param("import fractions\no = fractions.Fraction(1, 2)", "numerator", id="library"),
        pytest.param("import enum\nclass E(enum.Enum):\n    A = 1\no = E.A", "value", id="enum"),
        pytest.param("class K:\n    x = 1\no = K", "x", id="a-class-itself"),
        pytest.param(
            "import functools\nclass K:\n    @functools.cached_property\n    def x(self):\n"
            "        return 1\no = K()",
            "x",
            id="library-descriptor",
        ),
        pytest.param("class S(super):\n    x = 1\no = S(bool, True)", "real", id="super-subclass"),
        pytest.param(
            "class O:\n    def format(self):\n        pass\no = O()", "format", id="name-format"
        ),
        pytest.param("g = (i for i in [1])\no = g", "send", id="name-send"),
    ],
)
def test_a_site_keeps_no_verdict_where_the_guard_may_refuse(make: str, attr: str) -> None:
    counted = _Counted(attr)
    counted.run(make + f"\nfor i in range(5):\n    o.{attr}\n")
    assert counted.calls.get("_getattr_") == 5


def test_classes_whose_instances_resolve_attributes_elsewhere_are_never_fast() -> None:
    namespace = {"__module__": PROGRAM_MODULE}
    for base in (types.ModuleType, super, property):
        assert not _builtins._fast_class(type("X", (base,), dict(namespace)))
    assert _builtins._fast_class(type("X", (ValueError,), dict(namespace)))
    assert not _builtins._fast_class(type("X", (), {"__module__": "json"}))


def test_writing_a_class_drops_the_verdicts_about_it_and_its_subclasses() -> None:
    counted = _Counted("x")
    source = (
        "import functools\n"
        "class A:\n    pass\nclass B(A):\n    pass\n"
        "b = B()\nb.x = 1\n"
        "def read(o):\n    return o.x\n"
        "read(b)\nread(b)\n"  # one guard call: the verdict is kept
        "A.x = functools.cached_property(lambda self: 2)\n"  # a class write (to the base)
        "read(b)\nread(b)\nread(b)\n"  # the descriptor is not plain: the guard every time
        "setattr(A, 'x', 5)\nread(b)\nread(b)\n"
    )
    counted.run(source)
    assert counted.calls["_getattr_"] == 1 + 3 + 1


def test_fill_time_checks_see_what_a_decorator_added() -> None:
    counted = _Counted("x")
    counted.run(
        "import dataclasses\n"
        "@dataclasses.dataclass(slots=True)\nclass P:\n    x: int = 0\n"
        "p = P()\nfor i in range(3):\n    p.x = p.x + 1\n"
    )
    # Slots made by the library are plain member descriptors: one read, one write call.
    assert counted.calls == {"_getattr_": 1, "_write_": 1}


# -- statement groups: one test for the sites of a statement on one stable name ---------------


async def test_a_warmed_statement_group_still_refuses(run: Run) -> None:
    program = (
        "class N:\n    numerator = 0\n"
        "def bump(o):\n    o.numerator = o.numerator + 1\n"
        "bump(N())\nbump(N())\nimport fractions\nbump(fractions.Fraction(1, 2))\n"
        "return 'escaped'"
    )
    assert "'Fraction' objects cannot be modified" in err(await run(program), "forbidden")


def test_a_getter_in_a_group_keeps_the_group_off() -> None:
    # ``p.a`` runs code (a property) before ``p.b`` is read: the getter replaces ``b`` by
    # a descriptor that is not plain, and that read must take the guard at once.
    counted = _Counted("b")
    counted.run(
        "import functools\n"
        "state = {'flip': False}\n"
        "class P:\n"
        "    @property\n"
        "    def a(self):\n"
        "        if state['flip']:\n"
        "            P.b = functools.partialmethod(lambda s: 3)\n"
        "        return 1\n"
        "p = P()\n"
        "for i in range(6):\n"
        "    state['flip'] = i == 3\n"
        "    if i:\n"
        "        v = (p.a, p.b)\n"
        "    else:\n"
        "        P.b = 2\n"
    )
    # i=1: the site's verdict is made (1 call); i=2 fast; i=3 the getter writes P, the
    # read of b takes the guard (and again at i=4, 5: a partialmethod is not plain).
    assert counted.calls["_getattr_"] == 1 + 3


def test_code_before_a_read_leaves_the_read_its_own_test() -> None:
    counted = _Counted("x")
    counted.run(
        "import functools\n"
        "class P:\n    x = 1\n"
        "def swap(i):\n"
        "    if i == 2:\n"
        "        P.x = functools.partialmethod(lambda s: 5)\n"
        "    return 0\n"
        "p = P()\n"
        "total = 0\n"
        "for i in range(4):\n"
        "    total = (swap(i), p.x, p.x)\n"
    )
    # Two sites; each makes its verdict once (i=0), then after the class write at i=2
    # both take the guard at i=2 and i=3.
    assert counted.calls["_getattr_"] == 2 + 4


def test_the_group_verdict_is_dropped_by_a_class_write() -> None:
    counted = _Counted("x", "y")
    counted.run(
        "import functools\n"
        "class P:\n    pass\n"
        "p = P()\np.x = 1\np.y = 2\n"
        "for i in range(6):\n"
        "    if i == 3:\n"
        "        P.y = functools.cached_property(lambda s: 7)\n"
        "    v = p.x + p.y\n"
    )
    # i=0: both sites (2 calls) and the group verdict; i=1, 2: the group; i=3: the class
    # write drops it; x is plain again at once (1 call), y is not (3 calls: i=3, 4, 5).
    assert counted.calls["_getattr_"] == 2 + 1 + 3


@pytest.mark.parametrize("make", ["collections.defaultdict(int)", "collections.Counter()"])
def test_writes_to_dict_subclasses_need_the_guard_once(make: str) -> None:
    # The write guard allows every dict (an isinstance test, which follows the MRO).
    counted = _Counted()
    counted.run(
        f"import collections\nd = {make}\n"
        "for i in range(50):\n    d[i % 7] += 1\n    d['last'] = i\n"
    )
    assert counted.calls == {"_write_": 2}


def test_a_library_object_in_a_group_takes_the_guards_every_time() -> None:
    counted = _Counted("numerator", "denominator")
    counted.run(
        "import fractions\nf = fractions.Fraction(1, 3)\n"
        "for i in range(5):\n    v = (f.numerator, f.denominator)\n"
    )
    assert counted.calls == {"_getattr_": 10}


def test_the_policy_s_tree_copy_is_deep_and_keeps_locations_and_markers() -> None:
    # Guard sites compile a statement twice (its plain and its guarded form) from a copy
    # of it: the copy must be the same tree, locations and the policy's markers included,
    # and share no node (but the stateless contexts) with the original.
    import ast

    from codemode.sandbox.python._policy import _copy_tree

    source = (
        "class P:\n    def m(self, d):\n        self.x += d['k'][0]\n"
        "        return [f'{v!r:>3}' for v in (self.x, *d)]\n"
    )
    tree = ast.parse(source)
    target = tree.body[0].body[0].body[0]  # type: ignore[attr-defined]
    target._cm_marker = True
    copied = _copy_tree(tree)
    assert ast.dump(copied, include_attributes=True) == ast.dump(tree, include_attributes=True)
    originals = {id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context)}
    assert not originals & {id(n) for n in ast.walk(copied)}
    assert copied.body[0].body[0].body[0]._cm_marker is True  # type: ignore[attr-defined]
    copied.body[0].body[0].body[0].target.attr = "y"  # type: ignore[attr-defined]
    assert target.target.attr == "x"
    assert [ast.dump(n) for n in _copy_tree(tree.body)] == [ast.dump(n) for n in tree.body]
    assert compile(_copy_tree(tree), "<copy>", "exec") is not None
