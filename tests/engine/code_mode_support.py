"""Tiny fixtures for the code-mode tests (public API only), on top of ``pipeline_support``.

Importable as ``from code_mode_support import ...``, like ``pipeline_support``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pipeline_support import Body, call

from codemode.engine import (
    AbortSignal,
    CodeRunRequest,
    CodeRunResult,
    Scope,
    ToolDefinition,
    ToolExecutionResult,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.testing import InProcessRuntime

__all__ = [
    "GatedSession",
    "ScriptedRuntime",
    "code_rt",
    "echo_tool",
    "error_text",
    "run_code",
    "sleep_tool",
]


def echo_tool(
    name: str = "echo",
    *,
    parallel: bool = False,
    body: Body | None = None,
    calls: list[Any] | None = None,
) -> ToolDefinition:
    """A tool taking ``{value: string}`` and returning ``"<name>:<value>"`` (or ``body``)."""

    async def execute(args: Any, ctx: Any) -> Any:
        if calls is not None:
            calls.append(args)
        if body is not None:
            return await body(args, ctx)
        return f"{name}:{args['value']}"

    return define_tool(
        name=name,
        description=f"Echo tool {name}.",
        parameters={"value": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "string"}, render=lambda args, value: [text(value)]),
        execute=execute,
        is_concurrency_safe=(lambda args: True) if parallel else None,
    )


def sleep_tool(
    name: str = "nap", *, parallel: bool = True, log: list[str] | None = None
) -> ToolDefinition:
    """``{id: string, ms?: integer}``: sleeps ``ms`` (default 0) and returns ``id``."""

    async def execute(args: Any, ctx: Any) -> Any:
        if log is not None:
            log.append(f"start {args['id']}")
        await anyio.sleep(args.get("ms", 0) / 1000)
        if log is not None:
            log.append(f"end {args['id']}")
        return args["id"]

    return define_tool(
        name=name,
        description="Sleep, then return the id.",
        parameters={"id": {"type": "string", "required": True}, "ms": {"type": "integer"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda args, value: [text(value)]),
        execute=execute,
        is_concurrency_safe=(lambda args: True) if parallel else None,
    )


class ScriptedRuntime:
    """A ``CodeRuntime`` whose ``run`` is a test-provided ``behavior(request)``
    (the reference's FakeRuntime): tests drive the bindings directly."""

    isolation = "fake"

    def __init__(
        self,
        behavior: Callable[[CodeRunRequest], Awaitable[CodeRunResult]] | None = None,
        *,
        language: str = "typescript",
    ) -> None:
        self.language = language
        self.requests: list[CodeRunRequest] = []

        async def nothing(request: CodeRunRequest) -> CodeRunResult:
            return CodeRunResult(logs=[])

        self.behavior = behavior or nothing

    async def run(self, request: CodeRunRequest) -> CodeRunResult:
        self.requests.append(request)
        return await self.behavior(request)


def code_rt(
    program: Any = None, *, mode: str = "code", cap: int = 10, **kwargs: Any
) -> tuple[ToolRuntime, InProcessRuntime]:
    """A runtime in ``mode`` whose code runtime runs ``program`` in-process."""
    runtime = InProcessRuntime(program, **kwargs)
    return ToolRuntime(mode=mode, max_parallel_sub_calls=cap, code_runtime=runtime), runtime


async def run_code(
    rt: ToolRuntime,
    *,
    agent: Scope | None = None,
    signal: AbortSignal | None = None,
    call_id: str = "call-1",
    root_call_id: str | None = None,
    code: str = "program",
    description: str = "Run the test program",
) -> ToolExecutionResult:
    """Dispatch ``run_code`` through the whole pipeline, as the agent loop would."""
    arguments = {"code": code, "description": description}
    return await rt.execute(
        call(
            "run_code",
            arguments,
            call_id=call_id,
            signal=signal,
            agent=agent,
            root_call_id=root_call_id,
        )
    )


def error_text(result: ToolExecutionResult) -> str:
    """The single text block of a result."""
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert block["type"] == "text", block
    return str(block["text"])


class GatedSession:
    """A ``SessionLog`` whose ``tool/code-dispatch`` appends wait for ``gate`` (a slow
    durable backend); every other event is stored at once."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.gate = anyio.Event()
        self.waiting = 0

    async def append(self, event: dict[str, Any]) -> int:
        if event["type"] == "tool/code-dispatch":
            self.waiting += 1
            await self.gate.wait()
            self.waiting -= 1
        self.events.append(event)
        return len(self.events) - 1

    def close(self) -> None:
        pass
