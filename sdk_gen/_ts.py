"""TypeScript flavour: JSON Schema → TS type text, and the ``tools:sdk`` section.

Rules (the usual ``jsonSchemaToTs`` mapping of code-mode hosts): ``string``/``boolean``/``null`` map to
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

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._facts import render_facts
from ._instructions import TOOLS_INTRO as _TOOLS_INTRO
from ._instructions import TYPESCRIPT_INSTRUCTIONS
from ._py_names import camel_case
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
    # Deviation: an all-whitespace description documents nothing; the usual renderer
    # emits an empty `/**  */`, which only costs prompt tokens.
    if not collapsed:
        return []
    # Escape the comment closer so a description cannot end the JSDoc early.
    escaped = collapsed.replace("*/", "*\\/")
    # Deviation from the usual renderer, which passes it through: a lone surrogate would make
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


# Names the section declares itself (or uses from TypeScript): a shared shape never takes one.
_RESERVED_TYPE_NAMES: Final = frozenset(
    {"JsonValue", "ToolName", "ToolArgsMap", "ToolOutputMap", "ToolCallError", "Record"}
)


@dataclass(slots=True)
class _Render:
    """One SDK render's context (the context-free ``json_schema_to_ts`` has none).

    ``args``: inside ``ToolArgsMap``, where the facts block says once that objects are
    open, so an open object needs no `` & Record<...>`` and a closed one says ``// closed``.
    ``counts``/``names``: an object type that occurs more than once in the section is
    declared once as ``type Name = {...}`` and referred to by name (the job record three
    job tools return, ``stdout``/``stderr``); the first pass counts, the second names.
    """

    args: bool = False
    counting: bool = True
    counts: dict[str, int] = field(default_factory=dict)
    hints: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    taken: set[str] = field(default_factory=lambda: set(_RESERVED_TYPE_NAMES))
    declarations: list[str] = field(default_factory=list)
    # Each node's JSON text, by identity: both passes (and the declaration of a shared
    # shape) ask for the same nodes, which the tools hold for the whole render.
    texts: dict[int, str | None] = field(default_factory=dict)

    def key(self, node: Mapping[str, Any]) -> str | None:
        text = self.texts.get(id(node), "")
        if text == "":
            try:
                text = json.dumps(node, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                text = None
            self.texts[id(node)] = text
        return None if text is None else ("A" if self.args else "O") + text

    def name_for(self, hint: str) -> str:
        base = camel_case(hint) if hint else "Shape"
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        return name


def _render(node: Mapping[str, Any], level: int, ctx: _Render | None = None, hint: str = "") -> str:
    """Render a node the subset check has already accepted."""
    if "oneOf" in node:
        return " | ".join(_render(branch, level, ctx, hint) for branch in node["oneOf"])
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
        item = _render(node["items"], level, ctx, hint)
        # Deliberately textual, like the usual renderer: a `|` inside a string literal or a
        # JSDoc line also triggers the parentheses, which are harmless there.
        return f"({item})[]" if "|" in item or "&" in item else f"{item}[]"
    if schema_type == "object":
        return _render_object(node, level, ctx, hint)
    return "number" if schema_type == "integer" else str(schema_type)


def _render_object(
    node: Mapping[str, Any], level: int, ctx: _Render | None = None, hint: str = ""
) -> str:
    is_open = node.get("additionalProperties") is not False
    properties = properties_of(node)
    if not properties:
        return "Record<string, JsonValue>" if is_open else "Record<string, never>"
    key = ctx.key(node) if ctx is not None else None
    if ctx is not None and key is not None:
        if ctx.counting:
            ctx.counts[key] = ctx.counts.get(key, 0) + 1
            ctx.hints.setdefault(key, hint)
        elif ctx.counts.get(key, 0) > 1:
            name = ctx.names.get(key)
            if name is None:
                name = ctx.names[key] = ctx.name_for(ctx.hints.get(key, hint))
                body = _object_text(node, 0, ctx, is_open, properties)
                ctx.declarations.append(f"type {name} = {body}")
            return name
    return _object_text(node, level, ctx, is_open, properties)


def _object_text(
    node: Mapping[str, Any],
    level: int,
    ctx: _Render | None,
    is_open: bool,
    properties: Mapping[str, Any],
) -> str:
    required = set(node.get("required", ()))
    in_args = ctx is not None and ctx.args
    lines = ["{ // closed" if in_args and not is_open else "{"]
    for key, prop in properties.items():
        lines.extend(_jsdoc(prop.get("description"), level + 1))
        optional = "" if key in required else "?"
        value = _render(prop, level + 1, ctx, key)
        lines.append(f"{pad(level + 1, _INDENT)}{ts_key(key)}{optional}: {value};")
    lines.append(f"{pad(level, _INDENT)}}}")
    text = "\n".join(lines)
    return text + _OPEN_SUFFIX if is_open and not in_args else text


def json_schema_to_ts(schema: object, indent: int = 0) -> str:
    """Map one JSON Schema node to TypeScript type text.

    ``indent`` is the nesting level (two spaces each) of the line the type starts on;
    members of a multi-line object are indented one level deeper. Never raises: a
    schema outside the enforced subset, or one too deep to render, is ``unknown``.
    """
    return _root(schema, indent, None, "")


def _root(
    schema: object, indent: int, ctx: _Render | None, hint: str, supported: bool | None = None
) -> str:
    """``supported``: whether ``schema`` passed the subset check (``None``: check it)."""
    if not (is_supported_schema(schema) if supported is None else supported):
        return "unknown"
    assert isinstance(schema, Mapping)
    try:
        return _render(schema, indent, ctx, hint)
    except RecursionError:
        return "unknown"


def _interface(name: str, members: Sequence[str]) -> str:
    if not members:
        return f"interface {name} {{}}"
    return f"interface {name} {{\n" + "\n".join(members) + "\n}"


def render_typescript(tools: Sequence[ToolView], facts: Mapping[str, Any] | None = None) -> str:
    """The whole TypeScript ``tools:sdk`` section for tools already in sorted order."""
    ctx = _Render()
    # Each schema is checked once, not once per pass.
    supported = [
        (is_supported_schema(tool.parameters), is_supported_schema(tool.output_schema))
        for tool in tools
    ]
    for counting in (True, False):
        ctx.counting = counting
        args_members: list[str] = []
        output_members: list[str] = []
        for tool, (args_ok, output_ok) in zip(tools, supported, strict=True):
            key = ts_key(tool.name)
            # The tool's own description documents the ToolArgsMap entry only.
            args_members.extend(_jsdoc(tool.description, 1))
            ctx.args = True
            args = _root(tool.parameters, 1, ctx, f"{tool.name}_args", args_ok)
            ctx.args = False
            output = _root(tool.output_schema, 1, ctx, f"{tool.name}_output", output_ok)
            args_members.append(f"{pad(1, _INDENT)}{key}: {args};")
            output_members.append(f"{pad(1, _INDENT)}{key}: {output};")
    declaration = "\n\n".join(
        [
            _JSON_VALUE,
            _interface("ToolArgsMap", args_members),
            _interface("ToolOutputMap", output_members),
            *ctx.declarations,
            _PRELUDE,
        ]
    )
    head = TYPESCRIPT_INSTRUCTIONS.removesuffix(_TOOLS_INTRO)
    block = render_facts(facts, "typescript", open_args=bool(tools))
    return f"{head}{block}{_TOOLS_INTRO}\n\n```ts\n{declaration}\n```"
