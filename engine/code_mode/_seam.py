"""The seam between the engine and sandboxes: the ``CodeRuntime`` protocol and its data.

The engine owns ``run_code`` and the sub-dispatch driver; a runtime only runs a program
and relays binding calls. A runtime never sees the registry: it receives plain async
functions (``Binding.functions``) that accept lossless JSON arguments and either return
a JSON value or raise ``BindingCallError``. A function may also be a ``SettlingBinding``,
which a runtime can start from a plain callback (``begin``) and be told the outcome of,
with no task of its own waiting for it.

A program failure is a *field* of ``CodeRunResult`` (``error``), never an exception;
``run()`` raises only on seam misuse (invalid or duplicate binding globals, use after
disposal).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from .._signals import AbortSignal

__all__ = [
    "PORTABLE_RESERVED_WORDS",
    "RESERVED_BINDING_GLOBALS",
    "Binding",
    "BindingFunction",
    "SettlingBinding",
    "CodeRunError",
    "CodeRunRequest",
    "CodeRunResult",
    "CodeRuntime",
    "ErrorClass",
    "ERROR_KINDS",
    "ErrorKind",
    "validate_bindings",
]

ErrorKind = Literal[
    "syntax",
    "exception",
    "timeout",
    "memory",
    "output-limit",
    "sub-call-limit",
    "call-bytes-limit",
    "forbidden",
    "recursion",
    "invalid-output",
    "worker-exit",
    "abort",
]
# A runtime docstring (not a bare string after the alias): every public name of
# ``engine`` carries one, and ``help(engine.ErrorKind)`` should explain the kinds.
ErrorKind.__doc__ = """Why a code run failed, the same set in every guest language.

- ``syntax``: the program does not parse (or, in TypeScript, uses refused syntax).
- ``exception``: an uncaught exception in the program.
- ``timeout``: the compute budget or the wall-clock ceiling.
- ``memory``: the worker ran out of memory (catching ``MemoryError`` does not help).
- ``output-limit``: logs plus value/diagnostic exceeded ``max_output_bytes``.
- ``sub-call-limit``: the program made more binding calls than allowed.
- ``call-bytes-limit``: the JSON bytes of all binding-call arguments exceeded the budget.
- ``forbidden``: a guard denied access (dunders, private names, frames, module writes);
  terminal even when the program catches the exception.
- ``recursion``: the program exceeded the recursion limit (terminal, like ``memory``).
- ``invalid-output``: the completion value is not lossless JSON.
- ``worker-exit``: the worker died (crash, kill by the kernel, protocol violation).
- ``abort``: the caller's signal aborted the run.
"""

ERROR_KINDS: frozenset[str] = frozenset(ErrorKind.__args__)  # type: ignore[attr-defined]

BindingFunction = Callable[[Any], Awaitable[Any]]

Settle = Callable[[bool, Any], None]
"""How a started call reports: ``(True, value)`` or ``(False, BindingCallError)``."""


class SettlingBinding:
    """A binding function that can also be started without awaiting it.

    Awaiting ``fn(args)`` works as for any binding function. ``fn.begin(args, settle)``
    queues the same call and returns at once; ``settle`` is called exactly once, later,
    from whichever task commits the call (or at once, when ``begin`` refuses it by
    raising ``BindingCallError``, in which case ``settle`` is never called). A runtime
    that relays a call from a socket's read callback uses ``begin``: a task parked on
    each call would cost two extra event-loop turns per sub-call.
    """

    __slots__ = ("__name__", "_begin", "_call")

    def __init__(
        self, name: str, call: BindingFunction, begin: Callable[[Any, Settle], None]
    ) -> None:
        self.__name__ = name
        self._call = call
        self._begin = begin

    def __call__(self, args: Any = msgspec.UNSET) -> Awaitable[Any]:
        return self._call(args)

    def begin(self, args: Any, settle: Settle) -> None:
        """Queue the call; ``settle`` gets its outcome (see the class docstring)."""
        self._begin(args, settle)


class ErrorClass(msgspec.Struct, frozen=True):
    """The error class a guest defines for failed binding calls (``ToolCallError``)."""

    name: str = "ToolCallError"
    member_name_property: str = "toolName"


class Binding(msgspec.Struct, frozen=True):
    """One global namespace object exposed to the program (``tools``)."""

    global_name: str
    functions: Mapping[str, BindingFunction]
    error_class: ErrorClass | None = None


class CodeRunRequest(msgspec.Struct, frozen=True):
    """What the engine asks a runtime to run."""

    program: str
    bindings: list[Binding]
    signal: AbortSignal


class CodeRunError(msgspec.Struct, frozen=True):
    """Why a program failed. ``kind`` is one of ``ErrorKind``."""

    kind: str
    message: str


class CodeRunResult(msgspec.Struct, frozen=True):
    """What a run produced: logs, an optional completion value, or an error.

    ``value`` is ``msgspec.UNSET`` when the program returned nothing (``has_value`` tells
    an absent value from ``None``).
    """

    logs: list[str] = msgspec.field(default_factory=list)
    value: Any = msgspec.UNSET
    error: CodeRunError | None = None

    @property
    def has_value(self) -> bool:
        """True when the program produced a completion value (``None`` counts)."""
        return self.value is not msgspec.UNSET


@runtime_checkable
class CodeRuntime(Protocol):
    """A sandbox that runs one program per call. See module docstring."""

    @property
    def language(self) -> str:
        """``"python"`` or ``"typescript"``: selects the SDK and ``run_code`` flavour."""
        ...

    @property
    def isolation(self) -> str:
        """A short word describing the isolation (``"process"``, ``"in-process"``, ...)."""
        ...

    async def run(self, request: CodeRunRequest) -> CodeRunResult:
        """Run ``request.program`` with ``request.bindings``; failures are in the result."""
        ...


# The union of ECMAScript and Python reserved words, so a binding global is usable from
# every guest language.
PORTABLE_RESERVED_WORDS = frozenset(
    """
    break case catch class const continue debugger default delete do else enum export
    extends false finally for function if import in instanceof new null return super
    switch this throw true try typeof var void while with yield let static implements
    interface package private protected public await arguments eval
    False None True and as assert async def del elif except from global is lambda
    nonlocal not or pass raise match case type _ __debug__
    """.split()
)

RESERVED_BINDING_GLOBALS = frozenset(
    {"console", "__dsh_main__", "__builtins__", "__name__", "__debug__"}
)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FORBIDDEN_MEMBER = frozenset({"name", "message", "stack", "args", "with_traceback", "add_note"})
_DUNDER = re.compile(r"^__.+__$")


def validate_bindings(bindings: list[Binding]) -> None:
    """Check binding globals and error classes; raise ``ValueError`` on seam misuse."""
    seen: set[str] = set()
    for binding in bindings:
        for name in (binding.global_name,) + (
            (binding.error_class.name,) if binding.error_class else ()
        ):
            if name in RESERVED_BINDING_GLOBALS:
                raise ValueError(f'reserved binding global "{name}"')
            if not _IDENT.match(name) or name in PORTABLE_RESERVED_WORDS:
                raise ValueError(f'binding global "{name}" is not a usable identifier')
        if binding.global_name in seen:
            raise ValueError(f'duplicate binding global "{binding.global_name}"')
        seen.add(binding.global_name)
        if binding.error_class is not None:
            if binding.error_class.name in seen:
                raise ValueError(f'duplicate injected global "{binding.error_class.name}"')
            seen.add(binding.error_class.name)
            member = binding.error_class.member_name_property
            if not member or member in _FORBIDDEN_MEMBER or _DUNDER.match(member):
                raise ValueError(f'invalid error class member name property "{member}"')
