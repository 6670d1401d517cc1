"""The import allow-list of the Python guest, served through read-only module proxies.

``import json`` hands the program a ``ModuleProxy``, never the module: a frozen table of
the module's public attributes with every module-typed value removed (so
``json.decoder``, ``collections.abc`` or ``random._os`` do not exist) and, for modules
whose public surface includes sharp tools, an explicit export list (no
``typing.get_type_hints``, which evaluates strings; no ``string.Formatter``, whose field
lookups bypass the guards; no ``uuid.uuid1``, which shells out; ``functools.wraps``
without custom attribute lists). ``asyncio`` is a facade with ``gather`` and ``sleep``,
built per run by the guest. Only exact names import: no dotted or relative imports.

The tables are built in the fork server (``warm``), which also exercises lazy import
paths so workers do not touch the filesystem for them.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ALLOWED_MODULES", "ModuleProxy", "make_importer", "module_table", "warm"]

ALLOWED_MODULES = (
    "asyncio", "base64", "bisect", "collections", "copy", "dataclasses", "datetime",
    "decimal", "difflib", "fractions", "functools", "hashlib", "heapq", "itertools",
    "json", "math", "random", "re", "statistics", "string", "textwrap", "typing", "uuid",
)  # fmt: skip

_EXPORTS: dict[str, tuple[str, ...]] = {
    "typing": tuple(
        """
        Any Optional Union List Dict Tuple Set FrozenSet Type Callable Iterable Iterator
        Generator AsyncIterator AsyncIterable AsyncGenerator Awaitable Coroutine Sequence
        Mapping MutableMapping MutableSequence MutableSet AbstractSet Collection Container
        Hashable Sized Reversible NamedTuple TypedDict Literal Final ClassVar Annotated
        cast TYPE_CHECKING TypeVar Generic Protocol NotRequired Required Self DefaultDict
        Counter Deque OrderedDict ChainMap NoReturn Never LiteralString TypeAlias overload
        final runtime_checkable SupportsInt SupportsFloat SupportsIndex SupportsAbs
        """.split()
    ),
    "dataclasses": tuple(
        """
        dataclass field fields asdict astuple replace is_dataclass Field
        FrozenInstanceError InitVar KW_ONLY MISSING
        """.split()
    ),
    "functools": tuple(
        """
        reduce partial partialmethod lru_cache cache cached_property total_ordering
        cmp_to_key singledispatch singledispatchmethod WRAPPER_ASSIGNMENTS WRAPPER_UPDATES
        """.split()
    ),
    "string": tuple(
        """
        ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits
        punctuation printable whitespace capwords Template
        """.split()
    ),
    "uuid": tuple(
        """
        UUID uuid3 uuid4 uuid5 NAMESPACE_DNS NAMESPACE_URL NAMESPACE_OID NAMESPACE_X500
        SafeUUID RESERVED_NCS RFC_4122 RESERVED_MICROSOFT RESERVED_FUTURE
        """.split()
    ),
}

_TABLES: dict[str, dict[str, Any]] = {}


class ModuleProxy:
    """A read-only view of an allowed module's public, non-module attributes."""

    __slots__ = ("__name", "__table")
    __name: str
    __table: dict[str, Any]

    def __init__(self, name: str, table: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_ModuleProxy__name", name)
        object.__setattr__(self, "_ModuleProxy__table", dict(table))

    def __getattr__(self, attr: str) -> Any:
        try:
            return self.__table[attr]
        except KeyError:
            raise AttributeError(
                f"module '{self.__name}' has no attribute '{attr}' in the sandbox"
            ) from None

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"module '{self.__name}' is read-only")

    def __delattr__(self, attr: str) -> None:
        raise AttributeError(f"module '{self.__name}' is read-only")

    def __dir__(self) -> list[str]:
        return sorted(self.__table)

    def __repr__(self) -> str:
        return f"<module '{self.__name}' (sandboxed)>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("modules cannot be copied or pickled")


def _safe_wraps(wrapped: Any) -> Callable[[Any], Any]:
    """``functools.wraps(wrapped)`` with the default attribute lists only."""

    def decorate(wrapper: Any) -> Any:
        if not isinstance(wrapper, types.FunctionType) or wrapper.__module__ != "<program>":
            raise TypeError("functools.wraps() can only decorate the program's own functions")
        return functools.update_wrapper(wrapper, wrapped)

    return decorate


def module_table(name: str) -> dict[str, Any]:
    """The attribute table exposed for ``name`` (built once per process)."""
    table = _TABLES.get(name)
    if table is not None:
        return table
    module = importlib.import_module(name)
    exports = _EXPORTS.get(name)
    names = exports if exports is not None else [n for n in vars(module) if not n.startswith("_")]
    table = {}
    for attr in names:
        if not hasattr(module, attr):
            continue
        value = getattr(module, attr)
        if isinstance(value, types.ModuleType):
            continue
        table[attr] = value
    if name == "functools":
        table["wraps"] = _safe_wraps
    _TABLES[name] = table
    return table


_PROXIES: dict[str, ModuleProxy] = {}


def make_importer(extra: Mapping[str, ModuleProxy]) -> Callable[..., ModuleProxy]:
    """The program's ``__import__``: allow-listed names only, answered with proxies."""
    allowed = ", ".join(ALLOWED_MODULES)

    def guarded_import(
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> ModuleProxy:
        if level != 0:
            raise ImportError("relative imports are not allowed")
        if name in extra:
            return extra[name]
        if name not in ALLOWED_MODULES:
            raise ImportError(f'import of "{name}" is not allowed (available: {allowed})')
        proxy = _PROXIES.get(name)
        if proxy is None:
            proxy = _PROXIES[name] = ModuleProxy(name, module_table(name))
        return proxy

    return guarded_import


def warm() -> None:
    """Build every table and run the lazy import paths of the allowed modules."""
    for name in ALLOWED_MODULES:
        if name != "asyncio":
            module_table(name)
    import base64
    import datetime
    import decimal
    import difflib
    import fractions
    import hashlib
    import json
    import random
    import re
    import statistics
    import textwrap
    import uuid

    datetime.datetime.strptime("2024-01-02 03:04:05", "%Y-%m-%d %H:%M:%S")
    datetime.datetime.fromisoformat("2024-01-02T03:04:05+00:00").astimezone().isoformat()
    datetime.datetime.now().strftime("%c %x %X")
    _ = decimal.Decimal("1.10") + 1, fractions.Fraction(1, 3) * 2
    re.compile(r"(?P<w>\w+)\s*\d{2,}", re.I | re.M).findall("ab 12\ncd 34")
    json.loads(json.dumps({"a": [1.5, "x", None]}, indent=2, sort_keys=True))
    _ = statistics.mean([1, 2]), statistics.median([1, 2]), statistics.stdev([1, 2, 3])
    _ = hashlib.sha256(b"x").hexdigest(), hashlib.md5(b"x").hexdigest(), hashlib.sha1(b"x")
    _ = base64.b64encode(b"x"), base64.b64decode(b"eA=="), base64.urlsafe_b64encode(b"x")
    _ = uuid.uuid4(), uuid.uuid5(uuid.NAMESPACE_DNS, "x"), random.random(), random.choice([1])
    _ = (
        difflib.SequenceMatcher(None, "abc", "abd").ratio(),
        list(difflib.unified_diff(["a"], ["b"])),
    )
    _ = textwrap.dedent("  x"), textwrap.fill("a b c", 2), textwrap.shorten("a b c d e", 8)
    for encoding in ("utf-16", "utf-32", "latin-1", "ascii", "cp1252", "idna"):
        "x".encode(encoding)
