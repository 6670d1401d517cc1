"""What ``glob`` and ``grep`` share: argument checks, the search root, the ripgrep run, caps.

Values carry every match; the inline caps apply only to the rendered text. When a top-level
call is capped, the body saves the complete formatted list to the spill store and
``finalize_content`` swaps the "could not be saved" recovery sentence for the locator — the
render itself stays pure, and nested (code-mode) calls never spill.
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat as stat_mod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import msgspec

from codemode.engine import ToolDefinition, ToolOutput

from .._catalog import define_catalog_tool
from .._common import arg, is_blank, result_parts
from .._config import ToolsConfig
from .._errors import FsError, SearchError, io_error
from .._text import js_json
from ..fs._io import open_readable

if TYPE_CHECKING:
    # The ripgrep runner loads on the first search (``confined_by_kernel``, ``run_search``).
    from ._rg import RgOutput

__all__ = [
    "GLOB_UNSAVED",
    "GREP_UNSAVED",
    "VCS_DIRS",
    "SearchTarget",
    "Spills",
    "bounded",
    "confined_by_kernel",
    "confirm_matches",
    "confirm_paths",
    "search_target",
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


@dataclass(frozen=True, slots=True)
class SearchTarget:
    """Where ``rg`` runs: the physical ``root`` it is confined to (the workspace, or a
    runtime-owned readable directory) and the already-resolved path below it (``None``: the
    whole root). ``rg`` never sees a path as the caller wrote it."""

    root: str
    rel: str | None
    in_workspace: bool
    is_file: bool = False

    def argv(self) -> list[str]:
        return [] if self.rel is None else ["--", self.rel]

    def shown(self, printed: str) -> str:
        """A path as ``rg`` printed it, as values show it: workspace-relative inside the
        workspace, absolute in a runtime-owned directory."""
        if self.in_workspace:
            return printed
        return posixpath.join(self.root, printed)

    def shown_root(self) -> str:
        if self.rel is None:
            return "." if self.in_workspace else self.root
        return self.shown(self.rel)


def _locate(cfg: ToolsConfig, tool: str, path: str) -> SearchTarget:
    with cfg.workspace.open(path) as handle:
        st = handle.st
        if st is None:
            # The message ripgrep itself prints for a missing path.
            raise SearchError(
                f"{tool} search failed (exit 2): rg: {path}: No such file or directory "
                "(os error 2)",
                "SEARCH_FAILED",
            )
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        if not is_dir and not stat_mod.S_ISREG(st.st_mode):
            # A FIFO would block ripgrep until the timeout; sockets and devices are not text.
            raise FsError(
                f'cannot search "{handle.display}": not a regular file or directory',
                "FS_NOT_REGULAR_FILE",
            )
        if not is_dir and st.st_nlink > 1 and not cfg.allow_hardlinks:
            raise FsError(
                f'cannot search "{handle.display}": the file has {st.st_nlink} hard links and '
                "may be another name of a file outside the workspace",
                "FS_HARDLINKED",
            )
        rel = os.path.relpath(handle.real, handle.root)
        return SearchTarget(
            root=handle.root,
            rel=None if rel == "." else rel,
            in_workspace=handle.root == cfg.workspace.root,
            is_file=not is_dir,
        )


async def search_target(cfg: ToolsConfig, tool: str, args: Any) -> SearchTarget:
    """Resolve the ``path`` argument physically (``None``: the workspace root)."""
    path = arg(args, "path")
    if path is None:
        return SearchTarget(root=cfg.workspace.root, rel=None, in_workspace=True)
    if is_blank(path):
        raise SearchError("path must be a non-empty string when given", "SEARCH_INVALID_ARGS")
    try:
        return await anyio.to_thread.run_sync(_locate, cfg, tool, str(path))
    except OSError as exc:
        raise io_error(exc, "search", str(path)) from exc


_warned_unconfined = False


def confined_by_kernel() -> bool:
    """Whether ``rg`` runs under Landlock here; without it, results are re-checked (and
    the first search says so once on the ``tools.search`` logger)."""
    global _warned_unconfined
    from . import _rg

    if _rg.landlock_abi() > 0:
        return True
    if not _warned_unconfined:
        _warned_unconfined = True
        logging.getLogger("tools.search").warning(
            "grep/glob: this kernel has no Landlock, so ripgrep runs unconfined; results "
            "are kept only when they re-read the same through confined descriptors"
        )
    return False


def _confirm_paths(cfg: ToolsConfig, paths: list[str]) -> list[str]:
    kept = []
    for path in paths:
        try:
            # Values show paths workspace-relative, or absolute in a runtime-owned directory;
            # both resolve (confined) as written.
            with cfg.workspace.open(path) as handle:
                if handle.st is not None and stat_mod.S_ISREG(handle.st.st_mode):
                    kept.append(path)
        except FsError:
            continue
    return kept


async def confirm_paths(cfg: ToolsConfig, paths: list[str]) -> list[str]:
    """Without Landlock: keep only the paths that resolve, confined, to a regular file.

    ``rg`` walks by path, so a directory swapped for a link mid-walk can make it list
    names from outside; a name that does not exist inside the workspace is dropped.
    """
    return await anyio.to_thread.run_sync(_confirm_paths, cfg, paths)


def _line_texts(cfg: ToolsConfig, path: str, wanted: set[int]) -> dict[int, str]:
    """The wanted lines of ``path`` as grep reports lines, read through a confined fd."""
    found: dict[int, str] = {}
    try:
        with cfg.workspace.open(path) as handle:
            st = handle.st
            if st is None or not stat_mod.S_ISREG(st.st_mode):
                return found
            if st.st_nlink > 1 and not cfg.allow_hardlinks:
                return found
            fd = open_readable(handle)
    except FsError:
        return found
    last = max(wanted)
    try:
        with os.fdopen(fd, "rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if number in wanted:
                    line = raw[:-2] if raw.endswith(b"\r\n") else raw.rstrip(b"\n")
                    try:
                        found[number] = line.decode("utf-8")
                    except UnicodeDecodeError:
                        found[number] = "(line is not valid UTF-8)"
                if number >= last:
                    break
    except OSError:
        return {}  # unreadable now: nothing of it can be confirmed
    return found


def _confirm_matches(
    cfg: ToolsConfig, matches: list[dict[str, Any]], on_disk: dict[str, str]
) -> list[dict[str, Any]]:
    wanted: dict[str, set[int]] = {}
    for match in matches:
        wanted.setdefault(match["path"], set()).add(match["lineNumber"])
    texts = {
        path: _line_texts(cfg, on_disk.get(path, path), numbers) for path, numbers in wanted.items()
    }
    return [m for m in matches if texts[m["path"]].get(m["lineNumber"]) == m["line"]]


async def confirm_matches(
    cfg: ToolsConfig, matches: list[dict[str, Any]], on_disk: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Without Landlock: keep only matches whose line reads the same through a confined fd.

    Only content the tool itself read from inside the workspace is returned, whatever
    ``rg`` was raced into reading. ``on_disk`` maps a shown path to the file's name when
    they differ (a name that is not UTF-8).
    """
    return await anyio.to_thread.run_sync(_confirm_matches, cfg, matches, on_disk or {})


# The size of ``js_json(meta).encode("utf-8")`` without building the str: for the str, int,
# bool and None values a search meta holds, msgspec writes the same bytes (no ASCII
# escaping, the same control-character escapes), in a fraction of the time.
_encode = msgspec.json.Encoder().encode


def _json_size(meta: Any) -> bytes:
    """The JSON bytes whose length ``bounded`` compares (see above). msgspec refuses a lone
    surrogate: that meta is measured from ``js_json`` with each surrogate as 3 bytes, as
    a ``TextEncoder`` counts the U+FFFD it writes for one."""
    try:
        return _encode(meta)
    except UnicodeEncodeError:
        return js_json(meta).encode("utf-8", "surrogatepass")


def bounded(items: list[Any], max_bytes: int, make: Any) -> tuple[Any, bool]:
    """``make(items[:k])`` for the largest k >= 1 whose JSON fits ``max_bytes``."""
    meta = make(items, False)
    if len(_json_size(meta)) <= max_bytes or len(items) <= 1:
        return meta, False
    lo, hi = 1, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_json_size(make(items[:mid], True))) <= max_bytes:
            lo = mid
        else:
            hi = mid - 1
    return make(items[:lo], True), True


def search_card(args: Any, result: Any) -> Any:
    _content, is_error, meta = result_parts(result)
    if is_error or not isinstance(meta, dict) or meta.get("shape") not in ("paths", "matches"):
        return None
    return {"card": "search", **meta}


async def run_search(
    cfg: ToolsConfig, ctx: Any, tool: str, argv: list[str], target: SearchTarget
) -> RgOutput:
    """``rg argv`` in ``target.root``, confined to it, cancelled by the call's signal."""
    from ._rg import run_rg

    return await run_rg(
        [*argv, *target.argv()],
        cwd=target.root,
        confine=target.root,
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
