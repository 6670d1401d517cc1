"""The guard audit of the Python guest, as data: every name a program can reach, classified.

Each entry is ``"module.name": (verdict, reason)`` (``builtins.x`` for builtins):

- ``safe``: exported as is; the reason says why nothing it does (or returns, or whose
  methods do) evaluates strings as code, resolves names in the program's globals, reads
  attributes by a program-chosen name past the guards, reduces objects with
  program-chosen callables, writes to objects the program does not own, or hands out a
  module, frame, code object or host function;
- ``wrapped``: exported as a sandbox replacement (``_stdlib`` or ``_builtins``);
- ``guarded``: exported as is, with the dangerous attribute intercepted by the
  attribute guard (``_builtins.guarded_getattr``);
- ``removed``: not exported, kept here so that the reason is not lost.

``tests/sandbox/test_guard_audit.py`` fails when an exported name has no entry, when a
``removed`` name is reachable, or when a ``wrapped`` one is the original.
"""

from __future__ import annotations

__all__ = ["AUDIT", "VERDICTS"]

VERDICTS = frozenset({"safe", "wrapped", "guarded", "removed"})

AUDIT: dict[str, tuple[str, str]] = {}


def _group(verdict: str, reason: str, module: str, names: str) -> None:
    for name in names.split():
        key = f"{module}.{name}"
        assert key not in AUDIT, key
        AUDIT[key] = (verdict, reason)


_VALUE = "a constant (number, string, tuple, frozenset or flag value)"
_PURE = "pure computation on the arguments; calls back only callables the program passed"
_EXC = "an exception class; instances carry only the arguments they were raised with"

# -- builtins ---------------------------------------------------------------------------

_group(
    "safe",
    "pure functions on values; call only the program's own callables and the arguments' "
    "public protocol methods",
    "builtins",
    """
    abs aiter all anext any ascii bin callable chr divmod enumerate filter format hash
    hex id isinstance issubclass iter len map max min next oct ord pow repr reversed round
    sorted sum zip
    """,
)
_group(
    "safe",
    "value types and containers; their methods compute on the value (str.format and "
    "format_map are guarded, see builtins.getattr)",
    "builtins",
    "bool bytearray bytes complex dict float frozenset int list range set slice str tuple",
)
_group(
    "safe",
    "descriptors and base classes for the program's own classes; object's dunders stay "
    "behind the underscore rule; on super objects the guard resolves format/format_map "
    "and __init__ by the bound instance (super(S, s).format is str.format)",
    "builtins",
    "classmethod object property staticmethod super",
)
_group(
    "safe", "immutable singleton constants", "builtins", "None Ellipsis NotImplemented False True"
)
_group(
    "safe",
    _EXC + "; __traceback__ and AttributeError.obj are refused by the attribute guard",
    "builtins",
    """
    BaseException Exception ArithmeticError AssertionError AttributeError BufferError
    EOFError ExceptionGroup FloatingPointError ImportError IndexError KeyError LookupError
    MemoryError ModuleNotFoundError NameError NotImplementedError OSError OverflowError
    PermissionError FileNotFoundError FileExistsError ConnectionError TimeoutError
    RecursionError ReferenceError RuntimeError StopAsyncIteration StopIteration SyntaxError
    TypeError UnboundLocalError UnicodeError UnicodeDecodeError UnicodeEncodeError
    UnicodeTranslateError ValueError ZeroDivisionError Warning UserWarning
    DeprecationWarning RuntimeWarning
    """,
)
_group(
    "safe",
    "the class statement's builder; the metaclass comes from the program's bases, which "
    "are never metaclasses the program could not already name",
    "builtins",
    "__build_class__",
)
_group(
    "wrapped",
    "the allow-list importer: proxies only; library C code's imports of loaded modules "
    "pass without returning anything",
    "builtins",
    "__import__",
)
_group(
    "wrapped",
    "through the attribute and write guards (underscore names, frames, code, modules, "
    "coroutine drivers refused)",
    "builtins",
    "getattr hasattr setattr delattr",
)
_group("wrapped", "one argument only, never a metaclass", "builtins", "type")
_group("wrapped", "hides underscore names", "builtins", "dir")
_group(
    "removed",
    "evaluates strings as code, reads the caller's namespaces, or reaches files or stdin",
    "builtins",
    "eval exec compile open globals vars locals input breakpoint help exit quit",
)
_group("removed", "exposes raw buffers and their owners (.obj)", "builtins", "memoryview")

# -- base64, bisect, heapq, itertools, math, textwrap, html, difflib ----------------------

_group(
    "safe",
    _PURE,
    "base64",
    """
    b64encode b64decode standard_b64encode standard_b64decode urlsafe_b64encode
    urlsafe_b64decode b32encode b32decode b32hexencode b32hexdecode b16encode b16decode
    a85encode a85decode b85encode b85decode encodebytes decodebytes
    """,
)
_group("removed", "command-line entry points reading sys.argv and stdin", "base64", "main test")
_group(
    "safe",
    _PURE + " (key=, __lt__)",
    "bisect",
    "bisect bisect_left bisect_right insort insort_left insort_right",
)
_group(
    "safe",
    _PURE + " (__lt__, key=)",
    "heapq",
    "heappush heappop heapreplace heappushpop heapify merge nsmallest nlargest",
)
_group(
    "safe",
    "C iterator constructors; they call only the callables and iterables passed in",
    "itertools",
    """
    accumulate batched chain combinations combinations_with_replacement compress count
    cycle dropwhile filterfalse groupby islice pairwise permutations product repeat
    starmap takewhile tee zip_longest
    """,
)
_group(
    "safe",
    "numeric C functions and constants",
    "math",
    """
    acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e
    erf erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot inf
    isclose isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nan
    nextafter perm pi pow prod radians remainder sin sinh sqrt sumprod tan tanh tau trunc
    ulp
    """,
)
_group(
    "safe",
    "string processing with regular expressions fixed by the module (TextWrapper's "
    "attributes are plain options)",
    "textwrap",
    "TextWrapper wrap fill shorten dedent indent",
)
_group("safe", "entity tables and regex substitution; no templates", "html", "escape unescape")
_group(
    "safe",
    "sequence matching on the program's data; HtmlDiff formats with its own fixed "
    "templates and escapes the data",
    "difflib",
    """
    Match SequenceMatcher get_close_matches Differ IS_LINE_JUNK IS_CHARACTER_JUNK
    unified_diff context_diff diff_bytes ndiff HtmlDiff restore
    """,
)

# -- collections, copy ------------------------------------------------------------------

_group(
    "safe",
    "containers (writable like dict/list); defaultdict/ChainMap call only the program's factories",
    "collections",
    "deque defaultdict OrderedDict Counter ChainMap UserDict UserList",
)
_group(
    "safe",
    "eval()s generated source built only from validated identifiers, in a namespace with "
    "empty builtins; the class's __module__ is the caller's (the program)",
    "collections",
    "namedtuple",
)
_group(
    "guarded",
    "format/format_map delegate to the real str.format of .data: the attribute guard "
    "hands out the guarded formatter instead, on instances and on the class",
    "collections",
    "UserString",
)
_group(
    "wrapped",
    "a bound method's reducer is (getattr, (self, func.__name__)): rebuilt from its parts "
    "instead; other reducers are the types' own (programs cannot define __reduce_ex__, "
    "__copy__ or __deepcopy__)",
    "copy",
    "copy",
)
_group(
    "safe",
    "deepcopy copies methods by type (no getattr by name); reducers as for copy.copy; the "
    "memo holds only the program's own objects",
    "copy",
    "deepcopy",
)
_group("safe", _EXC, "copy", "Error error")
_group(
    "removed",
    "copyreg's writable global reducer registry: a program could hook the copying of "
    "every object of a type",
    "copy",
    "dispatch_table",
)

# -- csv, io -------------------------------------------------------------------------------

_group(
    "safe",
    "C reader/writer over the program's iterables and write() objects; dialects are a "
    "per-worker registry of option bags",
    "csv",
    """
    writer reader register_dialect unregister_dialect get_dialect list_dialects
    field_size_limit Dialect excel excel_tab unix_dialect DictReader DictWriter Sniffer
    """,
)
_group("safe", _VALUE, "csv", "QUOTE_MINIMAL QUOTE_ALL QUOTE_NONNUMERIC QUOTE_NONE")
_group("safe", _EXC, "csv", "Error")
_group("safe", "in-memory text stream; no file descriptor", "io", "StringIO")
_group("wrapped", "in-memory; getbuffer() (a memoryview) refused", "io", "BytesIO")
_group("safe", _EXC, "io", "UnsupportedOperation")
_group("safe", _VALUE, "io", "SEEK_SET SEEK_CUR SEEK_END")
_group(
    "removed",
    "file and descriptor access",
    "io",
    "open open_code FileIO BufferedReader BufferedWriter BufferedRWPair BufferedRandom "
    "TextIOWrapper",
)

# -- dataclasses ------------------------------------------------------------------------------

_group(
    "wrapped",
    "only on the program's own classes: on a foreign class it rewrote methods and turned "
    "annotated private slots into fields asdict() reads; on program classes it exec's "
    "source built from identifiers and never evaluates string annotations (it matches "
    "them with a regex against an empty module)",
    "dataclasses",
    "dataclass",
)
_group(
    "safe",
    "read fields of dataclasses, which only the program can create (dataclass is "
    "wrapped); asdict/astuple deep-copy (see copy.deepcopy); replace calls the class",
    "dataclasses",
    "fields asdict astuple replace is_dataclass",
)
_group(
    "safe",
    "field descriptors and markers",
    "dataclasses",
    "field Field InitVar KW_ONLY MISSING",
)
_group("safe", _EXC, "dataclasses", "FrozenInstanceError")
_group(
    "removed",
    "builds classes from an arbitrary namespace (dunder methods the policy forbids)",
    "dataclasses",
    "make_dataclass",
)

# -- datetime, time ---------------------------------------------------------------------

_group(
    "safe",
    "C value types; strftime/__format__/timetuple import time through the C path of the "
    "importer (nothing returned to the program)",
    "datetime",
    "timedelta date tzinfo time datetime timezone UTC",
)
_group("safe", _VALUE, "datetime", "MINYEAR MAXYEAR")
_group("removed", "a PyCapsule of C pointers", "datetime", "datetime_CAPI")
_group(
    "safe",
    "clocks and time conversions; strptime imports _strptime through the C path",
    "time",
    """
    time time_ns monotonic monotonic_ns perf_counter perf_counter_ns process_time
    process_time_ns gmtime localtime mktime asctime ctime strftime strptime struct_time
    """,
)
_group("safe", _VALUE, "time", "timezone altzone daylight tzname")
_group(
    "wrapped",
    "validated number; blocks the worker (also in an async program), bounded by the "
    "wall-clock limit from outside",
    "time",
    "sleep",
)
_group(
    "removed",
    "changes process-wide clock or timezone state",
    "time",
    "clock_settime clock_settime_ns tzset",
)

# -- decimal, fractions, statistics, random ---------------------------------------------------

_group(
    "safe",
    "C decimal arithmetic; contexts are per-thread option bags (writable like containers)",
    "decimal",
    """
    getcontext setcontext localcontext Decimal Context DecimalTuple DefaultContext
    BasicContext ExtendedContext
    """,
)
_group(
    "safe",
    _EXC,
    "decimal",
    """
    DecimalException Clamped Rounded Inexact Subnormal Underflow Overflow DivisionByZero
    FloatOperation InvalidOperation ConversionSyntax DivisionImpossible DivisionUndefined
    InvalidContext
    """,
)
_group(
    "safe",
    _VALUE,
    "decimal",
    """
    MAX_PREC MAX_EMAX MIN_EMIN MIN_ETINY ROUND_UP ROUND_DOWN ROUND_CEILING ROUND_FLOOR
    ROUND_HALF_UP ROUND_HALF_DOWN ROUND_HALF_EVEN ROUND_05UP
    """,
)
_group("safe", "rational arithmetic; parses numbers with a fixed regex", "fractions", "Fraction")
_group(
    "safe",
    _PURE + " (as_integer_ratio and numeric dunders of the data)",
    "statistics",
    """
    mean fmean geometric_mean harmonic_mean median median_low median_high median_grouped
    mode multimode quantiles variance pvariance stdev pstdev covariance correlation
    linear_regression LinearRegression NormalDist
    """,
)
_group("safe", _EXC, "statistics", "StatisticsError")
_group(
    "safe",
    "pseudo-random numbers; SystemRandom reads the kernel's getrandom; state is per worker",
    "random",
    """
    Random SystemRandom seed random uniform triangular randint choice randrange sample
    shuffle choices normalvariate lognormvariate expovariate vonmisesvariate gammavariate
    gauss betavariate paretovariate weibullvariate getstate setstate getrandbits randbytes
    """,
)

# -- enum ------------------------------------------------------------------------------

_group(
    "wrapped",
    "the functional API (Enum('E', names)) put dunder names into the class namespace "
    "(an __exit__ that swallows MemoryError without the terminal guard): the sandbox "
    "metaclass refuses _-names there; class syntax already refuses them",
    "enum",
    "Enum IntEnum StrEnum Flag IntFlag",
)
_group(
    "safe",
    "decorators and markers that read members by the names the program defined",
    "enum",
    "ReprEnum auto unique member nonmember property verify",
)
_group(
    "safe",
    _VALUE,
    "enum",
    "EnumCheck CONTINUOUS NAMED_FLAGS UNIQUE FlagBoundary STRICT CONFORM EJECT KEEP",
)
_group(
    "removed",
    "the metaclass: three-argument class creation from an arbitrary namespace",
    "enum",
    "EnumType EnumMeta",
)
_group(
    "removed",
    "writes the members into the defining module's globals",
    "enum",
    "global_enum global_enum_repr global_flag_repr global_str",
)

# -- functools -----------------------------------------------------------------------------

_group(
    "wrapped",
    "register(fn) without a class called typing.get_type_hints(fn), which eval()s string "
    "annotations in the program's globals without the guards (real builtins reachable): "
    "the sandbox register reads the annotation object and refuses strings",
    "functools",
    "singledispatch singledispatchmethod",
)
_group(
    "wrapped",
    "only the program's own functions; default attribute lists; refuses a dunder "
    "__name__ (see copy.copy)",
    "functools",
    "wraps",
)
_group(
    "wrapped",
    "writes comparison methods into the class: only the program's own classes",
    "functools",
    "total_ordering",
)
_group(
    "safe",
    "call or cache the program's callables; partial's func/args/keywords are what the "
    "program passed; cached_property stores under the program's attribute name",
    "functools",
    "reduce partial partialmethod lru_cache cache cached_property cmp_to_key",
)
_group("safe", _VALUE, "functools", "WRAPPER_ASSIGNMENTS WRAPPER_UPDATES")
_group(
    "removed",
    "custom attribute lists copy arbitrary attributes between arbitrary objects",
    "functools",
    "update_wrapper",
)

# -- hashlib -------------------------------------------------------------------------------

_group(
    "safe",
    "OpenSSL/builtin digests; new() maps a name to a fixed constructor table; "
    "file_digest reads the program's file-like object",
    "hashlib",
    """
    new pbkdf2_hmac scrypt file_digest md5 sha1 sha224 sha256 sha384 sha512 blake2b
    blake2s sha3_224 sha3_256 sha3_384 sha3_512 shake_128 shake_256
    """,
)
_group("safe", _VALUE, "hashlib", "algorithms_guaranteed algorithms_available")

# -- json ------------------------------------------------------------------------------------

_group(
    "safe",
    "C/Python codec; hooks and cls= are the program's callables; load/dump use the "
    "program's read()/write() objects",
    "json",
    "JSONDecoder JSONEncoder dump dumps load loads",
)
_group("safe", _EXC, "json", "JSONDecodeError")

# -- operator --------------------------------------------------------------------------------

_group(
    "safe",
    "the operators as functions (the same protocol methods the program's own expressions "
    "call; in-place ones as in `x += y`)",
    "operator",
    """
    lt le eq ne ge gt not_ truth is_ is_not abs add and_ floordiv index inv invert lshift
    mod mul matmul neg or_ pos pow rshift sub truediv xor concat contains countOf getitem
    indexOf length_hint call itemgetter iadd iand iconcat ifloordiv ilshift imod imul
    imatmul ior ipow irshift isub itruediv ixor
    """,
)
_group(
    "wrapped",
    "string-driven attribute access: names checked and each lookup through the attribute guard",
    "operator",
    "attrgetter methodcaller",
)
_group("wrapped", "item writes through the write guard", "operator", "setitem delitem")

# -- pathlib, pprint, re, shlex, string ------------------------------------------------------

_group(
    "safe",
    "pure paths: string manipulation, no filesystem call (PurePath() is PurePosixPath)",
    "pathlib",
    "PurePath PurePosixPath",
)
_group(
    "removed",
    "concrete paths touch the filesystem",
    "pathlib",
    "Path PosixPath WindowsPath",
)
_group(
    "safe",
    "repr-based formatting (dataclass fields by their declared names)",
    "pprint",
    "pformat saferepr isreadable isrecursive",
)
_group(
    "wrapped",
    "printed to the worker's /dev/null stdout: bound per run to the program's output",
    "pprint",
    "pprint pp PrettyPrinter",
)
_group(
    "safe",
    "the regex engine; replacement templates refer only to groups",
    "re",
    "match fullmatch search sub subn split findall finditer compile purge escape Pattern "
    "Match RegexFlag",
)
_group("safe", _VALUE, "re", "NOFLAG ASCII A IGNORECASE I LOCALE L UNICODE U MULTILINE M "
       "DOTALL S VERBOSE X")  # fmt: skip
_group("safe", _EXC, "re", "error")
_group(
    "removed",
    "deprecated, or exposes the engine's internal scanner objects",
    "re",
    "template TEMPLATE T DEBUG Scanner",
)
_group("wrapped", "str only; never enables source hooks", "shlex", "split")
_group("safe", _PURE, "shlex", "join quote")
_group(
    "removed",
    "the lexer class: its sourcehook opens files by name and it reads sys.stdin by default",
    "shlex",
    "shlex",
)
_group(
    "safe",
    _VALUE,
    "string",
    "ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits punctuation "
    "printable whitespace",
)
_group("safe", _PURE, "string", "capwords")
_group(
    "safe",
    "$-substitution looks names up in the program's mapping only (no attribute or index "
    "traversal); subclasses only change the regex",
    "string",
    "Template",
)
_group(
    "removed",
    "field lookups (get_field/get_value) run getattr/getitem past the guards",
    "string",
    "Formatter",
)

# -- traceback -----------------------------------------------------------------------------

_group(
    "wrapped",
    "the program's own frames only (the guest's trimmed format); never a frame or "
    "traceback object; print_* write to the program's output",
    "traceback",
    "format_exc format_exception format_exception_only print_exc print_exception",
)
_group(
    "removed",
    "walk or summarise frames (the guest runtime's too) and read source files",
    "traceback",
    """
    extract_tb extract_stack format_tb format_stack print_tb print_stack walk_tb
    walk_stack StackSummary FrameSummary TracebackException clear_frames print_last
    format_list print_list
    """,
)

# -- typing --------------------------------------------------------------------------------

_group(
    "safe",
    "special forms and generic aliases: subscription wraps strings in ForwardRef "
    "(compiled, never evaluated without get_type_hints)",
    "typing",
    """
    Any Optional Union List Dict Tuple Set FrozenSet Type Callable Iterable Iterator
    Generator AsyncIterator AsyncIterable AsyncGenerator Awaitable Coroutine Sequence
    Mapping MutableMapping MutableSequence MutableSet AbstractSet Collection Container
    Hashable Sized Reversible Literal Final ClassVar Annotated TypeVar Generic NotRequired
    Required Self DefaultDict Counter Deque OrderedDict ChainMap NoReturn Never
    LiteralString TypeAlias SupportsInt SupportsFloat SupportsIndex SupportsAbs
    """,
)
_group(
    "safe",
    "class builders over collections.namedtuple / dict; string annotations become "
    "ForwardRefs, whose constructor compile()s them; nothing exported evaluates one "
    "(get_type_hints and ForwardRef are removed; the audit hook refuses _evaluate's eval)",
    "typing",
    "NamedTuple TypedDict",
)
_group(
    "safe",
    "isinstance() against a runtime protocol probes the protocol's own member names with "
    "hasattr and returns only a bool; subscription compile()s string arguments into "
    "ForwardRefs, never evaluated",
    "typing",
    "Protocol runtime_checkable",
)
_group("safe", "returns its argument; registry keyed by the function", "typing", "cast overload")
_group("safe", _VALUE, "typing", "TYPE_CHECKING")
_group(
    "wrapped",
    "sets __final__ on its argument: only on the program's own objects",
    "typing",
    "final",
)
_group(
    "removed",
    "evaluate strings (ForwardRef) in a namespace: the original escape",
    "typing",
    "get_type_hints ForwardRef",
)

# -- urllib.parse, uuid -----------------------------------------------------------------------

_group(
    "safe",
    "string parsing and quoting; result types are namedtuples",
    "urllib.parse",
    """
    urlparse urlsplit urlunparse urlunsplit urljoin urldefrag quote quote_plus
    quote_from_bytes unquote unquote_plus unquote_to_bytes urlencode parse_qs parse_qsl
    ParseResult SplitResult DefragResult ParseResultBytes SplitResultBytes
    DefragResultBytes
    """,
)
_group(
    "safe",
    "UUID values; uuid3/5 hash, uuid4 reads os.urandom",
    "uuid",
    "UUID uuid3 uuid4 uuid5 SafeUUID",
)
_group(
    "safe",
    _VALUE,
    "uuid",
    "NAMESPACE_DNS NAMESPACE_URL NAMESPACE_OID NAMESPACE_X500 RESERVED_NCS RFC_4122 "
    "RESERVED_MICROSOFT RESERVED_FUTURE",
)
_group("removed", "reads the MAC address (may run programs)", "uuid", "uuid1 getnode")

# -- asyncio (the per-run facade of _asyncio, owned by the guest) ----------------------

_group(
    "wrapped",
    "the guest's facade over its own loop: tasks stay opaque (no loop, frame or coroutine "
    "internals), exceptions they hand back pass the terminal check",
    "asyncio",
    "gather sleep create_task ensure_future wait_for wait as_completed shield iscoroutine run "
    "TaskGroup",
)
_group(
    "safe",
    "inspects a function's code flags and returns a bool",
    "asyncio",
    "iscoroutinefunction",
)
_group(
    "safe",
    "asyncio synchronisation and queue classes: they bind to the running (guest) loop, "
    "which they keep in underscore attributes; their coroutines keep cr_frame/send behind "
    "the guards",
    "asyncio",
    "timeout Lock Event Condition Semaphore BoundedSemaphore Barrier Queue LifoQueue PriorityQueue",
)
_group(
    "safe",
    _EXC,
    "asyncio",
    "BrokenBarrierError QueueEmpty QueueFull CancelledError TimeoutError InvalidStateError",
)
_group("safe", _VALUE, "asyncio", "FIRST_COMPLETED FIRST_EXCEPTION ALL_COMPLETED")
