"""Test doubles shipped with the engine.

``InProcessRuntime`` is a ``CodeRuntime`` that runs a Python async callable *as the
program*, in the host process (no sandbox). It exists to test the engine's code-mode
driver and pipeline without a worker; never use it for untrusted code.

A program is ``async def program(tools, print) -> value``: ``tools.name(args)`` /
``tools["name"](args)`` call the bindings, a failed call raises ``ToolCallError``
(``tool_name``/``toolName``, ``message``, ``code``), ``print(*args)`` records one log entry
per line, and the return value becomes the completion value (return ``NO_VALUE`` for none).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import msgspec

from ._errors import BindingCallError
from ._signals import reason_text
from .code_mode._seam import CodeRunError, CodeRunRequest, CodeRunResult, validate_bindings
from .json import LosslessJsonError, snapshot

__all__ = ["InProcessRuntime", "NO_VALUE", "ProgramFn", "ToolCallError"]

NO_VALUE: Any = msgspec.UNSET
ProgramFn = Callable[[Any, Callable[..., None]], Awaitable[Any]]


class ToolCallError(Exception):
    """A failed binding call, as programs of ``InProcessRuntime`` see it."""

    def __init__(self, tool_name: str, message: str, code: str | None) -> None:
        super().__init__(message)
        self.tool_name = self.toolName = tool_name
        self.message = message
        self.code = code


class _Tools:
    def __init__(self, functions: Mapping[str, Callable[[Any], Awaitable[Any]]]) -> None:
        self._functions = dict(functions)
        # One wrapper per name, made on first use: ``tools.x(...)`` in a loop would
        # otherwise build a closure per call, a cost no sandbox binding has.
        self._wrappers: dict[str, Callable[..., Awaitable[Any]]] = {}

    def __getitem__(self, name: str) -> Callable[..., Awaitable[Any]]:
        wrapper = self._wrappers.get(name)
        if wrapper is None:
            wrapper = self._wrappers[name] = self._wrap(name)
        return wrapper

    def _wrap(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name not in self._functions:
            raise KeyError(f'unknown binding "tools.{name}"')
        fn = self._functions[name]

        async def call(args: Any = msgspec.UNSET) -> Any:
            try:
                return await fn(args)
            except BindingCallError as exc:
                raise ToolCallError(name, exc.message, exc.code) from None

        return call

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        # Attribute access to a missing tool is an AttributeError (so ``hasattr`` and
        # ``getattr(tools, name, None)`` behave), with the same ``unknown binding "tools.x"`` message a sandbox
        # gives.
        if name.startswith("__") or name not in self._functions:
            raise AttributeError(f'unknown binding "tools.{name}"')
        return self[name]


class InProcessRuntime:
    """An in-process ``CodeRuntime`` double (see module docstring).

    ``programs`` maps program text to callables; ``default`` runs for any other text.
    ``language`` decides the SDK/``run_code`` flavour (``"python"`` by default).
    """

    isolation = "in-process"

    def __init__(
        self,
        default: ProgramFn | None = None,
        *,
        programs: Mapping[str, ProgramFn] | None = None,
        language: str = "python",
    ) -> None:
        self.default = default
        self.programs: dict[str, ProgramFn] = dict(programs or {})
        self.language = language
        self.runs = 0

    def register(self, program: str, fn: ProgramFn) -> None:
        """Run ``fn`` whenever a request's program text equals ``program``."""
        self.programs[program] = fn

    async def run(self, request: CodeRunRequest) -> CodeRunResult:
        """Run the program callable; failures become ``CodeRunResult.error``."""
        validate_bindings(request.bindings)
        self.runs += 1
        signal = request.signal
        if signal.aborted:
            return CodeRunResult(logs=[], error=CodeRunError("abort", reason_text(signal.reason)))
        fn = self.programs.get(request.program, self.default)
        if fn is None:
            return CodeRunResult(
                logs=[], error=CodeRunError("exception", "no program registered for this text")
            )
        logs: list[str] = []

        def print_(*args: Any, sep: str = " ", end: str = "\n") -> None:
            # One entry per "\n"-terminated line (``str.splitlines`` would also split on
            # \r, \x0b, \x1c-\x1e, \x85, U+2028/2029, which print never treats as lines).
            lines = (sep.join(str(a) for a in args) + end).split("\n")
            if len(lines) > 1 and lines[-1] == "":
                lines.pop()
            logs.extend(lines)

        tools = _Tools(request.bindings[0].functions) if request.bindings else _Tools({})
        outcome: dict[str, Any] = {}

        async def body() -> None:
            try:
                outcome["value"] = await fn(tools, print_)
            except Exception as exc:
                outcome["error"] = exc
            tg.cancel_scope.cancel()

        async def watch() -> None:
            await signal.wait()
            outcome["aborted"] = True
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(body)
            tg.start_soon(watch)
        if "aborted" in outcome and "value" not in outcome and "error" not in outcome:
            return CodeRunResult(logs=logs, error=CodeRunError("abort", reason_text(signal.reason)))
        if "error" in outcome:
            exc = outcome["error"]
            return CodeRunResult(
                logs=logs, error=CodeRunError("exception", f"{type(exc).__name__}: {exc}")
            )
        value = outcome.get("value", NO_VALUE)
        if value is NO_VALUE:
            return CodeRunResult(logs=logs)
        try:
            value = snapshot(value, freeze=False)
        except LosslessJsonError:
            return CodeRunResult(
                logs=logs,
                error=CodeRunError("invalid-output", "program completion must be lossless JSON"),
            )
        return CodeRunResult(logs=logs, value=value)
