"""The import allow-list of the Python guest, served through read-only module proxies.

``import json`` hands the program a ``ModuleProxy``, never the module: a frozen table of
an explicit export list per module (``_EXPORTS``), every module-typed value removed, and
the callables the guard audit (``_audit``) rejected replaced by sandbox versions
(``_stdlib``: no ``typing.get_type_hints``, which evaluates strings; no
``string.Formatter``, whose field lookups bypass the guards; no ``uuid.uuid1``, which
shells out; ``functools.singledispatch`` whose ``register`` never evaluates annotations;
guarded ``operator.attrgetter``...). ``asyncio`` is a facade built per run by the guest;
``pprint`` and ``traceback`` are built per import, bound to the program's output. Exact
names import, plus ``urllib.parse`` (``import urllib.parse`` / ``from urllib.parse
import quote``); no relative imports.

Library C code imports modules through the *current* builtins' ``__import__`` (the
program's): ``datetime.strftime`` runs ``import time``. Those calls pass
``locals is globals`` (``PyImport_Import``), which program code never does, and read the
module from ``sys.modules`` afterwards; the importer lets them pass for modules already
loaded and returns nothing, so a program gains nothing by imitating one.

The tables are built in the fork server (``warm``), which also exercises lazy import
paths so workers do not touch the filesystem for them.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

from . import _builtins, _stdlib

__all__ = ["ALLOWED_MODULES", "ModuleProxy", "make_importer", "module_table", "warm"]

ALLOWED_MODULES = (
    "asyncio", "base64", "bisect", "collections", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "fractions", "functools", "hashlib",
    "heapq", "html", "io", "itertools", "json", "math", "operator", "pathlib", "pprint",
    "random", "re", "shlex", "statistics", "string", "textwrap", "time", "traceback",
    "typing", "urllib.parse", "uuid",
)  # fmt: skip


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Every module's public surface, explicitly: a new Python version adds nothing unaudited.
# Each name here is classified in _audit.AUDIT (a test enforces it).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "base64": _names(
        """
        b64encode b64decode standard_b64encode standard_b64decode urlsafe_b64encode
        urlsafe_b64decode b32encode b32decode b32hexencode b32hexdecode b16encode
        b16decode a85encode a85decode b85encode b85decode encodebytes decodebytes
        """
    ),
    "bisect": _names("bisect bisect_left bisect_right insort insort_left insort_right"),
    "collections": _names(
        "deque defaultdict OrderedDict namedtuple Counter ChainMap UserDict UserList UserString"
    ),
    "copy": _names("copy deepcopy Error error"),
    "csv": _names(
        """
        Error writer reader register_dialect unregister_dialect get_dialect list_dialects
        field_size_limit QUOTE_MINIMAL QUOTE_ALL QUOTE_NONNUMERIC QUOTE_NONE Dialect excel
        excel_tab unix_dialect DictReader DictWriter Sniffer
        """
    ),
    "dataclasses": _names(
        """
        dataclass field fields asdict astuple replace is_dataclass Field
        FrozenInstanceError InitVar KW_ONLY MISSING
        """
    ),
    "datetime": _names("MINYEAR MAXYEAR timedelta date tzinfo time datetime timezone UTC"),
    "decimal": _names(
        """
        getcontext setcontext localcontext Decimal Context DecimalTuple DecimalException
        Clamped Rounded Inexact Subnormal Underflow Overflow DivisionByZero FloatOperation
        InvalidOperation ConversionSyntax DivisionImpossible DivisionUndefined
        InvalidContext DefaultContext BasicContext ExtendedContext MAX_PREC MAX_EMAX
        MIN_EMIN MIN_ETINY ROUND_UP ROUND_DOWN ROUND_CEILING ROUND_FLOOR ROUND_HALF_UP
        ROUND_HALF_DOWN ROUND_HALF_EVEN ROUND_05UP
        """
    ),
    "difflib": _names(
        """
        Match SequenceMatcher get_close_matches Differ IS_LINE_JUNK IS_CHARACTER_JUNK
        unified_diff context_diff diff_bytes ndiff HtmlDiff restore
        """
    ),
    "enum": _names(
        """
        Enum IntEnum StrEnum Flag IntFlag ReprEnum auto unique member nonmember property
        verify EnumCheck CONTINUOUS NAMED_FLAGS UNIQUE FlagBoundary STRICT CONFORM EJECT KEEP
        """
    ),
    "fractions": _names("Fraction"),
    "functools": _names(
        """
        reduce partial partialmethod lru_cache cache cached_property total_ordering
        cmp_to_key singledispatch singledispatchmethod wraps WRAPPER_ASSIGNMENTS
        WRAPPER_UPDATES
        """
    ),
    "hashlib": _names(
        """
        algorithms_guaranteed algorithms_available new pbkdf2_hmac scrypt file_digest md5
        sha1 sha224 sha256 sha384 sha512 blake2b blake2s sha3_224 sha3_256 sha3_384
        sha3_512 shake_128 shake_256
        """
    ),
    "heapq": _names("heappush heappop heapreplace heappushpop heapify merge nsmallest nlargest"),
    "html": _names("escape unescape"),
    "io": _names("StringIO BytesIO UnsupportedOperation SEEK_SET SEEK_CUR SEEK_END"),
    "itertools": _names(
        """
        accumulate batched chain combinations combinations_with_replacement compress count
        cycle dropwhile filterfalse groupby islice pairwise permutations product repeat
        starmap takewhile tee zip_longest
        """
    ),
    "json": _names("JSONDecoder JSONDecodeError JSONEncoder dump dumps load loads"),
    "math": _names(
        """
        acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees
        dist e erf erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot
        inf isclose isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf
        nan nextafter perm pi pow prod radians remainder sin sinh sqrt sumprod tan tanh tau
        trunc ulp
        """
    ),
    "operator": _names(
        """
        lt le eq ne ge gt not_ truth is_ is_not abs add and_ floordiv index inv invert
        lshift mod mul matmul neg or_ pos pow rshift sub truediv xor concat contains
        countOf delitem getitem indexOf setitem length_hint call attrgetter itemgetter
        methodcaller iadd iand iconcat ifloordiv ilshift imod imul imatmul ior ipow
        irshift isub itruediv ixor
        """
    ),
    "pathlib": _names("PurePath PurePosixPath"),
    "pprint": _names("pprint pformat pp saferepr isreadable isrecursive PrettyPrinter"),
    "random": _names(
        """
        Random SystemRandom seed random uniform triangular randint choice randrange sample
        shuffle choices normalvariate lognormvariate expovariate vonmisesvariate
        gammavariate gauss betavariate paretovariate weibullvariate getstate setstate
        getrandbits randbytes
        """
    ),
    "re": _names(
        """
        NOFLAG ASCII A IGNORECASE I LOCALE L UNICODE U MULTILINE M DOTALL S VERBOSE X
        RegexFlag error match fullmatch search sub subn split findall finditer compile
        purge escape Pattern Match
        """
    ),
    "shlex": _names("split join quote"),
    "statistics": _names(
        """
        StatisticsError mean fmean geometric_mean harmonic_mean median median_low
        median_high median_grouped mode multimode quantiles variance pvariance stdev pstdev
        covariance correlation linear_regression LinearRegression NormalDist
        """
    ),
    "string": _names(
        """
        ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits
        punctuation printable whitespace capwords Template
        """
    ),
    "textwrap": _names("TextWrapper wrap fill shorten dedent indent"),
    "time": _names(
        """
        time time_ns monotonic monotonic_ns perf_counter perf_counter_ns process_time
        process_time_ns sleep gmtime localtime mktime asctime ctime strftime strptime
        struct_time timezone altzone daylight tzname
        """
    ),
    "traceback": _names(
        "format_exc format_exception format_exception_only print_exc print_exception"
    ),
    "typing": _names(
        """
        Any Optional Union List Dict Tuple Set FrozenSet Type Callable Iterable Iterator
        Generator AsyncIterator AsyncIterable AsyncGenerator Awaitable Coroutine Sequence
        Mapping MutableMapping MutableSequence MutableSet AbstractSet Collection Container
        Hashable Sized Reversible NamedTuple TypedDict Literal Final ClassVar Annotated
        cast TYPE_CHECKING TypeVar Generic Protocol NotRequired Required Self DefaultDict
        Counter Deque OrderedDict ChainMap NoReturn Never LiteralString TypeAlias overload
        final runtime_checkable SupportsInt SupportsFloat SupportsIndex SupportsAbs
        """
    ),
    "urllib.parse": _names(
        """
        urlparse urlsplit urlunparse urlunsplit urljoin urldefrag quote quote_plus
        quote_from_bytes unquote unquote_plus unquote_to_bytes urlencode parse_qs parse_qsl
        ParseResult SplitResult DefragResult ParseResultBytes SplitResultBytes
        DefragResultBytes
        """
    ),
    "uuid": _names(
        """
        UUID uuid3 uuid4 uuid5 NAMESPACE_DNS NAMESPACE_URL NAMESPACE_OID NAMESPACE_X500
        SafeUUID RESERVED_NCS RFC_4122 RESERVED_MICROSOFT RESERVED_FUTURE
        """
    ),
}

#: Built per import, bound to the importing run's output (see ``_stdlib``).
_PER_RUN = frozenset({"pprint", "traceback"})

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


def module_table(name: str) -> dict[str, Any]:
    """The attribute table exposed for ``name`` (built once per process)."""
    table = _TABLES.get(name)
    if table is not None:
        return table
    module = importlib.import_module(name)
    overrides = _stdlib.OVERRIDES.get(name, {})
    per_run = _stdlib.PER_RUN_NAMES.get(name, frozenset())
    table = {}
    for attr in _EXPORTS[name]:
        if attr in per_run:
            continue  # bound to a run's output by _proxy
        if attr in overrides:
            table[attr] = overrides[attr]
            continue
        if not hasattr(module, attr):
            continue  # not in this Python version
        value = getattr(module, attr)
        if isinstance(value, types.ModuleType):
            continue
        table[attr] = value
    _TABLES[name] = table
    return table


_PROXIES: dict[str, ModuleProxy] = {}


def _proxy(name: str, env: Any) -> ModuleProxy:
    if name in _PER_RUN:
        printer = env.get("_print_") if isinstance(env, dict) else None
        if printer is None:
            raise ImportError(f'"{name}" needs a program run to print to')
        stream = _stdlib.ProgramStream(printer(None))
        table = dict(module_table(name))
        table.update(_stdlib.per_run_overrides(name, stream))
        return ModuleProxy(name, table)
    proxy = _PROXIES.get(name)
    if proxy is None:
        proxy = _PROXIES[name] = ModuleProxy(name, module_table(name))
    return proxy


def make_importer(extra: Mapping[str, ModuleProxy]) -> Callable[..., ModuleProxy | None]:
    """The program's ``__import__``: allow-listed names only, answered with proxies."""
    allowed = ", ".join(ALLOWED_MODULES)
    packages = {name.split(".")[0]: name for name in ALLOWED_MODULES if "." in name}

    def guarded_import(
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> ModuleProxy | None:
        if locals is globals and isinstance(globals, dict) and name in sys.modules:
            # ``PyImport_Import`` from library C code (see module docstring): it reads
            # sys.modules itself; answer nothing, import nothing.
            return None
        if level != 0:
            raise ImportError("relative imports are not allowed")
        if name in extra:
            return extra[name]
        if name in packages and name not in ALLOWED_MODULES:
            # ``import urllib`` / ``from urllib import parse``: only the allowed child.
            child = packages[name]
            return ModuleProxy(name, {child.split(".", 1)[1]: _proxy(child, globals)})
        if name not in ALLOWED_MODULES:
            raise ImportError(f'import of "{name}" is not allowed (available: {allowed})')
        if "." in name and not fromlist:
            # ``import urllib.parse`` binds the package name.
            head, tail = name.split(".", 1)
            return ModuleProxy(head, {tail: _proxy(name, globals)})
        return _proxy(name, globals)

    return guarded_import


def warm() -> None:
    """Build every table, run the lazy import paths of the allowed modules, and install
    the audit hook that refuses code evaluation under program frames (inherited by every
    worker forked afterwards)."""
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
    import csv
    import enum
    import html
    import io
    import pathlib
    import pprint
    import shlex
    import time
    import urllib.parse

    now = datetime.datetime(2024, 1, 2, 3, 4, 5)
    _ = now.strftime("%A %d %B %Y-%m"), now.timetuple(), time.strftime("%Y"), time.localtime()
    _ = time.strptime("2024", "%Y"), time.gmtime(0), time.mktime(now.timetuple())
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["a", 1])
    _ = list(csv.DictReader(io.StringIO(buffer.getvalue() + "x,2\n"))), csv.Sniffer()
    _ = enum.Enum("E", "A B"), enum.Flag("F", "X Y"), enum.IntEnum("I", "Z"), enum.auto()
    _ = html.escape("<a>"), html.unescape("&lt;&amp;&eacute;"), pprint.pformat({"a": [1]})
    _ = urllib.parse.urlencode({"q": "a b"}), urllib.parse.urlsplit("http://x/y?z#w")
    _ = urllib.parse.quote("a b/é"), urllib.parse.unquote("%C3%A9"), urllib.parse.parse_qs("a=1")
    _ = shlex.split("a 'b c'"), shlex.quote("a b"), shlex.join(["a", "b"])
    _ = pathlib.PurePosixPath("/a/b.txt").with_suffix(".md").relative_to("/a").parts
    _ = hashlib.new("sha256", b"x").hexdigest(), hashlib.blake2b(b"x"), hashlib.sha3_256(b"x")
    _builtins.install_audit_hook()
