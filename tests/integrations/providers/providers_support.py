"""A small real catalogue for the provider-adapter tests (public API only).

Importable as ``from providers_support import ...`` (the folder has no ``__init__.py``).
"""

from __future__ import annotations

import typing
from typing import Any

import pydantic

from codemode.engine import ToolOutput, ToolRuntime, define_tool, text

__all__ = ["catalog_runtime", "check_sdk_type", "seen"]

# What each tool body received, by tool name (the e2e tests assert the stripped nulls).
seen: dict[str, list[Any]] = {}


def _record(name: str, args: Any) -> None:
    seen.setdefault(name, []).append(args)


def catalog_runtime() -> ToolRuntime:
    """A runtime with three ``define_tool`` tools covering optional, nested and union
    parameters, and one that always fails."""
    seen.clear()
    rt = ToolRuntime()

    async def search(args: Any, _ctx: Any) -> Any:
        _record("search_notes", args)
        limit = args.get("limit", 3)
        return {"hits": [f"{args['query']}-{i}" for i in range(limit)]}

    rt.register(
        define_tool(
            name="search_notes",
            description="Search the notes by text.",
            parameters={
                "query": {"type": "string", "required": True, "description": "Text to find."},
                "limit": {"type": "integer", "description": "At most this many hits."},
                "tags": {"type": "array", "items": {"type": "string"}},
                "filter": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"type": "string", "enum": ["todo", "idea"], "required": True},
                        "since": {"type": "string", "description": "ISO date."},
                    },
                },
            },
            output=ToolOutput(
                schema={
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "hits": {"type": "array", "items": {"type": "string"}, "required": True}
                    },
                },
                render=lambda _a, v: [text("\n".join(v["hits"]) or "no hits")],
            ),
            execute=search,
            is_concurrency_safe=lambda _a: True,
        )
    )

    async def add(args: Any, _ctx: Any) -> Any:
        _record("add", args)
        return args["a"] + args["b"]

    rt.register(
        define_tool(
            name="add",
            description="Add two numbers.",
            parameters={
                "a": {"type": "number", "required": True},
                "b": {"type": "number", "required": True},
            },
            output=ToolOutput(schema={"type": "number"}, render=lambda _a, v: [text(str(v))]),
            execute=add,
        )
    )

    async def fail(args: Any, _ctx: Any) -> Any:
        _record("explode", args)
        raise RuntimeError(f"boom: {args.get('why') or 'no reason'}")

    rt.register(
        define_tool(
            name="explode",
            description="Always fails.",
            parameters={"why": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
            output=ToolOutput(schema={"type": "string"}, render=lambda _a, v: [text(v)]),
            execute=fail,
        )
    )
    return rt


def check_sdk_type(sdk_type: Any, value: Any) -> None:
    """``value`` validates as the SDK's TypedDict, and uses no key the type lacks."""
    pydantic.TypeAdapter(sdk_type).validate_python(value)
    _known_keys(sdk_type, value)


def _known_keys(sdk_type: Any, value: Any) -> None:
    if not typing.is_typeddict(sdk_type) or not isinstance(value, dict):
        return
    hints = typing.get_type_hints(sdk_type)
    unknown = set(value) - set(hints)
    assert not unknown, f"{sdk_type.__name__} has no {sorted(unknown)}"
    for key, item in value.items():
        _known_keys(hints[key], item)
