"""``pipeline``: what ``ToolRuntime.execute()`` of a trivial tool costs, with no listener,
with one listener on each stage in turn (the per-stage cost is the difference), and with
three on every stage; against a bare ``await body(args)`` (the floor). Also schema
validation per value next to the ``jsonschema`` library on the same schema and values."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from codemode.engine import (
    AbortController,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.engine.schema import validate_json_schema_value

from ._common import BenchContext, timed
from ._model import FLOOR, MONTY, SMOLAGENTS, SuiteResult, cross_ratios, summarize

DESCRIPTION = "execute() per call: no listener, +1 per stage, 3 per stage; schema validation"
ENGINE = "codemode-engine"
NONE = "execute(), no listeners"
STAGES = ("tools/pre-execute", "tools/execute", "tools/post-execute", "tools/result")


async def _body(args: Any, ctx: Any) -> Any:
    return args["value"]


def _runtime(listeners: dict[str, int]) -> ToolRuntime:
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
    for stage, count in listeners.items():
        for _ in range(count):
            rt.on(stage, _LISTENERS[stage])
    return rt


async def _around(exec_: Any, next_: Any) -> Any:
    return await next_()


async def _post(exec_: Any, result: Any, next_: Any) -> Any:
    return await next_()


_LISTENERS: dict[str, Callable[..., Any]] = {
    "tools/pre-execute": _around,
    "tools/execute": _around,
    "tools/post-execute": _post,
    "tools/result": lambda exec_, result: None,
}


async def _per_call(fn: Callable[[], Awaitable[Any]], calls: int, rounds: int) -> list[float]:
    for _ in range(200):  # warm-up
        await fn()
    samples = []
    for _ in range(rounds):
        clock = timed()
        for _ in range(calls):
            await fn()
        samples.append(clock() / calls)
    return samples


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    calls = 2000 if ctx.quick else 10_000
    rounds = max(3, ctx.runs)
    result = SuiteResult(
        description=DESCRIPTION, params={"calls_per_round": calls, "rounds": rounds}
    )
    ctx.plan(len(STAGES) + 4)
    args = {"value": "hello"}
    signal = AbortController().signal

    def caller(rt: ToolRuntime) -> Callable[[], Awaitable[Any]]:
        inp = ToolExecutionInput(call_id="c", name="echo", arguments=args, signal=signal)

        async def call() -> Any:
            return await rt.execute(inp)

        return call

    async def bare() -> Any:
        return await _body(args, None)

    result.rows.append(
        summarize(NONE, FLOOR, await _per_call(bare, calls, rounds), note="bare await body(args)")
    )
    ctx.step("floor")
    plain = _runtime({})
    if (
        await plain.execute(
            ToolExecutionInput(call_id="c", name="echo", arguments=args, signal=signal)
        )
    ).is_error:
        raise RuntimeError("the pipeline's echo call failed")
    none = summarize(NONE, ENGINE, await _per_call(caller(plain), calls, rounds))
    result.rows.append(none)
    ctx.step("no listeners")
    per_stage: dict[str, float] = {}
    for stage in STAGES:
        row = summarize(
            f"execute(), 1 listener on {stage}",
            ENGINE,
            await _per_call(caller(_runtime({stage: 1})), calls, rounds),
        )
        per_stage[stage] = round((row.median - none.median) * 1e3, 3)
        row.note = f"{per_stage[stage]:.2f} µs over no listeners"
        result.rows.append(row)
        ctx.step(stage)
    result.rows.append(
        summarize(
            "execute(), 3 listeners per stage",
            ENGINE,
            await _per_call(caller(_runtime(dict.fromkeys(STAGES, 3))), calls, rounds),
        )
    )
    ctx.step("3 per stage")
    result.peers = {FLOOR: ctx.peers[FLOOR]}
    result.peers[MONTY] = result.peers[SMOLAGENTS] = "n/a: no tool pipeline to compare"
    result.peers["jsonschema"] = await _validation(result, rounds)
    ctx.step("validation")
    cross_ratios(result.rows)
    result.series = {"listener_us_per_stage": per_stage}
    return result


_SCHEMA = {
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


async def _validation(result: SuiteResult, rounds: int) -> str:
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
    case = "schema validation per value"

    def timed_rounds(check: Callable[[Any], Any]) -> list[float]:
        samples = []
        for _ in range(rounds):
            clock = timed()
            for _ in range(10):
                for value in values:
                    check(value)
            samples.append(clock() / (10 * len(values)))
        return samples

    result.rows.append(
        summarize(case, ENGINE, timed_rounds(lambda v: validate_json_schema_value(_SCHEMA, v)))
    )
    try:
        import jsonschema
    except ImportError as exc:
        return f"missing: jsonschema not importable ({exc})"
    validator = jsonschema.Draft202012Validator(_SCHEMA)
    result.rows.append(
        summarize(case, "jsonschema", timed_rounds(lambda v: list(validator.iter_errors(v))))
    )
    return "ok"
