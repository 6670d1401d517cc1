"""TypeScript flavour: JSON Schema → TS type text, and the ``tools:sdk`` section.

Rules (reference §4.1, `jsonSchemaToTs`): ``string``/``boolean``/``null`` map to
themselves and ``number``/``integer`` to ``number``; ``const`` (winning over ``enum``)
becomes a JSON literal and ``enum`` a ``|`` union; ``oneOf`` is ``A | B``; arrays are
``T[]``, or ``(T)[]`` when the item text contains ``|`` or ``&`` anywhere; objects with
properties are multi-line with two spaces per level, ``key?:`` for optional keys and a
one-line JSDoc per described property; an object that is not explicitly closed
(``additionalProperties`` not ``false``) gets `` & Record<string, JsonValue>``; empty
objects are ``Record<string, JsonValue>`` (open) or ``Record<string, never>`` (closed);
``{}`` is ``JsonValue``; anything outside the subset is ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._instructions import TYPESCRIPT_INSTRUCTIONS
from ._schema import is_supported_schema, properties_of
from ._text import collapse_whitespace, js_number, js_string, pad

if TYPE_CHECKING:
    from ._tool import ToolView

__all__ = ["json_schema_to_ts", "render_typescript"]

_INDENT: Final = 2
_BARE_KEY: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_OPEN_SUFFIX: Final = " & Record<string, JsonValue>"
_JSON_VALUE: Final = (
    "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }"
)
_PRELUDE: Final = (
    "type ToolName = keyof ToolOutputMap\n"
    "\n"
    "declare class ToolCallError extends Error {\n"
    '  readonly name: "ToolCallError";\n'
    "  readonly toolName: ToolName;\n"
    # Our extension: the failure's error code (see _instructions.py).
    "  readonly code: string | null;\n"
    "}\n"
    "\n"
    "declare const tools: {\n"
    "  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;\n"
    "}"
)


def ts_key(name: str) -> str:
    """An object key or tool name: bare when it is an ASCII identifier, else quoted.

    No aliasing, so every name stays reachable; ``__proto__`` is a plain identifier here.
    """
    return name if _BARE_KEY.fullmatch(name) else js_string(name)


def _jsdoc(description: object, level: int) -> list[str]:
    """A one-line JSDoc for a description, or nothing when there is none."""
    if not isinstance(description, str):
        return []
    collapsed = collapse_whitespace(description)
    # Deviation: an all-whitespace description documents nothing; the reference would
    # emit an empty `/**  */`, which only costs prompt tokens.
    if not collapsed:
        return []
    # Escape the comment closer so a description cannot end the JSDoc early.
    escaped = collapsed.replace("*/", "*\\/")
    # Deviation from the reference, which passes it through: a lone surrogate would make
    # the section unencodable as UTF-8 (fatal for a Python host), so show it as `\uNNNN`.
    escaped = _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group(0)):04x}", escaped)
    return [f"{pad(level, _INDENT)}/** {escaped} */"]


def _literal(value: object) -> str:
    """A validated ``const``/``enum`` scalar as a TS literal (``JSON.stringify``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # Python ints are exact; printing their digits is what a lossless value means.
        return str(value)
    if isinstance(value, float):
        return js_number(value)
    return js_string(str(value))


def _render(node: Mapping[str, Any], level: int) -> str:
    """Render a node the subset check has already accepted."""
    if "oneOf" in node:
        return " | ".join(_render(branch, level) for branch in node["oneOf"])
    schema_type = node.get("type")
    if "const" in node:
        return _literal(node["const"])
    if "enum" in node:
        return " | ".join(_literal(value) for value in node["enum"])
    if schema_type is None:
        return "JsonValue"
    if schema_type == "array":
        if "items" not in node:
            return "JsonValue[]"
        item = _render(node["items"], level)
        # Deliberately textual, like the reference: a `|` inside a string literal or a
        # JSDoc line also triggers the parentheses, which are harmless there.
        return f"({item})[]" if "|" in item or "&" in item else f"{item}[]"
    if schema_type == "object":
        return _render_object(node, level)
    return "number" if schema_type == "integer" else str(schema_type)


def _render_object(node: Mapping[str, Any], level: int) -> str:
    is_open = node.get("additionalProperties") is not False
    properties = properties_of(node)
    if not properties:
        return "Record<string, JsonValue>" if is_open else "Record<string, never>"
    required = set(node.get("required", ()))
    lines = ["{"]
    for key, prop in properties.items():
        lines.extend(_jsdoc(prop.get("description"), level + 1))
        optional = "" if key in required else "?"
        lines.append(
            f"{pad(level + 1, _INDENT)}{ts_key(key)}{optional}: {_render(prop, level + 1)};"
        )
    lines.append(f"{pad(level, _INDENT)}}}")
    text = "\n".join(lines)
    return text + _OPEN_SUFFIX if is_open else text


def json_schema_to_ts(schema: object, indent: int = 0) -> str:
    """Map one JSON Schema node to TypeScript type text.

    ``indent`` is the nesting level (two spaces each) of the line the type starts on;
    members of a multi-line object are indented one level deeper. Never raises: a
    schema outside the enforced subset, or one too deep to render, is ``unknown``.
    """
    if not is_supported_schema(schema):
        return "unknown"
    assert isinstance(schema, Mapping)
    try:
        return _render(schema, indent)
    except RecursionError:
        return "unknown"


def _interface(name: str, members: Sequence[str]) -> str:
    if not members:
        return f"interface {name} {{}}"
    return f"interface {name} {{\n" + "\n".join(members) + "\n}"


def render_typescript(tools: Sequence[ToolView]) -> str:
    """The whole TypeScript ``tools:sdk`` section for tools already in sorted order."""
    args_members: list[str] = []
    output_members: list[str] = []
    for tool in tools:
        key = ts_key(tool.name)
        # The tool's own description documents the ToolArgsMap entry only.
        args_members.extend(_jsdoc(tool.description, 1))
        args_members.append(f"{pad(1, _INDENT)}{key}: {json_schema_to_ts(tool.parameters, 1)};")
        output_members.append(
            f"{pad(1, _INDENT)}{key}: {json_schema_to_ts(tool.output_schema, 1)};"
        )
    declaration = "\n\n".join(
        [
            _JSON_VALUE,
            _interface("ToolArgsMap", args_members),
            _interface("ToolOutputMap", output_members),
            _PRELUDE,
        ]
    )
    return f"{TYPESCRIPT_INSTRUCTIONS}\n\n```ts\n{declaration}\n```"
