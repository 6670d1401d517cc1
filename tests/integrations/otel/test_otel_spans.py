"""OpenTelemetry spans for tool executions, checked with the SDK's in-memory exporter.

Real runtimes throughout: native calls, run_tool_calls, a real Python sandbox program
and a real TypeScript program whose sub-calls must be children of their run_code span.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from codemode.engine import (
    AbortController,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.scheduling import ModelToolCall, run_tool_calls
from codemode.integrations.otel import instrument
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def _tools(rt: ToolRuntime, provider: TracerProvider | None = None) -> None:
    async def add(args: Any, _ctx: Any) -> Any:
        if provider is not None:
            # A span the tool body opens itself: it must nest under the tool's span.
            with provider.get_tracer("tool-body").start_as_current_span("inside add"):
                pass
        return args["a"] + args["b"]

    rt.register(
        define_tool(
            name="add",
            description="Add two numbers.",
            parameters={
                "a": {"type": "number", "required": True},
                "b": {"type": "number", "required": True},
            },
            output=ToolOutput(schema={"type": "number"}, render=lambda _a, v: [text(str(v))]),
            execute=add,
            is_concurrency_safe=lambda _a: True,
        )
    )

    async def explode(args: Any, _ctx: Any) -> Any:
        raise RuntimeError("boom")

    rt.register(
        define_tool(
            name="explode",
            description="Always fails.",
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
            execute=explode,
        )
    )


def _input(name: str, arguments: Any, call_id: str = "call-1", **kw: Any) -> ToolExecutionInput:
    return ToolExecutionInput(
        call_id=call_id, name=name, arguments=arguments, signal=AbortController().signal, **kw
    )


def _tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]


async def test_a_native_call_is_one_span_with_the_genai_attributes(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime()
    _tools(rt, provider)
    instrument(rt, provider)
    result = await rt.execute(_input("add", {"a": 1, "b": 2}))
    assert result.value == 3
    (span,) = _tool_spans(exporter)
    assert span.name == "execute_tool add"
    assert span.kind is SpanKind.INTERNAL
    attrs = dict(span.attributes or {})
    assert {k: attrs[k] for k in attrs if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.description": "Add two numbers.",
        "gen_ai.tool.type": "function",
    }
    assert attrs["codemode.tool.run_ms"] >= 0
    # rt.execute directly: nothing queued it, so there is no queue wait to report.
    assert "codemode.tool.queue_wait_ms" not in attrs
    assert span.status.status_code is StatusCode.UNSET
    # The body's own span is a child of the tool span.
    (inner,) = [s for s in exporter.get_finished_spans() if s.name == "inside add"]
    assert inner.parent is not None and inner.parent.span_id == span.context.span_id


async def test_a_failing_call_has_error_status_and_type(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime()
    _tools(rt)
    instrument(rt, provider)
    await rt.execute(_input("explode", {}, "c-x"))
    await rt.execute(_input("add", {"a": "one", "b": 2}, "c-args"))
    await rt.execute(_input("nope", {}, "c-missing"))
    spans = {s.attributes["gen_ai.tool.call.id"]: s for s in _tool_spans(exporter)}  # type: ignore[index]
    boom = spans["c-x"]
    assert boom.status.status_code is StatusCode.ERROR
    assert boom.status.description == "boom"
    assert boom.attributes["error.type"] == "_OTHER"  # type: ignore[index]
    bad_args = spans["c-args"]
    assert bad_args.status.status_code is StatusCode.ERROR
    assert bad_args.attributes["error.type"] == "INVALID_ARGS"  # type: ignore[index]
    assert "must be a number" in (bad_args.status.description or "")
    missing = spans["c-missing"]
    assert missing.attributes["error.type"] == "UNKNOWN_TOOL"  # type: ignore[index]
    assert "gen_ai.tool.description" not in (missing.attributes or {})


async def test_a_denied_call_has_a_span_without_a_body(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime()
    _tools(rt)
    rt.guard(lambda exec_: "not today" if exec_.name == "add" else None)
    instrument(rt, provider)
    await rt.execute(_input("add", {"a": 1, "b": 2}))
    (span,) = _tool_spans(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "not today"
    assert "codemode.tool.run_ms" not in (span.attributes or {})


async def test_run_tool_calls_reports_queue_wait_and_parents_on_the_host_span(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime()
    _tools(rt)
    instrument(rt, provider)
    calls = [ModelToolCall(f"c{i}", "add", '{"a": 1, "b": 1}') for i in range(3)]
    with provider.get_tracer("host").start_as_current_span("agent step") as step:
        results = await run_tool_calls(rt, calls, signal=AbortController().signal)
    assert [r.value for r in results] == [2, 2, 2]
    spans = _tool_spans(exporter)
    assert len(spans) == 3
    for span in spans:
        assert span.parent is not None and span.parent.span_id == step.get_span_context().span_id
        assert span.attributes["codemode.tool.queue_wait_ms"] >= 0  # type: ignore[index]


async def test_a_call_settled_before_pre_execute_still_gets_a_span(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    class Runtime:
        language = "python"

        async def run(self, request: Any) -> Any:
            raise AssertionError("never runs")

    rt = ToolRuntime(mode="code", code_runtime=Runtime())
    _tools(rt)
    instrument(rt, provider)
    # Code-only mode: a direct call of a tool collapses to UNKNOWN_TOOL before the gate.
    result = await rt.execute(_input("add", {"a": 1, "b": 2}))
    assert result.is_error
    (span,) = _tool_spans(exporter)
    assert span.attributes["error.type"] == "UNKNOWN_TOOL"  # type: ignore[index]


async def test_uninstrument_removes_the_listeners(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime()
    _tools(rt)
    uninstrument = instrument(rt, provider)
    await rt.execute(_input("add", {"a": 1, "b": 2}))
    uninstrument()
    uninstrument()  # idempotent
    await rt.execute(_input("add", {"a": 1, "b": 2}))
    assert len(_tool_spans(exporter)) == 1


async def test_without_an_sdk_nothing_is_recorded_and_results_are_unchanged() -> None:
    for provider in (None, trace.NoOpTracerProvider()):
        rt = ToolRuntime()
        _tools(rt)
        instrument(rt, provider)
        assert (await rt.execute(_input("add", {"a": 1, "b": 2}))).value == 3
        failed = await rt.execute(_input("explode", {}))
        assert failed.is_error and failed.error.message == "boom"
        calls = [ModelToolCall("c", "add", '{"a": 2, "b": 2}')]
        assert [
            r.value for r in await run_tool_calls(rt, calls, signal=AbortController().signal)
        ] == [4]


# ---------------------------------------------------------------- code mode


@pytest.fixture(scope="module")
async def python_runtime() -> AsyncIterator[PythonRuntime]:
    async with PythonRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as runtime:
        yield runtime


@pytest.fixture(scope="module")
async def ts_runtime() -> AsyncIterator[TypeScriptRuntime]:
    async with TypeScriptRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as runtime:
        yield runtime


PY_PROGRAM = """
import asyncio
x = await tools.add({'a': 1, 'b': 2})
pair = await asyncio.gather(tools.add({'a': x, 'b': 10}), tools.add({'a': 0, 'b': 0}))
return [x, *pair]
"""

TS_PROGRAM = """
const x = await tools.add({ a: 1, b: 2 });
const pair = await Promise.all([tools.add({ a: x, b: 10 }), tools.add({ a: 0, b: 0 })]);
return [x, ...pair];
"""


async def _code_mode_spans(
    code_runtime: Any, code: str, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime(mode="code", code_runtime=code_runtime)
    _tools(rt)
    instrument(rt, provider)
    result = await rt.execute(
        _input("run_code", {"code": code, "description": "Add numbers"}, "run-1")
    )
    assert not result.is_error, result
    assert result.value["result"] == [3, 13, 0]
    spans = _tool_spans(exporter)
    (run,) = [s for s in spans if s.name == "execute_tool run_code"]
    children = [s for s in spans if s is not run]
    assert len(children) == 3
    assert run.parent is None
    for child in children:
        assert child.name == "execute_tool add"
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
        attrs = dict(child.attributes or {})
        assert attrs["codemode.tool.parent_call_id"] == "run-1"
        assert attrs["codemode.tool.root_call_id"] == "run-1"
        assert attrs["codemode.tool.queue_wait_ms"] >= 0
        assert attrs["gen_ai.tool.call.id"].startswith("run-1:code:")
        # A child lies within its parent's time.
        assert run.start_time <= child.start_time <= child.end_time <= run.end_time  # type: ignore[operator]
    assert sorted(c.attributes["gen_ai.tool.call.id"] for c in children) == [  # type: ignore[index]
        "run-1:code:1",
        "run-1:code:2",
        "run-1:code:3",
    ]
    assert run.attributes["codemode.tool.run_ms"] > 0  # type: ignore[index]


async def test_python_sub_calls_are_children_of_their_run_code_span(
    python_runtime: PythonRuntime, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    await _code_mode_spans(python_runtime, PY_PROGRAM, exporter, provider)


async def test_typescript_sub_calls_are_children_of_their_run_code_span(
    ts_runtime: TypeScriptRuntime, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    await _code_mode_spans(ts_runtime, TS_PROGRAM, exporter, provider)


async def test_a_failing_sub_call_and_a_failed_run(
    python_runtime: PythonRuntime, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime(mode="code", code_runtime=python_runtime)
    _tools(rt)
    instrument(rt, provider)
    code = (
        "try:\n    await tools.explode({})\nexcept ToolCallError:\n    pass\nraise ValueError('no')"
    )
    result = await rt.execute(_input("run_code", {"code": code, "description": "Fail"}, "run-2"))
    assert result.is_error
    spans = {s.name: s for s in _tool_spans(exporter)}
    run, sub = spans["execute_tool run_code"], spans["execute_tool explode"]
    assert sub.parent is not None and sub.parent.span_id == run.context.span_id
    assert sub.status.status_code is StatusCode.ERROR
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["error.type"] == "CODE_RUN_FAILED"  # type: ignore[index]
    assert run.attributes["codemode.tool.error.kind"] == "exception"  # type: ignore[index]


async def test_uninstrument_mid_call_still_ends_the_open_span(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    rt = ToolRuntime()
    _tools(rt)
    holder: dict[str, Any] = {}

    async def slow(args: Any, _ctx: Any) -> Any:
        holder["uninstrument"]()  # tracing stops while this call is running
        await rt.execute(_input("add", {"a": 1, "b": 1}, "after"))  # not traced
        return "done"

    rt.register(
        define_tool(
            name="slow",
            description="Stops the tracing mid-call.",
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
            execute=slow,
        )
    )
    holder["uninstrument"] = instrument(rt, provider)
    await rt.execute(_input("slow", {}, "during"))
    await rt.execute(_input("add", {"a": 1, "b": 1}, "later"))
    spans = _tool_spans(exporter)
    assert [s.attributes["gen_ai.tool.call.id"] for s in spans] == ["during"]  # type: ignore[index]
    assert spans[0].end_time is not None


async def test_content_is_recorded_only_when_asked(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    quiet, loud = ToolRuntime(), ToolRuntime()
    for rt in (quiet, loud):
        _tools(rt)
    instrument(quiet, provider)
    instrument(loud, provider, record_content=True)
    await quiet.execute(_input("add", {"a": 1, "b": 2}, "q"))
    await loud.execute(_input("add", {"a": 1, "b": 2}, "l"))
    await loud.execute(_input("explode", {}, "x"))
    spans = {
        s.attributes["gen_ai.tool.call.id"]: dict(s.attributes or {}) for s in _tool_spans(exporter)
    }  # type: ignore[index]
    assert "gen_ai.tool.call.arguments" not in spans["q"]
    assert "gen_ai.tool.call.result" not in spans["q"]
    assert spans["l"]["gen_ai.tool.call.arguments"] == '{"a":1,"b":2}'
    assert spans["l"]["gen_ai.tool.call.result"] == "3"
    assert spans["x"]["gen_ai.tool.call.arguments"] == "{}"
    assert "gen_ai.tool.call.result" not in spans["x"]
