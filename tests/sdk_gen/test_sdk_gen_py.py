"""Python flavour: type mapping, TypedDict naming and the rendered section."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from codemode.sdk_gen import (
    MAX_CLASS_NAME_BASE,
    MAX_LIST_NESTING,
    SdkTool,
    json_schema_to_py,
    render_sdk,
)


def fenced_py(section: str) -> str:
    """The body of the ```python block, checked to be valid Python."""
    head, _, rest = section.partition("\n\n```python\n")
    assert head.endswith("The available tools:")
    assert rest.endswith("\n```")
    body = rest[: -len("\n```")]
    ast.parse(body)
    return body


def render(*tools: SdkTool) -> str:
    return fenced_py(render_sdk(tools, "python"))


def closed(**properties: Any) -> dict[str, Any]:
    """A closed object whose properties are all required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def class_body(body: str, name: str) -> str:
    return body.split(f"class {name}(", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "number"}, "float"),
        ({"type": "integer"}, "int"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({"type": "null", "const": None}, "None"),
        ({}, "Any"),
        ({"description": "x"}, "Any"),
        ({"type": "string", "const": "a"}, 'Literal["a"]'),
        ({"enum": ["a", 1, None, False]}, 'Literal["a", 1, None, False]'),
        ({"const": None}, "Literal[None]"),
        (
            {"type": "string", "enum": ["a", 'q"', "b\\s", "\n", "\x00", "\ud800"]},
            'Literal["a", "q\\"", "b\\\\s", "\\n", "\\u0000", "\\ud800"]',
        ),
        ({"type": "string", "enum": ["a", "b"], "const": "b"}, 'Literal["b"]'),
        ({"type": "boolean", "enum": [True, False]}, "Literal[True, False]"),
        ({"type": "integer", "const": 2**70}, "Literal[1180591620717411303424]"),
        # An integral double keeps its exact digits (2**60 is not ...847000).
        ({"type": "number", "const": 2.0**60}, "Literal[1152921504606846976]"),
        ({"type": "number", "enum": [2.0, 2.5, 1.5e-7, -0.25]}, "Literal[2, 2.5, 1.5e-7, -0.25]"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "array"}, "list[Any]"),
        (
            {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "null"}]}},
            "list[str | None]",
        ),
        ({"oneOf": [{"type": "integer"}, {"type": "array", "items": {}}]}, "int | list[Any]"),
        # Context-free: no declarations to name a TypedDict with.
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "dict[str, Any]"),
        ({"type": "object", "additionalProperties": False}, "dict[str, Any]"),
        ({"type": ["string", "null"]}, "Any"),
        ({"type": "string", "pattern": "x"}, "Any"),
        (None, "Any"),
    ],
)
def test_type_mapping(schema: Any, expected: str) -> None:
    assert json_schema_to_py(schema) == expected


def test_worked_example() -> None:
    """The canonical example (a read tool with an options object), plus the documented `code` member of ToolCallError."""
    read_file = SdkTool(
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
        output_schema=closed(text={"type": "string"}, truncated={"type": "boolean"}),
    )
    my_tool = SdkTool(
        name="my-tool",
        description="Exotic name.",
        parameters={"type": "object", "properties": {}},
        output_schema={"type": "array", "items": {"type": "string"}},
    )
    assert render(read_file, my_tool) == (
        "from typing import Any, NotRequired, Protocol, TypedDict\n"
        "\n"
        "class ToolCallError(Exception):\n"
        "    toolName: str\n"
        "    code: str | None\n"
        "\n"
        "class ReadFileArgs(TypedDict):\n"
        "    # Path to read\n"
        "    path: str\n"
        "    limit: NotRequired[int]\n"
        "\n"
        "class ReadFileOutput(TypedDict):\n"
        "    text: str\n"
        "    truncated: bool\n"
        "\n"
        "class Tools(Protocol):\n"
        '    # tools["my-tool"](args: dict[str, Any]) -> list[str]\n'
        "    #   Exotic name.\n"
        "    async def read_file(self, args: ReadFileArgs) -> ReadFileOutput:\n"
        '        """Read a UTF-8 file."""\n'
        "\n"
        "tools: Tools"
    )


def test_instructions_wording() -> None:
    instructions = render_sdk([], "python").partition("\n\n```python\n")[0]
    for phrase in [
        "the body of an async Python function (top-level `await` and `return` both work)",
        "exactly two of the names declared below are bound: `tools` and `ToolCallError`",
        "never `FooArgs(field=1)`, which raises `NameError`",
        "subscript access for exotic, reserved, or underscore-leading names",
        "wrap in `try/except` to handle and continue. Its `code` is the failure's error code "
        '(e.g. `"INVALID_ARGS"`), or `None` when the failure has none.',
        "MAY overlap under `asyncio.gather`",
        "a top-level `return <value>`; the returned value must be lossless JSON",
    ]:
        assert phrase in instructions
    assert instructions.endswith("\n\nThe available tools:")


def test_empty_tool_set() -> None:
    assert render() == (
        "from typing import Protocol\n\n"
        "class ToolCallError(Exception):\n    toolName: str\n    code: str | None\n\n"
        "class Tools(Protocol):\n    pass\n\ntools: Tools"
    )


def test_nested_objects_oneof_branches_and_array_items_are_named() -> None:
    output = {
        "type": "object",
        "additionalProperties": False,
        "required": ["result", "rows"],
        "properties": {
            "result": {
                "oneOf": [
                    closed(kind={"type": "string", "const": "ok"}),
                    closed(
                        kind={"type": "string", "const": "err"},
                        error_info=closed(code={"type": "string"}),
                    ),
                ]
            },
            "rows": {"type": "array", "items": closed(n={"type": "integer"})},
        },
    }
    body = render(SdkTool("job_list", "", {"type": "object"}, output))
    classes = [line for line in body.splitlines() if line.startswith("class ")]
    # Nested classes precede the class that references them.
    assert classes == [
        "class ToolCallError(Exception):",
        "class JobListOutputResult1(TypedDict):",
        "class JobListOutputResult2ErrorInfo(TypedDict):",
        "class JobListOutputResult2(TypedDict):",
        "class JobListOutputRows(TypedDict):",
        "class JobListOutput(TypedDict):",
        "class Tools(Protocol):",
    ]
    assert "    result: JobListOutputResult1 | JobListOutputResult2\n" in body
    assert "    rows: list[JobListOutputRows]" in body
    assert "    error_info: JobListOutputResult2ErrorInfo\n" in body
    assert "async def job_list(self, args: dict[str, Any]) -> JobListOutput: ..." in body


def test_root_array_of_objects_takes_the_output_name() -> None:
    body = render(
        SdkTool("job_list", "", {}, {"type": "array", "items": closed(id={"type": "string"})})
    )
    assert "-> list[JobListOutput]: ..." in body
    assert "class JobListOutput(TypedDict):\n    id: str" in body


def test_closed_empty_object_is_an_empty_typeddict_and_open_empty_is_a_dict() -> None:
    body = render(
        SdkTool(
            "t",
            "",
            {"type": "object", "properties": {}},
            {"type": "object", "additionalProperties": False},
        )
    )
    assert "class TOutput(TypedDict):\n    pass" in body
    assert "async def t(self, args: dict[str, Any]) -> TOutput: ..." in body


@pytest.mark.parametrize(
    "field",
    ["my-field", "class", "None", "__debug__", "__token", "ﬁeld", "1x", "a b", ""],
)
def test_objects_with_inexpressible_field_names_degrade(field: str) -> None:
    body = render(SdkTool("t", "", {"type": "object", "properties": {"ok": {}, field: {}}}))
    assert "async def t(self, args: dict[str, Any])" in body
    assert "TArgs" not in body


@pytest.mark.parametrize(
    "field", ["match", "case", "type", "_", "_private", "__dunder__", "路径", "Any"]
)
def test_soft_keywords_dunders_and_unicode_are_fields(field: str) -> None:
    body = render(SdkTool("t", "", {"type": "object", "properties": {field: {"type": "string"}}}))
    assert f"class TArgs(TypedDict):\n    {field}: NotRequired[str]\n" in body


@pytest.mark.parametrize(
    ("tool", "args_class"),
    [
        ("read_file", "ReadFileArgs"),
        ("my-mcp.tool", "MyMcpToolArgs"),
        ("__proto__", "ProtoArgs"),
        ("1x", "Tool1xArgs"),
        ("---", "ToolArgs"),
        ("路径_tool", "路径ToolArgs"),
        ("ﬁle", "FIleArgs"),
        ("straße", "StraßeArgs"),
    ],
)
def test_class_names(tool: str, args_class: str) -> None:
    body = render(SdkTool(tool, "", {"type": "object", "properties": {"a": {"type": "string"}}}))
    assert f"class {args_class}(TypedDict):" in body


def test_class_name_collisions_get_numeric_suffixes() -> None:
    def schema(key: str) -> dict[str, Any]:  # distinct shapes: each gets its own class
        return {"type": "object", "properties": {key: {"type": "string"}}}

    body = render(
        SdkTool("a_b", "", schema("x")),
        SdkTool("aB", "", schema("y")),
        SdkTool("a-b", "", schema("z")),
    )
    # Sorted: "a-b" < "aB" < "a_b".
    assert "async def aB(self, args: ABArgs2)" in body
    assert "async def a_b(self, args: ABArgs3)" in body
    assert '# tools["a-b"](args: ABArgs)' in body


def test_class_name_base_is_capped() -> None:
    name = "x" * 300
    schema = closed(inner=closed(v={"type": "string"}))
    body = render(SdkTool(name, "", schema, schema))
    names = [line[6:].split("(")[0] for line in body.splitlines() if line.startswith("class ")]
    base = "X" + "x" * (MAX_CLASS_NAME_BASE - 1)
    # The cap cuts the Args/Output suffix, so the names collide and get suffixes, in
    # allocation order: a parent is named before its children, declared after them.
    assert names[1:-1] == [f"{base}2", base, f"{base}4", f"{base}3"]
    assert all(len(n) <= MAX_CLASS_NAME_BASE + 1 for n in names)


def test_list_nesting_is_capped() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_LIST_NESTING + 5):
        schema = {"type": "array", "items": schema}
    root = json_schema_to_py(schema)
    assert root == "list[" * MAX_LIST_NESTING + "Any" + "]" * MAX_LIST_NESTING
    body = render(SdkTool("t", "", {"type": "object", "properties": {"deep": schema}}, schema))
    # A field starts at depth 1 to leave room for `NotRequired[`.
    field = "list[" * (MAX_LIST_NESTING - 1) + "Any" + "]" * (MAX_LIST_NESTING - 1)
    assert f"    deep: NotRequired[{field}]\n" in body
    assert f"-> {root}: ..." in body


def test_exactly_max_nesting_is_kept() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_LIST_NESTING):
        schema = {"type": "array", "items": schema}
    assert json_schema_to_py(schema) == "list[" * MAX_LIST_NESTING + "str" + "]" * MAX_LIST_NESTING


def test_too_deep_to_render_degrades_without_leftover_classes() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for index in range(3000):
        schema = closed(**{f"f{index}": schema})
    body = render(SdkTool("t", "", schema, {"type": "string"}))
    assert "async def t(self, args: Any) -> str: ..." in body
    assert "TypedDict" not in body
    assert body.startswith("from typing import Any, Protocol\n")


@pytest.mark.parametrize(
    ("name", "is_method"),
    [
        ("read", True),
        ("match", True),
        ("路径", True),
        ("class", False),
        ("None", False),
        ("__debug__", False),
        ("_private", False),
        ("__proto__", False),
        ("my-tool", False),
        ("ﬁle", False),
    ],
)
def test_method_or_subscript_comment(name: str, is_method: bool) -> None:
    body = render(SdkTool(name, "Doc.", {"type": "object"}, {"type": "string"}))
    assert (f"    async def {name}(self, args: dict[str, Any]) -> str:\n" in body) is is_method
    comment = f'    # tools["{name}"](args: dict[str, Any]) -> str\n    #   Doc.'
    assert (comment in body) is not is_method


def test_only_comments_still_need_pass() -> None:
    body = render(SdkTool("class", "", {}, {}), SdkTool("_x", "", {}, {}))
    assert body.endswith(
        'class Tools(Protocol):\n    pass\n    # tools["_x"](args: Any) -> Any\n'
        '    # tools["class"](args: Any) -> Any\n\ntools: Tools'
    )


def test_method_without_description_is_a_one_liner() -> None:
    body = render(SdkTool("t", "   ", {}, {}))
    assert "    async def t(self, args: Any) -> Any: ...\n" in body
    assert '"""' not in body


def test_imports_list_exactly_the_used_symbols_in_order() -> None:
    assert render().startswith("from typing import Protocol\n")
    literal = SdkTool("t", "", {"type": "string", "enum": ["a"]}, {"type": "null"})
    assert render(literal).startswith("from typing import Literal, Protocol\n")
    required = SdkTool("t", "", closed(a={"type": "string"}), {"type": "null"})
    assert render(required).startswith("from typing import Protocol, TypedDict\n")


def test_description_escaping_in_docstrings_and_comments() -> None:
    description = 'Say "hi" \\ there\x00\x1b\x7f\x85 \ud800 end"'
    tool = SdkTool(
        "t",
        description,
        {"type": "object", "properties": {"a": {"type": "string", "description": description}}},
    )
    body = render(tool, SdkTool("my-tool", description, {}, {}))
    visible = 'Say "hi" \\ there\\x00\\x1b\\x7f\\x85 \\ud800 end"'
    assert f"    # {visible}\n    a: NotRequired[str]" in body
    assert f"    #   {visible}\n" in body
    docstring = visible.replace("\\", "\\\\").replace('"', '\\"')
    assert f'        """{docstring}"""' in body
    # The docstring decodes back to the visible one-line text.
    method = next(
        node
        for node in ast.walk(ast.parse(body))
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "t"
    )
    assert ast.get_docstring(method, clean=False) == visible


def test_description_ending_in_backslash_keeps_the_docstring_closed() -> None:
    body = render(SdkTool("t", "ends with \\", {}, {}), SdkTool("u", 'ends with "', {}, {}))
    assert '        """ends with \\\\"""' in body
    assert '        """ends with \\""""' in body


def test_exotic_tool_name_comment_uses_json_quoting() -> None:
    body = render(SdkTool('we"ird\nname\ud800', "", {}, {}))
    assert '    # tools["we\\"ird\\nname\\ud800"](args: Any) -> Any' in body


def test_a_shape_used_twice_is_declared_once() -> None:
    job = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
    }
    listed = {"type": "array", "items": job}
    wrapped = {"type": "object", "additionalProperties": False, "properties": {"job": job}}
    body = render(
        SdkTool("job_kill", "", output_schema=wrapped),
        SdkTool("job_list", "", output_schema=listed),
    )
    assert body.count("    id: str\n") == 1
    assert "class JobKillOutputJob(TypedDict):" in body
    assert "async def job_list(self, args: dict[str, Any]) -> list[JobKillOutputJob]: ..." in body


def test_argument_classes_are_open_by_the_stated_rule_and_closed_ones_say_so() -> None:
    closed_args = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "string"}},
    }
    open_output = {"type": "object", "properties": {"b": {"type": "string"}}}
    section = render_sdk([SdkTool("t", "", closed_args, open_output)], "python")
    assert "- Argument objects take undeclared keys unless marked `# closed`." in section
    assert "class TArgs(TypedDict):\n    a: NotRequired[str]\n    # closed\n" in section
    # Outputs keep their own note: the rule speaks of arguments only.
    assert (
        "    b: NotRequired[str]\n    # Additional keys beyond those declared are allowed."
        in section
    )
