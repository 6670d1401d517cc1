"""``grep``: matching lines, on ripgrep's ``--json`` output.

Matches are grouped by file and rendered as ``Line N: text``, at most
``ToolsConfig.grep_max_matches`` of them and each line cut at
``ToolsConfig.grep_max_line_bytes``; the value keeps every match.
"""

from __future__ import annotations

import base64
import os
import stat as stat_mod
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
import msgspec

from codemode.engine import ToolDefinition, text
from codemode.engine.json import FrozenDict, sealed, sealed_list
from codemode.engine.policies import utf8_head_bytes

from .._catalog import catalog_entry
from .._common import arg, is_blank
from .._config import ToolsConfig
from .._errors import SearchError
from ._common import (
    GREP_UNSAVED,
    SearchTarget,
    Spills,
    bounded,
    confined_by_kernel,
    confirm_matches,
    define_search_tool,
    run_search,
    search_target,
    search_title,
)

__all__ = ["build_grep", "parse_matches", "render_grep_text"]

_GREP_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matches": {
            "type": "array",
            "required": True,
            # What a program receives (the description speaks of the text listing).
            "description": "Every match, uncapped (the description's cap is its text listing's).",
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
    """The detail message for the first malformed line (slow path, errors only)."""
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
        if not isinstance(path, dict) or not (
            isinstance(path.get("text"), str) or isinstance(path.get("bytes"), str)
        ):
            return _malformed("a match record has no path text")
        if not isinstance(data.get("line_number"), int):
            return _malformed("a match record has no line number")
        content = data.get("lines")
        if not isinstance(content, dict):
            return _malformed("a match record has no line content")
        if not isinstance(content.get("text"), str) and not isinstance(content.get("bytes"), str):
            return _malformed("a match record has neither line text nor bytes")
    return _malformed("a line is not JSON")


def parse_matches(target: SearchTarget, stdout: bytes) -> list[dict[str, Any]]:
    """The match records of ``rg --json`` output, as the tool's value lists them."""
    return _parse_matches(target, stdout)[0]


def _path_of(record_path: _Text) -> tuple[str, str]:
    """A match's path as shown and as named on disk (they differ for a name that is not
    UTF-8, which ripgrep reports as base64 ``bytes``: shown with U+FFFD, as ``glob``
    shows it, and named by its bytes for the checks that open or stat it)."""
    if record_path.text is not None:
        return record_path.text, record_path.text
    if record_path.bytes is None:
        raise _malformed("a match record has no path text")
    try:
        name = base64.b64decode(record_path.bytes, validate=True)
    except ValueError:
        raise _malformed("a match record's path bytes are not base64") from None
    return name.decode("utf-8", "replace"), os.fsdecode(name)


def _parse_matches(
    target: SearchTarget, stdout: bytes
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``parse_matches`` and, for each shown path, the name on disk the checks use.

    Two names shown alike (``a\\xff`` and ``a\\xfe`` both show as ``a\ufffd``, as does a
    file really named so) cannot be told apart by what the value shows: their matches
    are left out, rather than one file's checks vouching for another's lines.
    """
    lines = [line for line in stdout.split(b"\n") if line]
    if not lines:
        return [], {}
    # Only match records matter. ripgrep writes "type" first in every per-file record, so
    # begin/end records (the bulk of the bytes, with their stats) are skipped undecoded;
    # anything else (the summary, which leads with "data", or a malformed line) is decoded.
    wanted = [
        line
        for line in lines
        if not (line.startswith(b'{"type":"begin"') or line.startswith(b'{"type":"end"'))
    ]
    try:
        records = _RECORDS.decode(b"[" + b",".join(wanted) + b"]")
    except msgspec.DecodeError:
        raise _diagnose(lines) from None
    matches: list[dict[str, Any]] = []
    relative: dict[str, str] = {}
    on_disk: dict[str, str] = {}  # shown path -> the name the checks open
    ambiguous: set[str] = set()
    for record in records:
        if record.type != "match":
            continue
        data = record.data
        if data is None:
            raise _diagnose(lines)
        if data.path is None:
            raise _malformed("a match record has no path text")
        printed, named = _path_of(data.path)
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
        path = relative.get(named)  # by the name on disk: one entry per file
        if path is None:
            path = relative[named] = target.shown(printed)
            name = path if named is printed else target.shown(named)
            if on_disk.setdefault(path, name) != name:
                ambiguous.add(path)
        # Sealed as built: str, an int (a line number fits a float) and str are lossless
        # JSON, so the pipeline's snapshot of the value need not copy 200 dicts again.
        matches.append(sealed({"path": path, "lineNumber": data.line_number, "line": line}))
    if ambiguous:
        matches = [m for m in matches if m["path"] not in ambiguous]
    return matches, on_disk


def _preview(line: str, max_bytes: int) -> str:
    if len(line) * 4 <= max_bytes:
        return line
    data = line.encode("utf-8")
    if len(data) <= max_bytes:
        return line
    return utf8_head_bytes(data, max_bytes).decode("utf-8") + " (line truncated)"


def _grouped(matches: Sequence[dict[str, Any]], max_bytes: int) -> dict[str, list[FrozenDict]]:
    # Rows are sealed (an int and a str): the meta lists them as they are, uncopied.
    files: dict[str, list[FrozenDict]] = {}
    for match in matches:
        row = sealed(
            {"lineNumber": match["lineNumber"], "line": _preview(match["line"], max_bytes)}
        )
        rows = files.get(match["path"])
        if rows is None:
            files[match["path"]] = [row]
        else:
            rows.append(row)
    return files


def _format_groups(files: dict[str, list[FrozenDict]]) -> str:
    return "\n\n".join(
        path + "".join(f"\nLine {m['lineNumber']}: {m['line']}" for m in rows)
        for path, rows in files.items()
    )


def _found(total: int) -> str:
    return f"Found {total} match" if total == 1 else f"Found {total} matches"


def _listed(
    matches: Sequence[dict[str, Any]], cap: int, max_bytes: int
) -> dict[str, list[FrozenDict]]:
    """The groups of the matches the text lists (the first ``cap``)."""
    return _grouped(matches if len(matches) <= cap else matches[:cap], max_bytes)


def _listing(total: int, files: dict[str, list[FrozenDict]], cap: int, recovery: str) -> str:
    if total == 0:
        return "No matches found"
    if total <= cap:
        return f"{_found(total)}\n\n{_format_groups(files)}"
    return f"Found {cap} of {total} matches\n\n{_format_groups(files)}\n\n({recovery})"


def render_grep_text(
    matches: Sequence[dict[str, Any]], cap: int, max_bytes: int, recovery: str
) -> str:
    """The inline ``grep`` rendering (header, grouped rows, recovery note when capped)."""
    return _listing(len(matches), _listed(matches, cap, max_bytes), cap, recovery)


def _invalid(message: str) -> SearchError:
    return SearchError(message, "SEARCH_INVALID_ARGS")


# Up to this many distinct files are stat'ed on the event loop: ~3 us each for the inodes
# rg has just read, so the loop is held under a millisecond. A worker thread's round trip
# for 200 files cost 0.6-1 ms more CPU per search on a 2-core host (and its wake-up
# waits for a core rg is using). More files than this go to a thread.
_INLINE_STATS = 256


def _without_hardlinked(
    target: SearchTarget, matches: list[dict[str, Any]], on_disk: dict[str, str]
) -> list[dict[str, Any]]:
    """``matches`` minus those in files with more than one hard link, which may be another
    name of a file outside the workspace (ripgrep cannot be told to skip them).
    ``on_disk`` names each shown path's file (``_parse_matches``)."""
    root = os.open(target.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        verdict: dict[str, bool] = {}
        kept = []
        for match in matches:
            path = match["path"]
            ok = verdict.get(path)
            if ok is None:
                name = on_disk.get(path, path)
                rel = name if target.in_workspace else os.path.relpath(name, target.root)
                try:
                    st = os.stat(rel, dir_fd=root, follow_symlinks=False)
                    ok = stat_mod.S_ISREG(st.st_mode) and st.st_nlink == 1
                except OSError:
                    ok = False
                verdict[path] = ok
            if ok:
                kept.append(match)
        return kept
    finally:
        os.close(root)


def _check_include(include: Any) -> str | None:
    if include is None:
        return None
    if is_blank(include):
        raise _invalid("include must be a non-empty glob when given")
    if include.strip().startswith("!"):
        raise _invalid(
            'include must be a positive glob filter; negated patterns ("!…") are not supported'
        )
    depth = 0
    for ch in include:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            raise _invalid(
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
    spills = Spills(cfg, GREP_UNSAVED, "Full grep result stored at:")
    last: list[tuple[Any, dict[str, list[FrozenDict]]]] = []

    def listed(value: Any) -> dict[str, list[FrozenDict]]:
        # render and presentation_meta both group the listed matches of the same frozen
        # value; keep the last grouping (holding the value keeps the identity valid).
        if last and last[0][0] is value:
            return last[0][1]
        files = _listed(value["matches"], cap, line_bytes)
        last[:] = [(value, files)]
        return files

    async def execute(args: Any, ctx: Any) -> Any:
        pattern = args["pattern"]
        if pattern == "":
            raise SearchError("pattern must be a non-empty string", "SEARCH_INVALID_ARGS")
        target = await search_target(cfg, "grep", args)
        include = _check_include(arg(args, "include"))
        argv = ["--no-config", "--json", f"--regexp={pattern}"]
        if include is not None:
            argv.append(f"--glob={include}")
        out = await run_search(cfg, ctx, "grep", argv, target)
        matches, on_disk = _parse_matches(target, out.stdout)
        if matches and not confined_by_kernel():
            matches = await confirm_matches(cfg, matches, on_disk)
        elif matches and not cfg.allow_hardlinks and not target.is_file:
            few = len(matches) <= _INLINE_STATS or (
                len({m["path"] for m in matches}) <= _INLINE_STATS
            )
            if few:
                matches = _without_hardlinked(target, matches, on_disk)
            else:
                matches = await anyio.to_thread.run_sync(
                    _without_hardlinked, target, matches, on_disk
                )
        if len(matches) > cap:
            full = f"{_found(len(matches))}\n\n{_format_groups(_grouped(matches, line_bytes))}"
            await spills.save(ctx, full, "grep-results.txt")
        # Sealed as a whole: the pipeline's snapshot returns the value as it is.
        return sealed({"matches": sealed_list(matches)})

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(_listing(len(value["matches"]), listed(value), cap, GREP_UNSAVED))]

    def meta(args: Any, value: Any) -> Any:
        total = len(value["matches"])
        # Built sealed, so the pipeline takes the meta as it is instead of copying every
        # group and row again.
        groups = [
            sealed({"path": path, "matches": sealed_list(rows)})
            for path, rows in listed(value).items()
        ]

        def make(items: list[FrozenDict], cut: bool) -> FrozenDict:
            truncated = cut or total > cap
            return sealed(
                {
                    "shape": "matches",
                    "files": sealed_list(items),
                    "truncated": truncated,
                    "total": total,
                }
            )

        return bounded(groups, cfg.search_meta_max_bytes, make)[0]

    def title(args: Any) -> str:
        title = search_title("Grep", args)
        if isinstance(arg(args, "include"), str):
            title += f" ({args['include']})"
        return title

    return define_search_tool(
        cfg,
        "grep",
        description=description,
        schema=_GREP_OUTPUT,
        render=render,
        meta=meta,
        execute=execute,
        spills=spills,
        title=title,
    )
