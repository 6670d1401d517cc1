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
    "codemode.sdk_gen",
    "codemode.sandbox",
    "codemode.tools",
]

API_MD_ENGINE = """
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


def test_engine_exports_every_name_api_md_pins() -> None:
    import codemode.engine as engine

    missing = [n for n in API_MD_ENGINE if n not in engine.__all__]
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
