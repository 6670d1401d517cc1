"""Properties over generated tool sets: total, deterministic, always valid Python."""

from __future__ import annotations

import ast
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sdk_gen_strategies import any_schema, tool_sets, valid_schemas
from strategies import supported_schemas

from codemode.engine import JsonSchemaError
from codemode.engine.schema import assert_supported_json_schema
from codemode.sdk_gen import (
    SDK_LANGUAGES,
    SdkTool,
    json_schema_to_py,
    json_schema_to_ts,
    render_sdk,
)
from codemode.sdk_gen._py_names import _camel_case_any, camel_case

settings.register_profile("sdk_gen", deadline=None, max_examples=150)
SDK_GEN = settings.get_profile("sdk_gen")


@SDK_GEN
@given(any_schema)
def test_schema_conversion_is_total(schema: Any) -> None:
    assert isinstance(json_schema_to_ts(schema), str)
    assert isinstance(json_schema_to_py(schema), str)


@SDK_GEN
@given(valid_schemas)
def test_valid_schemas_never_degrade_at_the_root(schema: dict[str, Any]) -> None:
    assert json_schema_to_ts(schema) != "unknown"
    # The Python type of a valid schema is Any only for an annotation-only node.
    assert json_schema_to_py(schema) != "Any" or ("type" not in schema and "oneOf" not in schema)


@SDK_GEN
@given(tool_sets(), st.randoms(use_true_random=False), st.sampled_from(SDK_LANGUAGES))
def test_output_is_byte_identical_across_calls_and_orders(
    tools: list[SdkTool], random: Any, language: str
) -> None:
    expected = render_sdk(tools, language)
    shuffled = list(tools)
    random.shuffle(shuffled)
    assert render_sdk(shuffled, language) == expected
    assert render_sdk(tuple(tools), language) == expected


@SDK_GEN
@given(tool_sets())
def test_python_block_always_parses(tools: list[SdkTool]) -> None:
    section = render_sdk(tools, "python")
    block = section.split("\n```python\n", 1)[1].removesuffix("\n```")
    tree = ast.parse(block)
    methods = [node.name for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef)]
    # Every method is a real tool name, spelled exactly (no NFKC folding by the parser).
    assert set(methods) <= {tool.name for tool in tools}
    section.encode("utf-8")


@SDK_GEN
@given(tool_sets(valid_schemas))
def test_typescript_section_is_utf8_and_lists_every_tool(tools: list[SdkTool]) -> None:
    section = render_sdk(tools, "typescript")
    section.encode("utf-8")
    body = section.split("\n```ts\n", 1)[1]
    assert body.endswith("\n```")
    # One ToolOutputMap line per tool, each at one-level indentation.
    # The interface ends at its own closing line (shared type aliases may follow it).
    rest = body.split("interface ToolOutputMap {", 1)[1]
    output_map = "" if rest.startswith("}") else rest.split("\n}\n", 1)[0]
    top_level = [
        line
        for line in output_map.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    ]
    keys = [line for line in top_level if not line.startswith("  }")]
    assert len(keys) == len(tools)


def _engine_accepts(schema: Any) -> bool:
    try:
        assert_supported_json_schema(schema)
    except JsonSchemaError:
        return False
    return True


@SDK_GEN
@given(st.one_of(any_schema, supported_schemas()))
def test_sdk_gen_and_the_engine_agree_on_the_subset(schema: Any) -> None:
    """sdk_gen re-checks the subset (it may not import engine); the two must agree, so a
    schema the engine registers never renders as `unknown`, and vice versa."""
    accepted = _engine_accepts(schema)
    assert accepted == (json_schema_to_ts(schema) != "unknown")
    if accepted:
        # The engine hands over deep-frozen copies; they render the same.
        frozen = assert_supported_json_schema(schema)
        assert json_schema_to_ts(frozen) == json_schema_to_ts(schema)
        assert json_schema_to_py(frozen) == json_schema_to_py(schema)


@settings(max_examples=1000)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=12))
def test_camel_case_ascii_path_matches_the_general_rules(raw: str) -> None:
    # camel_case takes a shortcut for ASCII names (every name a real render meets); it
    # must name exactly what the Unicode-aware path names.
    assert camel_case(raw) == _camel_case_any(raw)
