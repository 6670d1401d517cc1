"""Python flavour: JSON Schema → typing annotations, and the ``tools:sdk`` section.

Rules: ``str``/``float`` (number)/``int`` (integer)/``bool``/``None``;
``const``/``enum`` → ``Literal[...]``; arrays → ``list[T]`` (``list[Any]`` without
``items``); ``oneOf`` → ``A | B``; ``{}`` and anything outside the subset → ``Any``.
An object with properties becomes a named ``TypedDict`` declared before whatever
references it; optional fields are ``NotRequired[...]``, field descriptions are ``#``
lines above the field, and an open object says so in a trailing comment. An open empty
object, or one with any field name that cannot be a class-syntax field, is
``dict[str, Any]``; a closed empty object is a ``TypedDict`` with ``pass``.

Class names: ``CamelCase(tool) + "Args"``/``"Output"``; nested objects append
``CamelCase(field)``, ``oneOf`` branches their 1-based index, array items nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._facts import render_facts
from ._instructions import PYTHON_INSTRUCTIONS, TOOLS_INTRO
from ._py_names import (
    MAX_LIST_NESTING,
    ClassNames,
    camel_case,
    child_class_name,
    describe,
    docstring,
    is_field_name,
    is_method_name,
)
from ._schema import is_supported_schema, properties_of
from ._text import js_number, js_string, pad

if TYPE_CHECKING:
    from ._tool import ToolView

__all__ = ["json_schema_to_py", "render_python"]

_INDENT: Final = 4
_FIELD: Final = pad(1, _INDENT)
_TYPING_ORDER: Final = ("Any", "Literal", "NotRequired", "Protocol", "TypedDict")
_ERROR_STUB: Final = (
    "class ToolCallError(Exception):\n"
    "    toolName: str\n"
    # Our extension: the failure's error code (see _instructions.py).
    "    code: str | None"
)
_OPEN_NOTE: Final = f"{_FIELD}# Additional keys beyond those declared are allowed."
# Argument classes are open unless they say so (the facts block states the rule once).
_CLOSED_NOTE: Final = f"{_FIELD}# closed"


@dataclass(slots=True)
class _State:
    """What one render collects: class declarations, taken names, typing symbols."""

    classes: list[str] = field(default_factory=list)
    names: ClassNames = field(default_factory=ClassNames)
    typing: set[str] = field(default_factory=set)
    # False for the context-free `json_schema_to_py`, which has nowhere to declare.
    declare: bool = True
    # Rendering an argument schema (open is the stated rule, closed is marked).
    args: bool = False
    # An object shape already declared, by its schema: the same shape reuses the class
    # (the job record three job tools return is declared once).
    shapes: dict[str, str] = field(default_factory=dict)

    def snapshot(self) -> tuple[int, ClassNames, frozenset[str], dict[str, str]]:
        return len(self.classes), self.names.copy(), frozenset(self.typing), dict(self.shapes)

    def restore(self, snapshot: tuple[int, ClassNames, frozenset[str], dict[str, str]]) -> None:
        count, names, typing, shapes = snapshot
        del self.classes[count:]
        self.names = names
        self.typing = set(typing)
        self.shapes = shapes

    def shape_key(self, node: Mapping[str, Any]) -> str | None:
        try:
            return ("A" if self.args else "O") + json.dumps(node, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return None


def _scalar(value: object) -> str:
    """A validated ``const``/``enum`` scalar as Python literal text."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # An integral double prints its exact integer digits (as a BigInt would
        # print), so `2.0` is `2` and 2**60 is not rounded to ...847000.
        return str(int(value)) if value.is_integer() else js_number(value)
    return js_string(str(value))


def _constrained(node: Mapping[str, Any], broad: str, state: _State) -> str:
    if "const" in node:
        state.typing.add("Literal")
        return f"Literal[{_scalar(node['const'])}]"
    if "enum" in node:
        state.typing.add("Literal")
        return f"Literal[{', '.join(_scalar(value) for value in node['enum'])}]"
    return broad


_BROAD: Final = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"}


def _render(node: Mapping[str, Any], name: str, depth: int, state: _State) -> str:
    """Render a validated node; ``depth`` counts the ``list[`` brackets open around it."""
    if "oneOf" in node:
        # `A | B` opens no bracket, so branches inherit the depth.
        return " | ".join(
            _render(branch, child_class_name(name, str(index)), depth, state)
            for index, branch in enumerate(node["oneOf"], start=1)
        )
    schema_type = node.get("type")
    if schema_type == "null":
        return "None"
    if schema_type in _BROAD:
        return _constrained(node, _BROAD[schema_type], state)
    if schema_type is None:
        # An untyped `enum`/`const` (accepted by our engine) still narrows to a Literal.
        if "const" in node or "enum" in node:
            return _constrained(node, "Any", state)
        state.typing.add("Any")
        return "Any"
    if schema_type == "array":
        if "items" not in node or depth >= MAX_LIST_NESTING:
            state.typing.add("Any")
            return "list[Any]" if "items" not in node else "Any"
        # An array's items are named after the array itself (no suffix).
        return f"list[{_render(node['items'], name, depth + 1, state)}]"
    return _render_object(node, name, state)


def _render_object(node: Mapping[str, Any], name: str, state: _State) -> str:
    properties = properties_of(node)
    is_open = node.get("additionalProperties") is not False
    if (
        not state.declare
        or not all(is_field_name(key) for key in properties)
        or (not properties and is_open)
    ):
        state.typing.add("Any")
        return "dict[str, Any]"
    shape = state.shape_key(node)
    if shape is not None and shape in state.shapes:
        return state.shapes[shape]
    allocated = state.names.allocate(name)
    state.typing.add("TypedDict")
    required = set(node.get("required", ()))
    lines = [f"class {allocated}(TypedDict):"]
    for key, prop in properties.items():
        # Each field line restarts the bracket count at 1, reserving `NotRequired[`.
        child = _render(prop, child_class_name(allocated, camel_case(key)), 1, state)
        text = describe(prop.get("description"))
        if text is not None:
            lines.append(f"{_FIELD}# {text}")
        if key in required:
            lines.append(f"{_FIELD}{key}: {child}")
        else:
            state.typing.add("NotRequired")
            lines.append(f"{_FIELD}{key}: NotRequired[{child}]")
    # TypedDict syntax cannot express openness; under code mode this comment (or, for
    # arguments, the facts block's one sentence) is the model's only hint.
    if len(lines) == 1:  # a comment is no statement: an empty body still needs `pass`
        lines.append(f"{_FIELD}pass")
    if state.args and not is_open:
        lines.append(_CLOSED_NOTE)
    elif is_open and not state.args:
        lines.append(_OPEN_NOTE)
    # Appended after the children, so nested classes precede the class using them.
    state.classes.append("\n".join(lines))
    if shape is not None:
        state.shapes[shape] = allocated
    return allocated


def _render_root(schema: object, name: str, state: _State) -> str:
    if not is_supported_schema(schema):
        state.typing.add("Any")
        return "Any"
    assert isinstance(schema, Mapping)
    snapshot = state.snapshot()
    try:
        return _render(schema, name, 0, state)
    except RecursionError:
        # Too deep to render: drop the half-declared classes and degrade like a
        # malformed schema.
        state.restore(snapshot)
        state.typing.add("Any")
        return "Any"


def json_schema_to_py(schema: object) -> str:
    """Map one JSON Schema node to a context-free Python type expression.

    Objects are ``dict[str, Any]`` here (a named ``TypedDict`` needs the declarations
    that only :func:`render_sdk` emits). Never raises: a schema outside the enforced
    subset is ``Any``.
    """
    return _render_root(schema, "", _State(declare=False))


def render_python(tools: Sequence[ToolView], facts: Mapping[str, Any] | None = None) -> str:
    """The whole Python ``tools:sdk`` section for tools already in sorted order."""
    state = _State(typing={"Protocol"})
    members: list[str] = []
    methods = 0
    for tool in tools:
        base = camel_case(tool.name)
        state.args = True
        arg_type = _render_root(tool.parameters, f"{base}Args", state)
        state.args = False
        output_type = _render_root(tool.output_schema, f"{base}Output", state)
        if is_method_name(tool.name):
            # The docstring must be the first statement of the body to document it.
            doc = docstring(tool.description, pad(2, _INDENT))
            head = f"{_FIELD}async def {tool.name}(self, args: {arg_type}) -> {output_type}:"
            members.append(head if doc else f"{head} ...")
            members.extend(doc)
            methods += 1
        else:
            call = f"tools[{js_string(tool.name)}](args: {arg_type}) -> {output_type}"
            members.append(f"{_FIELD}# {call}")
            text = describe(tool.description)
            if text is not None:
                members.append(f"{_FIELD}#   {text}")
    # Comments are not statements: a body with no method still needs `pass`.
    body = "\n".join(members if methods else [f"{_FIELD}pass", *members])
    imports = ", ".join(symbol for symbol in _TYPING_ORDER if symbol in state.typing)
    classes = "".join(f"{declaration}\n\n" for declaration in state.classes)
    declaration = (
        f"from typing import {imports}\n\n{_ERROR_STUB}\n\n{classes}"
        f"class Tools(Protocol):\n{body}\n\ntools: Tools"
    )
    head = PYTHON_INSTRUCTIONS.removesuffix(TOOLS_INTRO)
    block = render_facts(facts, "python", open_args=bool(tools))
    return f"{head}{block}{TOOLS_INTRO}\n\n```python\n{declaration}\n```"
