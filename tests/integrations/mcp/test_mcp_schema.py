"""normalize_schema: every keyword rule, on hand-written and pydantic-generated schemas."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from codemode.engine import JsonSchemaError
from codemode.engine.schema import assert_supported_json_schema
from codemode.integrations.mcp import McpSchemaError, normalize_schema


def norm(schema: Any, **kw: Any) -> dict[str, Any]:
    out = normalize_schema(schema, tool="t", **kw)
    assert_supported_json_schema(out)  # whatever is accepted registers
    return out


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_local_refs_are_inlined_and_defs_dropped() -> None:
    schema = {
        "type": "object",
        "$defs": {"Tag": {"type": "string", "description": "a tag"}},
        "definitions": {"Id": {"type": "integer"}},
        "properties": {
            "tag": {"$ref": "#/$defs/Tag"},
            "id": {"$ref": "#/definitions/Id", "description": "which one"},
            "deep": {"$ref": "#/properties/tag"},
        },
    }
    out = norm(schema)
    assert out["properties"]["tag"] == {"type": "string", "description": "a tag"}
    # A sibling annotation of $ref refines the target.
    assert out["properties"]["id"] == {"type": "integer", "description": "which one"}
    assert out["properties"]["deep"] == {"type": "string", "description": "a tag"}
    assert "$defs" not in out and "definitions" not in out


def test_recursive_and_remote_refs_are_rejected_naming_tool_and_keyword() -> None:
    recursive = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"head": {"$ref": "#/$defs/Node"}},
    }
    with pytest.raises(McpSchemaError) as info:
        normalize_schema(recursive, tool="list-walk")
    assert info.value.tool == "list-walk" and info.value.keyword == "$ref"
    assert 'MCP tool "list-walk"' in str(info.value) and "recursive" in str(info.value)
    assert "schema.properties.head.properties.next" in str(info.value)
    with pytest.raises(McpSchemaError, match="not a local reference"):
        normalize_schema(obj(x={"$ref": "https://example.com/s.json"}), tool="t")
    with pytest.raises(McpSchemaError, match="points at nothing"):
        normalize_schema(obj(x={"$ref": "#/$defs/Missing"}), tool="t")


def test_unenforced_constraints_move_into_the_description() -> None:
    out = norm(
        obj(
            n={"type": "integer", "minimum": 1, "maximum": 9, "description": "count"},
            s={"type": "string", "pattern": "^a", "format": "date-time", "maxLength": 5},
            xs={"type": "array", "items": {"type": "number"}, "minItems": 1, "uniqueItems": True},
            o={"type": "object", "minProperties": 1},
            f={"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
        )
    )
    props = out["properties"]
    assert props["n"] == {"type": "integer", "description": "count (minimum: 1; maximum: 9)"}
    assert props["s"] == {
        "type": "string",
        "description": "(maxLength: 5; pattern: ^a; format: date-time)",
    }
    assert props["xs"]["description"] == "(minItems: 1; uniqueItems: true)"
    assert props["xs"]["items"] == {"type": "number"}
    assert props["o"]["description"] == "(minProperties: 1)"
    assert props["f"]["description"] == "(exclusiveMinimum: 0; multipleOf: 0.5)"


def test_bookkeeping_is_dropped_and_deprecated_noted() -> None:
    out = norm(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$id": "x",
            "$comment": "internal",
            "type": "object",
            "properties": {
                "old": {"type": "string", "deprecated": True, "readOnly": True},
                "blob": {"type": "string", "contentEncoding": "base64"},
            },
        }
    )
    assert set(out) == {"type", "properties"}
    assert out["properties"]["old"] == {"type": "string", "description": "(deprecated)"}
    assert out["properties"]["blob"] == {"type": "string"}


def test_type_arrays_become_oneof_with_keywords_split_by_type() -> None:
    out = norm(obj(v={"type": ["string", "null"], "maxLength": 3, "description": "maybe"}))
    assert out["properties"]["v"] == {
        "description": "maybe",
        "oneOf": [{"type": "string", "description": "(maxLength: 3)"}, {"type": "null"}],
    }
    out = norm(obj(v={"type": ["string", "integer"], "enum": ["a", 1]}))
    assert out["properties"]["v"]["oneOf"] == [
        {"type": "string", "enum": ["a"]},
        {"type": "integer", "enum": [1]},
    ]
    assert norm(obj(v={"type": ["boolean"]}))["properties"]["v"] == {"type": "boolean"}


def test_anyof_becomes_oneof_only_when_disjoint() -> None:
    out = norm(obj(v={"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}))
    assert out["properties"]["v"] == {
        "default": None,
        "oneOf": [{"type": "integer"}, {"type": "null"}],
    }
    # A one-branch anyOf merges into its node.
    assert norm(obj(v={"anyOf": [{"type": "string"}]}))["properties"]["v"] == {"type": "string"}
    with pytest.raises(McpSchemaError) as info:
        normalize_schema(obj(v={"anyOf": [{"type": "integer"}, {"type": "number"}]}), tool="t")
    assert info.value.keyword == "anyOf" and info.value.path == "schema.properties.v"
    with pytest.raises(McpSchemaError, match='"anyOf"'):
        normalize_schema(obj(v={"anyOf": [{}, {"type": "string"}]}), tool="t")


def test_required_alternatives_become_a_note() -> None:
    out = norm(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
            "anyOf": [{"required": ["id"]}, {"required": ["name", "owner"]}],
        }
    )
    assert out["description"] == "(requires id or name+owner)"
    assert "oneOf" not in out and "anyOf" not in out
    assert set(out["properties"]) == {"id", "name"}


def test_oneof_passes_and_nullable_adds_null() -> None:
    schema = obj(v={"oneOf": [{"type": "string"}, obj(a={"type": "integer"})]})
    assert norm(schema)["properties"]["v"]["oneOf"][1]["type"] == "object"
    out = norm(obj(v={"type": "string", "nullable": True}))
    assert out["properties"]["v"] == {"oneOf": [{"type": "string"}, {"type": "null"}]}


def test_allof_of_one_merges_and_of_several_is_rejected() -> None:
    out = norm(
        {
            "type": "object",
            "$defs": {"P": obj(x={"type": "string"})},
            "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}], "description": "the p"}},
        }
    )
    assert out["properties"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": "string"}},
        "description": "the p",
    }
    with pytest.raises(McpSchemaError) as info:
        normalize_schema(obj(p={"allOf": [obj(), obj()]}), tool="combo")
    assert info.value.keyword == "allOf" and "combo" in str(info.value)


@pytest.mark.parametrize(
    ("keyword", "node"),
    [
        ("not", {"not": {"type": "string"}}),
        ("if", {"if": {"type": "string"}, "then": {}}),
        ("patternProperties", {"type": "object", "patternProperties": {"^x": {}}}),
        ("prefixItems", {"type": "array", "prefixItems": [{"type": "string"}]}),
        ("propertyNames", {"type": "object", "propertyNames": {"pattern": "^a"}}),
        ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}),
        ("items", {"type": "array", "items": [{"type": "string"}]}),
        ("false", False),
    ],
)
def test_unrepresentable_keywords_are_rejected_by_name(keyword: str, node: Any) -> None:
    with pytest.raises(McpSchemaError) as info:
        normalize_schema(obj(field=node), tool="picky")
    assert info.value.keyword == keyword
    assert info.value.path == "schema.properties.field"
    assert f'keyword "{keyword}"' in str(info.value) and 'MCP tool "picky"' in str(info.value)
    assert isinstance(info.value, JsonSchemaError)  # one exception tree


def test_additional_properties_schema_becomes_a_note() -> None:
    out = norm({"type": "object", "additionalProperties": {"type": "integer"}})
    assert out == {"type": "object", "description": "(values: integer)"}
    assert norm({"type": "object", "additionalProperties": False})["additionalProperties"] is False
    assert norm({"type": "object", "additionalProperties": {}}) == {"type": "object"}


def test_required_but_undeclared_is_declared_as_any() -> None:
    out = norm({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]})
    assert out["properties"]["b"] == {}
    assert out["required"] == ["a", "b"]


def test_roots_true_empty_and_non_object() -> None:
    assert norm(None) == {"type": "object", "properties": {}}
    assert norm({}) == {"type": "object", "properties": {}}
    assert norm(obj(x=True))["properties"]["x"] == {}
    assert norm({"properties": {"x": {"type": "string"}}})["type"] == "object"
    with pytest.raises(McpSchemaError, match="must describe an object"):
        normalize_schema({"type": "string"}, tool="t")
    # Output schemas may be any type.
    assert normalize_schema({"type": "string"}, tool="t", root_object=False) == {"type": "string"}


class Address(BaseModel):
    street: str
    zip: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    name: str = Field(min_length=1, description="Full name")
    age: int | None = None
    kind: Literal["a", "b"] = "a"
    home: Address
    other: Address | None = None
    tags: list[str] = []
    scores: dict[str, float] = {}


@pytest.mark.anyio
async def test_pydantic_generated_schemas_from_a_real_server_normalise() -> None:
    server = MCPServer("p")

    @server.tool()
    def save(person: Person, note: str | None = None) -> Person:
        return person

    async with Client(server) as client:
        (tool,) = (await client.list_tools()).tools
    raw = tool.input_schema
    assert "$defs" in raw  # pydantic's shape: references into $defs
    out = norm(raw)
    person = out["properties"]["person"]
    assert person["type"] == "object"
    assert person["properties"]["name"]["description"] == "Full name (minLength: 1)"
    assert person["properties"]["age"]["oneOf"] == [{"type": "integer"}, {"type": "null"}]
    assert person["properties"]["kind"]["enum"] == ["a", "b"]
    assert person["properties"]["home"]["properties"]["zip"]["description"] == (
        r"(pattern: ^\d{5}$)"
    )
    assert person["properties"]["other"]["oneOf"][0]["properties"]["street"] == {
        "title": "Street",
        "type": "string",
    }
    assert person["properties"]["scores"]["description"] == "(values: number)"
    assert out["properties"]["note"]["oneOf"] == [{"type": "string"}, {"type": "null"}]
    output = normalize_schema(tool.output_schema, tool="save", root_object=False)
    assert output["properties"]["home"]["type"] == "object"
