"""The objects a Python program holds: bindings, awaitables, print, JSON conversion.

Everything here is reachable from program code, so each class exposes no public
attribute beyond what the program is meant to use (state lives in name-mangled slots,
which the guards refuse to read), and refuses to be copied or pickled.
"""

from __future__ import annotations

import datetime
import inspect
import json
import math
import re
import types
from collections.abc import Callable
from typing import Any

from ._builtins import (
    PROGRAM_MODULE,
    DeniedAccess,
    DeniedWrite,
    forget_class,
    guarded_delattr,
    guarded_getattr,
    guarded_hasattr,
    guarded_setattr,
)
from ._policy import NAMEDTUPLE_API, is_own_attribute

__all__ = [
    "awaitable_future",
    "is_awaitable_value",
    "match_guard",
    "namedtuple_getattr",
    "own_getattr",
    "own_write",
    "program_delattr",
    "program_getattr",
    "program_hasattr",
    "program_setattr",
    "to_json",
]

# Classes whose single positional class pattern matches the subject itself.
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _is_namedtuple_class(cls: Any) -> bool:
    try:
        fields = type.__getattribute__(cls, "_fields")
    except AttributeError:
        return False
    return issubclass(cls, tuple) and type(fields) is tuple


def namedtuple_getattr(obj: Any, name: str) -> Any:
    """``p._asdict`` and the rest of namedtuple's public API, on namedtuples only."""
    cls = obj if isinstance(obj, type) else type(obj)
    if not _is_namedtuple_class(cls):
        # Anywhere else an underscore name is what the attribute guard refuses.
        return guarded_getattr(obj, name)
    if name not in NAMEDTUPLE_API:  # pragma: no cover - the policy emits these only
        raise DeniedAccess(f'"{name}" is an invalid attribute name because it starts with "_"')
    return getattr(obj, name)


def match_guard(specs: tuple[tuple[Any, int], ...], values: tuple[Any, ...]) -> bool:
    """Check what a ``case`` with class patterns read, before its body runs.

    ``specs`` holds each class pattern's class and number of positional sub-patterns:
    the attribute names those read come from ``__match_args__`` and must pass the
    attribute guard; ``values`` are the case's captures, which must be values the
    guard would hand out (no module, frame, code or traceback). A refusal is a denial
    (terminal), never a silent non-match.
    """
    for cls, positional in specs:
        if not positional or (positional == 1 and cls in _SELF_MATCHING):
            continue
        names = getattr(cls, "__match_args__", ())
        for attr in names[:positional] if isinstance(names, tuple) else ():
            if type(attr) is str and attr.startswith("_"):
                raise DeniedAccess(
                    f'"{attr}" is an invalid attribute name because it starts with "_"'
                )
            guarded_getattr(_NameProbe(), attr, None)
    for value in values:
        _probe_value(value)
    return True


def _is_own(obj: Any) -> bool:
    """Whether ``obj`` holds only state the program put there (see ``own_getattr``)."""
    if isinstance(obj, types.FunctionType):
        return bool(obj.__module__ == PROGRAM_MODULE)
    if type(obj) is super:
        # ``super()._helper()``: resolved along the instance's own (checked) MRO.
        return _is_own(object.__getattribute__(obj, "__self__"))
    cls = obj if isinstance(obj, type) else type(obj)
    program = False
    for klass in type.__getattribute__(cls, "__mro__"):
        module = type.__getattribute__(klass, "__module__")
        if module == PROGRAM_MODULE:
            program = True
        elif module != "builtins":
            return False
    return program


def _private_denied(name: str) -> DeniedAccess:
    return DeniedAccess(f'"{name}" is an invalid attribute name because it starts with "_"')


def own_getattr(obj: Any, name: str) -> Any:
    """``obj._x`` for the program's own objects; a denial for anyone else's.

    Own means a program function, or a class (or an instance of one) whose MRO holds
    the program's classes and built-in types only: built-in types have no private
    attributes, so whatever ``_x`` resolves to was put there by the program. A library
    base class (``asyncio.Queue``, ``typing.Generic``) keeps its private state private.
    """
    if not _is_own(obj):
        raise _private_denied(name)
    value = getattr(obj, name)
    _probe_value(value)
    return value


def own_write(obj: Any) -> Any:
    """``obj`` if the program may set or delete its private attributes."""
    if not _is_own(obj):
        raise DeniedWrite(
            f"private attributes of '{type(obj).__name__}' objects cannot be modified by programs"
        )
    if isinstance(obj, type):
        forget_class(obj)
    return obj


def _own_name(obj: Any, name: Any) -> bool:
    return type(name) is str and is_own_attribute(name) and _is_own(obj)


def program_getattr(obj: Any, name: Any, *default: Any) -> Any:
    """The program's ``getattr``: the guard's, plus ``_x`` on the program's own objects."""
    if not _own_name(obj, name):
        return guarded_getattr(obj, name, *default)
    try:
        return own_getattr(obj, name)
    except DeniedAccess:
        raise
    except AttributeError:
        if default:
            return default[0]
        raise


def program_hasattr(obj: Any, name: Any) -> bool:
    """The program's ``hasattr`` (denied names read as absent, as in the guard's)."""
    if not _own_name(obj, name):
        return guarded_hasattr(obj, name)
    try:
        own_getattr(obj, name)
    except AttributeError:
        return False
    return True


def program_setattr(obj: Any, name: Any, value: Any) -> None:
    """The program's ``setattr``: the guard's, plus ``_x`` on the program's own objects."""
    if type(name) is str and is_own_attribute(name):
        setattr(own_write(obj), name, value)
    else:
        guarded_setattr(obj, name, value)


def program_delattr(obj: Any, name: Any) -> None:
    """The program's ``delattr``: the guard's, plus ``_x`` on the program's own objects."""
    if type(name) is str and is_own_attribute(name):
        delattr(own_write(obj), name)
    else:
        guarded_delattr(obj, name)


class _NameProbe:
    """An object without attributes: ``guarded_getattr`` on it checks only the name."""

    __slots__ = ()


_FORBIDDEN_CAPTURES = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType)


def _probe_value(value: Any) -> None:
    if isinstance(value, _FORBIDDEN_CAPTURES):
        raise DeniedAccess(f"'{type(value).__name__}' objects are not accessible to programs")


class _Lossy(Exception):
    """A value that JSON cannot carry exactly: where it is (``path``) and what it is."""

    def __init__(self, path: str = "$", what: str = "not JSON", fix: str = "") -> None:
        super().__init__(path, what, fix)
        self.path = path
        self.what = what
        self.fix = fix

    def describe(self, subject: str, verb: str) -> str:
        """``<subject> at <path> is <what> — <fix>`` (``verb`` is "return" or "pass")."""
        where = subject if self.path == "$" else f"{subject} at {self.path}"
        text = f"{where} {self.what}"
        return f"{text} — {self.fix.format(verb=verb)}" if self.fix else text


_CONTAINERS = (dict, list, tuple)
_IDENT_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _segment(key: Any) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    if _IDENT_KEY.match(key):
        return f".{key}"
    return "[" + json.dumps(key, ensure_ascii=False) + "]"


def _path(keys: list[Any]) -> str:
    return "$" + "".join(_segment(key) for key in keys)


def is_awaitable_value(value: Any) -> bool:
    """True for what a program forgot to ``await`` (tool calls, coroutines, tasks)."""
    return inspect.isawaitable(value) and not isinstance(value, type)


def _lossy(value: Any, keys: list[Any]) -> _Lossy:
    """Why ``value`` (at ``keys``) cannot cross as JSON, with a fix a model can apply."""
    path = _path(keys)
    if is_awaitable_value(value):
        return _Lossy(path, "is a coroutine", "did you forget await?")
    if isinstance(value, (set, frozenset)):
        return _Lossy(path, "is a set", "{verb} a list (e.g. sorted(...))")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return _Lossy(path, f"is {value!r} (not a finite number)", "{verb} a number or None")
        return _Lossy(path, "is -0.0 (negative zero)", "{verb} 0.0")
    if isinstance(value, (bytes, bytearray)):
        return _Lossy(path, "is bytes", "decode it to a str first")
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        name = type(value).__name__
        fix = "use .total_seconds()" if name == "timedelta" else "use .isoformat()"
        return _Lossy(path, f"is a {name}", fix)
    if inspect.isroutine(value) or isinstance(value, type):
        return _Lossy(path, "is a function or class", "{verb} plain data, not callables")
    name = type(value).__name__
    return _Lossy(path, f"is a {name} object", "{verb} dicts, lists, str, numbers, bool or None")


def to_json(value: Any) -> Any:
    """A plain JSON copy of ``value``, or raise ``_Lossy`` naming the offending path.

    What ``json.dumps`` accepts, minus what JSON cannot carry exactly: dicts with str
    keys, lists, str, int, bool, None and finite floats other than -0.0. As in
    ``json.dumps``, tuples (named or not) become arrays and dict/list subclasses
    (``Counter``, ``defaultdict``) plain objects/arrays -- what a Python programmer
    expects from ``return counter.most_common(3)``. Sets, NaN, non-str keys, cycles and
    other objects are lossy. Iterative: deep input cannot hit the recursion limit (nor
    can the bridge codec, see ``_frames``), so nesting is bounded by the frame cap only,
    as in the TypeScript guest. The path is built only on failure (linear cost).
    """
    if not isinstance(value, _CONTAINERS):
        return _scalar(value, [])
    root: list[Any] = [None]
    active: set[int] = set()
    # (source, copy, item iterator, key of the source in its parent)
    stack: list[tuple[Any, Any, Any, Any]] = []

    def keys_to(key: Any) -> list[Any]:
        return [entry[3] for entry in stack[1:]] + [key]

    def enter(src: Any, parent: Any, key: Any) -> None:
        if id(src) in active:
            raise _Lossy(_path(keys_to(key)), "refers back to itself (a cycle)",
                         "{verb} a copy without the cycle")  # fmt: skip
        active.add(id(src))
        dst: Any = {} if isinstance(src, dict) else []
        if isinstance(parent, dict):
            parent[key] = dst
        elif isinstance(parent, list):
            parent.append(dst)
        else:
            root[0] = dst
        items = iter(src.items()) if isinstance(src, dict) else iter(enumerate(src))
        stack.append((src, dst, items, key))

    enter(value, None, None)
    while stack:
        src, dst, items, _key = stack[-1]
        for key, child in items:
            if isinstance(src, dict) and type(key) is not str:
                keys = [entry[3] for entry in stack[1:]]
                raise _Lossy(_path(keys), f"has a key of type {type(key).__name__} ({key!r})",
                             "use str keys")  # fmt: skip
            if isinstance(child, _CONTAINERS):
                enter(child, dst, key)
                break
            if isinstance(dst, dict):
                dst[key] = _scalar(child, stack, key)
            else:
                dst.append(_scalar(child, stack, key))
        else:
            stack.pop()
            active.discard(id(src))
    return root[0]


def _scalar(value: Any, stack: list[Any], key: Any = None) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value) and not (value == 0.0 and math.copysign(1.0, value) < 0):
            return float(value)
    keys = [] if not stack and key is None else [entry[3] for entry in stack[1:]] + [key]
    raise _lossy(value, keys)


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Awaitable:
    """What ``gather``, ``sleep`` and friends return: only ``await`` works."""

    __slots__ = ("__inner",)

    def __init__(self, inner: Any) -> None:
        self.__inner = inner

    def __await__(self) -> Any:
        return (yield from self.__inner.__await__())

    def __repr__(self) -> str:
        return "<awaitable>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("awaitables cannot be copied or pickled")


_REUSED = "cannot reuse already awaited coroutine"


class _ToolCall:
    """``tools.x(args)``: a coroutine-like call that does nothing until it is awaited.

    As with a CPython coroutine, the call starts when it is awaited, passed to
    ``asyncio.gather`` or wrapped in a task -- never when it is created, so a program
    that builds calls and drops them makes no tool call. ``start(label, name, payload,
    now)`` sends the call and returns the future of its result (``now``: awaited
    directly, so it may be settled before it is returned); it runs at most once. The
    arguments are read when the call starts, as a coroutine reads its parameters.
    """

    __slots__ = ("__label", "__name", "__payload", "__start")

    def __init__(
        self, start: Callable[[str, str, Any, bool], Any], label: str, name: str, payload: Any
    ) -> None:
        self.__start: Callable[[str, str, Any, bool], Any] | None = start
        self.__label = label
        self.__name = name
        self.__payload = payload

    def __await__(self) -> Any:
        # Awaited directly: the guest may complete the call before the first yield
        # (``_Run.caller``'s ``now``), when nothing else in the worker could run meanwhile.
        return (yield from _start(self, True).__await__())

    def __repr__(self) -> str:
        return f"<tool call {self.__label}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("tool calls cannot be copied or pickled")


def _start(call: _ToolCall, now: bool = False) -> Any:
    start = call._ToolCall__start  # type: ignore[attr-defined]
    if start is None:
        raise RuntimeError(_REUSED)
    call._ToolCall__start = None  # type: ignore[attr-defined]
    payload = call._ToolCall__payload  # type: ignore[attr-defined]
    call._ToolCall__payload = None  # type: ignore[attr-defined]  # nothing kept alive
    return start(call._ToolCall__label, call._ToolCall__name, payload, now)  # type: ignore[attr-defined]


def awaitable_future(obj: Any) -> Any:
    """What asyncio's own functions should get for a program's awaitable ``obj``.

    A tool call is started (its future), our wrappers are unwrapped; anything else is
    returned as it is for asyncio to accept (coroutines) or refuse.
    """
    if type(obj) is _ToolCall:
        return _start(obj)
    if type(obj) is _Awaitable:
        return obj._Awaitable__inner  # type: ignore[attr-defined]
    return obj


class _ToolFunction:
    __slots__ = ("__call", "__name")

    def __init__(self, call: Callable[[str, Any], _ToolCall], name: str) -> None:
        self.__call = call
        self.__name = name

    def __call__(self, *args: Any, **kwargs: Any) -> _ToolCall:
        if len(args) > 1 or (args and kwargs):
            return self.__call(self.__name, _BadArity(len(args), bool(kwargs)))
        # ``tools.job_list()`` means "no arguments": an empty object, not a lossy value.
        payload = args[0] if args else dict(kwargs)
        return self.__call(self.__name, payload)

    def __repr__(self) -> str:
        return f"<tool {self.__name}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("tools cannot be copied or pickled")


class _BadArity:
    """Arguments that cannot form one object (reported when the call is awaited)."""

    __slots__ = ("keywords", "positional")

    def __init__(self, positional: int, keywords: bool) -> None:
        self.positional = positional
        self.keywords = keywords


class _Namespace:
    """A binding global (``tools``): ``tools.name(args)`` and ``tools["my-tool"](args)``."""

    __slots__ = ("__call", "__functions", "__global", "__names")
    __call: Callable[[str, Any], _ToolCall]
    __functions: dict[str, _ToolFunction]
    __global: str
    __names: tuple[str, ...]

    def __init__(self, global_name: str, names: list[str], call: Callable[[str, Any], _ToolCall]):
        object.__setattr__(self, "_Namespace__global", global_name)
        object.__setattr__(self, "_Namespace__names", tuple(names))
        object.__setattr__(self, "_Namespace__call", call)
        # One function object per known tool (a fan-out reads ``tools.x`` many times);
        # unknown names get a fresh one, so arbitrary names cannot grow a cache.
        functions = {name: _ToolFunction(call, name) for name in names}
        object.__setattr__(self, "_Namespace__functions", functions)

    def __getattr__(self, name: str) -> _ToolFunction:
        if name.startswith("__") and name.endswith("__"):
            # Protocol lookups (``__deepcopy__``, ``__length_hint__``...) must not turn
            # into tool calls; dunder-named tools stay reachable as ``tools["__x__"]``.
            raise AttributeError(name)
        return self.__functions.get(name) or _ToolFunction(self.__call, name)

    def __getitem__(self, name: Any) -> _ToolFunction:
        if not isinstance(name, str):
            raise TypeError(f"{self.__global} names are strings")
        return self.__functions.get(name) or _ToolFunction(self.__call, str(name))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self.__global} is read-only")

    def __contains__(self, name: Any) -> bool:
        return name in self.__names

    def __iter__(self) -> Any:
        return iter(self.__names)

    def __dir__(self) -> list[str]:
        return list(self.__names)

    def __repr__(self) -> str:
        return f"<{self.__global}: {', '.join(self.__names)}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"{self.__global} cannot be copied or pickled")


def _error_class(name: str, member: str) -> type[Exception]:
    def __init__(self: Any, message: Any = "", *args: Any, **fields: Any) -> None:
        Exception.__init__(self, message, *args)
        self.message = message
        self.code = fields.pop("code", None)
        setattr(self, member, fields.pop(member, None))

    def __str__(self: Any) -> str:
        return str(self.message)

    namespace = {"__init__": __init__, "__str__": __str__, "__module__": "builtins"}
    cls = type(name, (Exception,), namespace)
    cls.__qualname__ = name
    return cls


class _LineSink:
    """``print``'s file: splits output into lines and ships each one at once."""

    def __init__(self, emit: Callable[[str], None], max_line: int) -> None:
        self._emit = emit
        self._partial: list[str] = []
        self._partial_size = 0
        self._max_line = max_line

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("print() output must be str")
        if "\n" not in text:
            self._partial.append(text)
            self._partial_size += len(text)
            if self._partial_size > self._max_line:
                # A line longer than the whole output budget: ship it now so that the
                # ledger fails the run instead of the line filling memory.
                self.close()
            return len(text)
        self._partial_size = 0
        first, *rest = text.split("\n")
        self._partial.append(first)
        for piece in rest:
            self._emit("".join(self._partial))
            self._partial = [piece]
        return len(text)

    def flush(self) -> None:
        return None

    def set_max_line(self, max_line: int) -> None:
        """The output budget of the run this sink now serves (see ``_Run.attach``)."""
        self._max_line = max_line

    def close(self) -> None:
        """Ship a trailing partial line, if any."""
        if self._partial and "".join(self._partial):
            self._emit("".join(self._partial))
        self._partial = []
        self._partial_size = 0


class _Printer:
    __slots__ = ("__sink",)

    def __init__(self, sink: _LineSink) -> None:
        self.__sink = sink

    def _call_print(
        self, *objects: Any, sep: Any = " ", end: Any = "\n", file: Any = None, flush: bool = False
    ) -> None:
        if file is not None:
            raise TypeError("print(file=...) is not available in the sandbox")
        print(*objects, sep=sep, end=end, file=self.__sink)

    def __call__(self) -> str:
        return ""
