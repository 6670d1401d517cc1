"""What ``glob`` and ``grep`` share (tool-outputs.md §5, §6).

Values carry every match; the inline caps apply only to the rendered text. When a top-level
call is capped, the body saves the complete formatted list to the spill store and
``finalize_content`` swaps the "could not be saved" recovery sentence for the locator — the
render itself stays pure, and nested (code-mode) calls never spill.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from engine import ToolDefinition, ToolOutput

from ._catalog import define_catalog_tool
from ._common import arg, is_blank, result_parts
from ._config import ToolsConfig
from ._rg import RgOutput, run_rg
from ._text import js_json

__all__ = [
    "GLOB_UNSAVED",
    "GREP_UNSAVED",
    "VCS_DIRS",
    "Spills",
    "bounded",
    "check_path",
    "define_search_tool",
    "run_search",
    "search_card",
    "search_title",
    "workdir_relative",
]

VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
GLOB_UNSAVED = "The complete result could not be saved; narrow pattern or path to see more."
GREP_UNSAVED = (
    "The complete result could not be saved; narrow pattern, path, or include to see more."
)


class Spills:
    """Locators saved by capped top-level bodies, handed to ``finalize_content``."""

    def __init__(self, cfg: ToolsConfig, unsaved: str, saved_prefix: str) -> None:
        self.cfg = cfg
        self.unsaved = unsaved
        self.saved_prefix = saved_prefix
        self.pending: dict[object, str] = {}

    async def save(self, ctx: Any, content: str, name: str) -> None:
        if getattr(ctx, "parent", None) is not None:
            return  # post-execute projections never apply to nested calls
        store = self.cfg.spill_store
        try:
            locator = await store.save(
                content, suggested_name=name, label="result", call_id=ctx.call_id
            )
        except Exception:  # best effort: the unsaved wording stays
            return
        self.pending[ctx] = f"{self.saved_prefix} {locator}. {store.retrieval_hint}"

    def finalize(self, exec: Any, result: Any) -> Any:
        saved = self.pending.pop(exec, None)
        content, is_error, _meta = result_parts(result)
        if saved is None or is_error:
            return None
        out = []
        for block in content:
            if block.get("type") == "text" and self.unsaved in block.get("text", ""):
                block = {**block, "text": block["text"].replace(self.unsaved, saved)}
            out.append(block)
        return out


def workdir_relative(cfg: ToolsConfig, path: str) -> str:
    return cfg.workspace.relative(path) if os.path.isabs(path) else path


def check_path(cfg: ToolsConfig, args: Any) -> str | None:
    path = arg(args, "path")
    if path is None:
        return None
    if is_blank(path):
        raise ValueError("path must be a non-empty string when given")
    cfg.workspace.resolve(path)  # confinement only; ripgrep gets the path as written
    return str(path)


def bounded(items: list[Any], max_bytes: int, make: Any) -> tuple[Any, bool]:
    """``make(items[:k])`` for the largest k >= 1 whose JSON fits ``max_bytes``."""
    meta = make(items, False)
    if len(js_json(meta).encode("utf-8")) <= max_bytes or len(items) <= 1:
        return meta, False
    lo, hi = 1, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(js_json(make(items[:mid], True)).encode("utf-8")) <= max_bytes:
            lo = mid
        else:
            hi = mid - 1
    return make(items[:lo], True), True


def search_card(args: Any, result: Any) -> Any:
    _content, is_error, meta = result_parts(result)
    if is_error or not isinstance(meta, dict) or meta.get("shape") not in ("paths", "matches"):
        return None
    return {"card": "search", **meta}


async def run_search(cfg: ToolsConfig, ctx: Any, tool: str, argv: list[str]) -> RgOutput:
    """``rg argv`` in the workspace root, cancelled by the call's signal, with the caps."""
    return await run_rg(
        argv,
        cwd=cfg.workspace.root,
        signal=ctx.signal,
        tool=tool,
        raw_cap=cfg.raw_output_max_bytes,
        stderr_cap=cfg.stderr_max_bytes,
    )


def search_title(verb: str, args: Any) -> str:
    """``"<verb> <pattern>"``, plus ``" in <path>"`` when a path was given."""
    title = f"{verb} {args['pattern']}"
    if isinstance(arg(args, "path"), str):
        title += f" in {args['path']}"
    return title


def define_search_tool(
    cfg: ToolsConfig,
    name: str,
    *,
    description: str,
    schema: dict[str, Any],
    render: Callable[[Any, Any], list[dict[str, Any]]],
    meta: Callable[[Any, Any], Any],
    execute: Callable[[Any, Any], Any],
    spills: Spills,
    title: Callable[[Any], str],
) -> ToolDefinition:
    """The ``glob``/``grep`` definition: concurrency-safe, spill-finalized, search cards."""

    def present_call(args: Any) -> Any:
        return {
            "card": "generic",
            "title": title(args),
            "kind": "search",
            "rawInput": args["pattern"],
        }

    return define_catalog_tool(
        name,
        description=description,
        output=ToolOutput(schema=schema, render=render, presentation_meta=meta),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        timeout_ms=cfg.search_timeout_ms,
        finalize_content=spills.finalize,
        present_call=present_call,
        present_result=search_card,
    )
