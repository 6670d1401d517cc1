"""Golden files: a representative catalog rendered in both languages, byte for byte.

Regenerate after an intended change with::

    CODEMODE_UPDATE_GOLDEN=1 python -m pytest tests/sdk_gen -p no:cacheprovider

and review the diff. Each file holds the rendered section plus one trailing newline.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest

from codemode.sdk_gen import SdkTool, render_sdk

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("CODEMODE_UPDATE_GOLDEN") == "1"
EXTENSIONS = {"typescript": "ts", "python": "py"}


def obj(
    required: tuple[str, ...] = (),
    closed: bool | None = None,
    doc: str | None = None,
    fields: dict[str, Any] | None = None,
    **properties: Any,
) -> dict[str, Any]:
    """An object schema; ``closed=None`` omits additionalProperties (open, like a root).

    ``fields`` carries property names that are not valid keyword arguments.
    """
    node: dict[str, Any] = {"type": "object", "properties": {**(fields or {}), **properties}}
    if required:
        node["required"] = list(required)
    if closed is not None:
        node["additionalProperties"] = not closed
    if doc is not None:
        node["description"] = doc
    return node


STRING = {"type": "string"}
INTEGER = {"type": "integer"}

CATALOG: list[SdkTool] = [
    SdkTool(
        name="read_file",
        description="Read a UTF-8 file.\n\n  Returns   line-numbered\ttext.",
        parameters=obj(
            ("path",),
            path={"type": "string", "description": "Path to read"},
            offset={"type": "integer", "description": "1-based first line.", "default": 1},
            limit=INTEGER,
        ),
        output_schema=obj(
            ("path", "lines", "truncated"),
            closed=True,
            path=STRING,
            lines={
                "type": "array",
                "items": obj(("number", "text"), closed=True, number=INTEGER, text=STRING),
            },
            truncated={"type": "boolean"},
            spill={"oneOf": [STRING, {"type": "null"}], "description": "Where the rest went."},
        ),
    ),
    SdkTool(
        name="my-tool",
        description="Exotic name.",
        parameters={"type": "object", "properties": {}},
        output_schema={"type": "array", "items": STRING},
    ),
    SdkTool(
        name="__proto__",
        description='Enum members with specials: quotes ", backslashes \\ and pipes |.',
        parameters=obj(
            ("mode",),
            mode={"type": "string", "enum": ['say "hi"', "back\\slash", "a|b", "tab\there", "é"]},
            flag={"type": "boolean", "const": True},
            level={"type": "number", "enum": [0.5, 1, 2.0, 1e21]},
            big={"type": "integer", "const": 9007199254740993},
        ),
        output_schema=obj(closed=True),
    ),
    SdkTool(
        name="class",
        description="A reserved word as a tool name; the result is a discriminated union.",
        parameters=obj(
            ("target",),
            closed=True,
            target={
                "oneOf": [
                    obj(
                        ("kind", "path"),
                        closed=True,
                        kind={"type": "string", "const": "file"},
                        path=STRING,
                    ),
                    obj(
                        ("kind", "url"),
                        closed=True,
                        kind={"type": "string", "const": "url"},
                        url=STRING,
                    ),
                ]
            },
        ),
        output_schema={
            "oneOf": [
                obj(("ok",), closed=True, ok={"type": "boolean", "const": True}),
                obj(
                    ("ok", "error"),
                    closed=True,
                    ok={"type": "boolean", "const": False},
                    error=obj(
                        ("message",),
                        closed=True,
                        message=STRING,
                        code={"oneOf": [STRING, {"type": "null"}]},
                    ),
                ),
            ]
        },
    ),
    SdkTool(
        name="_private",
        description="Underscore-leading: subscript access only.",
        parameters=obj(("my-field",), fields={"my-field": STRING, "ok": INTEGER}),
        output_schema={
            "type": "array",
            "items": {
                "oneOf": [
                    STRING,
                    INTEGER,
                    {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
                ]
            },
        },
    ),
    SdkTool(
        name="search",
        description='Find */ text; "quoted" \x07bell\x1funit\x85nel and a trailing backslash \\',
        parameters=obj(
            ("query",),
            query={"type": "string", "description": "Regex */ to match.\r\nSecond line."},
            globs={"type": "array", "items": STRING, "description": "Say \"*.py\" or '*.ts'."},
            matrix={"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            anything={},
            any_list={"type": "array"},
        ),
        output_schema=obj(
            ("matches",),
            closed=True,
            matches={
                "type": "array",
                "items": obj(
                    ("path", "line"),
                    path=STRING,
                    line=INTEGER,
                    context=obj(closed=False, before=STRING, after=STRING),
                ),
            },
            extra={"type": "object", "additionalProperties": True},
            nothing={"type": "object", "additionalProperties": False},
            none={"type": "null"},
        ),
    ),
    SdkTool(
        name="match",
        description="Soft keywords and dunder fields stay TypedDict fields.",
        parameters=obj(
            ("match",),
            match=STRING,
            type={"type": "string", "enum": ["a", "b"]},
            _=INTEGER,
            __dunder__={"type": "boolean"},
            # Untyped enum: accepted by our engine's subset.
            case={"enum": ["a", 1, None], "description": "Any scalar of these."},
        ),
        output_schema={},
    ),
    SdkTool(
        name="bad_schema",
        description="Parameters outside the supported subset degrade as a whole.",
        parameters=obj(("n",), n={"type": ["integer", "null"]}, fine=STRING),
        output_schema={
            "type": "string",
            "title": "Plain text",
            "default": "",
            "examples": ["a", {"nested": [1, 2.5, None]}],
        },
    ),
    SdkTool(
        name="路径_tool",
        description="A Unicode identifier: a method in Python, quoted in TypeScript.",
        parameters=obj(("路径",), 路径=STRING),
        output_schema=obj(("路径",), closed=True, 路径=STRING),
    ),
    SdkTool(
        name="ﬁle",
        description="NFKC-unstable names: not a method, and not a TypedDict field.",
        # Spelled through a dict: as a keyword argument Python would NFKC it to "field".
        parameters=obj(fields={"\ufb01eld": STRING}),
        output_schema={"type": "boolean"},
    ),
    SdkTool(name="a_b", description="", parameters=obj(x=STRING), output_schema={"type": "null"}),
    SdkTool(name="aB", description="   ", parameters=obj(x=STRING), output_schema={"type": "null"}),
    SdkTool(
        name="deep.nested",
        description="Three levels of objects, open and closed.",
        parameters=obj(
            ("outer",),
            outer=obj(
                ("inner",),
                closed=True,
                doc="Outer level.",
                inner=obj(
                    ("leaf",),
                    doc="Inner level.",
                    leaf={"type": "string", "description": "The leaf."},
                    items={"type": "array", "items": obj(("id",), closed=True, id=INTEGER)},
                ),
            ),
        ),
        output_schema={
            "type": "array",
            "items": {"type": "array", "items": obj(("id",), closed=True, id=STRING)},
        },
    ),
]
CASES = {"catalog": CATALOG, "empty": []}
# What a runtime and a host pass in (sandbox/_sdk_facts.py, cli/_compose.py), fixed here
# so the block's wording is golden too.
FACTS: dict[str, Any] = {
    "syntax": "TypeScript: types are erased.",
    "modules": ["asyncio", "json", "re"],
    "asyncio": ["gather", "sleep", "Semaphore"],
    "calls": "A tool call starts when made.",
    "limits": {
        "max_compute_ms": 10_000,
        "max_wall_ms": 60_000,
        "max_memory_bytes": 512 * 2**20,
        "max_output_bytes": 16 * 2**20,
        "max_sub_calls": 10_000,
    },
    "workspace": "/repo",
    "read_before_write": ["edit", "write"],
}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    expected = (text + "\n").encode("utf-8")
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(expected)
        return
    assert path.exists(), f"{path} is missing; run with CODEMODE_UPDATE_GOLDEN=1"
    assert path.read_bytes() == expected, (
        f"{path} is stale; run with CODEMODE_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("language", sorted(EXTENSIONS))
def test_golden(case: str, language: str) -> None:
    text = render_sdk(CASES[case], language)
    check_golden(f"{case}.{EXTENSIONS[language]}.md", text)


@pytest.mark.parametrize("language", sorted(EXTENSIONS))
def test_golden_with_facts(language: str) -> None:
    text = render_sdk(CATALOG, language, FACTS)
    check_golden(f"catalog-facts.{EXTENSIONS[language]}.md", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_golden_block_parses(case: str) -> None:
    text = render_sdk(CASES[case], "python")
    block = text.split("\n```python\n", 1)[1].removesuffix("\n```")
    ast.parse(block)


def test_catalog_is_representative() -> None:
    assert len(CATALOG) >= 8
    assert len({tool.name for tool in CATALOG}) == len(CATALOG)


def test_render_does_not_depend_on_order() -> None:
    for language in EXTENSIONS:
        assert render_sdk(reversed(CATALOG), language) == render_sdk(CATALOG, language)
