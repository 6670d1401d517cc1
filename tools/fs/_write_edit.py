"""``write`` and ``edit``: whole-file writes and literal replacements.

Both write atomically (temp file + ``renameat`` in the physical parent directory's
descriptor, see ``_io``), check and record versions with the read-before-write policy on
the descriptor they replace, and return full before/after texts so the ``diff`` card can be
rebuilt from ``meta`` without touching the disk again. Both compute the size of what they
would write first and refuse a result over ``ToolsConfig.max_result_bytes``
(``FS_TOO_LARGE``) before building it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import arg, is_blank, result_parts
from .._config import ToolsConfig
from .._errors import FsError, io_error
from .._text import crlf_to_lf
from ._diff import diff_hunks
from ._io import (
    FileVersion,
    check_regular,
    decode_utf8,
    digest,
    open_entry,
    read_fd,
    replace_entry,
    utf8_len,
    version_of,
)
from ._paths import Handle

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


def _too_large(display: str, size: int, cap: int, what: str) -> FsError:
    return FsError(
        f'cannot {what} "{display}": the result would be {size} bytes, over the {cap}-byte limit',
        "FS_TOO_LARGE",
    )


def _prior(entry: Handle) -> tuple[FileVersion, bytes | None]:
    """The version of the existing file at ``entry`` and its bytes when small enough to
    serve as the diff basis (``None`` beyond ``_DIFF_BASIS_MAX_BYTES``)."""
    fd, st = open_entry(entry)
    try:
        if st.st_size >= _DIFF_BASIS_MAX_BYTES:
            return version_of(st, None), None
        data = read_fd(fd, _DIFF_BASIS_MAX_BYTES)
    finally:
        os.close(fd)
    return version_of(st, digest(data)), data


def _write_file(
    cfg: ToolsConfig, agent: Any, raw: str, content: str
) -> tuple[dict[str, Any], str, FileVersion]:
    cap = cfg.max_result_bytes
    size = utf8_len(content)
    with cfg.workspace.entry(raw, create_parents=True) as entry:
        display = entry.display
        if size > cap:
            raise _too_large(display, size, cap, "write")
        if not entry.name:
            raise FsError(f'cannot write "{display}": not a regular file', "FS_NOT_REGULAR_FILE")
        current: FileVersion | None = None
        data: bytes | None = None
        if entry.st is not None:
            check_regular(entry.st, display, "write", allow_hardlinks=cfg.allow_hardlinks)
            current, data = _prior(entry)
        if cfg.fs_policy is not None:
            cfg.fs_policy.check("write", agent, entry.real, display, current)
        before: str | None = None
        if data is not None and b"\x00" not in data[:8192]:
            try:
                before = crlf_to_lf(decode_utf8(data))
            except UnicodeDecodeError:
                before = None
        out = content.encode("utf-8")
        st = replace_entry(entry, out)
        if len(out) >= _DIFF_BASIS_MAX_BYTES:
            before = None
        value = {
            "path": display,
            "operation": "update" if entry.st is not None else "create",
            "before": before,
            "after": crlf_to_lf(content),
        }
        return value, entry.real, version_of(st, digest(out))


def _edit_file(
    cfg: ToolsConfig, agent: Any, raw: str, old: str, new: str, replace_all: bool
) -> tuple[dict[str, Any], str, FileVersion]:
    cap = cfg.max_result_bytes
    policy = cfg.fs_policy
    with cfg.workspace.entry(raw, create_parents=False) as entry:
        path = entry.display
        if entry.st is None:
            if policy is not None:
                policy.check("edit", agent, entry.real, path, None)
            # Without the policy a vanished file reads as a stale version (``FS_STALE_VERSION``).
            raise FsError(
                f'cannot edit "{path}": file changed since it was read — re-read the file, '
                "then retry",
                "FS_STALE_VERSION",
            )
        if not entry.name:
            raise FsError(f'cannot edit "{path}": not a regular file', "FS_NOT_REGULAR_FILE")
        check_regular(entry.st, path, "edit", allow_hardlinks=cfg.allow_hardlinks)
        if entry.st.st_size > cap:
            raise FsError(
                f'cannot edit "{path}": the file is {entry.st.st_size} bytes, over the '
                f"{cap}-byte limit",
                "FS_TOO_LARGE",
            )
        fd, st = open_entry(entry)
        try:
            data = read_fd(fd, cap)
        finally:
            os.close(fd)
        if len(data) > cap:
            raise _too_large(path, len(data), cap, "edit")
        if policy is not None:
            policy.check("edit", agent, entry.real, path, version_of(st, digest(data)))
        if b"\x00" in data:
            raise FsError(f'cannot edit "{path}": binary file', "FS_NOT_TEXT")
        try:
            original = decode_utf8(data)
        except UnicodeDecodeError:
            raise FsError(f'cannot edit "{path}": invalid UTF-8 text', "FS_NOT_TEXT") from None
        del data
        before = crlf_to_lf(original)
        needle = crlf_to_lf(old)
        replacement = crlf_to_lf(new)
        count = before.count(needle)
        if count == 0:
            raise FsError(f'old_string was not found in "{path}"', "FS_EDIT_NOT_FOUND")
        if count > 1 and not replace_all:
            raise FsError(
                f'old_string matched {count} times in "{path}"; provide a more specific '
                "old_string or set replace_all to true",
                "FS_AMBIGUOUS_EDIT",
            )
        head = original[:_STYLE_SCAN]
        crlf_count = head.count("\r\n")
        crlf = crlf_count > head.count("\n") - crlf_count
        # The size of the result, from counts alone, before anything is built: replace_all
        # of a one-character needle in a large file can otherwise ask for gigabytes.
        grow = utf8_len(replacement) - utf8_len(needle)
        size = utf8_len(before) + count * grow
        if crlf:
            size += before.count("\n") + count * (replacement.count("\n") - needle.count("\n"))
        if size > cap:
            raise _too_large(path, size, cap, "edit")
        after = before.replace(needle, replacement)
        on_disk = after.replace("\n", "\r\n") if crlf else after
        out = on_disk.encode("utf-8")
        del on_disk
        st = replace_entry(entry, out)
        return (
            {"path": path, "before": before, "after": after},
            entry.real,
            version_of(st, digest(out)),
        )


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
    verb: str,
    work: Callable[..., tuple[dict[str, Any], str, FileVersion]],
    *args: Any,
) -> Any:
    """``work(cfg, agent, raw, *rest)`` in a worker thread; the written version goes to the
    policy."""
    try:
        value, real, version = await anyio.to_thread.run_sync(work, cfg, ctx.agent, *args)
    except OSError as exc:
        raise io_error(exc, verb, args[0]) from exc
    if cfg.fs_policy is not None:
        cfg.fs_policy.observe_present(ctx.agent, real, version)
    return value


def build_write(cfg: ToolsConfig) -> ToolDefinition:
    """The ``write`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        if is_blank(args["file_path"]):
            raise FsError("file_path must be a non-empty string", "FS_INVALID_ARGS")
        return await _commit(cfg, ctx, "write", _write_file, args["file_path"], args["content"])

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
            raise FsError("file_path must be a non-empty string", "FS_INVALID_ARGS")
        old, new = args["old_string"], args["new_string"]
        if old == "":
            raise FsError("old_string must be a non-empty string", "FS_INVALID_ARGS")
        if old == new:
            raise FsError("old_string and new_string must differ", "FS_INVALID_ARGS")
        replace_all = arg(args, "replace_all") is True
        return await _commit(cfg, ctx, "edit", _edit_file, args["file_path"], old, new, replace_all)

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
