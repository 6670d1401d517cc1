"""Sandbox replacements for standard-library callables the guard audit rejected as-is.

Each replacement keeps the public behaviour a program relies on and removes the one
capability the audit (``_audit``) found: evaluating strings in the program's globals
(``functools.singledispatch``'s ``register`` calls ``typing.get_type_hints``), string
driven attribute access that skips the guards (``operator.attrgetter``/``methodcaller``,
``copy.copy`` of a bound method, which reconstructs it with the real ``getattr`` and the
function's ``__name__``), writes to objects the program does not own
(``dataclasses.dataclass``/``functools.total_ordering``/``typing.final`` on foreign
classes, ``operator.setitem``/``delitem``), dunder members through the enum functional
API, file access (``shlex`` source hooks, ``BytesIO.getbuffer``'s memoryview) and output
to the worker's ``/dev/null`` stdio (``pprint.pprint``, ``traceback.print_exc``).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import io
import math
import operator
import pprint
import re
import sys
import time
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ._builtins import (
    PROGRAM_MODULE,
    DeniedWrite,
    check_attribute_name,
    guarded_getattr,
    guarded_write,
    is_program_defined,
)
from ._traceback import FILENAME as PROGRAM_FILENAME
from ._traceback import format_exception as _format_program_exception

__all__ = ["OVERRIDES", "PER_RUN_NAMES", "ProgramStream", "per_run_overrides"]


def _require_program_class(cls: Any, what: str) -> None:
    if not isinstance(cls, type) or not is_program_defined(cls):
        raise DeniedWrite(f"{what} can only be applied to the program's own classes")


# -- functools ---------------------------------------------------------------------------


def _is_dispatch_type(cls: Any) -> bool:
    if isinstance(cls, type):
        return True
    if typing.get_origin(cls) in (typing.Union, types.UnionType):
        return all(isinstance(arg, type) for arg in typing.get_args(cls))
    return False


_DOTTED_NAME = re.compile(r"[A-Za-z]\w*(?:\.[A-Za-z]\w*)*")


def _lookup_program_name(name: str) -> Any:
    # Lexical lookup as the program sees it: its frames innermost first (program classes
    # are locals of the wrapper function), then its globals, then its builtins.
    frame: types.FrameType | None = sys._getframe(1)
    outermost = None
    while frame is not None:
        if frame.f_code.co_filename == PROGRAM_FILENAME:
            outermost = frame
            scope = frame.f_locals
            if name in scope:
                return scope[name]
        frame = frame.f_back
    if outermost is not None:
        if name in outermost.f_globals:
            return outermost.f_globals[name]
        if name in outermost.f_builtins:
            return outermost.f_builtins[name]
    raise TypeError(f"register(): name {name!r} in the annotation is not defined")


def _resolve_annotation(text: str) -> Any:
    """A string annotation naming classes (``int``, ``mod.Cls``, ``A | B``), resolved
    without evaluation: dotted names only, each step through the attribute guard."""
    values = []
    for part in text.split("|"):
        part = part.strip()
        if not _DOTTED_NAME.fullmatch(part):
            raise TypeError(
                f"annotation {text!r} is not a class name; annotations are not evaluated "
                "in the sandbox: pass the class instead, as in @f.register(SomeClass)"
            )
        root, *attrs = part.split(".")
        value = _lookup_program_name(root)
        for attr in attrs:
            value = guarded_getattr(value, attr)
        values.append(value)
    return functools.reduce(operator.or_, values)


def _annotated_class(func: Any) -> Any:
    # What ``register`` would learn from typing.get_type_hints, without evaluating
    # anything. Program annotations are strings (RestrictedPython compiles with PEP 563).
    annotations = getattr(func, "__annotations__", None)
    if not isinstance(annotations, dict) or not annotations:
        raise TypeError(
            f"Invalid first argument to `register()`: {func!r}. "
            "Use either `@register(some_class)` or plain `@register` "
            "on an annotated function."
        )
    for name, value in annotations.items():
        if name == "return":
            continue
        return _resolve_annotation(value) if isinstance(value, str) else value
    raise TypeError("register() needs an annotated first parameter")


def singledispatch(func: Any) -> Any:
    """``functools.singledispatch`` whose ``register`` never evaluates annotations."""
    dispatcher = functools.singledispatch(func)
    real_register = dispatcher.register

    def register(cls: Any, func: Any = None) -> Any:
        if func is None and not _is_dispatch_type(cls):
            func, cls = cls, _annotated_class(cls)
        # With a class (or an invalid first argument and a function) the real register
        # never reaches typing.get_type_hints.
        return real_register(cls, func)

    dispatcher.register = register  # type: ignore[method-assign]
    return dispatcher


class _SingleDispatchMethod(functools.singledispatchmethod):  # type: ignore[type-arg]
    """``functools.singledispatchmethod`` over the sandbox ``singledispatch``."""

    def __init__(self, func: Any) -> None:
        super().__init__(func)
        self.dispatcher = singledispatch(func)


_SingleDispatchMethod.__name__ = _SingleDispatchMethod.__qualname__ = "singledispatchmethod"


def wraps(wrapped: Any) -> Callable[[Any], Any]:
    """``functools.wraps(wrapped)`` with the default attribute lists only.

    The wrapper must be the program's own function, and the copied ``__name__`` may not
    be a dunder (a function named ``__globals__`` would turn ``copy.copy`` of a bound
    method into an unguarded ``getattr``; ``copy.copy`` is wrapped too).
    """

    def decorate(wrapper: Any) -> Any:
        if not isinstance(wrapper, types.FunctionType) or wrapper.__module__ != PROGRAM_MODULE:
            raise TypeError("functools.wraps() can only decorate the program's own functions")
        name = getattr(wrapped, "__name__", None)
        if isinstance(name, str) and name.startswith("__"):
            raise TypeError("functools.wraps() cannot copy a dunder __name__ in the sandbox")
        return functools.update_wrapper(wrapper, wrapped)

    return decorate


def total_ordering(cls: Any) -> Any:
    """``functools.total_ordering`` for the program's own classes only (it writes them)."""
    _require_program_class(cls, "functools.total_ordering()")
    return functools.total_ordering(cls)


# -- dataclasses -------------------------------------------------------------------------


def dataclass(cls: Any = None, /, **options: Any) -> Any:
    """``dataclasses.dataclass`` for the program's own classes only.

    On a foreign class it would rewrite that class's methods and turn its annotated
    private slots into fields that ``asdict``/``astuple`` read past the guards.
    """

    def wrap(target: Any) -> Any:
        _require_program_class(target, "dataclasses.dataclass()")
        return dataclasses.dataclass(target, **options)

    return wrap if cls is None else wrap(cls)


# -- typing ------------------------------------------------------------------------------


def final(f: Any) -> Any:
    """``typing.final``: marks only the program's own classes and functions."""
    return typing.final(f) if is_program_defined(f) else f


# -- copy --------------------------------------------------------------------------------


def copy_(x: Any) -> Any:
    """``copy.copy``, except that a bound method is rebuilt from its parts.

    The real reducer of a bound method is ``(getattr, (self, func.__name__))``: copying
    it would run the real ``getattr`` with whatever name the function carries.
    """
    if isinstance(x, types.MethodType):
        return types.MethodType(x.__func__, x.__self__)
    return copy.copy(x)


copy_.__name__ = copy_.__qualname__ = "copy"


# -- operator ----------------------------------------------------------------------------


def _dotted(name: Any) -> tuple[str, ...]:
    if type(name) is not str:
        raise TypeError("attribute name must be a string")
    return tuple(check_attribute_name(part) for part in name.split("."))


class attrgetter:
    """``operator.attrgetter`` whose lookups go through the attribute guard."""

    __slots__ = ("__chains",)

    def __init__(self, attr: Any, *attrs: Any) -> None:
        self.__chains = tuple(_dotted(name) for name in (attr, *attrs))

    def __call__(self, obj: Any) -> Any:
        values = []
        for chain in self.__chains:
            value = obj
            for part in chain:
                value = guarded_getattr(value, part)
            values.append(value)
        return values[0] if len(values) == 1 else tuple(values)

    def __repr__(self) -> str:
        names = ", ".join(repr(".".join(chain)) for chain in self.__chains)
        return f"operator.attrgetter({names})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("attrgetter cannot be copied or pickled in the sandbox")


class methodcaller:
    """``operator.methodcaller`` whose method lookup goes through the attribute guard."""

    __slots__ = ("__args", "__kwargs", "__name")

    def __init__(self, name: Any, /, *args: Any, **kwargs: Any) -> None:
        if type(name) is not str:
            raise TypeError("method name must be a string")
        self.__name = check_attribute_name(name)
        self.__args = args
        self.__kwargs = kwargs

    def __call__(self, obj: Any) -> Any:
        return guarded_getattr(obj, self.__name)(*self.__args, **self.__kwargs)

    def __repr__(self) -> str:
        return f"operator.methodcaller({self.__name!r})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("methodcaller cannot be copied or pickled in the sandbox")


def setitem(a: Any, b: Any, c: Any, /) -> None:
    """``operator.setitem`` through the write guard (``a[b] = c`` in a program)."""
    guarded_write(a)[b] = c


def delitem(a: Any, b: Any, /) -> None:
    """``operator.delitem`` through the write guard (``del a[b]`` in a program)."""
    del guarded_write(a)[b]


# -- enum --------------------------------------------------------------------------------


def _member_names(names: Any) -> Any:
    """The functional API's members, refusing ``_``-names (dunders would become methods)."""
    if isinstance(names, str):
        members: list[Any] = names.replace(",", " ").split()
        keys = members
    elif isinstance(names, Mapping):
        members = list(names.items())
        keys = [key for key, _ in members]
    else:
        members = list(names)
        keys = [item if isinstance(item, str) else item[0] for item in members]
    for key in keys:
        if type(key) is not str or key.startswith("_"):
            raise ValueError(f"enum member names may not start with '_' in the sandbox: {key!r}")
    return members


class _EnumType(enum.EnumType):
    """The sandbox enums' metaclass: the functional API cannot define dunder members."""

    def __call__(cls, value: Any, names: Any = None, *args: Any, **kwargs: Any) -> Any:
        if names is None:
            return super().__call__(value, *args, **kwargs)
        kwargs.setdefault("module", PROGRAM_MODULE)
        return super().__call__(value, _member_names(names), *args, **kwargs)


class Enum(enum.Enum, metaclass=_EnumType):
    """``enum.Enum`` (functional API without ``_``-named members)."""


class IntEnum(enum.IntEnum, metaclass=_EnumType):
    """``enum.IntEnum`` (functional API without ``_``-named members)."""


class StrEnum(enum.StrEnum, metaclass=_EnumType):
    """``enum.StrEnum`` (functional API without ``_``-named members)."""


class Flag(enum.Flag, metaclass=_EnumType):
    """``enum.Flag`` (functional API without ``_``-named members)."""


class IntFlag(enum.IntFlag, metaclass=_EnumType):
    """``enum.IntFlag`` (functional API without ``_``-named members)."""


for _cls in (Enum, IntEnum, StrEnum, Flag, IntFlag):
    _cls.__module__ = "enum"


# -- time --------------------------------------------------------------------------------


def sleep(secs: Any, /) -> None:
    """``time.sleep``: blocks the worker; the wall-clock limit bounds it from outside."""
    if isinstance(secs, bool) or not isinstance(secs, (int, float)):
        raise TypeError("sleep() argument must be a number")
    if not math.isfinite(secs) or secs < 0:
        raise ValueError("sleep length must be a finite, non-negative number")
    time.sleep(secs)


# -- io ----------------------------------------------------------------------------------


class BytesIO(io.BytesIO):
    """``io.BytesIO`` without ``getbuffer`` (a memoryview, which the builtins withhold)."""

    @property
    def getbuffer(self) -> Any:  # type: ignore[override]
        # Absent rather than failing: hashlib.file_digest falls back to readinto().
        raise AttributeError("getbuffer() is not available in the sandbox")


BytesIO.__module__ = "io"


# -- shlex -------------------------------------------------------------------------------


def _shlex_split(s: Any, comments: bool = False, posix: bool = True) -> list[str]:
    import shlex

    # shlex.split never enables source hooks (``source`` stays None); the shlex class,
    # whose ``sourcehook`` opens files by name, is not exported.
    if not isinstance(s, str):
        raise TypeError("shlex.split() requires a str")
    return shlex.split(s, comments=bool(comments), posix=bool(posix))


_shlex_split.__name__ = _shlex_split.__qualname__ = "split"


# -- per-run: pprint and traceback print to the program's log ------------------------------


class ProgramStream:
    """A write-only text stream into the program's ``print`` (its log lines)."""

    __slots__ = ("__printer",)

    def __init__(self, printer: Any) -> None:
        self.__printer = printer

    def write(self, text: Any) -> int:
        """Append ``text`` to the program's output."""
        if not isinstance(text, str):
            raise TypeError("write() argument must be str")
        self.__printer._call_print(text, end="")
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: lines leave as they complete."""

    def __repr__(self) -> str:
        return "<program output>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("the program's output cannot be copied or pickled")


def _exc_of(exc: Any, value: Any) -> BaseException:
    candidate = exc if value is _UNSET else value
    if not isinstance(candidate, BaseException):
        raise TypeError("expected an exception instance")
    return candidate


_UNSET: Any = object()


def _format_exception(exc: Any, /, value: Any = _UNSET, tb: Any = _UNSET, **_: Any) -> list[str]:
    text = _format_program_exception(_exc_of(exc, value), [])
    return [line + "\n" for line in text.split("\n")]


def _format_exception_only(exc: Any, /, value: Any = _UNSET) -> list[str]:
    text = _format_program_exception(_exc_of(exc, value), [])
    return [text.rsplit("\n", 1)[-1] + "\n"]


def _format_exc(limit: Any = None, chain: bool = True) -> str:
    current = sys.exc_info()[1]
    if current is None:
        return "NoneType: None\n"
    return "".join(_format_exception(current))


def per_run_overrides(module: str, stream: ProgramStream) -> dict[str, Any]:
    """Replacements bound to one run's output stream (``pprint``, ``traceback``)."""

    def target(file: Any) -> Any:
        if file is None:
            return stream
        if not callable(guarded_getattr(file, "write", None)):
            raise TypeError("file must have a write() method")
        return file

    if module == "pprint":

        def pprint_(obj: Any, stream: Any = None, *args: Any, **kwargs: Any) -> None:
            pprint.pprint(obj, target(stream), *args, **kwargs)

        def pp(obj: Any, stream: Any = None, *args: Any, **kwargs: Any) -> None:
            pprint.pp(obj, target(stream), *args, **kwargs)

        class PrettyPrinter(pprint.PrettyPrinter):
            """``pprint.PrettyPrinter`` printing to the program's output by default."""

            def __init__(
                self,
                indent: int = 1,
                width: int = 80,
                depth: Any = None,
                stream: Any = None,
                **kwargs: Any,
            ) -> None:
                super().__init__(indent, width, depth, target(stream), **kwargs)

        PrettyPrinter.__module__ = "pprint"
        pprint_.__name__ = pprint_.__qualname__ = "pprint"
        return {"pprint": pprint_, "pp": pp, "PrettyPrinter": PrettyPrinter}
    if module == "traceback":

        def print_exception(
            exc: Any, /, value: Any = _UNSET, tb: Any = _UNSET, file: Any = None, **_: Any
        ) -> None:
            target(file).write("".join(_format_exception(exc, value)))

        def print_exc(limit: Any = None, file: Any = None, chain: bool = True) -> None:
            target(file).write(_format_exc())

        return {"print_exception": print_exception, "print_exc": print_exc}
    return {}


for _fn, _name in (
    (_format_exception, "format_exception"),
    (_format_exception_only, "format_exception_only"),
    (_format_exc, "format_exc"),
):
    _fn.__name__ = _fn.__qualname__ = _name


#: Names ``per_run_overrides`` provides: absent from the shared tables.
PER_RUN_NAMES: dict[str, frozenset[str]] = {
    "pprint": frozenset({"pprint", "pp", "PrettyPrinter"}),
    "traceback": frozenset({"print_exception", "print_exc"}),
}

#: module -> exported name -> replacement (applied when the module's table is built).
OVERRIDES: dict[str, dict[str, Any]] = {
    "copy": {"copy": copy_},
    "dataclasses": {"dataclass": dataclass},
    "enum": {
        "Enum": Enum,
        "IntEnum": IntEnum,
        "StrEnum": StrEnum,
        "Flag": Flag,
        "IntFlag": IntFlag,
    },
    "functools": {
        "singledispatch": singledispatch,
        "singledispatchmethod": _SingleDispatchMethod,
        "total_ordering": total_ordering,
        "wraps": wraps,
    },
    "io": {"BytesIO": BytesIO},
    "operator": {
        "attrgetter": attrgetter,
        "methodcaller": methodcaller,
        "setitem": setitem,
        "delitem": delitem,
    },
    "shlex": {"split": _shlex_split},
    "time": {"sleep": sleep},
    "traceback": {
        "format_exception": _format_exception,
        "format_exception_only": _format_exception_only,
        "format_exc": _format_exc,
    },
    "typing": {"final": final},
}
