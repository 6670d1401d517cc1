"""Tiny fixtures for the pipeline/registry/policy tests (public API only).

Importable as ``from pipeline_support import ...`` (pytest puts ``tests/engine`` on
``sys.path`` because the directory has no ``__init__.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from codemode.engine import (
    AbortController,
    AbortSignal,
    Scope,
    ToolDefinition,
    ToolExecutionFailure,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)

__all__ = [
    "ABORTED",
    "BEFORE",
    "Body",
    "Recorder",
    "call",
    "ctx",
    "echo_tool",
    "error_text",
    "live_signal",
    "raw_tool",
    "recorder",
]

Body = Callable[[Any, Any], Awaitable[Any]]

# ``error_text(result)[:3]`` of the two cancellation failures.
ABORTED = ("tool call aborted", "AbortError", "ABORTED")
BEFORE = ("tool call aborted before dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH")


def ctx(label: str) -> dict[str, Any]:
    """An additional context attributed to plugin ``label``."""
    return {"role": "user", "content": [text(label)], "source": {"kind": "plugin", "plugin": label}}


def live_signal() -> AbortSignal:
    """A fresh, never-aborted signal."""
    return AbortController().signal


_DEFAULT: Any = object()


def call(
    name: str = "echo",
    arguments: Any = _DEFAULT,
    *,
    call_id: str = "c1",
    signal: AbortSignal | None = None,
    agent: Scope | None = None,
    parent: object | None = None,
    root_call_id: str | None = None,
) -> ToolExecutionInput:
    """A ``ToolExecutionInput`` with sensible defaults (``{"value": "hi"}`` arguments)."""
    return ToolExecutionInput(
        call_id=call_id,
        name=name,
        arguments={"value": "hi"} if arguments is _DEFAULT else arguments,
        signal=signal if signal is not None else live_signal(),
        agent=agent,
        parent=parent,
        root_call_id=root_call_id,
    )


async def _echo_body(args: Any, _exec: Any) -> Any:
    return args["value"]


def echo_tool(
    name: str = "echo",
    body: Body | None = None,
    **options: Any,
) -> ToolDefinition:
    """A ``define_tool`` string echo: ``{"value": str}`` -> the string, rendered as text."""
    output = options.pop(
        "output",
        ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
    )
    return define_tool(
        name=name,
        description=f"Echo ({name}).",
        parameters={"value": {"type": "string", "required": True}},
        output=output,
        execute=body or _echo_body,
        **options,
    )


def raw_tool(
    name: str = "raw",
    body: Body | None = None,
    *,
    schema: Any = None,
    **options: Any,
) -> ToolDefinition:
    """A raw ``ToolDefinition`` (no argument validation) whose output is any JSON."""

    async def default(args: Any, _exec: Any) -> Any:
        return args

    return ToolDefinition(
        name=name,
        description=f"Raw ({name}).",
        parameters={"type": "object"},
        output=ToolOutput(
            schema={} if schema is None else schema,
            render=lambda _a, v: [text(repr(v))],
        ),
        execute=body or default,
        **options,
    )


def error_text(result: ToolExecutionResult) -> tuple[str, str | None, str | None, str]:
    """``(message, info.name, info.code, content text)`` of a failure."""
    assert isinstance(result, ToolExecutionFailure), result
    info = result.error.info
    return (
        result.error.message,
        None if info is None else info.name,
        None if info is None else info.code,
        result.content[0]["text"] if result.content else "",
    )


class Recorder:
    """Records which stages ran for each call (pre/execute/body/post/finalize/result)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.results: list[tuple[Any, Any]] = []

    def count(self, name: str) -> int:
        return self.events.count(name)


def recorder(rt: ToolRuntime, scope: Scope | None = None) -> Recorder:
    """Install observing listeners on every stage of ``rt`` (globally or on ``scope``)."""
    rec = Recorder()
    target: Any = scope if scope is not None else rt

    async def pre(exec_: Any, next_: Any) -> Any:
        rec.events.append("pre")
        return await next_()

    async def around(exec_: Any, next_: Any) -> Any:
        rec.events.append("execute")
        return await next_()

    async def post(exec_: Any, result: Any, next_: Any) -> Any:
        rec.events.append("post")
        return await next_()

    def observe(exec_: Any, result: Any) -> None:
        rec.events.append("result")
        rec.results.append((exec_, result))

    target.on("tools/pre-execute", pre)
    target.on("tools/execute", around)
    target.on("tools/post-execute", post)
    target.on("tools/result", observe)
    return rec
