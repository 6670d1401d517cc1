"""``str_replace_editor``: view / create / str_replace / insert.

The value is the rendered text itself. Unlike ``edit``, matching is on the raw file content
(no CRLF normalisation). Paths may be absolute or workspace-relative (messages always show
the absolute path); an absolute path outside the workspace that exists under it when read
as workspace-relative gets a "Maybe you meant <workspace>/<path>?" hint.
"""

from __future__ import annotations

import os
import stat as stat_mod
from typing import Any

import anyio.to_thread

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import arg
from .._config import ToolsConfig
from .._errors import FsError, io_error
from .._text import utf16_head, utf16_len
from ._io import (
    FileVersion,
    check_regular,
    create_entry,
    decode_utf8,
    digest,
    open_entry,
    open_readable,
    read_fd,
    replace_entry,
    utf8_len,
    version_of,
)
from ._paths import Handle
from ._policy import FsObservationPolicy

__all__ = ["CLIP_NOTE", "build_str_replace_editor"]

CLIP_NOTE = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
    "You should retry this tool after you have searched inside the file with `grep -n` in "
    "order to find the line numbers of what you are looking for.</NOTE>"
)
_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})
_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _invalid(message: str) -> FsError:
    return FsError(message, "FS_INVALID_ARGS")


class _Editor:
    """One call's worth of editor operations (blocking; run in a worker thread).

    Every command resolves its path once, into descriptors, and does its I/O on them.
    """

    def __init__(self, cfg: ToolsConfig, policy: FsObservationPolicy | None, agent: Any) -> None:
        self.cfg = cfg
        self.workspace = cfg.workspace
        self.policy = policy
        self.agent = agent
        self.max_chars = cfg.editor_max_output_chars
        self.cap = cfg.max_result_bytes

    def clip(self, s: str) -> str:
        if utf16_len(s) > self.max_chars:
            return utf16_head(s, self.max_chars) + CLIP_NOTE
        return s

    def seen(self, real: str, version: FileVersion | None) -> None:
        if self.policy is None:
            return
        if version is None:
            self.policy.observe_absent(self.agent, real)
        else:
            self.policy.observe_present(self.agent, real, version)

    def missing(self, handle: Handle) -> FsError:
        self.seen(handle.real, None)
        return FsError(
            f"The path {handle.display} does not exist. Please provide a valid path.",
            "FS_NOT_FOUND",
        )

    def too_large(self, display: str, size: int) -> FsError:
        return FsError(
            f'cannot edit "{display}": the result would be {size} bytes, over the '
            f"{self.cap}-byte limit",
            "FS_TOO_LARGE",
        )

    def decode(self, data: bytes, path: str) -> str:
        if b"\x00" in data[:8192]:
            raise FsError(f'cannot read "{path}": binary file', "FS_NOT_TEXT")
        try:
            return decode_utf8(data)
        except UnicodeDecodeError:
            raise FsError(f'cannot read "{path}": invalid UTF-8 text', "FS_NOT_TEXT") from None

    def load(self, raw: str, command: str) -> tuple[Handle, str]:
        """The entry ``raw`` names and its text, for ``str_replace``/``insert``; the policy
        is consulted on the version of the very bytes read."""
        entry = self.workspace.entry(raw, create_parents=False)
        try:
            path = entry.display
            if entry.st is None:
                if self.policy is not None:
                    self.policy.check("editor", self.agent, entry.real, path, None)
                raise self.missing(entry)
            if stat_mod.S_ISDIR(entry.st.st_mode):
                raise FsError(
                    f"The path {path} is a directory and only the `view` command can be used "
                    "on directories",
                    "FS_NOT_REGULAR_FILE",
                )
            verb = "insert into" if command == "insert" else "edit"
            check_regular(entry.st, path, verb, allow_hardlinks=self.cfg.allow_hardlinks)
            if entry.st.st_size > self.cap:
                raise self.too_large(path, entry.st.st_size)
            fd, st = open_entry(entry)
            try:
                data = read_fd(fd, self.cap)
            finally:
                os.close(fd)
            if len(data) > self.cap:
                raise self.too_large(path, len(data))
            if self.policy is not None:
                self.policy.check(
                    "editor", self.agent, entry.real, path, version_of(st, digest(data))
                )
            return entry, self.decode(data, path)
        except BaseException:
            entry.close()
            raise

    def write(self, entry: Handle, content: str) -> None:
        data = content.encode("utf-8")
        st = replace_entry(entry, data)
        self.seen(entry.real, version_of(st, digest(data)))

    # -- commands ------------------------------------------------------------------------

    def view(self, raw: str, view_range: Any) -> str:
        with self.workspace.open(raw) as handle:
            path = handle.display
            st = handle.st
            if st is None:
                raise self.missing(handle)
            if stat_mod.S_ISDIR(st.st_mode):
                if view_range is not None:
                    raise _invalid(
                        "The `view_range` parameter is not allowed when `path` points to a "
                        "directory."
                    )
                return self.listing(handle)
            if not stat_mod.S_ISREG(st.st_mode):
                raise FsError(
                    f'cannot view "{path}": not a regular file or directory', "FS_NOT_REGULAR_FILE"
                )
            check_regular(st, path, "view", allow_hardlinks=self.cfg.allow_hardlinks)
            if st.st_size > self.cap:
                raise FsError(
                    f'cannot view "{path}": the file is {st.st_size} bytes, over the '
                    f"{self.cap}-byte limit; use read with offset/limit",
                    "FS_TOO_LARGE",
                )
            fd = open_readable(handle)
            try:
                st = os.fstat(fd)
                data = read_fd(fd, self.cap)
            finally:
                os.close(fd)
            content = self.decode(data, path)
            self.seen(handle.real, version_of(st, digest(data)))
        del data
        lines = content.split("\n")
        total = len(lines)
        first, shown, suffix = 1, lines, ""
        if view_range is not None:
            if len(view_range) != 2:
                raise _invalid("Invalid `view_range`. It should be a list of two integers.")
            a, b = view_range
            where = f"Invalid `view_range`: [{a}, {b}]."
            if a < 1 or a > total:
                raise _invalid(
                    f"{where} Its first element `{a}` should be within the range of lines of "
                    f"the file: [1, {total}]"
                )
            if b > total:
                raise _invalid(
                    f"{where} Its second element `{b}` should be smaller than the number of "
                    f"lines in the file: `{total}`"
                )
            if b != -1 and b < a:
                raise _invalid(
                    f"{where} Its second element `{b}` should be larger or equal than its "
                    f"first `{a}`"
                )
            first = a
            shown = lines[a - 1 :] if b == -1 else lines[a - 1 : b]
            suffix = f" with view_range=[{a}, {b}]"
        head = (
            f"Here's the content of {path} with line numbers (which has a total of {total} lines)"
        )
        # Number only as many lines as can survive the clip: the rest would be cut anyway.
        budget = self.max_chars + 1
        rows: list[str] = []
        for i, line in enumerate(shown):
            row = f"{first + i:>6}  {line}"
            rows.append(row)
            budget -= len(row) + 1
            if budget < 0:
                break
        return self.clip(f"{head}{suffix}:\n" + "\n".join(rows) + "\n")

    def listing(self, handle: Handle) -> str:
        rows: list[tuple[str, str]] = [(handle.display, "d")]
        # Every row is at least "k\t<display>/x\n": only this many can appear before the
        # clip, so a huge directory is never held (or sorted) whole.
        keep = self.max_chars // (len(handle.display) + 4) + 2

        def order(row: tuple[str, str]) -> bytes:
            # JavaScript sorts strings by UTF-16 code units.
            return row[0].encode("utf-16-be", "surrogatepass")

        def visit(dir_fd: int, shown: str, depth: int) -> None:
            # Each level is opened from its parent's descriptor with O_NOFOLLOW: a directory
            # swapped for a link mid-listing is skipped, never followed out.
            try:
                entries = os.scandir(dir_fd)
            except OSError:
                return
            with entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(".") or name in _SKIPPED_DIRS:
                        continue
                    display = os.path.join(shown, name)
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        is_file = entry.is_file(follow_symlinks=False)
                        kind = "d" if is_dir else "f" if is_file else "?"
                    except OSError:
                        is_dir, kind = False, "?"
                    rows.append((display, kind))
                    if len(rows) > 2 * keep:
                        rows.sort(key=order)
                        del rows[keep:]
                    if is_dir and depth < 2:
                        try:
                            child = os.open(name, _LIST_FLAGS, dir_fd=dir_fd)
                        except OSError:
                            continue
                        try:
                            visit(child, display, depth + 1)
                        finally:
                            os.close(child)

        top = os.open(".", _LIST_FLAGS, dir_fd=handle.fd)
        try:
            visit(top, handle.display, 1)
        finally:
            os.close(top)
        rows.sort(key=order)
        body = "\n".join(f"{kind}\t{path}" for path, kind in rows)
        return (
            f"Here're the files and directories up to 2 levels deep in {handle.display}, "
            "excluding hidden items, node_modules, and Python cache directories:\n"
            + self.clip(body + "\n")
            + "\n"
        )

    def create(self, raw: str, file_text: str) -> str:
        with self.workspace.entry(raw, create_parents=True) as entry:
            if entry.st is not None or not entry.name:
                raise FsError(
                    f"File already exists at: {entry.display}. Cannot overwrite files using "
                    "command `create`.",
                    "FS_ALREADY_EXISTS",
                )
            size = utf8_len(file_text)
            if size > self.cap:
                raise self.too_large(entry.display, size)
            data = file_text.encode("utf-8")
            try:
                st = create_entry(entry, data)
            except FileExistsError:
                raise FsError(
                    f"File already exists at: {entry.display}. Cannot overwrite files using "
                    "command `create`.",
                    "FS_ALREADY_EXISTS",
                ) from None
            self.seen(entry.real, version_of(st, digest(data)))
            return f"New file created successfully at: {entry.display}"

    def str_replace(self, raw: str, old: str, new: str) -> str:
        entry, content = self.load(raw, "str_replace")
        with entry:
            path = entry.display
            count = content.count(old)
            if count == 0:
                raise FsError(
                    f"No replacement was performed, old_str `{old}` did not appear verbatim in "
                    f"{path}.",
                    "FS_EDIT_NOT_FOUND",
                )
            if count > 1:
                starts: list[int] = []
                at = content.find(old)
                while at >= 0:
                    starts.append(content.count("\n", 0, at) + 1)
                    at = content.find(old, at + len(old))
                listed = ", ".join(str(n) for n in starts)
                raise FsError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                    f"lines [{listed}]. Please ensure it is unique",
                    "FS_AMBIGUOUS_EDIT",
                )
            size = utf8_len(content) + utf8_len(new) - utf8_len(old)
            if size > self.cap:
                raise self.too_large(path, size)
            self.write(entry, content.replace(old, new, 1))
            return f"The file {path} has been edited successfully."

    def insert(self, raw: str, line: int, new: str) -> str:
        entry, content = self.load(raw, "insert")
        with entry:
            lines = content.split("\n")
            if line < 0 or line > len(lines):
                raise _invalid(
                    f"Invalid `insert_line` parameter: {line}. It should be within the range of "
                    f"lines of the file: [0, {len(lines)}]"
                )
            size = utf8_len(content) + utf8_len(new) + 1
            if size > self.cap:
                raise self.too_large(entry.display, size)
            self.write(entry, "\n".join([*lines[:line], *new.split("\n"), *lines[line:]]))
            return f"The file {entry.display} has been edited successfully."


def _required(name: str, command: str) -> FsError:
    return _invalid(f"Parameter `{name}` is required for command: {command}")


def _hint(cfg: ToolsConfig, raw: str) -> str:
    """ " Maybe you meant <ws>/<raw>?" for an absolute path written as if the workspace were
    ``/`` — only when that candidate exists inside the workspace, so it never points out."""
    if not raw.startswith("/"):
        return ""
    candidate = cfg.workspace.root + "/" + raw.lstrip("/")
    try:
        with cfg.workspace.open(candidate) as handle:
            if handle.exists:
                return f" Maybe you meant {handle.display}?"
    except FsError:
        pass
    return ""


async def _run(editor: _Editor, command: str, raw: str, args: Any) -> Any:
    if command == "view":
        view_range = arg(args, "view_range")
        return await anyio.to_thread.run_sync(editor.view, raw, view_range)
    if command == "create":
        file_text = arg(args, "file_text")
        if file_text is None:
            raise _required("file_text", command)
        return await anyio.to_thread.run_sync(editor.create, raw, file_text)
    if command == "str_replace":
        old = arg(args, "old_str")
        if old is None:
            raise _required("old_str", command)
        if old == "":
            raise _invalid("Parameter `old_str` is empty for command: str_replace")
        new = arg(args, "new_str")
        return await anyio.to_thread.run_sync(
            editor.str_replace, raw, old, "" if new is None else new
        )
    line = arg(args, "insert_line")
    if line is None:
        raise _required("insert_line", command)
    new = arg(args, "new_str")
    if new is None:
        raise _required("new_str", command)
    return await anyio.to_thread.run_sync(editor.insert, raw, line, new)


def build_str_replace_editor(cfg: ToolsConfig) -> ToolDefinition:
    """The ``str_replace_editor`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        command = args["command"]
        raw = args["path"]
        if not raw.strip():
            raise _invalid("path must be a non-empty string")
        editor = _Editor(cfg, cfg.fs_policy, ctx.agent)
        try:
            return await _run(editor, command, raw, args)
        except OSError as exc:
            raise io_error(exc, "edit" if command != "view" else "view", raw) from exc
        except FsError as exc:
            if exc.code == "FS_OUTSIDE_WORKSPACE" and "the path is outside" in exc.message:
                hint = await anyio.to_thread.run_sync(_hint, cfg, raw)
                if hint:
                    raise FsError(exc.message + "." + hint, exc.code) from None
            raise

    def present_call(args: Any) -> Any:
        command, path = args["command"], args["path"]
        if command == "view":
            return {"card": "generic", "title": f"view {path}", "kind": "read"}
        if command == "create":
            file_text = arg(args, "file_text")
            diff = {"path": path, "oldText": None, "newText": file_text or ""}
            return {"card": "diff", "title": f"create {path}", "diffs": [diff]}
        if command == "str_replace":
            new = arg(args, "new_str")
            diff = {"path": path, "oldText": arg(args, "old_str"), "newText": new or ""}
            return {"card": "diff", "title": f"str_replace {path}", "diffs": [diff]}
        line = arg(args, "insert_line")
        at = max(1, (line if isinstance(line, int) else 0) + 1)
        return {
            "card": "generic",
            "title": f"insert {path}",
            "kind": "edit",
            "locations": [{"path": path, "line": at}],
        }

    return define_catalog_tool(
        "str_replace_editor",
        output=ToolOutput(schema={"type": "string"}, render=lambda args, value: [text(value)]),
        execute=execute,
        # Viewing only reads; every other command mutates and runs alone.
        is_concurrency_safe=lambda args: args["command"] == "view",
        present_call=present_call,
    )
