"""One OpenTelemetry span per tool execution, installed through the runtime's listeners.

Where each piece comes from (all public ``ToolRuntime.on`` events):

- ``tools/pre-execute`` (outermost, ``prepend=True``) starts the span when the pipeline
  takes the call up. Its parent is the span of ``exec.parent`` (the ``run_code``
  execution whose program made this sub-call) when there is one, else the context
  current at that point (the host's agent/step span, say).
- ``tools/execute`` (outermost) times the body and makes the span current while it
  runs, so spans a tool body opens itself nest under its tool span.
- ``tools/result`` ends the span with the outcome. A call that settled before
  pre-execute (lossy arguments, a code-only collapse, an early abort) gets a span there,
  started and ended at once.

Queue wait is ``ToolExecution.queued_at`` (set by ``run_tool_calls`` and the code-mode
driver) up to the span's start; run time is the body's.

Cost without an SDK: an explicit no-op provider installs nothing at all. The global
provider (the default) may get an SDK only later, so there the listeners stay, and each
first asks whether a real provider is set yet (one global read) and otherwise passes the
call straight on; once one is set (the API allows that once) the question is not asked
again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from codemode.engine import ToolExecution, ToolExecutionResult, ToolRuntime
from codemode.engine.json import dumps_compact

__all__ = ["ATTRIBUTES", "instrument"]

_TRACER_NAME = "codemode"

#: The attribute keys set on each span (GenAI semantic conventions, then codemode's own).
ATTRIBUTES = {
    "operation": "gen_ai.operation.name",
    "tool_name": "gen_ai.tool.name",
    "call_id": "gen_ai.tool.call.id",
    "description": "gen_ai.tool.description",
    "tool_type": "gen_ai.tool.type",
    "error_type": "error.type",
    "arguments": "gen_ai.tool.call.arguments",
    "result": "gen_ai.tool.call.result",
    "parent_call_id": "codemode.tool.parent_call_id",
    "root_call_id": "codemode.tool.root_call_id",
    "queue_wait_ms": "codemode.tool.queue_wait_ms",
    "run_ms": "codemode.tool.run_ms",
    "error_code": "codemode.tool.error.code",
    "error_kind": "codemode.tool.error.kind",
}

_OTHER = "_OTHER"  # error.type when a failure carries no code (the convention's fallback)


class _Open:
    """A started span and what its ending needs."""

    __slots__ = ("body_started", "call_id", "run_ms", "span", "started")

    def __init__(self, span: Span, call_id: str, started: float) -> None:
        self.span = span
        self.call_id = call_id
        self.started = started
        self.body_started: float | None = None
        self.run_ms: float | None = None


_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


class _Tracing:
    def __init__(self, rt: ToolRuntime, tracer: Tracer, *, live: bool, content: bool) -> None:
        self.rt = rt
        self.tracer = tracer
        self.content = content
        # False while the global provider is still the API's placeholder.
        self.live = live
        # Keyed by the execution's token: a sub-call names its run_code by that token.
        self.open: dict[object, _Open] = {}
        # After uninstrument(): the result observer stays until the open spans ended.
        self.closing = False
        self.remove_observer: Callable[[], None] | None = None

    # ------------------------------------------------------------------ start

    def _sdk_configured(self) -> bool:
        if not isinstance(trace.get_tracer_provider(), _NO_SDK):
            self.live = True  # a global provider is set once and for all
        return self.live

    def _start(self, exec_: ToolExecution, now: float) -> _Open | None:
        parent_open = self.open.get(exec_.parent) if exec_.parent is not None else None
        ctx = trace.set_span_in_context(parent_open.span) if parent_open is not None else None
        attrs: dict[str, Any] = {
            ATTRIBUTES["operation"]: "execute_tool",
            ATTRIBUTES["tool_name"]: exec_.name,
            ATTRIBUTES["call_id"]: exec_.call_id,
            ATTRIBUTES["tool_type"]: "function",
        }
        tool = self.rt.get(exec_.name, exec_.agent)
        if tool is not None and tool.description:
            attrs[ATTRIBUTES["description"]] = tool.description
        if parent_open is not None:
            attrs[ATTRIBUTES["parent_call_id"]] = parent_open.call_id
        if exec_.root_call_id != exec_.call_id:
            attrs[ATTRIBUTES["root_call_id"]] = exec_.root_call_id
        if exec_.queued_at is not None:
            attrs[ATTRIBUTES["queue_wait_ms"]] = round((now - exec_.queued_at) * 1000, 3)
        if self.content and exec_.arguments is not None:
            attrs[ATTRIBUTES["arguments"]] = dumps_compact(exec_.arguments)
        # Attributes at start: samplers see the tool's name and operation (and the SDK
        # cleans them in one pass instead of one locked set per key).
        span = self.tracer.start_span(
            f"execute_tool {exec_.name}", context=ctx, kind=SpanKind.INTERNAL, attributes=attrs
        )
        if not span.is_recording():
            # Sampled out: nothing to record, nothing to keep.
            return None
        opened = _Open(span, exec_.call_id, now)
        self.open[exec_.token] = opened
        return opened

    async def pre_execute(self, exec_: ToolExecution, next_: Callable[[], Any]) -> Any:
        if self.live or self._sdk_configured():
            self._start(exec_, time.perf_counter())
        return await next_()

    # ------------------------------------------------------------------- body

    async def around_body(self, exec_: ToolExecution, next_: Callable[[], Any]) -> Any:
        opened = self.open.get(exec_.token)
        if opened is None:
            return await next_()
        token = otel_context.attach(trace.set_span_in_context(opened.span))
        opened.body_started = time.perf_counter()
        try:
            return await next_()
        finally:
            opened.run_ms = round((time.perf_counter() - opened.body_started) * 1000, 3)
            otel_context.detach(token)

    # -------------------------------------------------------------------- end

    def result(self, exec_: ToolExecution, result: ToolExecutionResult) -> None:
        try:
            self._end(exec_, result)
        finally:
            if self.closing and not self.open:
                self.close()

    def close(self) -> None:
        remove, self.remove_observer = self.remove_observer, None
        if remove is not None:
            remove()

    def _end(self, exec_: ToolExecution, result: ToolExecutionResult) -> None:
        opened = self.open.pop(exec_.token, None)
        if opened is None:
            if (
                not self.live or self.closing
            ):  # (pre-execute asked already, or never ran: no SDK then)
                return
            # Settled before pre-execute ran: a span of its own, started and ended now.
            opened = self._start(exec_, time.perf_counter())
            if opened is None:
                return
            self.open.pop(exec_.token, None)
        span = opened.span
        end: dict[str, Any] = {}
        if opened.run_ms is not None:
            end[ATTRIBUTES["run_ms"]] = opened.run_ms
        if result.is_error:
            info = result.error.info
            end[ATTRIBUTES["error_type"]] = info.code if info is not None else _OTHER
            if info is not None:
                end[ATTRIBUTES["error_code"]] = info.code
                if info.kind is not None:
                    end[ATTRIBUTES["error_kind"]] = info.kind
            span.set_status(Status(StatusCode.ERROR, result.error.message))
        elif self.content:
            end[ATTRIBUTES["result"]] = dumps_compact(result.value)
        if end:
            span.set_attributes(end)
        span.end()


def instrument(
    rt: ToolRuntime,
    tracer_provider: TracerProvider | None = None,
    *,
    record_content: bool = False,
) -> Callable[[], None]:
    """Trace every tool execution of ``rt``; returns ``uninstrument()``, which removes the
    listeners again (spans already open still end with their calls' results).

    Each execution — a native call, ``run_code``, and each sub-call of a ``run_code``
    program (a child of that run's span) — gets one ``INTERNAL`` span named
    ``execute_tool {tool}`` with the GenAI ``execute_tool`` attributes
    (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
    ``gen_ai.tool.description``, ``gen_ai.tool.type``), ``codemode.tool.queue_wait_ms``
    and ``codemode.tool.run_ms``, and on failure an ERROR status with the message and
    ``error.type`` (the failure's code, ``_OTHER`` without one).

    ``record_content=True`` adds the convention's opt-in ``gen_ai.tool.call.arguments``
    and, for successes, ``gen_ai.tool.call.result`` (compact JSON of the value). Off by
    default: arguments and results may be sensitive and large.

    ``tracer_provider`` defaults to the global one; with only the API installed (no SDK)
    spans are non-recording and the listeners do next to nothing (see the module
    docstring); an explicit ``NoOpTracerProvider`` installs no listener at all.
    """
    if isinstance(tracer_provider, trace.NoOpTracerProvider):
        return lambda: None
    if tracer_provider is None:
        # The global provider's tracer follows an SDK configured later (a proxy).
        tracer = trace.get_tracer(_TRACER_NAME)
        live = not isinstance(trace.get_tracer_provider(), _NO_SDK)
    else:
        tracer = tracer_provider.get_tracer(_TRACER_NAME)
        live = True
    tracing = _Tracing(rt, tracer, live=live, content=record_content)
    disposers = [
        rt.on("tools/pre-execute", tracing.pre_execute, prepend=True),
        rt.on("tools/execute", tracing.around_body, prepend=True),
    ]
    tracing.remove_observer = rt.on("tools/result", tracing.result)

    def uninstrument() -> None:
        """Stop tracing new calls (idempotent); spans already open end with their calls."""
        while disposers:
            disposers.pop()()
        tracing.closing = True
        if not tracing.open:
            tracing.close()

    return uninstrument
