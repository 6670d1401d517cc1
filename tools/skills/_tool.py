"""``skill``: load one catalogued skill's instructions for the model."""

from __future__ import annotations

from typing import Any

import anyio

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import catalog_entry, define_catalog_tool
from .._common import arg
from .._config import ToolsConfig
from ._catalog import SkillCatalog, escape_attr, escape_text

__all__ = ["build_skill_tool", "render_skill"]

_RESOLVE = (
    "Resolve relative paths mentioned by this skill against the base directory before using "
    "them. Load referenced resources only as needed."
)
_RESOLVE_URL = (
    "Resolve relative paths mentioned by this skill against the base URL before using them. "
    "Load referenced resources only as needed."
)

_OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "required": True},
        "provider": {"type": "string", "required": True},
        "resourceBase": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {
                    "type": "string",
                    "enum": ["directory", "url", "opaque"],
                    "required": True,
                },
                "path": {"type": "string"},
                "url": {"type": "string"},
                "description": {"type": "string"},
            },
        },
        "content": {"type": "string", "required": True},
    },
}


def _hint_lines(value: Any) -> list[str]:
    base = value.get("resourceBase")
    kind = base.get("kind") if isinstance(base, dict) else None
    if kind == "directory":
        return [f"Base directory for this skill: {escape_text(base['path'])}", _RESOLVE]
    if kind == "url":
        return [f"Base URL for this skill: {escape_text(base['url'])}", _RESOLVE_URL]
    if kind == "opaque":
        return [
            f"Resources for this skill: {escape_text(base['description'])}",
            "Load referenced resources only as needed.",
        ]
    return [
        f"This skill's resources are managed by its provider ({escape_text(value['provider'])}). "
        "Load referenced resources only as needed."
    ]


def render_skill(value: Any) -> str:
    """The model-facing text of a loaded skill value."""
    return "\n".join(
        [
            f'<skill_content name="{escape_attr(value["name"])}">',
            "<skill_resources>",
            *_hint_lines(value),
            "</skill_resources>",
            "",
            "<skill_instructions>",
            value["content"],
            "</skill_instructions>",
            "</skill_content>",
        ]
    )


def build_skill_tool(
    cfg: ToolsConfig, catalog: SkillCatalog, *, describe_catalog: bool = False
) -> ToolDefinition:
    """The ``skill`` tool loading from ``catalog``.

    By default its description is the catalog's text, unchanged: give the model the list of
    skills with ``catalog.catalog_text()`` (system prompt or context message).
    ``describe_catalog=True`` appends that list to the description instead (after a blank
    line; nothing when no skill is model-invocable), fixed when the tool is built: rebuild
    and re-register the tool after ``catalog.refresh()``.
    """

    async def execute(args: Any, ctx: Any) -> Any:
        name = args["name"]
        # File reads off the event loop: a SKILL.md on a slow filesystem must not stall
        # every other call.
        loaded = await anyio.to_thread.run_sync(catalog.load, name)
        return {
            "name": loaded.skill.name,
            "provider": catalog.provider,
            "resourceBase": {"kind": "directory", "path": loaded.skill.directory},
            "content": loaded.content,
        }

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(render_skill(value))]

    def present_call(args: Any) -> Any:
        name = arg(args, "name")
        if not isinstance(name, str):
            return None
        return {"card": "generic", "title": f"Load skill {name}", "kind": "read"}

    description = catalog_entry("skill")["description"]
    listing = catalog.catalog_text() if describe_catalog else ""
    return define_catalog_tool(
        "skill",
        description=f"{description}\n\n{listing}" if listing else description,
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render),
        execute=execute,
        present_call=present_call,
    )
