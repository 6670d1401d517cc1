"""Every package exposes one sorted ``__all__`` whose names exist and carry docstrings."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "codemode",
    "codemode.engine",
    "codemode.engine.schema",
    "codemode.engine.policies",
    "codemode.engine.scheduling",
    "codemode.engine.testing",
    "codemode.engine.json",
    "codemode.engine.code_mode",
    "codemode.cli",
    "codemode.integrations.mcp",
    "codemode.sdk_gen",
    "codemode.sandbox",
    "codemode.tools",
    "codemode.tools.interact",
    "codemode.tools.lsp",
    "codemode.tools.skills",
    "codemode.tools.terminal",
    "codemode.tools.web",
    "codemode.agent",
]

# The engine's documented public surface: embedders and the README build on these names,
# so removing or renaming one is an API break this test makes visible.
ENGINE_PUBLIC = """
ToolRuntime Scope define_tool ToolDefinition ToolOutput ToolSchema ToolExecutionInput
ToolExecution ToolRunContext ToolDispatchExecution ToolExecutionSuccess ToolExecutionFailure
ToolFailure ToolErrorInfo Allow Deny Ask Accept Block CodeDispatchLog AbortController
AbortSignal text CodeRuntime CodeRunRequest CodeRunResult CodeRunError Binding ErrorClass
BindingCallError SessionLog MemorySessionLog SqliteSessionLog HarnessError JsonSchemaError
ToolArgsError ToolOutputError ToolNotFoundError AbortError ToolTimeoutError CodeRunFailedError
""".split()


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for attr in exported:
        obj = getattr(module, attr)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name}.{attr} has no docstring"


def test_engine_exports_its_documented_public_names() -> None:
    import codemode.engine as engine

    missing = [n for n in ENGINE_PUBLIC if n not in engine.__all__]
    assert missing == []


def test_schema_module_exports_the_pinned_functions() -> None:
    from codemode.engine import schema

    for name in (
        "assert_supported_json_schema",
        "assert_object_json_schema",
        "validate_json_schema_value",
        "parameter_schema_spec_to_json_schema",
        "value_schema_spec_to_json_schema",
        "validate_args",
    ):
        assert callable(getattr(schema, name))


def test_the_facade_loads_lazily_and_re_exports_the_subpackages_objects() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, codemode\n"
        "assert 'anyio' not in sys.modules and 'codemode.engine' not in sys.modules\n"
        "codemode.ToolRuntime\n"
        "assert 'codemode.engine' in sys.modules and 'codemode.sandbox' not in sys.modules\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr

    import codemode
    import codemode.engine
    import codemode.engine.policies
    import codemode.sandbox
    import codemode.tools

    homes = [codemode.engine, codemode.engine.policies, codemode.sandbox, codemode.tools]
    for name in codemode.__all__:
        home = next(m for m in homes if name in m.__all__)
        assert getattr(codemode, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = codemode.nope  # type: ignore[attr-defined]
