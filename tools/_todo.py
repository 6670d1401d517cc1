"""``todo_write``: the agent's whole task list, replaced on every call.

The accepted list is session state: each call appends a ``todo/write`` event to the calling
scope's session (last write wins), which is what a UI renders as the checklist.
"""

from __future__ import annotations

from typing import Any

from codemode.engine import ToolDefinition, ToolOutput, text

from ._catalog import catalog_entry, define_catalog_tool
from ._config import ToolsConfig
from ._text import js_json

__all__ = ["build_todo_write", "todo_description"]

_PARALLEL = (
    "Mark every todo being actively worked on `in_progress` — several at once when work "
    "genuinely runs in parallel (e.g. concurrent subagents or background commands), one for "
    "sequential work; while work remains, at least one task should be `in_progress`. "
)
_SINGLE = (
    "Keep AT MOST ONE todo `in_progress` at a time; while work remains, exactly one active "
    "task should be `in_progress`. "
)
_STATUSES = ["pending", "in_progress", "completed"]
_OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "todos": {
            "type": "array",
            "required": True,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "content": {"type": "string", "required": True},
                    "status": {"type": "string", "enum": _STATUSES, "required": True},
                },
            },
        },
        "counts": {
            "type": "object",
            "additionalProperties": False,
            "required": True,
            "properties": {
                "pending": {"type": "integer", "required": True},
                "inProgress": {"type": "integer", "required": True},
                "completed": {"type": "integer", "required": True},
            },
        },
    },
}


def todo_description(allow_parallel_in_progress: bool) -> str:
    """The model-facing description; the catalog's text is the parallel variant."""
    base: str = catalog_entry("todo_write")["description"]
    if allow_parallel_in_progress:
        return base
    assert _PARALLEL in base, "the catalog's todo_write description changed"
    return base.replace(_PARALLEL, _SINGLE)


def build_todo_write(cfg: ToolsConfig) -> ToolDefinition:
    """The ``todo_write`` tool bound to ``cfg``."""
    allow_parallel = cfg.allow_parallel_in_progress

    async def execute(args: Any, ctx: Any) -> Any:
        todos: list[dict[str, str]] = []
        seen: set[str] = set()
        active = 0
        for item in args["todos"]:
            content = item["content"].strip()
            if not content:
                raise ValueError("invalid todo: `content` must be a non-empty string")
            if content in seen:
                raise ValueError(f"invalid todos: duplicate content {js_json(content)}")
            seen.add(content)
            if item["status"] == "in_progress":
                active += 1
            todos.append({"content": content, "status": item["status"]})
        if not allow_parallel and active > 1:
            raise ValueError(f"invalid todos: at most one task may be in_progress (got {active})")
        session = getattr(ctx.agent, "session", None) if ctx.agent is not None else None
        if session is None:
            raise ValueError("todo_write requires an owning agent session")
        await session.append({"type": "todo/write", "todos": todos})
        counts = {
            "pending": sum(1 for t in todos if t["status"] == "pending"),
            "inProgress": active,
            "completed": sum(1 for t in todos if t["status"] == "completed"),
        }
        return {"todos": todos, "counts": counts}

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        c = value["counts"]
        return [
            text(
                f"Updated todo list: {c['pending']} pending, {c['inProgress']} in progress, "
                f"{c['completed']} completed."
            )
        ]

    return define_catalog_tool(
        "todo_write",
        description=todo_description(allow_parallel),
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render),
        execute=execute,
        present_call=lambda args: {
            "card": "generic",
            "title": "Update todo list",
            "kind": "other",
            "rawInput": args["todos"],
        },
    )
