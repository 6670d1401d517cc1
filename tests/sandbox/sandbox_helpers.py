"""Helpers shared by the sandbox tests (real runtimes, real workers, no mocks)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from codemode.engine import (
    AbortController,
    AbortSignal,
    Binding,
    BindingCallError,
    CodeRunRequest,
    CodeRunResult,
    ErrorClass,
    ToolDefinition,
    ToolOutput,
    define_tool,
    text,
)
from codemode.sandbox import ProcessRuntime

Run = Callable[..., Awaitable[CodeRunResult]]


async def echo(args: Any) -> Any:
    return args


async def fail(args: Any) -> Any:
    raise BindingCallError(str(args.get("message", "deliberate failure")), args.get("code"))


async def slow(args: Any) -> Any:
    await anyio.sleep(float(args.get("seconds", 30)))
    return args.get("value", "slow")


async def buggy(args: Any) -> Any:
    raise KeyError("host bug")


async def delayed(args: Any) -> Any:
    await anyio.sleep(float(args["delay"]))
    return args["value"]


DEFAULT_TOOLS: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "echo": echo,
    "fail": fail,
    "slow": slow,
    "buggy": buggy,
    "delayed": delayed,
    "my-tool": echo,
}


def bindings(tools: Mapping[str, Callable[[Any], Awaitable[Any]]] | None = None) -> list[Binding]:
    """``tools`` + ``ToolCallError``, as the engine binds them."""
    return [Binding("tools", dict(tools if tools is not None else DEFAULT_TOOLS), ErrorClass())]


def make_runner(runtime: ProcessRuntime) -> Run:
    async def run(
        program: str,
        *,
        tools: Mapping[str, Callable[[Any], Awaitable[Any]]] | None = None,
        signal: AbortSignal | None = None,
    ) -> CodeRunResult:
        request = CodeRunRequest(program, bindings(tools), signal or AbortController().signal)
        with anyio.fail_after(50):
            return await runtime.run(request)

    return run


def ok(result: CodeRunResult) -> Any:
    """The value of a successful run (fails the test with the diagnostic otherwise)."""
    assert result.error is None, result.error
    return result.value if result.has_value else None


def err(result: CodeRunResult, kind: str = "exception") -> str:
    """The message of a failed run of ``kind``."""
    assert result.error is not None, f"expected {kind}, got value {result.value!r}"
    assert result.error.kind == kind, result.error
    return result.error.message


def add_tool() -> ToolDefinition:
    """A parallel-safe ``add`` tool (two required integers) for engine-level runs."""

    async def add(args: Any, ctx: Any) -> Any:
        return args["a"] + args["b"]

    return define_tool(
        name="add",
        description="Add two integers.",
        parameters={
            "a": {"type": "integer", "required": True},
            "b": {"type": "integer", "required": True},
        },
        output=ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text(str(v))]),
        execute=add,
        is_concurrency_safe=lambda args: True,
    )


async def threads_started_since(before: set[threading.Thread]) -> list[threading.Thread]:
    """The threads started after ``before`` was taken that are still alive.

    Compares identities, not counts: a thread left by an earlier test (asyncio's
    child watcher, a worker thread idling out) may end during the test and must
    not hide a leak or fail a clean run.  Waits up to a second for new threads
    that are already on their way out.
    """
    for _ in range(100):
        new = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not new:
            return []
        await anyio.sleep(0.01)
    return new
