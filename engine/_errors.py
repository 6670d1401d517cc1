"""The one exception tree of codemode.

::

    Exception
    ├── HarnessError(message, code)        -- carries ``{name, code}`` into ``error.info``
    │   ├── JsonSchemaError                UNSUPPORTED_SCHEMA  (thrown at define/register time)
    │   ├── ToolArgsError                  INVALID_ARGS
    │   ├── ToolOutputError                INVALID_TOOL_OUTPUT
    │   ├── ToolNotFoundError              UNKNOWN_TOOL
    │   ├── AbortError                     ABORTED | ABORTED_BEFORE_DISPATCH
    │   ├── ToolTimeoutError               TOOL_TIMEOUT
    │   └── CodeRunFailedError(message, kind)  CODE_RUN_FAILED  (``kind``: an ``ErrorKind``)
    └── BindingCallError(message, code)    -- a sub-call failed; raised by binding functions

Inside the pipeline these are *results*, never escaping exceptions: a tool body (or a
policy) raising a ``HarnessError`` produces a failure result whose ``error.info`` is
``{name: <class name>, code}`` (plus ``kind`` when the error has one: a failed code run
says why, machine-readably); any other exception produces a failure without ``info``.
``JsonSchemaError`` and registration errors (``ValueError``/``TypeError``) are raised to
the host at definition/registration time, because they are misuse, not control flow.
"""

from __future__ import annotations

__all__ = [
    "AbortError",
    "BindingCallError",
    "CodeRunFailedError",
    "HarnessError",
    "JsonSchemaError",
    "ToolArgsError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolTimeoutError",
]


class HarnessError(Exception):
    """Base of the errors whose class name and ``code`` ride a failure's ``error.info``."""

    #: The error's code; each subclass declares its own, and an instance may carry a more
    #: specific one (``AbortError``'s ``ABORTED_BEFORE_DISPATCH``, a tool family's codes).
    code: str = "HARNESS_ERROR"
    # A finer classification than ``code`` for hosts that alert on it without parsing
    # text; only ``CodeRunFailedError`` sets one today.
    kind: str | None = None

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        # No code given: the class's own (``type(self).code``), so ``ToolArgsError("x").code``
        # and ``ToolArgsError.code`` agree.
        self.code = type(self).code if code is None else code

    def __str__(self) -> str:
        return self.message


class JsonSchemaError(HarnessError):
    """An unsupported or malformed schema, raised at ``define_tool``/``register`` time."""

    code = "UNSUPPORTED_SCHEMA"

    def __init__(self, message: str, violations: list[str] | None = None) -> None:
        super().__init__(message)
        self.violations: list[str] = list(violations or [])


class ToolArgsError(HarnessError):
    """A ``define_tool`` tool received arguments that fail its parameter schema."""

    code = "INVALID_ARGS"

    def __init__(self, message: str, violations: list[str] | None = None) -> None:
        super().__init__(message)
        self.violations: list[str] = list(violations or [])


class ToolOutputError(HarnessError):
    """A tool (or policy) produced a value or rendering that is not valid output."""

    code = "INVALID_TOOL_OUTPUT"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ToolNotFoundError(HarnessError):
    """The named tool is not visible to the calling scope."""

    code = "UNKNOWN_TOOL"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class AbortError(HarnessError):
    """The caller cancelled the call (``ABORTED`` or ``ABORTED_BEFORE_DISPATCH``)."""

    code = "ABORTED"

    def __init__(self, message: str = "tool call aborted", code: str | None = None) -> None:
        super().__init__(message, code)


class ToolTimeoutError(HarnessError):
    """The timeout policy's own deadline fired."""

    code = "TOOL_TIMEOUT"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class CodeRunFailedError(HarnessError):
    """A ``run_code`` program failed (exception, limit, abort, dead worker, ...).

    ``kind`` is the runtime's ``ErrorKind`` (``"timeout"``, ``"forbidden"``, ...); it
    rides the failure's ``error.info.kind``. ``None`` only when a host raises this error
    itself without one.
    """

    code = "CODE_RUN_FAILED"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


class BindingCallError(Exception):
    """Raised by a binding function when the sub-call it relayed failed.

    ``message`` is the failure's bare message (no ``Error: `` prefix); ``code`` is the
    failure's ``error.info.code`` when it has one. Guests turn it into ``ToolCallError``.
    Its code is always the relayed failure's (no class-level default): ``None`` means the
    failure carried none.
    """

    code: str | None = None

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message
