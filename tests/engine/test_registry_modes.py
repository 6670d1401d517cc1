"""Presentation modes: present_as, wire schemas per mode, and the code-mode collapse."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pipeline_support import call, echo_tool, error_text, recorder

from codemode.engine import AbortController, ToolRuntime
from codemode.engine.testing import InProcessRuntime


def route(name: str) -> str:
    return (
        f'unknown tool "{name}": only `run_code` is callable directly — call `{name}` from '
        "inside a `run_code` program instead"
    )


def _runtime(mode: str = "native") -> ToolRuntime:
    rt = ToolRuntime(mode=mode, code_runtime=InProcessRuntime())
    rt.register(echo_tool(is_concurrency_safe=lambda _a: True))
    rt.register(echo_tool("other"))
    return rt


def _names(rt: ToolRuntime, scope: Any = None) -> list[str]:
    return [s.name for s in rt.schemas(scope)]


# --- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_max_parallel_sub_calls_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError) as excinfo:
        ToolRuntime(max_parallel_sub_calls=bad)
    assert (
        str(excinfo.value) == "ToolRuntime(max_parallel_sub_calls=...) must be a positive integer"
    )


def test_mode_must_be_known() -> None:
    with pytest.raises(ValueError):
        ToolRuntime(mode="hybrid")
    assert ToolRuntime().mode == "native"
    assert ToolRuntime(mode="both").mode == "both"


# --- present_as -----------------------------------------------------------------------------


def test_present_as_nearest_declaration_on_the_chain_wins() -> None:
    rt = _runtime()
    preset = rt.scope("preset")
    agent = rt.scope("agent", parent=preset)
    sibling = rt.scope("sibling", parent=preset)
    loner = rt.scope("loner")
    preset.present_as("code")
    agent.present_as("both")
    assert rt.mode_for(preset) == "code"
    assert rt.mode_for(sibling) == "code"
    assert rt.mode_for(agent) == "both"
    assert rt.mode_for(loner) == "native"
    assert rt.mode_for() == "native"


def test_present_as_conflict_and_disposer() -> None:
    rt = _runtime(mode="both")
    agent = rt.scope("agent")
    dispose = agent.present_as("code")
    with pytest.raises(ValueError) as excinfo:
        agent.present_as("both")
    assert str(excinfo.value) == (
        'tools.presentAs("both") conflicts with "code" already declared for this scope; one '
        "composition selects one presentation"
    )
    assert rt.mode_for(agent) == "code"
    dispose()
    assert rt.mode_for(agent) == "both"  # the deployment default again
    dispose()  # idempotent
    again = agent.present_as("native")
    assert rt.mode_for(agent) == "native"
    dispose()  # a spent disposer must not undo the new declaration
    assert rt.mode_for(agent) == "native"
    again()
    with pytest.raises(ValueError):
        agent.present_as("hybrid")


# --- wire schemas per mode --------------------------------------------------------------------


def test_schemas_per_mode() -> None:
    rt = _runtime()
    native = rt.scope("native")
    code = rt.scope("code")
    code.present_as("code")
    both = rt.scope("both")
    both.present_as("both")
    assert _names(rt, native) == ["echo", "other"]
    assert _names(rt, code) == ["run_code"]
    assert _names(rt, both) == ["echo", "other", "run_code"]
    run_code = rt.schemas(code)[0]
    assert run_code.parameters["required"] == ["code", "description"]
    assert rt.get("run_code", native) is None
    assert rt.get("run_code", code) is not None
    assert rt.get("echo", code) is not None  # visible, only not directly callable


def test_system_prompt_sections_per_mode() -> None:
    rt = _runtime()
    code = rt.scope("code")
    code.present_as("code")
    both = rt.scope("both")
    both.present_as("both")
    assert rt.system_prompt_sections() == {"tools:code-only": "", "tools:sdk": ""}
    sections = rt.system_prompt_sections(code)
    assert set(sections) == {"tools:code-only", "tools:sdk"}
    assert sections["tools:code-only"] == (
        "`run_code` is the only tool you can call directly — a tool call naming any other tool "
        "fails. Reach every tool the SDK declares below from inside the program."
    )
    assert "async def echo(" in sections["tools:sdk"]
    assert "async def run_code(" not in sections["tools:sdk"]
    both_sections = rt.system_prompt_sections(both)
    assert both_sections["tools:code-only"] == ""
    assert both_sections["tools:sdk"] != ""


def test_code_modes_need_a_code_runtime() -> None:
    rt = ToolRuntime(mode="code")
    with pytest.raises(RuntimeError, match="requires a code runtime"):
        rt.schemas()
    native = ToolRuntime()
    agent = native.scope("agent")
    agent.present_as("both")
    with pytest.raises(RuntimeError, match='mode "both" requires a code runtime'):
        native.schemas(agent)
    assert native.schemas() == []  # native needs no runtime


def test_run_code_cannot_be_restricted_away() -> None:
    rt = _runtime(mode="both")
    agent = rt.scope("agent")
    agent.restrict(allow=[])
    assert _names(rt, agent) == ["run_code"]


# --- collapse ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_collapsed_call_is_denied_before_every_policy() -> None:
    rt = _runtime(mode="code")
    finalized: list[Any] = []
    rt.register(echo_tool("fin", finalize_content=lambda _e, r: finalized.append(r)))
    rt.guard(lambda _e: "guards never see a collapsed call")
    rec = recorder(rt)
    result = await rt.execute(call())
    assert error_text(result) == (
        route("echo"),
        "ToolNotFoundError",
        "UNKNOWN_TOOL",
        f"Error: {route('echo')}",
    )
    assert rec.events == ["result"]
    await rt.execute(call("fin"))
    assert finalized == []  # the finalizer is dropped for the route denial


@pytest.mark.anyio
async def test_pre_aborted_collapsed_call_keeps_the_finalizer() -> None:
    rt = _runtime(mode="code")
    finalized: list[Any] = []
    rt.register(echo_tool("fin", finalize_content=lambda _e, r: finalized.append(r)))
    controller = AbortController()
    controller.abort("stop")
    rec = recorder(rt)
    result = await rt.execute(call("fin", signal=controller.signal))
    assert error_text(result)[:3] == (
        "tool call aborted before dispatch",
        "AbortError",
        "ABORTED_BEFORE_DISPATCH",
    )
    assert rec.events == ["result"]
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_collapsed_call_with_lossy_arguments_reports_the_arguments() -> None:
    rt = _runtime(mode="code")
    finalized: list[Any] = []
    rt.register(echo_tool("fin", finalize_content=lambda _e, r: finalized.append(r)))
    result = await rt.execute(call("fin", arguments={"value": math.nan}))
    assert error_text(result)[0] == "tool execution arguments must be losslessly JSON-serializable"
    assert finalized == []
    controller = AbortController()
    controller.abort("stop")
    result = await rt.execute(call("fin", arguments={"value": math.nan}, signal=controller.signal))
    assert error_text(result)[0] == "tool execution arguments must be losslessly JSON-serializable"
    assert len(finalized) == 1


@pytest.mark.anyio
async def test_invisible_names_take_the_ordinary_unknown_path_under_code() -> None:
    rt = _runtime(mode="code")
    rec = recorder(rt)
    result = await rt.execute(call("ghost"))
    assert error_text(result)[0] == 'unknown tool "ghost"'
    assert rec.events == ["pre", "execute", "post", "result"]


@pytest.mark.anyio
async def test_nested_calls_bypass_the_collapse() -> None:
    rt = _runtime(mode="code")
    token = object()
    result = await rt.execute(call(parent=token))
    assert result.value == "hi"  # type: ignore[union-attr]
    assert rt.execution_mode(call(parent=token)) == "parallel"
    assert rt.execution_mode(call()) == "exclusive"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["native", "both"])
async def test_native_and_both_are_not_collapsed(mode: str) -> None:
    rt = _runtime(mode=mode)
    result = await rt.execute(call())
    assert result.value == "hi"  # type: ignore[union-attr]
    assert rt.execution_mode(call()) == "parallel"


@pytest.mark.anyio
async def test_collapse_follows_the_per_scope_mode() -> None:
    rt = _runtime()  # native deployment
    preset = rt.scope("preset")
    preset.present_as("code")
    coded = rt.scope("coded", parent=preset)
    native = rt.scope("native")
    assert error_text(await rt.execute(call(agent=coded)))[0] == route("echo")
    assert (await rt.execute(call(agent=native))).value == "hi"  # type: ignore[union-attr]
    assert rt.execution_mode(call(agent=coded)) == "exclusive"
    assert rt.execution_mode(call(agent=native)) == "parallel"
    coded.present_as("native")
    assert (await rt.execute(call(agent=coded))).value == "hi"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_run_code_is_unknown_for_a_native_scope() -> None:
    rt = _runtime()
    result = await rt.execute(call("run_code", arguments={"code": "", "description": "d"}))
    assert error_text(result)[0] == 'unknown tool "run_code"'
    assert rt.execution_mode(call("run_code")) == "exclusive"


def test_run_code_is_always_exclusive() -> None:
    rt = _runtime(mode="both")
    assert rt.execution_mode(call("run_code", arguments={"code": "", "description": "d"})) == (
        "exclusive"
    )
