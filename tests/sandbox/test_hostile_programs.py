"""Escape attempts against the Python guest's guards.

Built from public write-ups: RestrictedPython advisories (``str.format``/``format_map``
attribute traversal, guard shadowing through positional-only parameters, inspection
attributes), smolagents' local-executor CVEs (class-hierarchy walks to ``Popen``,
``getattr`` leaks to modules, dunder methods as time bombs) and pyjail techniques
(generator/coroutine frames, traceback frames, ``__builtins__`` rebuilds, module
internals). Each must fail with a clear error; none may reach a module, a frame or a
host object. The kernel layers behind these guards are tested in ``test_boundary.py``.
"""

from __future__ import annotations

import pytest
from sandbox_helpers import Run, err, ok

pytestmark = pytest.mark.anyio

# (program, fragment of the error message)
REFUSED_AT_COMPILE = [
    ("().__class__.__mro__[1].__subclasses__()", '"__mro__" is an invalid attribute name'),
    ("x = ().__class__", '"__class__" is an invalid attribute name'),
    ("[].__class__.__base__.__subclasses__()", '"__base__" is an invalid attribute name'),
    ("__builtins__['eval']('1')", '"__builtins__" is an invalid variable name'),
    ("__import__('os')", '"__import__" is an invalid variable name'),
    ("def f(_getattr_, /):\n    return _getattr_", '"_getattr_" is an invalid variable name'),
    ("def f(*, _write_=None):\n    pass", '"_write_" is an invalid variable name'),
    ("lambda _getitem_: _getitem_", '"_getitem_" is an invalid variable name'),
    ("_getattr_ = getattr", '"_getattr_" is an invalid variable name'),
    ("for _getiter_ in []:\n    pass", '"_getiter_" is an invalid variable name'),
    (
        "try:\n    pass\nexcept Exception as _print_:\n    pass",
        '"_print_" is an invalid variable name',
    ),
    ("import json as _getattr_", '"_getattr_" is an invalid variable name'),
    ("from json import loads as _inplacevar_", '"_inplacevar_" is an invalid variable name'),
    ("(_write_ := 1)", '"_write_" is an invalid variable name'),
    ("_print = 1", '"_print" is an invalid variable name'),
    ("_tmp0 = 1", '"_tmp0" is an invalid variable name'),
    ("del _exc_guard_", '"_exc_guard_" is an invalid variable name'),
    ("g = (i for i in [1])\ng.gi_frame", '"gi_frame" is a restricted name'),
    ("def f():\n    yield\nf().gi_code", '"gi_code" is a restricted name'),
    ("async def f():\n    pass\nf().cr_frame", '"cr_frame" is a restricted name'),
    (
        "try:\n    1/0\nexcept Exception as e:\n    e.__traceback__.tb_frame",
        '"__traceback__" is an invalid',
    ),
    ("print.__self__", '"__self__" is an invalid attribute name'),
    ("(lambda: 1).__globals__", '"__globals__" is an invalid attribute name'),
    ("(lambda: 1).__code__", '"__code__" is an invalid attribute name'),
    ("class X:\n    __slots__ = ()", '"__slots__" is an invalid variable name'),
    ("class X(metaclass=object):\n    pass", 'The keyword argument "metaclass" is not allowed'),
    (
        "class X:\n    def __getattribute__(self, n):\n        pass",
        '"__getattribute__" is an invalid',
    ),
    ("class X:\n    def __del__(self):\n        pass", '"__del__" is an invalid variable name'),
    (
        "class X:\n    def __init_subclass__(cls):\n        pass",
        '"__init_subclass__" is an invalid',
    ),
    ("class X:\n    def __reduce__(self):\n        pass", '"__reduce__" is an invalid'),
    ("def __init__(self):\n    pass", '"__init__" is an invalid variable name'),
    ("exec('1')", "Exec calls are not allowed."),
    ("eval('1')", "Eval calls are not allowed."),
    (
        "match 1:\n    case object(__class__=c):\n        pass",
        '"__class__" is an invalid attribute',
    ),
    ("match 1:\n    case int(real=__x):\n        pass", '"__x" is an invalid variable name'),
    ("match 1:\n    case [*_getattr_]:\n        pass", '"_getattr_" is an invalid variable name'),
    ("match {}:\n    case {**_write_}:\n        pass", '"_write_" is an invalid variable name'),
    ("match 1:\n    case x.__class__:\n        pass", '"__class__" is an invalid attribute'),
    ("match 1:\n    case x.gi_frame:\n        pass", '"gi_frame" is a restricted name'),
    ("match 1:\n    case x.y.__dict__():\n        pass", '"__dict__" is an invalid attribute'),
    ("match 1:\n    case {x._k: 1}:\n        pass", '"_k" is an invalid attribute'),
    ("try:\n    pass\nexcept* Exception as _print_:\n    pass", '"_print_" is an invalid variable'),
    ("x = 1\nx.__dict__", '"__dict__" is an invalid attribute name'),
    ("ToolCallError.__subclasses__()", '"__subclasses__" is an invalid attribute name'),
    ("tools._Namespace__call", '"_Namespace__call" is an invalid attribute name'),
    ("self = 1\nself.__class__.__bases__", '"__bases__" is an invalid attribute name'),
    ("x = [1]\nx.__class__.n += 1", '"__class__" is an invalid attribute name'),
    ("o = object()\no.__x += 1", '"__x" is an invalid attribute name'),
]


@pytest.mark.parametrize(("program", "fragment"), REFUSED_AT_COMPILE)
async def test_refused_at_compile_time(run: Run, program: str, fragment: str) -> None:
    message = err(await run(program), "forbidden")
    assert "SyntaxError" in message and fragment in message, message


# (program, fragment of the error message) -- compiles, fails at run time.
REFUSED_AT_RUN = [
    ("'{0.__class__}'.format(1)", '"__class__" is an invalid attribute name'),
    ("'{a.__class__.__mro__}'.format_map({'a': 1})", '"__class__" is an invalid attribute name'),
    ("str.format('{0.__class__}', 1)", '"__class__" is an invalid attribute name'),
    ("f = str.format\nf('{0.__globals__}', print)", '"__globals__" is an invalid attribute name'),
    ("g = (i for i in [1])\n'{0.gi_frame}'.format(g)", '"gi_frame" is a restricted name'),
    ("'{0[0].__class__}'.format([[1]])", '"__class__" is an invalid attribute name'),
    ("getattr((), '__class__')", '"__class__" is an invalid attribute name'),
    ("getattr(print, '__self__')", '"__self__" is an invalid attribute name'),
    ("getattr(lambda: 1, '__glob' + 'als__')", '"__globals__" is an invalid attribute name'),
    ("g = (i for i in [1])\ngetattr(g, 'gi_' + 'frame')", '"gi_frame" is a restricted name'),
    (
        "async def f():\n    pass\nc = f()\ngetattr(c, 'cr_await')",
        '"cr_await" is a restricted name',
    ),
    (
        "try:\n    1/0\nexcept Exception as e:\n    getattr(e, '__traceback__')",
        "invalid attribute name",
    ),
    ("import json\njson.decoder", "module 'json' has no attribute 'decoder'"),
    ("import json\njson.scanner", "module 'json' has no attribute 'scanner'"),
    ("import collections\ncollections.abc", "module 'collections' has no attribute 'abc'"),
    ("import random\ngetattr(random, '_os')", '"_os" is an invalid attribute name'),
    ("import random\nrandom.os", "module 'random' has no attribute 'os'"),
    ("import typing\ntyping.get_type_hints", "module 'typing' has no attribute 'get_type_hints'"),
    ("import typing\ntyping.sys", "module 'typing' has no attribute 'sys'"),
    ("import dataclasses\ndataclasses.sys", "module 'dataclasses' has no attribute 'sys'"),
    ("import dataclasses\ndataclasses.make_dataclass", "has no attribute 'make_dataclass'"),
    ("import functools\nfunctools.update_wrapper", "has no attribute 'update_wrapper'"),
    ("import string\nstring.Formatter", "module 'string' has no attribute 'Formatter'"),
    ("import uuid\nuuid.uuid1()", "module 'uuid' has no attribute 'uuid1'"),
    ("import datetime\ndatetime.sys", "module 'datetime' has no attribute 'sys'"),
    ("import statistics\nstatistics.random", "module 'statistics' has no attribute 'random'"),
    ("import asyncio\nasyncio.events", "module 'asyncio' has no attribute 'events'"),
    ("import os", 'import of "os" is not allowed'),
    ("import sys", 'import of "sys" is not allowed'),
    ("import subprocess", 'import of "subprocess" is not allowed'),
    ("import ctypes", 'import of "ctypes" is not allowed'),
    ("import builtins", '"builtins" is a reserved name'),
    ("import posix", 'import of "posix" is not allowed'),
    ("import importlib", 'import of "importlib" is not allowed'),
    ("import collections.abc", 'import of "collections.abc" is not allowed'),
    ("from json import decoder", "cannot import name 'decoder'"),
    ("from os import path", 'import of "os" is not allowed'),
    ("from . import x", "relative imports are not allowed"),
    ("open('/etc/passwd')", "name 'open' is not defined"),
    ("globals()", "name 'globals' is not defined"),
    ("vars()", "name 'vars' is not defined"),
    ("locals()", "name 'locals' is not defined"),
    ("compile('1', 'x', 'eval')", "name 'compile' is not defined"),
    ("breakpoint()", '"breakpoint" is a reserved name'),
    ("help()", "name 'help' is not defined"),
    ("input()", "name 'input' is not defined"),
    ("memoryview(b'x')", "name 'memoryview' is not defined"),
    ("type('X', (), {})", "type() takes exactly one argument in the sandbox"),
    ("type(type(1))", "type() of a class is not available"),
    ("setattr(str, 'upper', None)", "'type' objects cannot be modified by programs"),
    ("import json\njson.dumps = print", "'ModuleProxy' objects cannot be modified by programs"),
    ("import json\nsetattr(json, 'dumps', print)", "objects cannot be modified by programs"),
    ("import json\njson.JSONEncoder.default = print", "'type' objects cannot be modified"),
    ("import decimal\ndecimal.Decimal.x = 1", "objects cannot be modified by programs"),
    ("tools.echo = 1", "'_Namespace' objects cannot be modified by programs"),
    ("getattr(tools, '_Namespace__call')", "invalid attribute name"),
    ("import copy\ncopy.deepcopy(tools)", "tools cannot be copied or pickled"),
    ("import copy\ncopy.copy(tools.echo)", "tools cannot be copied or pickled"),
    ("import copy\nimport json\ncopy.copy(json)", "modules cannot be copied or pickled"),
    ("async def f():\n    await tools.echo({})\nc = f()\nc.send(None)", '"send" of coroutines'),
    ("async def f():\n    yield 1\ng = f()\ng.asend(None)", '"asend" of coroutines'),
    ("try:\n    [].nope\nexcept AttributeError as e:\n    e.obj", '"obj" of AttributeError'),
    ("hasattr(1, '__class__') or undefined_name", "name 'undefined_name' is not defined"),
    ("dir()", "dir() takes exactly one argument"),
]


# A guard denial ends the run (kind ``forbidden``); everything else is an exception.
_DENIALS = (
    "invalid attribute name", "is a restricted name", "cannot be modified",
    "of coroutines", '"obj" of AttributeError', "is a reserved name",
)  # fmt: skip


@pytest.mark.parametrize(("program", "fragment"), REFUSED_AT_RUN)
async def test_refused_at_run_time(run: Run, program: str, fragment: str) -> None:
    kind = "forbidden" if any(d in fragment for d in _DENIALS) else "exception"
    message = err(await run(program), kind)
    assert fragment in message, message
    assert "/" not in message.rsplit("\n", 1)[-1] or "import" in message  # no host paths


async def test_module_proxies_hide_modules_and_underscores(run: Run) -> None:
    program = """
import json, random, collections, typing, functools, dataclasses, re, datetime
names = {}
for mod in [json, random, collections, typing, functools, dataclasses, re, datetime]:
    names[repr(mod)] = [n for n in dir(mod) if n.startswith('_')]
return names
"""
    assert all(v == [] for v in ok(await run(program)).values())


async def test_dir_hides_underscore_names(run: Run) -> None:
    assert ok(await run("return [n for n in dir(tools) if n.startswith('_')] + dir(1)[:0]")) == []


async def test_dataclass_internals_stay_out_of_reach(run: Run) -> None:
    program = """
from dataclasses import dataclass, fields
@dataclass
class P:
    x: int = 0
f = fields(P)[0]
return [f.name, f.default, hasattr(f, '_field_type'), hasattr(P, '__dataclass_fields__')]
"""
    assert ok(await run(program)) == ["x", 0, False, False]


async def test_string_annotations_are_never_evaluated(run: Run) -> None:
    program = """
from dataclasses import dataclass
import typing
@dataclass
class P:
    x: "__import__('os').system('touch /tmp/pwned')" = 0
class Q(typing.NamedTuple):
    y: "open('/etc/passwd')" = 1
return [P().x, Q().y]
"""
    assert ok(await run(program)) == [0, 1]


async def test_catching_everything_does_not_survive_a_refused_access(run: Run) -> None:
    program = """
out = []
print('probing')
for attempt in ["__class__", "__globals__", "gi_frame", "f_back", "tb_frame", "__subclasses__"]:
    try:
        getattr(print, attempt)
        out.append("leak " + attempt)
    except BaseException as e:
        out.append(type(e).__name__)
    print('carried on')
return out
"""
    result = await run(program)
    message = err(result, "forbidden")
    assert message.endswith('AttributeError: "__class__" is an invalid attribute name'
                            ' because it starts with "_"')  # fmt: skip
    assert result.logs == ["probing"]  # output before the denial is kept, none after


# Each program catches the denial its own way and would return "survived".
CAUGHT_DENIALS = [
    "try:\n    getattr((), '__class__')\nexcept BaseException:\n    pass",
    "try:\n    getattr((), '__class__', None)\nexcept AttributeError:\n    pass",
    "for i in range(1):\n    try:\n        getattr((), '__class__')\n    finally:\n        break",
    "try:\n    '{0.__class__}'.format(1)\nexcept Exception:\n    pass",
    "import json\ntry:\n    json.dumps = print\nexcept TypeError:\n    pass",
    "try:\n    tools.echo = 1\nexcept Exception:\n    pass",
    "try:\n    setattr(tools, 'x', 1)\nexcept Exception:\n    pass",
    "async def f():\n    pass\nc = f()\ntry:\n    c.send(None)\nexcept Exception:\n    pass",
    "class C:\n    def __enter__(self):\n        return self\n"
    "    def __exit__(self, *a):\n        return True\nwith C():\n    getattr(1, '_x')",
    "try:\n    raise ExceptionGroup('g', [ValueError()])\nexcept* ValueError:\n    getattr(1, '_x')",
    "def probe():\n    return getattr(1, '__class__')\n"
    "try:\n    sorted([1, 2], key=lambda x: probe())\nexcept Exception:\n    pass",
    "import asyncio\nasync def f():\n    getattr(1, '__class__')\n"
    "t = asyncio.create_task(f())\nawait asyncio.sleep(0.01)",
    "import asyncio\nasync def f():\n    getattr(1, '__class__')\n"
    "r = await asyncio.gather(f(), return_exceptions=True)",
    "import asyncio\nasync def f():\n    getattr(1, '__class__')\ntry:\n"
    "    async with asyncio.TaskGroup() as tg:\n        tg.create_task(f())\n"
    "except* Exception:\n    pass",
    "import asyncio\nasync def f():\n    getattr(1, '__class__')\n"
    "done, _ = await asyncio.wait([asyncio.create_task(f())])\nfor t in done:\n    t.exception()",
    "import asyncio\nt = asyncio.create_task(tools.echo({}))\n"
    "t.add_done_callback(lambda t: getattr(1, '__class__'))\nawait t\nawait asyncio.sleep(0)",
]


@pytest.mark.parametrize("program", CAUGHT_DENIALS)
async def test_a_caught_denial_still_ends_the_run(run: Run, program: str) -> None:
    result = await run(program + "\nreturn 'survived'")
    message = err(result, "forbidden")
    assert (
        "invalid attribute name" in message
        or "cannot be modified" in message
        or ('"send" of coroutines' in message)
    ), message


async def test_a_denial_inside_code_a_library_calls_is_not_swallowed(run: Run) -> None:
    # The traceback renderer calls ``str(e)`` and falls back quietly when it fails; a
    # denial inside ``__str__`` must end the run all the same.
    program = (
        "class E(Exception):\n    def __str__(self):\n        return str(getattr(1, '__class__'))\n"
        "raise E()"
    )
    message = err(await run(program), "forbidden")
    assert message.endswith(
        "  line 3, in E.__str__\n    return str(getattr(1, '__class__'))\n"
        'AttributeError: "__class__" is an invalid attribute name because it starts with "_"'
    ), message


async def test_a_denial_reports_the_program_lines_that_led_to_it(run: Run) -> None:
    program = (
        "def helper(o):\n    return getattr(o, '__globals__')\nasync def f():\n"
        "    return helper(print)\nprint('before')\ntry:\n    await f()\nexcept Exception:\n"
        "    pass"
    )
    result = await run(program)
    assert err(result, "forbidden") == (
        "Traceback (most recent call last):\n  line 7, in <program>\n    await f()\n"
        "  line 4, in f\n    return helper(print)\n  line 2, in helper\n"
        "    return getattr(o, '__globals__')\n"
        'AttributeError: "__globals__" is an invalid attribute name because it starts with "_"'
    )
    assert result.logs == ["before"]


@pytest.mark.parametrize(
    ("program", "fragment"),
    [
        ("import random\nrandom._os", '"_os" is an invalid attribute name'),
        ("import asyncio\nclass Q(asyncio.Queue):\n    pass\nQ()._loop", '"_loop" is an invalid'),
        ("import asyncio\nclass Q(asyncio.Queue):\n    pass\nQ()._loop = 1", "private attributes"),
        ("import asyncio\nclass Q(asyncio.Queue):\n    pass\ngetattr(Q(), '_loop', 1)", '"_loop"'),
        ("import json\nsetattr(json, '_x', 1)", "private attributes of 'ModuleProxy'"),
        ("t = tools.echo({})\nt._x", '"_x" is an invalid attribute name'),
        ("from typing import Generic, TypeVar\nT = TypeVar('T')\nclass G(Generic[T]):\n"
         "    pass\nG._is_protocol", '"_is_protocol" is an invalid'),
        ("getattr(1, '_x', None)", '"_x" is an invalid attribute name'),
        ("class A:\n    pass\nA.x = print\ngetattr(A.x, '_x', None)", '"_x" is an invalid'),
    ],
)  # fmt: skip
async def test_private_attributes_of_library_objects_stay_denied(
    run: Run, program: str, fragment: str
) -> None:
    assert fragment in err(await run(program), "forbidden")


async def test_hasattr_of_a_denied_name_reads_as_absent(run: Run) -> None:
    # Probing for a protocol (``hasattr(x, '__iter__')``) is ordinary code, not an attack.
    assert ok(await run("return [hasattr([], '__iter__'), hasattr(1, '_x')]")) == [False, False]


async def test_a_refused_import_stays_catchable(run: Run) -> None:
    program = "try:\n    import os\nexcept ImportError as e:\n    return str(e)[:24]"
    assert ok(await run(program)) == 'import of "os" is not al'


async def test_functools_wraps_cannot_decorate_foreign_objects(run: Run) -> None:
    program = "import functools, json\nfunctools.wraps(print)(json.JSONDecoder)"
    assert "can only decorate the program's own functions" in err(await run(program))


async def test_exception_args_and_notes_hold_no_host_objects(run: Run) -> None:
    program = """
leaks = []
for probe in [lambda: tools.x.y, lambda: (1).nope, lambda: {}['k'], lambda: [].pop()]:
    try:
        probe()
    except Exception as e:
        leaks.extend(repr(a) for a in e.args if not isinstance(a, (str, int)))
return leaks
"""
    assert ok(await run(program)) == []


async def test_subclassing_tool_call_error_and_builtins_is_harmless(run: Run) -> None:
    program = """
class Mine(ToolCallError):
    pass
class D(dict):
    def keys(self):
        return ['forged']
e = Mine('m', toolName='t')
e.extra = 1
d = D(a=1)
d['b'] = 2
return [str(e), e.toolName, e.extra, sorted(d.items())]
"""
    assert ok(await run(program)) == ["m", "t", 1, [["a", 1], ["b", 2]]]
