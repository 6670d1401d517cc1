"""Guards and restricted builtins for the Python guest.

The compiled program reaches objects only through these functions: ``_getattr_`` for
every attribute read (and ``getattr``/``hasattr``), ``_write_`` before every attribute or
item write, ``_getitem_``, ``_getiter_``, ``_inplacevar_``, ``_apply_``. The attribute
guard refuses underscore names (but the few string-valued dunders the policy allows),
frame/code/generator internals, the driving methods of coroutines (``send`` would
surface the event loop's futures), ``AttributeError.obj``, and any module, frame, code
or traceback *value*; ``str.format``/``format_map`` (also of ``UserString`` and through
``super(S, s)``) are replaced by a formatter whose field lookups go through the same
guards; ``__init__`` resolves only where re-running it is a write the program may make.
Writes are allowed on plain containers and on what the program defined itself (classes,
their instances, its functions).

``code_audit`` is an audit hook (installed in the fork server by ``_modules.warm``)
that refuses code evaluation and file, process and socket events while program frames
are on the stack: a second net behind the audit of allowed callables (``_audit``).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import builtins
import collections
import decimal
import operator
import re
import string
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from ._policy import (
    GROUP_SITE,
    OWN_READ_SITE,
    OWN_WRITE_SITE,
    READ_SITE,
    READ_WRITE_SITE,
    READABLE_DUNDERS,
    SITE_TABLE,
    SITE_TYPE,
    WRITE_SITE,
)
from ._traceback import FILENAME as _PROGRAM_FILENAME

__all__ = [
    "PROGRAM_MODULE",
    "DeniedAccess",
    "DeniedWrite",
    "check_attribute_name",
    "code_audit",
    "forget_class",
    "guarded_getattr",
    "guarded_getitem",
    "guarded_write",
    "install_audit_hook",
    "is_program_defined",
    "make_builtins",
    "make_guards",
]

PROGRAM_MODULE = "<program>"

_DENIED_NAMES = frozenset(INSPECT_ATTRIBUTES) | {
    "f_back", "f_builtins", "f_code", "f_globals", "f_locals", "f_trace", "f_lasti",
    "tb_frame", "tb_next", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code",
    "cr_await", "cr_origin", "ag_frame", "ag_code", "ag_await", "mro",
}  # fmt: skip
_DRIVERS = frozenset({"send", "throw", "close", "asend", "athrow", "aclose"})
_FORBIDDEN_VALUES = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType)
_WRITABLE = (
    dict,
    list,
    set,
    bytearray,
    collections.deque,
    collections.UserDict,
    collections.UserList,
    decimal.Context,
)
_MISSING: Any = object()


class DeniedAccess(AttributeError):
    """A guard refused an attribute read; the guest ends the run (kind ``forbidden``)."""


class DeniedWrite(TypeError):
    """A guard refused a write; the guest ends the run (kind ``forbidden``)."""


# Tracebacks and ``type(e).__name__`` show the familiar names.
DeniedAccess.__name__ = DeniedAccess.__qualname__ = "AttributeError"
DeniedWrite.__name__ = DeniedWrite.__qualname__ = "TypeError"


def is_program_defined(obj: Any) -> bool:
    """Whether ``obj`` is the program's own function, class or instance of its class."""
    cls = obj if isinstance(obj, type) else type(obj)
    if isinstance(obj, types.FunctionType):
        return bool(obj.__module__ == PROGRAM_MODULE)
    try:
        return bool(type.__getattribute__(cls, "__module__") == PROGRAM_MODULE)
    except AttributeError:
        return False


def check_attribute_name(name: Any) -> str:
    """``name`` if programs may read an attribute of that name, else raise."""
    if type(name) is not str:
        raise TypeError("attribute name must be a string")
    if name.startswith("_") and name not in READABLE_DUNDERS:
        raise DeniedAccess(f'"{name}" is an invalid attribute name because it starts with "_"')
    if name in _DENIED_NAMES:
        raise DeniedAccess(f'"{name}" is a restricted name that programs may not access')
    return name


class _SafeFormatter(string.Formatter):
    """``str.format`` whose ``{0.attr}`` / ``{0[key]}`` lookups go through the guards."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            obj = guarded_getattr(obj, key) if is_attr else guarded_getitem(obj, key)
        return obj, first


_FORMATTER = _SafeFormatter()


def _safe_format(template: str, /, *args: Any, **kwargs: Any) -> str:
    if not isinstance(template, str):
        raise TypeError("format() requires a str")
    return _FORMATTER.vformat(template, args, kwargs)


def _safe_format_map(template: str, mapping: Any, /) -> str:
    if not isinstance(template, str):
        raise TypeError("format_map() requires a str")
    return _FORMATTER.vformat(template, (), mapping)


def _user_string_format(self: Any, /, *args: Any, **kwargs: Any) -> str:
    if not isinstance(self, collections.UserString):
        raise TypeError("UserString.format() requires a UserString")
    return _safe_format(self.data, *args, **kwargs)


def _user_string_format_map(self: Any, mapping: Any, /) -> str:
    if not isinstance(self, collections.UserString):
        raise TypeError("UserString.format_map() requires a UserString")
    return _safe_format_map(self.data, mapping)


class _BoundFormat:
    __slots__ = ("__mapping", "__template")

    def __init__(self, template: str, mapping: bool) -> None:
        self.__template = template
        self.__mapping = mapping

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        if self.__mapping:
            return _safe_format_map(self.__template, *args, **kwargs)
        return _safe_format(self.__template, *args, **kwargs)

    def __repr__(self) -> str:
        return "<built-in method format of str object>"


def guarded_getattr(obj: Any, name: Any, default: Any = _MISSING) -> Any:
    """``getattr`` for programs (see module docstring)."""
    name = check_attribute_name(name)
    if name in ("format", "format_map"):
        # ``super(S, s).format`` (S a str subclass) is the real str.format bound to s.
        subject = obj.__self__ if isinstance(obj, super) else obj  # type: ignore[attr-defined]
        if isinstance(subject, str):
            return _BoundFormat(subject, name == "format_map")
        if isinstance(subject, collections.UserString):
            # UserString.format delegates to the real str.format of ``.data``.
            return _BoundFormat(subject.data, name == "format_map")
        if isinstance(subject, type) and issubclass(subject, str):
            return _safe_format if name == "format" else _safe_format_map
        if isinstance(subject, type) and issubclass(subject, collections.UserString):
            return _user_string_format if name == "format" else _user_string_format_map
    if name in _DRIVERS and not isinstance(obj, types.GeneratorType):
        if isinstance(obj, (types.CoroutineType, types.AsyncGeneratorType)) or hasattr(
            obj, "__await__"
        ):
            raise DeniedAccess(f'"{name}" of coroutines is not available to programs')
    if name == "obj" and isinstance(obj, AttributeError) and not is_program_defined(obj):
        raise DeniedAccess('"obj" of AttributeError is not available to programs')
    if isinstance(obj, _FORBIDDEN_VALUES):
        raise DeniedAccess(f"'{type(obj).__name__}' objects are not accessible to programs")
    if name in _INITIALISERS:
        return _guarded_initialiser(obj, name, default)
    try:
        value = getattr(obj, name)
    except AttributeError as exc:
        if default is not _MISSING:
            return default
        # A fresh error: the original's ``obj`` would hand the object back.
        raise AttributeError(str(exc)) from None
    if isinstance(value, _FORBIDDEN_VALUES):
        raise DeniedAccess(f'"{name}" is not accessible to programs')
    return value


_INITIALISERS = frozenset({"__init__", "__post_init__"})


def _may_reinitialise(obj: Any) -> bool:
    # Re-running an initialiser writes the object's state: the write guard's rule.
    return isinstance(obj, _WRITABLE) or is_program_defined(obj)


class _CheckedInitialiser:
    """A foreign class's ``__init__``: callable only on what the program may write."""

    __slots__ = ("__function",)

    def __init__(self, function: Any) -> None:
        self.__function = function

    def __call__(self, instance: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not _may_reinitialise(instance):
            raise DeniedWrite(
                f"'{type(instance).__name__}' objects cannot be re-initialised by programs"
            )
        return self.__function(instance, *args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.__function)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("initialisers cannot be copied or pickled")


def _guarded_initialiser(obj: Any, name: str, default: Any) -> Any:
    """``obj.__init__``: readable for ``super().__init__(...)`` and ``Base.__init__(self)``,
    but a host object's bound initialiser (``tools.__init__``) would let a program
    rewrite its state (a module proxy's table, the bindings' call function)."""
    if isinstance(obj, super):
        allowed = _may_reinitialise(obj.__self__)  # type: ignore[attr-defined]
    elif isinstance(obj, type):
        allowed = True
    else:
        allowed = _may_reinitialise(obj)
    if not allowed:
        if default is not _MISSING:
            return default
        raise DeniedAccess(f"\"{name}\" of '{type(obj).__name__}' objects is not available")
    try:
        value = getattr(obj, name)
    except AttributeError as exc:
        if default is not _MISSING:
            return default
        raise AttributeError(str(exc)) from None
    if isinstance(obj, type) and not (
        isinstance(value, types.FunctionType) and value.__module__ == PROGRAM_MODULE
    ):
        # Unbound: ``Base.__init__(anything)``; the program's own functions are its own.
        return _CheckedInitialiser(value)
    return value


def guarded_hasattr(obj: Any, name: Any) -> bool:
    """``hasattr`` through the attribute guard (denied names read as absent)."""
    try:
        guarded_getattr(obj, name)
    except AttributeError:
        return False
    return True


def guarded_getitem(obj: Any, key: Any) -> Any:
    """``obj[key]``."""
    return obj[key]


def guarded_write(obj: Any) -> Any:
    """Return ``obj`` if the program may assign to its attributes or items."""
    if isinstance(obj, _WRITABLE) or is_program_defined(obj):
        if isinstance(obj, type):
            forget_class(obj)
        return obj
    raise DeniedWrite(f"'{type(obj).__name__}' objects cannot be modified by programs")


def guarded_setattr(obj: Any, name: Any, value: Any) -> None:
    """``setattr`` through the write guard."""
    name = check_attribute_name(name)
    if name in READABLE_DUNDERS:
        raise DeniedAccess(f'"{name}" cannot be assigned by programs')
    setattr(guarded_write(obj), name, value)


def guarded_delattr(obj: Any, name: Any) -> None:
    """``delattr`` through the write guard."""
    name = check_attribute_name(name)
    if name in READABLE_DUNDERS:
        raise DeniedAccess(f'"{name}" cannot be deleted by programs')
    delattr(guarded_write(obj), name)


_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "|=": operator.ior,
    "^=": operator.ixor,
    "&=": operator.iand,
    "@=": operator.imatmul,
}


def inplacevar(op: str, target: Any, value: Any) -> Any:
    """``target <op>= value``."""
    return _INPLACE[op](target, value)


def apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` (RestrictedPython routes star-calls through here)."""
    return func(*args, **kwargs)


def typename(obj: Any) -> str:
    """``type(obj).__name__`` (what ``obj.__class__.__name__`` compiles to)."""
    return type(obj).__name__


def safe_type(*args: Any) -> type:
    """One-argument ``type``; never hands out a metaclass (no dynamic class creation)."""
    if len(args) != 1:
        raise TypeError("type() takes exactly one argument in the sandbox")
    result = type(args[0])
    if issubclass(result, type):
        raise TypeError("type() of a class is not available in the sandbox")
    return result


def safe_dir(*args: Any) -> list[str]:
    """``dir(obj)`` without underscore names."""
    if len(args) != 1:
        raise TypeError("dir() takes exactly one argument in the sandbox")
    return [name for name in dir(args[0]) if not name.startswith("_")]


def _metaclass_of(bases: tuple[Any, ...]) -> type:
    meta: type = type
    for base in bases:
        candidate = type(base)
        if issubclass(candidate, meta):
            meta = candidate
        elif not issubclass(meta, candidate):
            raise TypeError("metaclass conflict in class bases")
    return meta


def make_class(name: str, bases: tuple[Any, ...], namespace: dict[str, Any], **kw: Any) -> Any:
    """``__metaclass__``: create a class statement's class with the bases' metaclass."""
    return _metaclass_of(bases)(name, bases, namespace, **kw)


def _prepare_class(name: str, bases: tuple[Any, ...], **kw: Any) -> Any:
    # RestrictedPython compiles every class as ``class C(metaclass=__metaclass__)``;
    # without this, bases whose metaclass prepares a namespace (enum) get a plain dict.
    return _metaclass_of(bases).__prepare__(name, bases, **kw)


make_class.__prepare__ = _prepare_class  # type: ignore[attr-defined]


_BUILTIN_NAMES = """
abs aiter all anext any ascii bin bool bytearray bytes callable chr classmethod complex
dict divmod enumerate filter float format frozenset hash hex id int isinstance issubclass
iter len list map max min next object oct ord pow property range repr reversed round set
slice sorted staticmethod str sum super tuple zip
None Ellipsis NotImplemented False True
BaseException Exception ArithmeticError AssertionError AttributeError BufferError
EOFError ExceptionGroup FloatingPointError ImportError IndexError KeyError LookupError
MemoryError ModuleNotFoundError NameError NotImplementedError OSError OverflowError
PermissionError FileNotFoundError FileExistsError ConnectionError TimeoutError
RecursionError ReferenceError RuntimeError StopAsyncIteration StopIteration SyntaxError
TypeError UnboundLocalError UnicodeError UnicodeDecodeError UnicodeEncodeError
UnicodeTranslateError ValueError ZeroDivisionError
Warning UserWarning DeprecationWarning RuntimeWarning
""".split()


def make_builtins(importer: Callable[..., Any]) -> dict[str, Any]:
    """The ``__builtins__`` of a program (``__import__`` is ``importer``)."""
    table: dict[str, Any] = {name: getattr(builtins, name) for name in _BUILTIN_NAMES}
    table.update(
        __build_class__=builtins.__build_class__,
        __import__=importer,
        getattr=guarded_getattr,
        hasattr=guarded_hasattr,
        setattr=guarded_setattr,
        delattr=guarded_delattr,
        type=safe_type,
        dir=safe_dir,
    )
    return table


# -- guard sites: the guards' verdicts cached per access site ------------------------------
#
# The policy compiles ``p.x`` (``p`` a plain name in a function scope) into
# ``(p.x if _type_(p) is _s7_ else _rs_(p, "x", "_s7_"))``, and ``p.x = v`` / ``d[k] = v``
# likewise with ``_ws_`` around the target. ``_s7_`` is a global of the run that only the
# slow path writes: it calls the guard, and when the guard can have nothing to refuse for
# *any* object of exactly that type at that site, it stores the type. Later accesses on an
# object of that exact type take plain bytecode (no Python-level call): what the guard
# would have checked is fixed by the type, and the type of an object cannot change
# (``__class__`` cannot be assigned by programs). The check is an identity test of the
# type, so no program code (a metaclass ``__hash__``/``__eq__``) runs between it and the
# access, and the name is read twice with nothing in between that could rebind it.
#
# Which types qualify (every other type always takes the guard):
# - reads of public names: the exact built-in value types and C containers below, whose
#   public attributes are methods and numbers (``format``/``format_map``, the coroutine
#   drivers, ``obj`` and the frame/code names never qualify: the guard treats those by
#   name); and the program's own classes (``_fast_class``), for a name that resolves on
#   the class to a function, a ``property``/``classmethod``/``staticmethod``, a slot or a
#   plain value: what such a read returns is what the program stored or what calling its
#   own callable returns (the value test of the guard finds nothing there);
# - writes (attributes and items): types whose MRO holds ``dict``, ``list``, ``set``,
#   ``bytearray`` or ``deque`` (the guard's ``isinstance`` test, which follows the MRO),
#   and the program's own classes;
# - ``_x`` reads and writes: the program's own classes.
# A write to a class (through any guard) drops every cached verdict of it and of its
# subclasses, so a later ``C.x = <descriptor>`` is seen by the next read of ``x``; the
# tests read the verdict afresh at every execution.
#
# Two shapes share one test (see ``_policy``): ``self.n += v`` (``_rws_``: the read's
# verdict, on the program's own classes, covers the write) and a statement's group
# (``_gs_``): the reads a statement evaluates before it can run any code, which must run
# none themselves (no ``property``), plus its store. A write verdict depends on nothing a
# class write changes, so it may be used after code ran.

#: Exact built-in types whose public attributes a guard never refuses by value.
_READ_FAST_TYPES = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set,
                    frozenset, range, slice, collections.deque, collections.defaultdict,
                    collections.OrderedDict)  # fmt: skip
#: Types whose instances the write guard allows whatever the instance: it tests
#: ``isinstance`` against these (concrete classes: the answer follows the type's MRO).
_WRITE_BASES = {id(t): t for t in (dict, list, set, bytearray, collections.deque)}
_READ_FAST = {id(t): t for t in _READ_FAST_TYPES}
#: Names the attribute guard treats specially, whatever the object.
_NAMED_BY_GUARD = frozenset({"format", "format_map", "obj"}) | _DRIVERS | _DENIED_NAMES
#: Built-in bases a program class may have and stay fast: value types and exceptions (not
#: ``super``, ``property`` or ``types.ModuleType``, whose instances resolve attributes
#: elsewhere or are refused by the guard as values).
_OWN_BASES = {
    id(t): t
    for t in (object, dict, list, tuple, set, frozenset, str, bytes, bytearray, int, float,
              complex, *(v for v in vars(builtins).values()
                         if isinstance(v, type) and issubclass(v, BaseException)))
}  # fmt: skip
#: Class attributes a fast read may resolve to (or any value whose type has no ``__get__``).
_PLAIN_DESCRIPTORS = (
    types.FunctionType,
    types.MemberDescriptorType,  # ``__slots__`` a library made (dataclass(slots=True))
    property,
    classmethod,
    staticmethod,
)
_HOOKS = ("__getattr__", "__getattribute__")


def _has_get(kind: type) -> bool:
    mro = type.__getattribute__(kind, "__mro__")
    return any("__get__" in type.__getattribute__(k, "__dict__") for k in mro)


def _fast_class(cls: type) -> bool:
    """Whether ``cls`` is one of the program's own classes, with plain attribute lookup.

    Created by the program (``__module__`` is the program's), metaclass exactly ``type``,
    every base the program's own or one of ``_OWN_BASES``, and no ``__getattr__`` or
    ``__getattribute__`` put on it by a library decorator.
    """
    if type(cls) is not type:
        return False
    program = False
    for klass in cls.__mro__:
        if _OWN_BASES.get(id(klass)) is klass:
            continue
        if type(klass) is not type or klass.__module__ != PROGRAM_MODULE:
            return False
        namespace = type.__getattribute__(klass, "__dict__")
        if any(hook in namespace for hook in _HOOKS):
            return False
        program = True
    return program


def _plain_resolution(cls: type, name: str) -> bool:
    """Whether ``name`` resolves on ``cls`` (a ``_fast_class``) to nothing but plain values."""
    for klass in cls.__mro__:
        namespace = type.__getattribute__(klass, "__dict__")
        if name in namespace:
            if _OWN_BASES.get(id(klass)) is klass:
                return True  # a built-in method or slot of a value type
            kind = type(namespace[name])
            return kind in _PLAIN_DESCRIPTORS or not _has_get(kind)
    return True  # the instance's own dict, or AttributeError


def _runs_no_code(cls: type, name: str) -> bool:
    """Whether reading ``name`` on an instance of ``cls`` (a fast type) runs no code.

    Built-in types' attributes are C; on the program's classes, everything
    ``_plain_resolution`` allows but a ``property`` (its getter is code).
    """
    if _READ_FAST.get(id(cls)) is cls:
        return True
    for klass in cls.__mro__:
        namespace = type.__getattribute__(klass, "__dict__")
        if name in namespace:
            return type(namespace[name]) is not property
    return True


def _fast_write(cls: type) -> bool:
    """Whether the write guard allows every object of exactly this type."""
    mro = type.__getattribute__(cls, "__mro__")
    return any(_WRITE_BASES.get(id(k)) is k for k in mro) or _fast_class(cls)


def _fast_read(cls: type, name: str) -> bool:
    if name in _NAMED_BY_GUARD:
        return False
    if _READ_FAST.get(id(cls)) is cls:
        return True
    return _fast_class(cls) and _plain_resolution(cls, name)


class _SiteTable:
    """The guard sites of one run's globals (``env``): their names, to drop verdicts."""

    __slots__ = ("__weakref__", "env", "names", "refused")

    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env
        self.names: tuple[str, ...] = ()
        # The type a site last refused, per site: a loop over a module proxy or a
        # library object asks once, not at every access.
        self.refused: dict[str, type] = {}

    def register(self, names: tuple[str, ...]) -> None:
        """Called once by the compiled program: every site starts with no verdict."""
        if any(type(n) is not str or not _SITE_NAME(n) for n in names):
            raise TypeError("invalid guard site names")
        for name in names:
            self.env[name] = None
        self.names = self.names + names

    def forget(self, cls: type) -> None:
        env = self.env
        for name in self.names:
            cached = env.get(name)
            mro = () if cached is None else type.__getattribute__(cached, "__mro__")
            if any(k is cls for k in mro):
                env[name] = None
        for name, refused in list(self.refused.items()):
            if any(k is cls for k in type.__getattribute__(refused, "__mro__")):
                del self.refused[name]


_SITE_NAME = re.compile(r"_s\d+_").fullmatch
_TABLES: weakref.WeakSet[_SiteTable] = weakref.WeakSet()


def forget_class(cls: type) -> None:
    """``cls`` (a class) is about to be written: no site may keep a verdict about it."""
    for table in list(_TABLES):
        table.forget(cls)


def _make_sites(env: dict[str, Any]) -> dict[str, Any]:
    """The slow paths of the guard sites of ``env`` (they call ``env``'s guards)."""
    table = _SiteTable(env)
    _TABLES.add(table)
    refused = table.refused

    def verdict(slot: str, cls: type, fast: Callable[[], bool]) -> None:
        if refused.get(slot) is not cls:
            if fast():
                env[slot] = cls
            else:
                refused[slot] = cls

    def read_site(obj: Any, name: str, slot: str) -> Any:
        value = env["_getattr_"](obj, name)
        cls = type(obj)
        verdict(slot, cls, lambda: _fast_read(cls, name))
        return value

    def write_site(obj: Any, slot: str) -> Any:
        target = env["_write_"](obj)
        cls = type(obj)
        verdict(slot, cls, lambda: _fast_write(cls))
        return target

    def own_read_site(obj: Any, name: str, slot: str) -> Any:
        value = env["_own_getattr_"](obj, name)
        cls = type(obj)
        verdict(slot, cls, lambda: _fast_class(cls) and _plain_resolution(cls, name))
        return value

    def own_write_site(obj: Any, slot: str) -> Any:
        target = env["_own_write_"](obj)
        cls = type(obj)
        verdict(slot, cls, lambda: _fast_class(cls))
        return target

    def read_write_site(obj: Any, name: str, slot: str) -> Any:
        # ``self.n += v``: the read's guard; the verdict covers the write too, so only
        # the program's own classes qualify.
        own = name.startswith("_")
        value = env["_own_getattr_" if own else "_getattr_"](obj, name)
        cls = type(obj)
        if (
            (own or name not in _NAMED_BY_GUARD)
            and _fast_class(cls)
            and _plain_resolution(cls, name)
        ):
            env[slot] = cls
        return value

    def group_site(obj: Any, slot: str, spec: tuple[tuple[str, str], ...]) -> None:
        # After the statement ran with its sites: one verdict for all of its members.
        cls = type(obj)
        if refused.get(slot) is cls:
            return  # the same type as last time: no need to ask again
        for kind, attr in spec:
            if kind == "w":
                ok = _fast_write(cls)
            elif kind == "ow":
                ok = _fast_class(cls)
            elif kind == "r":
                ok = _fast_read(cls, attr) and _runs_no_code(cls, attr)
            elif kind == "o":
                ok = _fast_class(cls) and _plain_resolution(cls, attr)
                ok = ok and _runs_no_code(cls, attr)
            else:
                ok = False
            if not ok:
                refused[slot] = cls
                return
        env[slot] = cls

    return {
        SITE_TYPE: type,
        GROUP_SITE: group_site,
        READ_WRITE_SITE: read_write_site,
        SITE_TABLE: table.register,
        READ_SITE: read_site,
        WRITE_SITE: write_site,
        OWN_READ_SITE: own_read_site,
        OWN_WRITE_SITE: own_write_site,
    }


def make_guards(
    *,
    print_factory: Callable[[Any], Any],
    exc_guard: Callable[[], None],
    returned: Callable[[Any], Any],
) -> dict[str, Any]:
    """The guard globals RestrictedPython's generated code calls (and the guard sites')."""
    env = {
        "__name__": PROGRAM_MODULE,
        "__metaclass__": make_class,
        "_getattr_": guarded_getattr,
        "_getitem_": guarded_getitem,
        "_write_": guarded_write,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_inplacevar_": inplacevar,
        "_apply_": apply,
        "_print_": print_factory,
        "_exc_guard_": exc_guard,
        "_ret_": returned,
        "_typename_": typename,
    }
    env.update(_make_sites(env))
    return env


# -- a second net: no code evaluation or I/O on the program's behalf ----------------------

_CODE_EVENTS = frozenset({"exec", "compile"})
# Library functions that compile and run generated source for the program: from fixed
# templates and validated identifiers, with their own namespaces (see _audit).
_CODE_CALLERS = frozenset(
    {
        ("dataclasses", "_create_fn"),  # 3.11
        ("dataclasses", "add_fns_to_class"),  # 3.13
        ("collections", "namedtuple"),
    }
)
# typing.ForwardRef.__init__ compiles a string annotation; running it needs
# ForwardRef._evaluate, which is not on this list.
_COMPILE_ONLY_CALLERS = frozenset({("typing", "__init__")})
# Nothing a program is offered opens files, lists directories, starts processes, opens
# sockets or loads native code: such an event under program frames means an escape.
# (Sending on the existing bridge socket is not refused: print runs under program frames.)
_IO_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir", "os.system"})
_IO_PREFIXES = ("os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.kill", "subprocess.",
                "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo",
                "socket.gethost", "socket.getnameinfo", "ctypes.", "shutil.", "pty.", "os.remove", "os.rename", "os.rmdir",
                "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown",
                "os.putenv", "os.unsetenv", "sys.addaudithook")  # fmt: skip
_installed = False


def _program_frame(frame: types.FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename == _PROGRAM_FILENAME:
            return True
        frame = frame.f_back
    return False


def code_audit(event: str, args: Any) -> None:
    """Audit hook: while program code is running, refuse ``compile``/``exec``/``eval``
    (unless called by one of the audited code generators) and file, process, socket and
    native-code events.

    The guard audit removes or wraps every allowed callable that evaluates strings; this
    catches one the audit missed (the way ``typing.get_type_hints`` once did) before the
    string runs with the real builtins, and an escape that reached ``open`` or ``os``
    before it touches the host. Dormant outside program frames (the guest's own compile
    and reporting, the fork server, the test-only raw guest).
    """
    if event in _CODE_EVENTS:
        caller = sys._getframe(1)
        if not _program_frame(caller):
            return
        key = (caller.f_globals.get("__name__"), caller.f_code.co_name)
        if key in _CODE_CALLERS or (event == "compile" and key in _COMPILE_ONLY_CALLERS):
            return
        raise DeniedAccess(f"{event}() of code is not allowed in the sandbox")
    if event in _IO_EVENTS or event.startswith(_IO_PREFIXES):
        if _program_frame(sys._getframe(1)):
            raise DeniedAccess(f"{event} is not allowed in the sandbox")


def install_audit_hook() -> None:
    """Install ``code_audit`` once per process (the fork server; workers inherit it)."""
    global _installed
    if not _installed:
        sys.addaudithook(code_audit)
        _installed = True
