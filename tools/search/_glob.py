"""``glob``: files matching a glob pattern, on ripgrep.

The files come sorted by modification time (ripgrep's ``--sort=modified``), at most ``ToolsConfig.glob_max_results``
of them in the rendered text; the value keeps every match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from codemode.engine import ToolDefinition, text

from .._catalog import catalog_entry
from .._common import is_blank
from .._config import ToolsConfig
from .._errors import SearchError
from ._common import (
    GLOB_UNSAVED,
    VCS_DIRS,
    Spills,
    bounded,
    confined_by_kernel,
    confirm_paths,
    define_search_tool,
    run_search,
    search_target,
    search_title,
)

__all__ = ["build_glob", "glob_page"]

_GLOB_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "root": {"type": "string", "required": True},
        "paths": {
            "type": "array",
            "items": {"type": "string"},
            "required": True,
            # What a program receives (the description speaks of the text listing).
            "description": "Every match, uncapped (the description's cap is its text listing's).",
        },
    },
}


def _group_key(root: str) -> Callable[[str], str]:
    """The top-level entry of a path relative to ``root`` (leading separators stripped)."""
    prefix = "" if root in (".", "") else root.rstrip("/") + "/"

    def key(path: str) -> str:
        rel = path[len(prefix) :] if prefix and path.startswith(prefix) else path
        while rel.startswith("./"):
            rel = rel[2:]
        return rel.lstrip("/").partition("/")[0]

    return key


def glob_page(paths: Sequence[str], root: str, cap: int) -> tuple[list[str], int, int]:
    """The sampled page of an over-cap result: ``(page, groups shown, total groups)``.

    Round-robin across top-level entries (groups in first-appearance order, each group's
    picks in modification-time order), then printed group by group.
    """
    key = _group_key(root)
    groups: dict[str, list[str]] = {}
    for path in paths:
        group = key(path)
        members = groups.get(group)
        if members is None:
            groups[group] = [path]
        else:
            members.append(path)
    sizes = [len(members) for members in groups.values()]
    # Round-robin picks: with g groups, k full rounds give each group min(size, k) paths.
    taken = [0] * len(sizes)
    remaining = min(cap, len(paths))
    while remaining > 0:
        open_groups = [i for i, size in enumerate(sizes) if taken[i] < size]
        if len(open_groups) <= remaining:
            for i in open_groups:
                taken[i] += 1
            remaining -= len(open_groups)
        else:
            for i in open_groups[:remaining]:
                taken[i] += 1
            remaining = 0
    page = [path for i, members in enumerate(groups.values()) for path in members[: taken[i]]]
    return page, sum(1 for t in taken if t), len(sizes)


def _glob_text(value: Any, cap: int, recovery: str) -> tuple[str, list[str]]:
    paths: list[str] = value["paths"]
    total = len(paths)
    if total == 0:
        return "No files found", []
    if total <= cap:
        return "\n".join(paths), list(paths)
    page, shown, groups = glob_page(paths, value["root"], cap)
    if groups == total:
        basis = "."
    else:
        basis = (
            f", sampled across {shown} of the {groups} top-level entries this pattern matched "
            "instead of taken in modification-time order."
        )
        if shown < groups:
            basis += " Narrow path to inspect a specific subtree."
    footer = f"(Showing {len(page)} of {total} paths{basis} {recovery})"
    return "\n".join(page) + "\n\n" + footer, page


def build_glob(cfg: ToolsConfig) -> ToolDefinition:
    """The ``glob`` tool bound to ``cfg``."""
    entry = catalog_entry("glob")
    cap = cfg.glob_max_results
    description = entry["description"]
    if cap != 100:
        description = description.replace("Up to 100 paths", f"Up to {cap} paths").replace(
            "returns 100 paths", f"returns {cap} paths"
        )
    spills = Spills(cfg, GLOB_UNSAVED, "Full sorted result stored at:")
    last: list[tuple[Any, tuple[str, list[str]]]] = []

    def page_of(value: Any) -> tuple[str, list[str]]:
        # render and presentation_meta both need the page of the same frozen value; keep the
        # last one so a large result is sampled once (holding it keeps the identity valid).
        if last and last[0][0] is value:
            return last[0][1]
        computed = _glob_text(value, cap, GLOB_UNSAVED)
        last[:] = [(value, computed)]
        return computed

    async def execute(args: Any, ctx: Any) -> Any:
        pattern = args["pattern"]
        if is_blank(pattern):
            raise SearchError("pattern must be a non-empty string", "SEARCH_INVALID_ARGS")
        target = await search_target(cfg, "glob", args)
        argv = ["--no-config", "--files", f"--glob={pattern}", "--sort=modified"]
        argv += ["--no-ignore", "--hidden"]
        for vcs in VCS_DIRS:
            argv += [f"--glob=!**/{vcs}", f"--glob=!**/{vcs}/**"]
        out = await run_search(cfg, ctx, "glob", argv, target)
        raw = out.stdout.decode("utf-8", "replace")
        paths = raw.split("\n")
        if paths and not paths[-1]:
            paths.pop()
        if not target.in_workspace:
            paths = [target.shown(p) for p in paths]
        if paths and not confined_by_kernel():
            paths = await confirm_paths(cfg, paths)
        value = {"root": target.shown_root(), "paths": paths}
        if len(paths) > cap:
            await spills.save(ctx, "\n".join(paths), "glob-results.txt")
        return value

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(page_of(value)[0])]

    def meta(args: Any, value: Any) -> Any:
        _text, page = page_of(value)
        total = len(value["paths"])

        def make(items: list[str], cut: bool) -> dict[str, Any]:
            truncated = cut or total > len(page)
            return {"shape": "paths", "paths": items, "truncated": truncated, "total": total}

        return bounded(page, cfg.search_meta_max_bytes, make)[0]

    return define_search_tool(
        cfg,
        "glob",
        description=description,
        schema=_GLOB_OUTPUT,
        render=render,
        meta=meta,
        execute=execute,
        spills=spills,
        title=lambda args: search_title("Glob", args),
    )
