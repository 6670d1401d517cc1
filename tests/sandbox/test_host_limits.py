"""Host-side caps on program data (issue 9, items 1-3), in real workers of both guests.

- nesting: every value crossing the bridge is checked against ``max_nesting_depth`` while
  it is decoded; deep arguments fail their call with ``INVALID_ARGS`` before a binding is
  reached, a deep completion value is ``invalid-output``, a deep binding result fails its
  call;
- argument bytes: the JSON bytes of all call arguments of a run are metered against
  ``max_call_bytes``; crossing it ends the run with ``call-bytes-limit``;
- the sub-call limit has its own kind, ``sub-call-limit``.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from sandbox_helpers import DEFAULT_TOOLS, Run, err, make_runner, ok

from codemode.engine import AbortController, MemorySessionLog, ToolExecutionInput, ToolRuntime
from codemode.engine.json import FrozenDict
from codemode.sandbox import Limits, ProcessRuntime, PythonRuntime, TypeScriptRuntime

_INLINE_BYTES = 64 * 1024  # sandbox._bridge: payloads above it are decoded off the loop

pytestmark = pytest.mark.anyio

LIMITS = Limits(max_compute_ms=10_000, max_wall_ms=30_000, pool_size=1)

# A program fragment building ``deep(n)``: [[...["leaf"]...]], n lists deep.
PY_DEEP = "def deep(n):\n    v = 'leaf'\n    for _ in range(n):\n        v = [v]\n    return v\n"
TS_DEEP = "function deep(n) { let v = 'leaf'; for (let i = 0; i < n; i++) v = [v]; return v }\n"


@pytest.fixture(scope="module", params=["python", "typescript"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[ProcessRuntime]:
    cls = PythonRuntime if request.param == "python" else TypeScriptRuntime
    async with cls(LIMITS) as rt:
        yield rt


@pytest.fixture
def run(runtime: ProcessRuntime) -> Run:
    return make_runner(runtime)


def is_ts(runtime: ProcessRuntime) -> bool:
    return isinstance(runtime, TypeScriptRuntime)


def deep(n: int) -> Any:
    value: Any = "leaf"
    for _ in range(n):
        value = [value]
    return value


def depth_of(value: Any) -> int:
    n = 0
    while isinstance(value, list):
        value, n = value[0], n + 1
    return n


class Recorder:
    """Binding functions that record what reached them."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def record(self, args: Any) -> Any:
        self.seen.append(args)
        return len(self.seen)

    def tools(self) -> dict[str, Any]:
        return {**DEFAULT_TOOLS, "record": self.record}


# -- nesting cap --------------------------------------------------------------------------


async def test_arguments_past_the_cap_fail_the_call_with_invalid_args(
    runtime: ProcessRuntime, run: Run
) -> None:
    recorder = Recorder()
    if is_ts(runtime):
        program = TS_DEEP + (
            "let caught\ntry { await tools.record(deep(10001)) }\n"
            "catch (e) { caught = [e.name, e.code, e.message] }\n"
            "const after = await tools.record({ok: true})\n"
            "return [caught, after]"
        )
    else:
        program = PY_DEEP + (
            "try:\n    await tools.record(deep(10001))\n"
            "except ToolCallError as e:\n    caught = [type(e).__name__, e.code, str(e)]\n"
            "after = await tools.record({'ok': True})\n"
            "return [caught, after]"
        )
    value = ok(await run(program, tools=recorder.tools()))
    assert value == [
        ["ToolCallError", "INVALID_ARGS", "arguments nest deeper than 10,000 levels"],
        1,
    ]
    # The refused call never reached a binding; the run carried on.
    assert recorder.seen == [{"ok": True}]


async def test_arguments_at_the_cap_still_cross(runtime: ProcessRuntime, run: Run) -> None:
    recorder = Recorder()
    prefix = TS_DEEP if is_ts(runtime) else PY_DEEP
    value = ok(await run(prefix + "return await tools.record(deep(10000))", tools=recorder.tools()))
    assert value == 1
    assert depth_of(recorder.seen[0]) == 10_000


async def test_completion_value_past_the_cap_is_invalid_output(
    runtime: ProcessRuntime, run: Run
) -> None:
    prefix = TS_DEEP if is_ts(runtime) else PY_DEEP
    result = await run(prefix + "return deep(10001)")
    assert err(result, "invalid-output") == "program completion nests deeper than 10,000 levels"


async def test_binding_result_past_the_cap_fails_the_call(
    runtime: ProcessRuntime, run: Run
) -> None:
    async def too_deep(args: Any) -> Any:
        return deep(10_001)

    tools = {**DEFAULT_TOOLS, "tooDeep": too_deep}
    if is_ts(runtime):
        program = "try { await tools.tooDeep({}) } catch (e) { return e.message }"
    else:
        program = "try:\n    await tools.tooDeep({})\nexcept ToolCallError as e:\n    return str(e)"
    assert ok(await run(program, tools=tools)) == "binding result nests deeper than 10,000 levels"


async def test_a_low_cap_is_enforced_on_shallow_values_too() -> None:
    # msgspec decodes 60 levels natively; the cap must still apply.
    async with PythonRuntime(Limits(max_nesting_depth=50, pool_size=1)) as rt:
        recorder = Recorder()
        run = make_runner(rt)
        program = PY_DEEP + (
            "out = []\nfor n in (50, 51):\n    try:\n"
            "        out.append(await tools.record(deep(n)))\n"
            "    except ToolCallError as e:\n        out.append([e.code, str(e)])\nreturn out"
        )
        value = ok(await run(program, tools=recorder.tools()))
        assert value == [1, ["INVALID_ARGS", "arguments nest deeper than 50 levels"]]
        assert ok(await run(PY_DEEP + "return deep(50)")) == deep(50)
        result = await run(PY_DEEP + "return deep(51)")
        assert err(result, "invalid-output") == "program completion nests deeper than 50 levels"


async def test_deep_arguments_fail_with_invalid_args_through_the_engine() -> None:
    from sandbox_helpers import add_tool

    async with PythonRuntime(LIMITS) as sandbox:
        rt = ToolRuntime(mode="code", code_runtime=sandbox)
        rt.register(add_tool())
        session = MemorySessionLog()
        agent = rt.scope("agent", session=session)
        code = PY_DEEP + (
            "try:\n    await tools.add({'a': 1, 'b': 2, 'x': deep(200000)})\n"
            "except ToolCallError as e:\n    return [e.code, str(e)]"
        )
        result = await rt.execute(
            ToolExecutionInput(
                call_id="call-1",
                name="run_code",
                arguments={"code": code, "description": "deep"},
                signal=AbortController().signal,
                agent=agent,
            )
        )
        assert not result.is_error, result.content
        assert result.value["result"] == [
            "INVALID_ARGS",
            "arguments nest deeper than 10,000 levels",
        ]
        # Refused before the pipeline: no dispatch events for it.
        assert [e["type"] for e in session.events] == []


async def test_large_frames_arrive_as_frozen_snapshots(runtime: ProcessRuntime, run: Run) -> None:
    # A frame above the inline threshold with many members is decoded and snapshotted
    # off the event loop, so the engine's own snapshot of the arguments costs nothing.
    # (One of few members up to 4 MiB decodes on the loop, as fast as a copy.)
    recorder = Recorder()
    size = 2 * _INLINE_BYTES
    program = (
        f"return await tools.record({{s: 'x'.repeat({size}), many: [...Array(1000).keys()]}})"
        if is_ts(runtime)
        else f"return await tools.record({{'s': 'x' * {size}, 'many': list(range(1000))}})"
    )
    ok(await run(program, tools=recorder.tools()))
    (args,) = recorder.seen
    assert type(args) is FrozenDict and args["s"] == "x" * size
    assert args["many"] == list(range(1000))


# -- argument bytes -----------------------------------------------------------------------


async def test_argument_bytes_are_metered_and_terminal(runtime: ProcessRuntime) -> None:
    cls = type(runtime)
    async with cls(Limits(max_call_bytes=10_000, pool_size=1)) as rt:
        recorder = Recorder()
        run = make_runner(rt)
        if is_ts(rt):
            program = (
                "console.log('start')\nfor (let i = 0; i < 100; i++) {\n"
                "  try { await tools.record({s: 'x'.repeat(1000)}) } catch (e) {}\n}\n"
                "return 'not reached'"
            )
        else:
            program = (
                "print('start')\nfor i in range(100):\n    try:\n"
                "        await tools.record({'s': 'x' * 1000})\n"
                "    except BaseException:\n        pass\nreturn 'not reached'"
            )
        result = await run(program, tools=recorder.tools())
        assert (
            err(result, "call-bytes-limit")
            == "call-bytes limit reached (10000 argument bytes per run)"
        )
        assert result.logs == ["start"]
        # {"s":"xxx..."} is 1,008 bytes: nine calls fit in 10,000, the tenth does not.
        assert len(recorder.seen) == 9


async def test_default_limits() -> None:
    limits = Limits()
    assert limits.max_nesting_depth == 10_000
    assert limits.max_call_bytes == 64 * 2**20


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_call_bytes": 0}, "Limits.max_call_bytes must be a positive number"),
        ({"max_nesting_depth": -1}, "Limits.max_nesting_depth must be a positive number"),
        ({"max_nesting_depth": 2.5}, "Limits.max_nesting_depth must be an integer"),
        ({"max_call_bytes": True}, "Limits.max_call_bytes must be a positive number"),
    ],
)
async def test_limits_are_validated(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Limits(**options)


async def test_large_arguments_are_logged_as_a_digest_of_their_json(
    runtime: ProcessRuntime,
) -> None:
    # The bridge measures and hashes a big argument's JSON off the loop; the session log
    # records exactly what it would have computed itself.
    from sandbox_helpers import add_tool

    rt = ToolRuntime(mode="code", code_runtime=runtime)
    rt.register(add_tool())
    session = MemorySessionLog()
    agent = rt.scope("agent", session=session)
    if is_ts(runtime):
        code = "return await tools.add({a: 1, b: 2, pad: 'é'.repeat(100000)})"
    else:
        code = "return await tools.add({'a': 1, 'b': 2, 'pad': 'é' * 100000})"
    result = await rt.execute(
        ToolExecutionInput(
            call_id="call-1",
            name="run_code",
            arguments={"code": code, "description": "big arguments"},
            signal=AbortController().signal,
            agent=agent,
        )
    )
    assert not result.is_error, result.content
    body = msgspec.json.encode({"a": 1, "b": 2, "pad": "é" * 100_000})
    start, settle = session.events
    for event in (start, settle):
        assert event["truncatedFields"] == ["arguments"]
        marker = event["arguments"]
        assert marker["bytes"] == len(body)
        assert marker["sha256"] == hashlib.sha256(body).hexdigest()
        assert body.decode().startswith(marker["preview"])
