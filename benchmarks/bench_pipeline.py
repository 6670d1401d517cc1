"""Pipeline overhead: median cost of ``ToolRuntime.execute()`` for a trivial tool.

Rows: a bare ``await body(args, ctx)`` (the floor), ``execute()`` with no listeners, and
``execute()`` with 3 listeners on every stage (pre-execute, execute, post-execute,
result). Also schema validation throughput next to the ``jsonschema`` library (when
installed) on the same schema and values. Plain script: prints a table.

Targets (issue 2): under 15 µs per call with no listeners; validation >= 3x jsonschema.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio

from codemode.engine import (
    AbortController,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.schema import validate_json_schema_value

N = 20_000
ROUNDS = 5


async def _body(args: Any, ctx: Any) -> Any:
    return args["value"]


def _tool() -> Any:
    return define_tool(
        name="echo",
        description="Echo a value.",
        parameters={"value": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
        execute=_body,
    )


async def _per_call(fn: Any) -> float:
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(N):
            await fn()
        samples.append((time.perf_counter() - start) / N * 1e6)
    return statistics.median(samples)


async def main() -> None:
    signal = AbortController().signal
    args = {"value": "hello"}

    async def bare() -> Any:
        return await _body(args, None)

    rt = ToolRuntime()
    rt.register(_tool())
    inp = ToolExecutionInput(call_id="c", name="echo", arguments=args, signal=signal)

    async def plain() -> Any:
        return await rt.execute(inp)

    rt3 = ToolRuntime()
    rt3.register(_tool())
    for _ in range(3):

        async def pre(exec_: Any, next_: Any) -> Any:
            return await next_()

        async def around(exec_: Any, next_: Any) -> Any:
            return await next_()

        async def post(exec_: Any, result: Any, next_: Any) -> Any:
            return await next_()

        rt3.on("tools/pre-execute", pre)
        rt3.on("tools/execute", around)
        rt3.on("tools/post-execute", post)
        rt3.on("tools/result", lambda e, r: None)
    inp3 = ToolExecutionInput(call_id="c", name="echo", arguments=args, signal=signal)

    async def listened() -> Any:
        return await rt3.execute(inp3)

    assert not (await plain()).is_error and not (await listened()).is_error
    floor = await _per_call(bare)
    t0 = await _per_call(plain)
    t3 = await _per_call(listened)
    print(f"pipeline overhead (median of {ROUNDS} rounds x {N} calls)")
    print(f"{'case':<38}{'us/call':>10}{'x bare':>10}")
    print(f"{'bare await body(args)':<38}{floor:>10.2f}{1:>10.1f}")
    print(f"{'execute(), no listeners':<38}{t0:>10.2f}{t0 / floor:>10.1f}")
    print(f"{'execute(), 3 listeners per stage':<38}{t3:>10.2f}{t3 / floor:>10.1f}")
    print(f"target: no-listener execute() < 15 us -> {'MET' if t0 < 15 else 'MISSED'}")
    _bench_validation()


def _bench_validation() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "size": {"type": "integer"},
            "mode": {"enum": ["a", "b", "c"]},
            "nested": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x"],
                "additionalProperties": False,
            },
        },
        "required": ["name", "tags"],
    }
    values = [
        {
            "name": f"n{i}",
            "tags": ["a", "b", str(i)],
            "size": i,
            "mode": "b",
            "nested": {"x": 1.5, "y": i},
        }
        for i in range(200)
    ]
    reps = 50

    start = time.perf_counter()
    for _ in range(reps):
        for v in values:
            validate_json_schema_value(schema, v)
    ours = (time.perf_counter() - start) / (reps * len(values)) * 1e6
    print()
    print("schema validation (valid values, same schema and values)")
    print(f"{'validator':<38}{'us/value':>10}{'x ours':>10}")
    print(f"{'codemode.engine.schema.validate_json_schema_value':<38}{ours:>10.2f}{1:>10.1f}")
    try:
        import jsonschema
    except ImportError:
        print("jsonschema not installed: pip install jsonschema to compare")
        return
    validator = jsonschema.Draft202012Validator(schema)
    start = time.perf_counter()
    for _ in range(reps):
        for v in values:
            list(validator.iter_errors(v))
    theirs = (time.perf_counter() - start) / (reps * len(values)) * 1e6
    print(f"{'jsonschema Draft202012Validator':<38}{theirs:>10.2f}{theirs / ours:>10.1f}")
    print(f"target: >= 3x faster than jsonschema -> {'MET' if theirs / ours >= 3 else 'MISSED'}")


if __name__ == "__main__":
    anyio.run(main)
