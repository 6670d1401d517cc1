"""The public surface of sdk_gen: inputs it accepts, errors it raises, what it imports."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import codemode.sdk_gen as sdk_gen
from codemode.sdk_gen import SDK_LANGUAGES, SdkTool, render_sdk

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}


def test_public_names_are_sorted_documented_and_reexported() -> None:
    assert sdk_gen.__all__ == sorted(sdk_gen.__all__)
    for name in sdk_gen.__all__:
        value = getattr(sdk_gen, name)
        if callable(value):
            assert value.__doc__, name
            assert value.__module__.startswith("codemode.sdk_gen._"), name


def test_package_is_pure_stdlib() -> None:
    """No import of engine (or any third-party package): sdk_gen sits below engine."""
    package = Path(sdk_gen.__file__).parent
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for module in modules:
                    assert module.split(".")[0] in sys.stdlib_module_names, (source.name, module)


def test_languages() -> None:
    assert SDK_LANGUAGES == ("typescript", "python")


@pytest.mark.parametrize("language", ["ruby", "TypeScript", "ts", "", None])
def test_unknown_language_is_a_value_error(language: Any) -> None:
    with pytest.raises(ValueError) as raised:
        render_sdk([], language)
    assert str(raised.value) == (
        f'no SDK renderer registered for runtime language "{language}" '
        '(known: "typescript", "python")'
    )


def test_unknown_language_message_exact() -> None:
    with pytest.raises(
        ValueError,
        match='^no SDK renderer registered for runtime language "ruby" '
        r'\(known: "typescript", "python"\)$',
    ):
        render_sdk([SdkTool("x")], "ruby")


def test_sdk_tool_is_a_frozen_dataclass_with_defaults() -> None:
    tool = SdkTool("x")
    assert (tool.description, tool.parameters, tool.output_schema) == (
        "",
        {"type": "object", "properties": {}},
        {},
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.name = "y"  # type: ignore[misc]


@pytest.mark.parametrize("language", SDK_LANGUAGES)
def test_duck_typed_objects_and_mappings_render_like_sdk_tools(language: str) -> None:
    as_tool = SdkTool("t", "Doc.", SCHEMA, {"type": "string"})
    as_object = SimpleNamespace(
        name="t", description="Doc.", parameters=SCHEMA, output_schema={"type": "string"}
    )
    as_mapping = {
        "name": "t",
        "description": "Doc.",
        "parameters": SCHEMA,
        "output_schema": {"type": "string"},
    }
    expected = render_sdk([as_tool], language)
    assert render_sdk([as_object], language) == expected
    assert render_sdk([as_mapping], language) == expected
    assert render_sdk(iter([as_mapping]), language) == expected


@pytest.mark.parametrize("language", SDK_LANGUAGES)
def test_missing_or_non_string_description_is_undocumented(language: str) -> None:
    expected = render_sdk([SdkTool("t", "", SCHEMA, {})], language)
    assert (
        render_sdk([{"name": "t", "parameters": SCHEMA, "output_schema": {}}], language) == expected
    )
    assert render_sdk([SdkTool("t", None, SCHEMA, {})], language) == expected  # type: ignore[arg-type]
    assert render_sdk([SdkTool("t", 42, SCHEMA, {})], language) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("language", SDK_LANGUAGES)
def test_duplicate_names_are_rejected(language: str) -> None:
    with pytest.raises(ValueError, match=r'^duplicate tool name "a" in the SDK tool set$'):
        render_sdk([SdkTool("a"), SdkTool("b"), SdkTool("a")], language)


@pytest.mark.parametrize("tool", [SimpleNamespace(description="x"), {"name": 3}, object()])
def test_a_tool_needs_a_string_name(tool: object) -> None:
    with pytest.raises(TypeError, match=r"^SDK tool name must be a string"):
        render_sdk([tool], "python")


@pytest.mark.parametrize("language", SDK_LANGUAGES)
def test_schemas_are_not_mutated(language: str) -> None:
    parameters = {"type": "object", "properties": {"a": {"type": "string", "description": " x\n"}}}
    snapshot = repr(parameters)
    render_sdk([SdkTool("t", "d", parameters, parameters)], language)
    assert repr(parameters) == snapshot


@pytest.mark.parametrize("language", SDK_LANGUAGES)
def test_frozen_mapping_types_are_accepted(language: str) -> None:
    from types import MappingProxyType

    frozen = MappingProxyType(
        {
            "type": "object",
            "properties": MappingProxyType({"a": MappingProxyType({"type": "string"})}),
            "required": ("a",),
        }
    )
    plain = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert render_sdk([SdkTool("t", "", frozen, frozen)], language) == render_sdk(
        [SdkTool("t", "", plain, plain)], language
    )
