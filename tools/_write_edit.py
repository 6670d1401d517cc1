"""``write`` and ``edit``: whole-file writes and literal replacements (tool-outputs.md §2, §3).

Both write atomically (temp file + rename) through the link-resolved real path, record the
new version with the read-before-write policy, and return full before/after texts so the
``diff`` card can be rebuilt from ``meta`` without touching the disk again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from engine import ToolDefinition, ToolOutput, text

from ._catalog import define_catalog_tool
from ._common import arg, is_blank, result_parts
from ._config import ToolsConfig
from ._diff import diff_hunks
from ._errors import FsError
from ._fsio import (
    FileVersion,
    atomic_write,
    decode_utf8,
    digest,
    read_regular_file,
    regular_stat,
    version_of,
)
from ._paths import Resolved
from ._text import crlf_to_lf

__all__ = ["build_edit", "build_write"]

_DIFF_BASIS_MAX_BYTES = 10 * 1024 * 1024
_STYLE_SCAN = 4096

_NULLABLE_STRING = {"oneOf": [{"type": "string"}, {"type": "null"}]}

_WRITE_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "required": True},
        "operation": {"type": "string", "enum": ["create", "update"], "required": True},
        "before": {**_NULLABLE_STRING, "required": True},
        "after": {"type": "string", "required": True},
    },
}
_EDIT_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "required": True},
        "before": {"type": "string", "required": True},
        "after": {"type": "string", "required": True},
    },
}


def _written_version(st: os.stat_result, data: bytes) -> FileVersion:
    return version_of(st, digest(data))


def _prior_text(resolved: Resolved) -> tuple[bool, str | None]:
    """``(existed, LF-normalised prior text or None)`` for ``write``."""
    st = regular_stat(resolved, "write")
    if st is None:
        return False, None
    if st.st_size >= _DIFF_BASIS_MAX_BYTES:
        return True, None
    try:
        with open(resolved.real, "rb") as fh:
            data = fh.read()
        if b"\x00" in data[:8192]:
            return True, None
        return True, crlf_to_lf(decode_utf8(data))
    except (OSError, UnicodeDecodeError):
        return True, None


def _write_file(resolved: Resolved, content: str) -> tuple[dict[str, Any], FileVersion]:
    existed, before = _prior_text(resolved)
    data = content.encode("utf-8")
    try:
        st = atomic_write(resolved.real, data)
    except NotADirectoryError:
        raise FsError(
            f'cannot resolve "{resolved.display}": a parent path segment is not a directory',
            "FS_NOT_FOUND",
        ) from None
    if len(data) >= _DIFF_BASIS_MAX_BYTES:
        before = None
    value = {
        "path": resolved.display,
        "operation": "update" if existed else "create",
        "before": before,
        "after": crlf_to_lf(content),
    }
    return value, _written_version(st, data)


def _edit_file(
    resolved: Resolved, old: str, new: str, replace_all: bool
) -> tuple[dict[str, Any], FileVersion]:
    path = resolved.display
    read = read_regular_file(resolved, "edit")
    if read is None:
        # Without the policy a vanished file reads as a stale version (the reference's code).
        raise FsError(
            f'cannot edit "{path}": file changed since it was read — re-read the file, then retry',
            "FS_STALE_VERSION",
        )
    data, _st = read
    if b"\x00" in data:
        raise FsError(f'cannot edit "{path}": binary file', "FS_NOT_TEXT")
    try:
        original = decode_utf8(data)
    except UnicodeDecodeError:
        raise FsError(f'cannot edit "{path}": invalid UTF-8 text', "FS_NOT_TEXT") from None
    before = crlf_to_lf(original)
    needle = crlf_to_lf(old)
    count = before.count(needle)
    if count == 0:
        raise FsError(f'old_string was not found in "{path}"', "FS_EDIT_NOT_FOUND")
    if count > 1 and not replace_all:
        raise FsError(
            f'old_string matched {count} times in "{path}"; provide a more specific '
            "old_string or set replace_all to true",
            "FS_AMBIGUOUS_EDIT",
        )
    after = before.replace(needle, crlf_to_lf(new))
    head = original[:_STYLE_SCAN]
    crlf = head.count("\r\n")
    on_disk = after.replace("\n", "\r\n") if crlf > head.count("\n") - crlf else after
    out = on_disk.encode("utf-8")
    st = atomic_write(resolved.real, out)
    return {"path": path, "before": before, "after": after}, _written_version(st, out)


def _diff_meta(value: Any) -> Any:
    before = value.get("before")
    if not isinstance(before, str):
        return {"diffs": []}
    return {"diffs": diff_hunks(value["path"], before, value["after"])}


def _meta_diffs(result: Any) -> list[Any] | None:
    _content, is_error, meta = result_parts(result)
    if is_error or not isinstance(meta, dict) or not isinstance(meta.get("diffs"), list):
        return None
    return list(meta["diffs"])


def _meta(args: Any, value: Any) -> Any:
    return _diff_meta(value)


async def _commit(
    cfg: ToolsConfig,
    ctx: Any,
    resolved: Resolved,
    work: Callable[..., tuple[dict[str, Any], FileVersion]],
    *args: Any,
) -> Any:
    """``work(resolved, *args)`` in a worker thread; the written version goes to the policy."""
    value, version = await anyio.to_thread.run_sync(work, resolved, *args)
    if cfg.fs_policy is not None:
        cfg.fs_policy.observe_present(ctx.agent, resolved.real, version)
    return value


def build_write(cfg: ToolsConfig) -> ToolDefinition:
    """The ``write`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        if is_blank(args["file_path"]):
            raise ValueError("file_path must be a non-empty string")
        resolved = cfg.workspace.resolve(args["file_path"], write=True)
        return await _commit(cfg, ctx, resolved, _write_file, args["content"])

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        verb = "Created file" if value["operation"] == "create" else "Updated file"
        return [
            text(f"<path>{value['path']}</path>\n<type>file</type>\n<content>\n{verb}\n</content>")
        ]

    def fallback(args: Any) -> list[dict[str, Any]]:
        return [{"path": args["file_path"], "oldText": None, "newText": args["content"]}]

    def present_call(args: Any) -> Any:
        return {
            "card": "diff",
            "title": f"Write {args['file_path']}",
            "diffs": fallback(args),
            "locations": [{"path": args["file_path"]}],
        }

    def present_result(args: Any, result: Any) -> Any:
        diffs = _meta_diffs(result)
        if diffs is None and result_parts(result)[1]:
            return None
        return {"card": "diff", "diffs": diffs or fallback(args)}

    return define_catalog_tool(
        "write",
        output=ToolOutput(schema=_WRITE_OUTPUT, render=render, presentation_meta=_meta),
        execute=execute,
        present_call=present_call,
        present_result=present_result,
    )


def build_edit(cfg: ToolsConfig) -> ToolDefinition:
    """The ``edit`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        if is_blank(args["file_path"]):
            raise ValueError("file_path must be a non-empty string")
        old, new = args["old_string"], args["new_string"]
        if old == "":
            raise ValueError("old_string must be a non-empty string")
        if old == new:
            raise ValueError("old_string and new_string must differ")
        resolved = cfg.workspace.resolve(args["file_path"], write=True)
        replace_all = arg(args, "replace_all") is True
        return await _commit(cfg, ctx, resolved, _edit_file, old, new, replace_all)

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        if arg(args, "replace_all") is True:
            return [
                text(
                    f"The file {value['path']} has been updated. "
                    "All occurrences were successfully replaced."
                )
            ]
        return [text(f"The file {value['path']} has been updated successfully.")]

    def present_call(args: Any) -> Any:
        return {
            "card": "diff",
            "title": f"Edit {args['file_path']}",
            "diffs": [
                {
                    "path": args["file_path"],
                    "oldText": args["old_string"] or None,
                    "newText": args["new_string"],
                }
            ],
        }

    def present_result(args: Any, result: Any) -> Any:
        diffs = _meta_diffs(result)
        return None if diffs is None else {"card": "diff", "diffs": diffs}

    return define_catalog_tool(
        "edit",
        output=ToolOutput(schema=_EDIT_OUTPUT, render=render, presentation_meta=_meta),
        execute=execute,
        present_call=present_call,
        present_result=present_result,
    )
