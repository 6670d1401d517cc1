"""TypeScript flavour: `json_schema_to_ts` rules and the rendered section."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.sdk_gen import SdkTool, json_schema_to_ts, render_sdk

OPEN = " & Record<string, JsonValue>"


def fenced_ts(section: str) -> str:
    """The body of the ```ts block."""
    head, _, rest = section.partition("\n\n```ts\n")
    assert head.endswith("The available tools:")
    assert rest.endswith("\n```")
    return rest[: -len("\n```")]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "string"),
        ({"type": "boolean"}, "boolean"),
        ({"type": "null"}, "null"),
        ({"type": "number"}, "number"),
        ({"type": "integer"}, "number"),
        ({}, "JsonValue"),
        ({"description": "anything", "title": "t", "default": [1, {"a": None}]}, "JsonValue"),
        ({"type": "string", "const": "a"}, '"a"'),
        ({"type": "string", "enum": ["a", "b"]}, '"a" | "b"'),
        # const wins over enum
        ({"type": "string", "enum": ["a", "b"], "const": "b"}, '"b"'),
        ({"type": "boolean", "const": False}, "false"),
        ({"type": "boolean", "enum": [True, False]}, "true | false"),
        ({"type": "null", "const": None}, "null"),
        # Untyped enum/const: accepted by our engine's subset, so rendered.
        ({"enum": ["a", 1, None, True]}, '"a" | 1 | null | true'),
        ({"const": 2.5, "description": "d"}, "2.5"),
        ({"enum": [1, True], "const": 1.0}, "1"),
        ({"type": "integer", "const": 2.0}, "2"),
        ({"type": "integer", "const": 2**70}, "1180591620717411303424"),
        (
            {"type": "number", "enum": [1, 2.5, -0.5, 1e21, 1.5e-7, 1e20]},
            "1 | 2.5 | -0.5 | 1e+21 | 1.5e-7 | 100000000000000000000",
        ),
        ({"type": "number", "const": 2.0**60}, "1152921504606847000"),
        ({"oneOf": [{"type": "string"}, {"type": "number"}]}, "string | number"),
        ({"type": "array", "items": {"type": "string"}}, "string[]"),
        ({"type": "array"}, "JsonValue[]"),
        ({"type": "array", "items": {}}, "JsonValue[]"),
        ({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}, "number[][]"),
        (
            {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "null"}]}},
            "(string | null)[]",
        ),
        ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}, '("a" | "b")[]'),
        # The parenthesisation test is textual (a `|` anywhere parenthesises).
        ({"type": "array", "items": {"type": "string", "const": "a|b"}}, '("a|b")[]'),
        ({"type": "array", "items": {"type": "string", "const": "a&b"}}, '("a&b")[]'),
        ({"type": "object"}, "Record<string, JsonValue>"),
        (
            {"type": "object", "properties": {}, "additionalProperties": True},
            "Record<string, JsonValue>",
        ),
        (
            {"type": "object", "properties": {}, "additionalProperties": False},
            "Record<string, never>",
        ),
        ({"type": "object", "additionalProperties": False}, "Record<string, never>"),
    ],
)
def test_type_mapping(schema: dict[str, Any], expected: str) -> None:
    assert json_schema_to_ts(schema) == expected


def test_special_strings_are_json_stringified() -> None:
    schema = {
        "type": "string",
        "enum": ['q"d', "back\\slash", "nl\n", "\x01", "\u2028", "\ud800", "é"],
    }
    assert json_schema_to_ts(schema) == (
        '"q\\"d" | "back\\\\slash" | "nl\\n" | "\\u0001" | "\u2028" | "\\ud800" | "é"'
    )


def test_object_layout_indentation_and_docs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "  Path\n\tto   read  "},
            "opts": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "deep": {
                        "type": "object",
                        "properties": {"x": {"type": "integer", "description": "an x"}},
                        "required": ["x"],
                    },
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["tags"],
            },
        },
        "required": ["path"],
    }
    assert json_schema_to_ts(schema) == (
        "{\n"
        "  /** Path to read */\n"
        "  path: string;\n"
        "  opts?: {\n"
        "    deep?: {\n"
        "      /** an x */\n"
        "      x: number;\n"
        "    }" + OPEN + ";\n"
        "    tags: string[];\n"
        "  };\n"
        "}" + OPEN
    )


def test_indent_argument_shifts_members() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
    }
    assert json_schema_to_ts(schema, 2) == "{\n      a?: string;\n    }"


def test_array_of_open_objects_is_parenthesised() -> None:
    schema = {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "null"}}}}
    assert json_schema_to_ts(schema) == "({\n  a?: null;\n}" + OPEN + ")[]"


def test_array_of_closed_objects_is_not_parenthesised() -> None:
    item = {"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": False}
    assert json_schema_to_ts({"type": "array", "items": item}) == "{\n  a?: null;\n}[]"


@pytest.mark.parametrize(
    ("key", "rendered"),
    [
        ("plain", "plain"),
        ("$dollar_1", "$dollar_1"),
        ("__proto__", "__proto__"),
        ("my-mcp.tool", '"my-mcp.tool"'),
        ("a b", '"a b"'),
        ("1x", '"1x"'),
        ("é", '"é"'),
        ("", '""'),
        ('q"', '"q\\""'),
    ],
)
def test_key_quoting(key: str, rendered: str) -> None:
    schema = {
        "type": "object",
        "properties": {key: {"type": "string"}},
        "additionalProperties": False,
    }
    assert json_schema_to_ts(schema) == f"{{\n  {rendered}?: string;\n}}"


def test_descriptions_collapse_and_escape_comment_closers() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "a": {"type": "string", "description": "ends */ here /* and\u2028next\u3000x\ufeff"},
            "b": {"type": "string", "description": " \n\t "},
            "c": {"type": "string", "description": ""},
            "d": {"type": "string", "description": "keeps\x1fcontrols\x85raw"},
        },
    }
    assert json_schema_to_ts(schema) == (
        "{\n"
        "  /** ends *\\/ here /* and next x */\n"
        "  a?: string;\n"
        "  b?: string;\n"
        "  c?: string;\n"
        "  /** keeps\x1fcontrols\x85raw */\n"
        "  d?: string;\n"
        "}"
    )


def _cyclic() -> dict[str, Any]:
    node: dict[str, Any] = {"type": "array"}
    node["items"] = node
    return node


@pytest.mark.parametrize(
    "schema",
    [
        None,
        [],
        "string",
        3,
        {"type": ["string", "null"]},
        {"type": "strin"},
        {"type": "number", "minimum": 1},
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "properties": {"a": "string"}},
        {"type": "object", "properties": []},
        {"type": "object", "required": ["missing"]},
        {"type": "object", "required": "a", "properties": {"a": {}}},
        {"type": "object", "additionalProperties": {}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "string", "items": {}},
        {"type": "array", "properties": {}},
        {"type": "array", "items": {"type": "bogus"}},
        {"type": "object", "enum": [{}]},
        {"items": {}},
        {"enum": []},
        {"enum": [{}]},
        {"const": [1]},
        {"enum": ["a"], "const": "b"},
        {"enum": [1], "const": True},
        {"type": "string", "enum": []},
        {"type": "string", "enum": "a"},
        {"type": "string", "enum": [1]},
        {"type": "number", "enum": [True]},
        {"type": "number", "const": float("nan")},
        {"type": "number", "const": float("inf")},
        {"type": "number", "const": -0.0},
        {"type": "integer", "const": 1.5},
        {"type": "string", "const": "c", "enum": ["a", "b"]},
        {"oneOf": [{"type": "string"}]},
        {"oneOf": {"type": "string"}},
        {"oneOf": [{"type": "string"}, {"type": "number"}], "type": "string"},
        {"oneOf": [{"type": "string"}, {"type": "number"}], "items": {}},
        {"oneOf": [{"type": "string"}, 5]},
        {"description": 3},
        {"title": None},
        {"default": float("nan")},
        {"examples": [object()]},
        {1: "x"},
        _cyclic(),
    ],
)
def test_unsupported_or_malformed_schemas_are_unknown(schema: Any) -> None:
    assert json_schema_to_ts(schema) == "unknown"


def test_one_bad_node_degrades_the_whole_tree() -> None:
    schema = {
        "type": "object",
        "properties": {"good": {"type": "string"}, "bad": {"format": "uri"}},
    }
    assert json_schema_to_ts(schema) == "unknown"


def test_shared_subschemas_are_not_cycles() -> None:
    shared = {"type": "string"}
    schema = {
        "type": "object",
        "properties": {"a": shared, "b": shared},
        "additionalProperties": False,
    }
    assert json_schema_to_ts(schema) == "{\n  a?: string;\n  b?: string;\n}"


def test_too_deep_to_render_is_unknown_not_an_error() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    assert json_schema_to_ts(schema) == "unknown"


def test_worked_example() -> None:
    """The canonical example (a read tool with an options object), plus the documented `code` member of ToolCallError."""
    tools = [
        SdkTool(
            name="read_file",
            description="Read a UTF-8 file.",
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path to read"},
                    "limit": {"type": "integer"},
                },
                "required": ["path"],
            },
            output_schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {"text": {"type": "string"}, "truncated": {"type": "boolean"}},
                "required": ["text", "truncated"],
            },
        ),
        SdkTool(
            name="my-tool",
            description="Exotic name.",
            parameters={"type": "object", "properties": {}},
            output_schema={"type": "array", "items": {"type": "string"}},
        ),
    ]
    assert fenced_ts(render_sdk(tools, "typescript")) == (
        "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }\n"
        "\n"
        "interface ToolArgsMap {\n"
        "  /** Exotic name. */\n"
        '  "my-tool": Record<string, JsonValue>;\n'
        "  /** Read a UTF-8 file. */\n"
        "  read_file: {\n"
        "    /** Path to read */\n"
        "    path: string;\n"
        "    limit?: number;\n"
        "  };\n"
        "}\n"
        "\n"
        "interface ToolOutputMap {\n"
        '  "my-tool": string[];\n'
        "  read_file: {\n"
        "    text: string;\n"
        "    truncated: boolean;\n"
        "  };\n"
        "}\n"
        "\n"
        "type ToolName = keyof ToolOutputMap\n"
        "\n"
        "declare class ToolCallError extends Error {\n"
        '  readonly name: "ToolCallError";\n'
        "  readonly toolName: ToolName;\n"
        "  readonly code: string | null;\n"
        "}\n"
        "\n"
        "declare const tools: {\n"
        "  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;\n"
        "}"
    )


def test_instructions_are_the_reference_text_plus_the_code_sentence() -> None:
    section = render_sdk([], "typescript")
    instructions = section.partition("\n\n```ts\n")[0]
    assert instructions.startswith("## Writing code for run_code\n\n`run_code` takes two required")
    assert (
        "- A FAILED tool call rejects with `ToolCallError`, whose `toolName` identifies the failed "
        "tool and whose `message` is human-readable — `try/catch` it to handle and continue. "
        'Its `code` is the failure\'s error code (e.g. `"INVALID_ARGS"`), or `null` when the '
        "failure has none.\n"
    ) in instructions
    assert "MAY overlap under `Promise.all`" in instructions
    assert instructions.endswith("extract just what you need.\n\nThe available tools:")


def test_empty_tool_set() -> None:
    body = fenced_ts(render_sdk([], "typescript"))
    assert "interface ToolArgsMap {}\n\ninterface ToolOutputMap {}\n\ntype ToolName" in body


def test_tool_description_documents_the_args_entry_only() -> None:
    tool = SdkTool(
        "t",
        "Tool doc.",
        {"type": "object", "properties": {"a": {"type": "string", "description": "arg doc"}}},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {"b": {"type": "string", "description": "out doc"}},
        },
    )
    body = fenced_ts(render_sdk([tool], "typescript"))
    assert body.count("/** Tool doc. */") == 1
    assert "interface ToolArgsMap {\n  /** Tool doc. */\n  t: {\n    /** arg doc */" in body
    assert "interface ToolOutputMap {\n  t: {\n    /** out doc */\n    b?: string;\n  };\n}" in body


def test_tools_sort_by_utf16_code_units() -> None:
    # Code-point order would put U+FFFF before the astral emoji; UTF-16 puts it after.
    names = ["b", "\uffff", "B", "😀", "_x", "a", "é"]
    body = fenced_ts(render_sdk([SdkTool(name) for name in names], "typescript"))
    args_map = body.split("interface ToolArgsMap {\n", 1)[1].split("\n}", 1)[0]
    keys = [line.split(":", 1)[0].strip() for line in args_map.splitlines()]
    assert keys == ["B", "_x", "a", "b", '"é"', '"😀"', '"\uffff"']


def test_missing_or_malformed_tool_schemas_render_unknown() -> None:
    body = fenced_ts(render_sdk([{"name": "x"}], "typescript"))
    assert "interface ToolArgsMap {\n  x: unknown;\n}" in body
    assert "interface ToolOutputMap {\n  x: unknown;\n}" in body


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        (0.1, "0.1"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (1.2345678901234568e20, "123456789012345680000"),
        (-1.5e300, "-1.5e+300"),
        (5e-324, "5e-324"),
        (123.456, "123.456"),
        (0.0, "0"),
    ],
)
def test_float_literals_use_javascript_number_formatting(value: float, rendered: str) -> None:
    assert json_schema_to_ts({"type": "number", "const": value}) == rendered


def test_lone_surrogates_in_descriptions_are_made_visible() -> None:
    """Deliberate choice: passed through raw, they would make text no UTF-8
    encoder accepts; we show them as `\\uNNNN` so the section always encodes."""
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "string", "description": "x\ud800y"}},
    }
    assert json_schema_to_ts(schema) == "{\n  /** x\\ud800y */\n  a?: string;\n}"
    render_sdk([SdkTool("t", "bad \udfff", schema)], "typescript").encode("utf-8")


def test_integers_too_long_to_print_are_unsupported() -> None:
    assert json_schema_to_ts({"type": "integer", "const": 10**4000}) == "1" + "0" * 4000
    assert json_schema_to_ts({"type": "integer", "const": 10**5000}) == "unknown"
    assert json_schema_to_ts({"default": 10**5000}) == "unknown"


def test_a_shape_used_twice_is_declared_once_as_a_type_alias() -> None:
    job = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
    }
    tools = [
        SdkTool(
            "job_kill",
            "",
            output_schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {"job": job},
            },
        ),
        SdkTool("job_list", "", output_schema={"type": "array", "items": job}),
    ]
    body = fenced_ts(render_sdk(tools, "typescript"))
    assert "  job_list: Job[];\n" in body
    assert "    job?: Job;\n" in body
    assert "\n\ntype Job = {\n  id: string;\n}\n\n" in body
    assert body.count("id: string;") == 1


def test_argument_objects_are_open_by_the_stated_rule_and_closed_ones_say_so() -> None:
    closed_args = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "string"}},
    }
    open_output = {"type": "object", "properties": {"b": {"type": "string"}}}
    section = render_sdk([SdkTool("t", "", closed_args, open_output)], "typescript")
    assert "- Argument objects take undeclared keys unless marked `// closed`." in section
    assert "  t: { // closed\n    a?: string;\n  };\n" in section
    # Outputs keep the exact type: the rule speaks of arguments only.
    assert "  t: {\n    b?: string;\n  } & Record<string, JsonValue>;\n" in section
    assert section.count("Record<string, JsonValue>") == 1
