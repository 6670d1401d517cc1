"""``glob`` and ``grep`` on ripgrep (tool-outputs.md §5, §6).

Values carry every match; the inline caps apply only to the rendered text. When a top-level
call is capped, the body saves the complete formatted list to the spill store and
``finalize_content`` swaps the "could not be saved" recovery sentence for the locator — the
render itself stays pure, and nested (code-mode) calls never spill.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import msgspec

from engine import ToolDefinition, ToolOutput, define_tool, text

from ._catalog import catalog_entry, parameter_spec
from ._common import arg, is_blank, result_parts
from ._config import ToolsConfig
from ._errors import SearchError
from ._rg import run_rg
from ._text import js_json, utf8_head

__all__ = ["build_glob", "build_grep", "glob_page", "render_grep_text"]

_VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
GLOB_UNSAVED = "The complete result could not be saved; narrow pattern or path to see more."
GREP_UNSAVED = (
    "The complete result could not be saved; narrow pattern, path, or include to see more."
)

_GLOB_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "root": {"type": "string", "required": True},
        "paths": {"type": "array", "items": {"type": "string"}, "required": True},
    },
}
_GREP_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matches": {
            "type": "array",
            "required": True,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "required": True},
                    "lineNumber": {"type": "integer", "required": True},
                    "line": {"type": "string", "required": True},
                },
            },
        }
    },
}


class _Spills:
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


def _workdir_relative(cfg: ToolsConfig, path: str) -> str:
    return cfg.workspace.relative(path) if os.path.isabs(path) else path


def _check_path(cfg: ToolsConfig, args: Any) -> str | None:
    path = arg(args, "path")
    if path is None:
        return None
    if is_blank(path):
        raise ValueError("path must be a non-empty string when given")
    cfg.workspace.resolve(path)  # confinement only; ripgrep gets the path as written
    return str(path)


def _bounded(items: list[Any], max_bytes: int, make: Any) -> tuple[Any, bool]:
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


# -- glob -------------------------------------------------------------------------------


def _group_of(path: str, root: str) -> str:
    rel = path
    if root not in (".", "") and (path == root or path.startswith(root.rstrip("/") + "/")):
        rel = path[len(root.rstrip("/")) :]
    while rel.startswith("./"):
        rel = rel[2:]
    return rel.lstrip("/").split("/", 1)[0]


def glob_page(paths: Sequence[str], root: str, cap: int) -> tuple[list[str], int, int]:
    """The sampled page of an over-cap result: ``(page, groups shown, total groups)``.

    Round-robin across top-level entries (groups in first-appearance order, each group's
    picks in modification-time order), then printed group by group.
    """
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(_group_of(path, root), []).append(path)
    members = list(groups.values())
    taken = [0] * len(members)
    picked = 0
    while picked < cap:
        progressed = False
        for index, group in enumerate(members):
            if picked >= cap:
                break
            if taken[index] < len(group):
                taken[index] += 1
                picked += 1
                progressed = True
        if not progressed:
            break
    page = [path for index, group in enumerate(members) for path in group[: taken[index]]]
    return page, sum(1 for t in taken if t), len(members)


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
    spills = _Spills(cfg, GLOB_UNSAVED, "Full sorted result stored at:")

    async def execute(args: Any, ctx: Any) -> Any:
        pattern = args["pattern"]
        if is_blank(pattern):
            raise ValueError("pattern must be a non-empty string")
        path = _check_path(cfg, args)
        argv = ["--no-config", "--files", f"--glob={pattern}", "--sort=modified"]
        argv += ["--no-ignore", "--hidden"]
        for vcs in _VCS_DIRS:
            argv += [f"--glob=!**/{vcs}", f"--glob=!**/{vcs}/**"]
        if path is not None:
            argv += ["--", path]
        out = await run_rg(
            argv,
            cwd=cfg.workspace.root,
            signal=ctx.signal,
            tool="glob",
            raw_cap=cfg.raw_output_max_bytes,
            stderr_cap=cfg.stderr_max_bytes,
        )
        raw = out.stdout.decode("utf-8", "replace")
        paths = [_workdir_relative(cfg, p) for p in raw.split("\n") if p]
        root = "." if path is None else _workdir_relative(cfg, path)
        value = {"root": root, "paths": paths}
        if len(paths) > cap:
            await spills.save(ctx, "\n".join(paths), "glob-results.txt")
        return value

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(_glob_text(value, cap, GLOB_UNSAVED)[0])]

    def meta(args: Any, value: Any) -> Any:
        _text, page = _glob_text(value, cap, GLOB_UNSAVED)
        total = len(value["paths"])

        def make(items: list[str], cut: bool) -> dict[str, Any]:
            truncated = cut or total > len(page)
            return {"shape": "paths", "paths": items, "truncated": truncated, "total": total}

        return _bounded(page, cfg.search_meta_max_bytes, make)[0]

    def present_call(args: Any) -> Any:
        title = f"Glob {args['pattern']}"
        if isinstance(arg(args, "path"), str):
            title += f" in {args['path']}"
        return {"card": "generic", "title": title, "kind": "search", "rawInput": args["pattern"]}

    return define_tool(
        name=entry["name"],
        description=description,
        parameters=parameter_spec("glob"),
        output=ToolOutput(schema=_GLOB_OUTPUT, render=render, presentation_meta=meta),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        timeout_ms=cfg.search_timeout_ms,
        finalize_content=spills.finalize,
        present_call=present_call,
        present_result=_search_card,
    )


def _search_card(args: Any, result: Any) -> Any:
    _content, is_error, meta = result_parts(result)
    if is_error or not isinstance(meta, dict) or meta.get("shape") not in ("paths", "matches"):
        return None
    return {"card": "search", **meta}


# -- grep -------------------------------------------------------------------------------


class _Text(msgspec.Struct):
    text: str | None = None
    bytes: str | None = None


class _Data(msgspec.Struct):
    path: _Text | None = None
    lines: _Text | None = None
    line_number: int | None = None


class _Record(msgspec.Struct):
    type: str
    data: _Data | None = None


_RECORDS = msgspec.json.Decoder(list[_Record])


def _malformed(detail: str) -> SearchError:
    return SearchError(f"grep received malformed ripgrep --json output ({detail})", "SEARCH_FAILED")


def _diagnose(lines: list[bytes]) -> SearchError:
    """The reference's detail for the first malformed line (slow path, errors only)."""
    for line in lines:
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return _malformed("a line is not JSON")
        if not isinstance(record, dict):
            return _malformed("a record is not an object")
        if record.get("type") != "match":
            continue
        data = record.get("data")
        if not isinstance(data, dict):
            return _malformed("a match record has no data")
        path = data.get("path")
        if not isinstance(path, dict) or not isinstance(path.get("text"), str):
            return _malformed("a match record has no path text")
        if not isinstance(data.get("line_number"), int):
            return _malformed("a match record has no line number")
        content = data.get("lines")
        if not isinstance(content, dict):
            return _malformed("a match record has no line content")
        if not isinstance(content.get("text"), str) and not isinstance(content.get("bytes"), str):
            return _malformed("a match record has neither line text nor bytes")
    return _malformed("a line is not JSON")


def _parse_matches(cfg: ToolsConfig, stdout: bytes) -> list[dict[str, Any]]:
    lines = [line for line in stdout.split(b"\n") if line]
    if not lines:
        return []
    try:
        records = _RECORDS.decode(b"[" + b",".join(lines) + b"]")
    except msgspec.DecodeError:
        raise _diagnose(lines) from None
    matches: list[dict[str, Any]] = []
    relative: dict[str, str] = {}
    for record in records:
        if record.type != "match":
            continue
        data = record.data
        if data is None:
            raise _diagnose(lines)
        if data.path is None or data.path.text is None:
            raise _malformed("a match record has no path text")
        if data.line_number is None:
            raise _malformed("a match record has no line number")
        if data.lines is None:
            raise _malformed("a match record has no line content")
        line = data.lines.text
        if line is None:
            if data.lines.bytes is None:
                raise _malformed("a match record has neither line text nor bytes")
            line = "(line is not valid UTF-8)"
        elif line.endswith("\n"):
            line = line[:-2] if line.endswith("\r\n") else line[:-1]
        raw_path = data.path.text
        path = relative.get(raw_path)
        if path is None:
            path = relative[raw_path] = _workdir_relative(cfg, raw_path)
        matches.append({"path": path, "lineNumber": data.line_number, "line": line})
    return matches


def _preview(line: str, max_bytes: int) -> str:
    if len(line) * 4 <= max_bytes:
        return line
    data = line.encode("utf-8")
    if len(data) <= max_bytes:
        return line
    return utf8_head(data, max_bytes).decode("utf-8") + " (line truncated)"


def _grouped(matches: Sequence[dict[str, Any]], max_bytes: int) -> dict[str, list[dict[str, Any]]]:
    files: dict[str, list[dict[str, Any]]] = {}
    for match in matches:
        files.setdefault(match["path"], []).append(
            {"lineNumber": match["lineNumber"], "line": _preview(match["line"], max_bytes)}
        )
    return files


def _format_groups(files: dict[str, list[dict[str, Any]]]) -> str:
    return "\n\n".join(
        path + "".join(f"\nLine {m['lineNumber']}: {m['line']}" for m in rows)
        for path, rows in files.items()
    )


def _found(total: int) -> str:
    return f"Found {total} match" if total == 1 else f"Found {total} matches"


def render_grep_text(
    matches: Sequence[dict[str, Any]], cap: int, max_bytes: int, recovery: str
) -> str:
    """The inline ``grep`` rendering (header, grouped rows, recovery note when capped)."""
    total = len(matches)
    if total == 0:
        return "No matches found"
    if total <= cap:
        return f"{_found(total)}\n\n{_format_groups(_grouped(matches, max_bytes))}"
    body = _format_groups(_grouped(matches[:cap], max_bytes))
    return f"Found {cap} of {total} matches\n\n{body}\n\n({recovery})"


def _check_include(include: Any) -> str | None:
    if include is None:
        return None
    if is_blank(include):
        raise ValueError("include must be a non-empty glob when given")
    if include.strip().startswith("!"):
        raise ValueError(
            'include must be a positive glob filter; negated patterns ("!…") are not supported'
        )
    depth = 0
    for ch in include:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            raise ValueError(
                "include must be one glob, not a comma-separated list (use {a,b} alternation instead)"
            )
    return str(include)


def build_grep(cfg: ToolsConfig) -> ToolDefinition:
    """The ``grep`` tool bound to ``cfg``."""
    entry = catalog_entry("grep")
    cap = cfg.grep_max_matches
    line_bytes = cfg.grep_max_line_bytes
    description = entry["description"]
    if cap != 250:
        description = description.replace("first 250 matches", f"first {cap} matches")
    spills = _Spills(cfg, GREP_UNSAVED, "Full grep result stored at:")

    async def execute(args: Any, ctx: Any) -> Any:
        pattern = args["pattern"]
        if pattern == "":
            raise ValueError("pattern must be a non-empty string")
        path = _check_path(cfg, args)
        include = _check_include(arg(args, "include"))
        argv = ["--no-config", "--json", f"--regexp={pattern}"]
        if include is not None:
            argv.append(f"--glob={include}")
        if path is not None:
            argv += ["--", path]
        out = await run_rg(
            argv,
            cwd=cfg.workspace.root,
            signal=ctx.signal,
            tool="grep",
            raw_cap=cfg.raw_output_max_bytes,
            stderr_cap=cfg.stderr_max_bytes,
        )
        matches = _parse_matches(cfg, out.stdout)
        if len(matches) > cap:
            full = f"{_found(len(matches))}\n\n{_format_groups(_grouped(matches, line_bytes))}"
            await spills.save(ctx, full, "grep-results.txt")
        return {"matches": matches}

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(render_grep_text(value["matches"], cap, line_bytes, GREP_UNSAVED))]

    def meta(args: Any, value: Any) -> Any:
        matches = value["matches"]
        total = len(matches)
        files = list(_grouped(matches[:cap], line_bytes).items())

        def make(items: list[tuple[str, Any]], cut: bool) -> dict[str, Any]:
            groups = [{"path": path, "matches": rows} for path, rows in items]
            truncated = cut or total > cap
            return {"shape": "matches", "files": groups, "truncated": truncated, "total": total}

        return _bounded(files, cfg.search_meta_max_bytes, make)[0]

    def present_call(args: Any) -> Any:
        title = f"Grep {args['pattern']}"
        if isinstance(arg(args, "path"), str):
            title += f" in {args['path']}"
        if isinstance(arg(args, "include"), str):
            title += f" ({args['include']})"
        return {"card": "generic", "title": title, "kind": "search", "rawInput": args["pattern"]}

    return define_tool(
        name=entry["name"],
        description=description,
        parameters=parameter_spec("grep"),
        output=ToolOutput(schema=_GREP_OUTPUT, render=render, presentation_meta=meta),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        timeout_ms=cfg.search_timeout_ms,
        finalize_content=spills.finalize,
        present_call=present_call,
        present_result=_search_card,
    )
