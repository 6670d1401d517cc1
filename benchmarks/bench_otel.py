"""OpenTelemetry listener cost: median µs per ``ToolRuntime.execute()`` of a trivial tool.

Rows: no instrumentation (the floor); ``instrument(rt)`` with only the API (no SDK:
non-recording spans); ``instrument(rt)`` with the SDK recording every span into a
batch processor whose exporter drops them (the cost of recording, not of exporting);
and the SDK with a sampler that records nothing; plus three pass-through listeners in
the same slots, the engine's own cost of having listeners at all. The listener's cost is
each row minus the first. Plain script: prints a table.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from codemode.engine import (
    AbortController,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.integrations.otel import instrument

N = 2_000
ROUNDS = 21


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def _body(args: Any, ctx: Any) -> Any:
    return args["value"]


def _runtime() -> ToolRuntime:
    rt = ToolRuntime()
    rt.register(
        define_tool(
            name="echo",
            description="Echo a value.",
            parameters={"value": {"type": "string", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
            execute=_body,
        )
    )
    return rt


def _pass_through(rt: ToolRuntime) -> None:
    """The same three listener slots ``instrument`` uses, doing nothing: what the
    engine's waterfalls cost by themselves."""

    async def wrap(exec_: Any, next_: Any) -> Any:
        return await next_()

    rt.on("tools/pre-execute", wrap, prepend=True)
    rt.on("tools/execute", wrap, prepend=True)
    rt.on("tools/result", lambda exec_, result: None)


async def _round(rt: ToolRuntime) -> float:
    signal = AbortController().signal
    start = time.perf_counter()
    for i in range(N):
        await rt.execute(
            ToolExecutionInput(
                call_id=f"c{i}", name="echo", arguments={"value": "hi"}, signal=signal
            )
        )
    return (time.perf_counter() - start) / N * 1e6


async def main() -> None:
    sdk = TracerProvider()
    sdk.add_span_processor(BatchSpanProcessor(_Drop(), max_queue_size=N * 4))
    configs: list[tuple[str, ToolRuntime]] = [("no instrumentation", _runtime())]
    rt = _runtime()
    _pass_through(rt)
    configs.append(("3 pass-through listeners (engine floor)", rt))
    rt = _runtime()
    instrument(rt, trace.NoOpTracerProvider())
    configs.append(("instrument(rt, NoOpTracerProvider())", rt))
    rt = _runtime()
    instrument(rt)  # the global provider: the API's proxy, no SDK configured
    configs.append(("instrument(rt), no SDK configured", rt))
    rt = _runtime()
    instrument(rt, sdk)
    configs.append(("instrument(rt, sdk), recording", rt))
    rt = _runtime()
    instrument(rt, TracerProvider(sampler=ALWAYS_OFF))
    configs.append(("instrument(rt, sdk), sampled out", rt))

    # Rounds interleave the configurations, so load from elsewhere hits them alike.
    samples: dict[str, list[float]] = {name: [] for name, _ in configs}
    for r in range(ROUNDS + 1):
        for name, rt in configs:
            value = await _round(rt)
            if r:  # round 0 warms up
                samples[name].append(value)
    sdk.shutdown()

    floor = statistics.median(samples[configs[0][0]])
    print(f"{'configuration':40} {'median µs/call':>15} {'listener µs':>12} {'min µs':>8}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:40} {median:15.2f} {median - floor:12.2f} {min(values):8.2f}")


if __name__ == "__main__":
    anyio.run(main)
