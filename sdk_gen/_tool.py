"""The tool shape the renderers read, and how loose inputs are brought to it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ._text import utf16_key

__all__ = ["SdkTool", "ToolView", "normalize_tools"]


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class SdkTool:
    """One tool as the SDK sees it: name, description and two JSON Schemas.

    ``parameters`` is the argument schema (an object root that omits
    ``additionalProperties`` is open, as every ``define_tool`` root is);
    ``output_schema`` is the canonical output schema (``{}`` means any JSON value).
    Schemas are read, never mutated or validated beyond rendering: a schema outside the
    supported subset renders as ``unknown`` / ``Any``.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_empty_object_schema)
    output_schema: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolView:
    """A tool after input normalisation (internal to the renderers)."""

    name: str
    description: str | None
    parameters: object
    output_schema: object


_FIELDS = ("name", "description", "parameters", "output_schema")


def _view(tool: object) -> ToolView:
    if isinstance(tool, Mapping):
        values = [tool.get(key) for key in _FIELDS]
    else:
        values = [getattr(tool, key, None) for key in _FIELDS]
    name, description, parameters, output_schema = values
    if not isinstance(name, str):
        raise TypeError(
            f"SDK tool name must be a string, got {type(name).__name__} in {tool!r:.200}"
        )
    # A non-string description is simply not documented (not an error: hosts
    # importing tools from elsewhere send all sorts).
    return ToolView(
        name=name,
        description=description if isinstance(description, str) else None,
        parameters=parameters,
        output_schema=output_schema,
    )


def normalize_tools(tools: Iterable[object]) -> list[ToolView]:
    """Views of ``tools`` sorted by name in UTF-16 code-unit order (JavaScript ``<``).

    Names must be unique: the output would otherwise depend on input order, and the
    caller's view of visible tools is keyed by name anyway.
    """
    views = [_view(tool) for tool in tools]
    views.sort(key=lambda view: utf16_key(view.name))
    for previous, current in pairwise(views):
        if previous.name == current.name:
            raise ValueError(f'duplicate tool name "{current.name}" in the SDK tool set')
    return views
