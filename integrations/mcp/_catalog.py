"""Large catalogs: a compact index in the prompt, full declarations on demand.

When the generated SDK of every tool would exceed a size budget, ``run_code``'s
description carries ``compact_index`` instead (one line per tool: its name and the first
sentence of its description) plus the full declarations of two discovery tools that
programs call in the sandbox:

- ``search_tools("query")`` (or ``{"query", "limit"}``): the best-matching tools by a
  word score over names and descriptions, with their declarations;
- ``describe_tool("name")`` (or ``{"name"}``): one tool's full description and
  declarations (an unknown name fails, suggesting close names).

Declarations are the generated SDK (``codemode.sdk_gen.render_sdk``) of just those tools,
in the runtime's language, so they read exactly like the full SDK would. The catalog is
read live from the runtime's view of the calling scope, so it lists what the program
may call.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from typing import Any

from codemode.engine import ToolDefinition, ToolOutput, ToolRuntime, text
from codemode.sdk_gen import render_sdk

__all__ = [
    "DISCOVERY_TOOL_NAMES",
    "compact_index",
    "declarations",
    "discovery_tools",
    "one_line",
    "search",
]

DISCOVERY_TOOL_NAMES = ("search_tools", "describe_tool")
_DEFAULT_LIMIT = 8
_MAX_LIMIT = 50
_LINE_CHARS = 120


def one_line(description: str) -> str:
    """The first sentence (or line) of ``description``, at most 120 characters."""
    first = description.strip().split("\n", 1)[0].strip()
    match = re.match(r"(.+?[.!?])(\s|$)", first)
    if match:
        first = match.group(1)
    if len(first) > _LINE_CHARS:
        first = first[: _LINE_CHARS - 1].rstrip() + "…"
    return first


def _words(s: str) -> list[str]:
    # Split camelCase and separators: "getNote", "get-note", "get_note" -> get, note.
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return [w for w in re.split(r"[^A-Za-z0-9]+", s.lower()) if w]


def search(tools: list[Any], query: str, limit: int) -> list[Any]:
    """The ``limit`` best matches of ``query`` among ``tools`` (``.name``,
    ``.description``), best first, ties by name; tools matching no word are left out."""
    terms = _words(query)
    if not terms:
        return []
    scored: list[tuple[float, str, Any]] = []
    for tool in tools:
        name_words = _words(tool.name)
        description = tool.description or ""
        desc_words = _words(description)
        score = 0.0
        for term in terms:
            if term in name_words:
                score += 4
            elif any(w.startswith(term) or term in w for w in name_words):
                score += 2
            if term in desc_words:
                score += 1
            elif any(w.startswith(term) for w in desc_words):
                score += 0.5
        if query.strip().lower() == tool.name.lower():
            score += 10
        if score > 0:
            scored.append((-score, tool.name, tool))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [tool for _, _, tool in scored[:limit]]


def declarations(tools: list[Any], language: str) -> str:
    """The SDK declarations block (the fenced code, without the usage text) of ``tools``."""
    if not tools:
        return ""
    rendered = render_sdk(tools, language, None)
    start = rendered.find("```")
    return rendered[start:] if start >= 0 else rendered


def compact_index(tools: list[Any]) -> str:
    """One ``- name: first sentence`` line per tool, sorted by name."""
    lines = [f"- {t.name}: {one_line(t.description or '')}".rstrip(": ") for t in tools]
    return "\n".join(sorted(lines))


def _query_of(args: Any, key: str) -> tuple[str, int]:
    if isinstance(args, str):
        return args, _DEFAULT_LIMIT
    if isinstance(args, Mapping) and isinstance(args.get(key), str):
        limit = args.get("limit", _DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a positive integer")
        return args[key], min(limit, _MAX_LIMIT)
    raise ValueError(f'pass a string or {{"{key}": "..."}}')


def discovery_tools(
    runtime: ToolRuntime, *, hidden: Callable[[str], bool] | None = None
) -> list[ToolDefinition]:
    """``search_tools`` and ``describe_tool`` over ``runtime``'s live catalog.

    Each call reads the tools the calling scope sees (minus ``run_code``, the two
    discovery tools themselves, and names for which ``hidden`` is true) and renders
    declarations in the language of ``runtime.code_runtime``.
    """

    def catalog(agent: Any) -> list[Any]:
        return [
            t
            for t in runtime.sdk_tools(agent)
            if t.name not in DISCOVERY_TOOL_NAMES and not (hidden and hidden(t.name))
        ]

    def language() -> str:
        return str(getattr(runtime.code_runtime, "language", "typescript"))

    async def search_execute(args: Any, ctx: Any) -> Any:
        query, limit = _query_of(args, "query")
        found = search(catalog(ctx.agent), query, limit)
        return {
            "matches": [{"name": t.name, "summary": one_line(t.description or "")} for t in found],
            "declarations": declarations(found, language()),
        }

    async def describe_execute(args: Any, ctx: Any) -> Any:
        name, _ = _query_of(args, "name")
        tools = {t.name: t for t in catalog(ctx.agent)}
        tool = tools.get(name)
        if tool is None:
            close = difflib.get_close_matches(name, sorted(tools), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise LookupError(f"no tool named {name!r}{hint}; search with search_tools")
        return {
            "name": tool.name,
            "description": tool.description or "",
            "declarations": declarations([tool], language()),
        }

    def render_search(_args: Any, value: Any) -> list[dict[str, Any]]:
        if not value["matches"]:
            return [text("no matching tools")]
        return [text(value["declarations"])]

    def render_describe(_args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(value["declarations"])]

    def argument_schema(key: str, what: str) -> dict[str, Any]:
        properties: dict[str, Any] = {key: {"type": "string", "description": what}}
        if key == "query":
            properties["limit"] = {
                "type": "integer",
                "description": f"most matches to return (default {_DEFAULT_LIMIT})",
            }
        return {
            "oneOf": [
                {"type": "string", "description": what},
                {
                    "type": "object",
                    "properties": properties,
                    "required": [key],
                    "additionalProperties": False,
                },
            ]
        }

    match = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": {"type": "string"}, "summary": {"type": "string"}},
        "required": ["name", "summary"],
    }
    search_output = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "matches": {"type": "array", "items": match},
            "declarations": {
                "type": "string",
                "description": "SDK declarations of the matches, as the full SDK has them",
            },
        },
        "required": ["matches", "declarations"],
    }
    describe_output = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "declarations": {"type": "string"},
        },
        "required": ["name", "description", "declarations"],
    }
    return [
        ToolDefinition(
            name="search_tools",
            description=(
                "Search the tool catalog by words (names and descriptions). Returns the "
                "best matches with their SDK declarations."
            ),
            parameters=argument_schema("query", "words to search for, e.g. 'create issue'"),
            output=ToolOutput(schema=search_output, render=render_search),
            execute=search_execute,
            is_concurrency_safe=lambda _args: True,
        ),
        ToolDefinition(
            name="describe_tool",
            description="One tool's full description and SDK declarations, by exact name.",
            parameters=argument_schema("name", "the exact tool name"),
            output=ToolOutput(schema=describe_output, render=render_describe),
            execute=describe_execute,
            is_concurrency_safe=lambda _args: True,
        ),
    ]
