"""Stage 1 of the pipeline: argument materialisation (reference §2.3.1)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pipeline_support import call, echo_tool, error_text, raw_tool, recorder

from codemode.engine import AbortController, ToolExecutionFailure, ToolExecutionSuccess, ToolRuntime

LOSSY_MESSAGE = "tool execution arguments must be losslessly JSON-serializable"


def _cycle() -> dict[str, Any]:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


def _list_cycle() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


class _Opaque:
    pass


LOSSY_ARGUMENTS = {
    "nan": {"value": math.nan},
    "negative-zero": {"value": -0.0},
    "inf": {"value": math.inf},
    "minus-inf": {"value": -math.inf},
    "tuple": {"value": (1, 2)},
    "set": {"value": {1, 2}},
    "frozenset": {"value": frozenset()},
    "bytes": {"value": b"x"},
    "object": {"value": _Opaque()},
    "function": {"value": len},
    "cycle": _cycle(),
    "list-cycle": {"value": _list_cycle()},
    "int-key": {1: "x"},
    "none-key": {None: "x"},
    "nested-nan": {"value": [{"deep": [math.nan]}]},
    "huge-int": {"value": 10**400},
    "root-tuple": ("a",),
    "root-object": _Opaque(),
    "root-nan": math.nan,
}


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", list(LOSSY_ARGUMENTS.values()), ids=list(LOSSY_ARGUMENTS))
async def test_lossy_arguments_are_a_final_result(arguments: Any) -> None:
    rt = ToolRuntime()
    bodies: list[Any] = []
    finalized: list[tuple[Any, Any]] = []

    async def body(args: Any, _exec: Any) -> Any:
        bodies.append(args)
        return "ran"

    def finalize(exec_: Any, result: Any) -> None:
        finalized.append((exec_, result))

    rt.register(echo_tool(body=body, finalize_content=finalize))
    rec = recorder(rt)

    result = await rt.execute(call(arguments=arguments))

    assert error_text(result) == (LOSSY_MESSAGE, None, None, f"Error: {LOSSY_MESSAGE}")
    assert result.to_json() == {
        "isError": True,
        "error": {"message": LOSSY_MESSAGE},
        "content": [{"type": "text", "text": f"Error: {LOSSY_MESSAGE}"}],
    }
    assert bodies == []
    # No pre-execute, tools/execute or post-execute; tools/result exactly once.
    assert rec.events == ["result"]
    assert len(finalized) == 1
    exec_, seen = finalized[0]
    assert exec_.arguments is None
    assert seen.is_error
    observed_exec, observed = rec.results[0]
    assert observed_exec is exec_
    assert observed_exec.arguments is None
    assert observed is result


@pytest.mark.anyio
async def test_argument_failure_wins_over_a_pre_aborted_signal() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    controller = AbortController()
    controller.abort("stop")
    rec = recorder(rt)

    result = await rt.execute(call(arguments={"value": math.nan}, signal=controller.signal))

    assert error_text(result)[:3] == (LOSSY_MESSAGE, None, None)
    assert rec.events == ["result"]


@pytest.mark.anyio
async def test_argument_failure_of_an_unknown_tool_is_the_same_final_result() -> None:
    rt = ToolRuntime()
    rec = recorder(rt)
    result = await rt.execute(call("nope", arguments={"value": (1,)}))
    assert error_text(result)[0] == LOSSY_MESSAGE
    assert rec.events == ["result"]


@pytest.mark.anyio
async def test_unexpected_failure_while_reading_arguments_uses_its_message() -> None:
    # The Python analogue of a throwing getter: an int subclass whose float
    # conversion raises. The pipeline must still produce a result, never raise.
    class Hostile(int):
        def __float__(self) -> float:
            raise ValueError("hostile getter")

    rt = ToolRuntime()
    rt.register(raw_tool())
    rec = recorder(rt)
    result = await rt.execute(call("raw", arguments={"n": Hostile(3)}))
    assert error_text(result) == ("hostile getter", None, None, "Error: hostile getter")
    assert rec.events == ["result"]


@pytest.mark.anyio
async def test_body_sees_a_detached_deep_frozen_copy_and_the_callers_dict_stays_mutable() -> None:
    rt = ToolRuntime()
    caller_args: dict[str, Any] = {"nested": {"items": [1, 2]}, "flag": True}
    seen: dict[str, Any] = {}

    async def body(args: Any, exec_: Any) -> Any:
        seen["args"] = args
        seen["same_as_exec"] = args is exec_.arguments
        # The caller mutating its own dict mid-call does not reach the snapshot.
        caller_args["nested"]["items"].append(3)
        for mutate in (
            lambda: args.__setitem__("x", 1),
            lambda: args["nested"].__setitem__("y", 2),
            lambda: args["nested"]["items"].append(4),
            lambda: args.pop("flag"),
            lambda: args.update({}),
        ):
            with pytest.raises(TypeError):
                mutate()
        return "ok"

    rt.register(raw_tool(body=body))
    result = await rt.execute(call("raw", arguments=caller_args))

    assert isinstance(result, ToolExecutionSuccess)
    assert seen["same_as_exec"] is True
    assert seen["args"] == {"nested": {"items": [1, 2]}, "flag": True}
    assert seen["args"] is not caller_args
    # The caller's object was never frozen.
    caller_args["new"] = 1
    caller_args["nested"]["items"].append(5)
    assert caller_args["nested"]["items"] == [1, 2, 3, 5]


@pytest.mark.anyio
async def test_shared_non_cyclic_references_are_allowed_and_copied() -> None:
    rt = ToolRuntime()
    shared = {"k": [1]}
    seen: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        seen.append(args)
        return "ok"

    rt.register(raw_tool(body=body))
    result = await rt.execute(call("raw", arguments={"a": shared, "b": shared}))
    assert not result.is_error
    assert seen[0] == {"a": {"k": [1]}, "b": {"k": [1]}}


@pytest.mark.anyio
async def test_five_thousand_deep_arguments_work() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = {"d": [deep]}
    rt = ToolRuntime()
    depth: list[int] = []

    async def body(args: Any, _exec: Any) -> Any:
        node, n = args, 0
        while isinstance(node, dict):
            node, n = node["d"][0], n + 1
        depth.append(n)
        return n

    rt.register(raw_tool(body=body, schema={"type": "integer"}))
    result = await rt.execute(call("raw", arguments=deep))
    assert isinstance(result, ToolExecutionSuccess)
    assert depth == [5000]
    assert result.value == 5000


@pytest.mark.anyio
async def test_five_thousand_deep_arguments_pass_define_tool_validation() -> None:
    from codemode.engine import ToolOutput, define_tool, text

    deep: Any = 0
    for _ in range(5000):
        deep = [deep]

    async def body(args: Any, _exec: Any) -> Any:
        return "validated"

    rt = ToolRuntime()
    rt.register(
        define_tool(
            name="deep",
            description="Deep arguments.",
            parameters={"payload": {"type": "json", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
            execute=body,
        )
    )
    result = await rt.execute(call("deep", arguments={"payload": deep}))
    assert isinstance(result, ToolExecutionSuccess)
    assert result.value == "validated"


@pytest.mark.anyio
async def test_json_scalars_at_the_root_are_lossless_arguments() -> None:
    rt = ToolRuntime()
    seen: list[Any] = []

    async def body(args: Any, _exec: Any) -> Any:
        seen.append(args)
        return None

    rt.register(raw_tool(body=body))
    for value in (None, True, 0, -1.5, "text", [], {}):
        result = await rt.execute(call("raw", arguments=value))
        assert not result.is_error, (value, result)
    assert seen == [None, True, 0, -1.5, "text", [], {}]


@pytest.mark.anyio
async def test_raw_string_arguments_fail_define_tool_validation_inside_the_body() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    rec = recorder(rt)
    result = await rt.execute(call(arguments="{not json"))
    assert error_text(result) == (
        'invalid arguments: "arguments" must be an object',
        "ToolArgsError",
        "INVALID_ARGS",
        'Error: invalid arguments: "arguments" must be an object',
    )
    # Validation happens inside the body: every policy stage ran.
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_invalid_arguments_join_violations_and_count_as_an_invoked_body() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    controller = AbortController()

    async def abort_in_post(exec_: Any, result: Any, next_: Any) -> Any:
        controller.abort("late")
        return await next_()

    rt.on("tools/post-execute", abort_in_post)
    result = await rt.execute(call(arguments={"value": 1, "x": 2}, signal=controller.signal))
    # Errors are never replaced by the cancel rule.
    assert error_text(result)[:3] == (
        'invalid arguments: "value" must be a string',
        "ToolArgsError",
        "INVALID_ARGS",
    )
    missing = await rt.execute(call(arguments={}))
    assert error_text(missing)[0] == 'invalid arguments: missing required property "value"'


@pytest.mark.anyio
async def test_root_call_id_defaults_to_call_id_and_tokens_are_unique() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    rec = recorder(rt)
    await rt.execute(call(call_id="a"))
    await rt.execute(call(call_id="b", root_call_id="root"))
    (first, _), (second, _) = rec.results
    assert (first.call_id, first.root_call_id) == ("a", "a")
    assert (second.call_id, second.root_call_id) == ("b", "root")
    assert first.token is not second.token
    assert first.parent is None and first.agent is None


@pytest.mark.anyio
async def test_non_signal_input_is_misuse() -> None:
    rt = ToolRuntime()
    rt.register(echo_tool())
    from codemode.engine import ToolExecutionInput

    bad = ToolExecutionInput(call_id="c", name="echo", arguments={}, signal=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await rt.execute(bad)


def test_failure_type_is_exported() -> None:
    assert ToolExecutionFailure.is_error is True
    assert ToolExecutionSuccess.is_error is False
