"""The SDK's "sandbox facts" block as a model sees it: built from the runtime's own limits
and guest surface (``ProcessRuntime.sdk_facts``) plus the host's facts, through the
engine's ``system_prompt_sections``."""

from __future__ import annotations

import pytest
from sandbox_helpers import add_tool

from codemode.engine import ToolRuntime
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.sandbox.python._modules import ALLOWED_MODULES

LIMITS = Limits(
    max_compute_ms=7_000, max_wall_ms=90_000, max_memory_bytes=256 * 2**20,
    max_output_bytes=2 * 2**20, max_sub_calls=321,
)  # fmt: skip


def sdk_section(runtime: PythonRuntime | TypeScriptRuntime, **host_facts: object) -> str:
    rt = ToolRuntime(mode="code", code_runtime=runtime)
    rt.register(add_tool())
    rt.sdk_facts.update(host_facts)
    return rt.system_prompt_sections(rt.scope("agent"))["tools:sdk"]


@pytest.mark.parametrize("runtime_class", [PythonRuntime, TypeScriptRuntime])
def test_the_limits_in_force_are_stated(
    runtime_class: type[PythonRuntime] | type[TypeScriptRuntime],
) -> None:
    section = sdk_section(runtime_class(LIMITS))
    assert (
        "- Limits per run, terminal even if caught: 7 s CPU (awaiting tools is free), 90 s "
        "wall, 256 MiB memory, 2 MiB output, 321 tool calls.\n"
    ) in section
    # The block sits between the usage bullets and the declarations, once.
    assert section.count("Sandbox facts:\n") == 1
    assert section.index("Sandbox facts:") < section.index("The available tools:")


def test_python_lists_the_allow_list_it_runs_with() -> None:
    section = sdk_section(PythonRuntime(LIMITS))
    assert f"- Modules (no others): {', '.join(ALLOWED_MODULES)}.\n" in section
    asyncio_line = next(line for line in section.splitlines() if line.startswith("- `asyncio`"))
    assert {"gather", "sleep"} <= set(
        asyncio_line.removesuffix(".").split(" offers ")[1].split(", ")
    )


def test_typescript_states_its_syntax_and_call_semantics() -> None:
    section = sdk_section(TypeScriptRuntime(LIMITS))
    assert "enums and constructor parameter properties are compiled" in section
    assert "namespaces with values, decorators and `import`/`export` are refused" in section
    assert "- A tool call starts when made; `await` it, or `Promise.all` several.\n" in section
    assert "Modules (no others)" not in section


def test_host_facts_name_the_workspace_and_the_read_before_write_tools() -> None:
    section = sdk_section(
        TypeScriptRuntime(LIMITS), workspace="/srv/repo", read_before_write=["edit", "write"]
    )
    assert "- Workspace: `/srv/repo`; file tools take paths relative to it.\n" in section
    assert "- `edit` and `write` change an existing file only after a `read`.\n" in section
