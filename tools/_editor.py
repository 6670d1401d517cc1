"""``str_replace_editor``: view / create / str_replace / insert (tool-outputs.md §7).

The value is the rendered text itself. Unlike ``edit``, matching is on the raw file content
(no CRLF normalisation) and the path must be absolute.
"""

from __future__ import annotations

import os
import stat as stat_mod
from typing import Any

import anyio.to_thread

from engine import ToolDefinition, ToolOutput, text

from ._catalog import define_catalog_tool
from ._common import arg
from ._config import ToolsConfig
from ._errors import FsError
from ._fs_policy import FsObservationPolicy
from ._fsio import FileVersion, atomic_write, decode_utf8, digest, stat_or_none, version_of
from ._paths import Resolved
from ._text import utf16_head, utf16_len

__all__ = ["CLIP_NOTE", "build_str_replace_editor"]

CLIP_NOTE = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
    "You should retry this tool after you have searched inside the file with `grep -n` in "
    "order to find the line numbers of what you are looking for.</NOTE>"
)
_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})


class _Editor:
    """One call's worth of editor operations (blocking; run in a worker thread)."""

    def __init__(self, cfg: ToolsConfig, policy: FsObservationPolicy | None, agent: Any) -> None:
        self.cfg = cfg
        self.policy = policy
        self.agent = agent
        self.max_chars = cfg.editor_max_output_chars

    def clip(self, s: str) -> str:
        if utf16_len(s) > self.max_chars:
            return utf16_head(s, self.max_chars) + CLIP_NOTE
        return s

    def seen(self, resolved: Resolved, version: FileVersion | None) -> None:
        if self.policy is None:
            return
        if version is None:
            self.policy.observe_absent(self.agent, resolved.real)
        else:
            self.policy.observe_present(self.agent, resolved.real, version)

    def missing(self, resolved: Resolved) -> FsError:
        self.seen(resolved, None)
        return FsError(
            f"The path {resolved.display} does not exist. Please provide a valid path.",
            "FS_NOT_FOUND",
        )

    def read_text(self, resolved: Resolved, command: str) -> tuple[str, os.stat_result, bytes]:
        path = resolved.display
        st = stat_or_none(resolved)
        if st is None:
            raise self.missing(resolved)
        if stat_mod.S_ISDIR(st.st_mode):
            raise FsError(
                f"The path {path} is a directory and only the `view` command can be used on "
                "directories",
                "FS_NOT_REGULAR_FILE",
            )
        if not stat_mod.S_ISREG(st.st_mode):
            verb = "insert into" if command == "insert" else "edit"
            raise ValueError(f'cannot {verb} "{path}": not a regular file')
        try:
            with open(resolved.real, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise self.missing(resolved) from None
        if b"\x00" in data[:8192]:
            raise FsError(f'cannot read "{path}": binary file', "FS_NOT_TEXT")
        try:
            content = decode_utf8(data)
        except UnicodeDecodeError:
            raise FsError(f'cannot read "{path}": invalid UTF-8 text', "FS_NOT_TEXT") from None
        return content, st, data

    def write(self, resolved: Resolved, content: str) -> None:
        data = content.encode("utf-8")
        st = atomic_write(resolved.real, data)
        self.seen(resolved, version_of(st, digest(data)))

    # -- commands ------------------------------------------------------------------------

    def view(self, resolved: Resolved, view_range: Any) -> str:
        path = resolved.display
        st = stat_or_none(resolved)
        if st is None:
            raise self.missing(resolved)
        if stat_mod.S_ISDIR(st.st_mode):
            if view_range is not None:
                raise ValueError(
                    "The `view_range` parameter is not allowed when `path` points to a directory."
                )
            return self.listing(resolved)
        if not stat_mod.S_ISREG(st.st_mode):
            raise ValueError(f'cannot view "{path}": not a regular file or directory')
        content, st, data = self.read_text(resolved, "view")
        self.seen(resolved, version_of(st, digest(data)))
        lines = content.split("\n")
        total = len(lines)
        first, shown, suffix = 1, lines, ""
        if view_range is not None:
            if len(view_range) != 2:
                raise ValueError("Invalid `view_range`. It should be a list of two integers.")
            a, b = view_range
            where = f"Invalid `view_range`: [{a}, {b}]."
            if a < 1 or a > total:
                raise ValueError(
                    f"{where} Its first element `{a}` should be within the range of lines of "
                    f"the file: [1, {total}]"
                )
            if b > total:
                raise ValueError(
                    f"{where} Its second element `{b}` should be smaller than the number of "
                    f"lines in the file: `{total}`"
                )
            if b != -1 and b < a:
                raise ValueError(
                    f"{where} Its second element `{b}` should be larger or equal than its "
                    f"first `{a}`"
                )
            first = a
            shown = lines[a - 1 :] if b == -1 else lines[a - 1 : b]
            suffix = f" with view_range=[{a}, {b}]"
        numbered = "\n".join(f"{first + i:>6}  {line}" for i, line in enumerate(shown))
        head = (
            f"Here's the content of {path} with line numbers (which has a total of {total} lines)"
        )
        return self.clip(f"{head}{suffix}:\n{numbered}\n")

    def listing(self, resolved: Resolved) -> str:
        rows: list[tuple[str, str]] = [(resolved.display, "d")]

        def visit(real: str, shown: str, depth: int) -> None:
            try:
                entries = list(os.scandir(real))
            except OSError:
                return
            for entry in entries:
                name = entry.name
                if name.startswith(".") or name in _SKIPPED_DIRS:
                    continue
                display = os.path.join(shown, name)
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    kind = "d" if is_dir else "f" if entry.is_file(follow_symlinks=False) else "?"
                except OSError:
                    is_dir, kind = False, "?"
                rows.append((display, kind))
                if is_dir and depth < 2:
                    visit(entry.path, display, depth + 1)

        visit(resolved.real, resolved.display, 1)
        # JavaScript sorts strings by UTF-16 code units.
        rows.sort(key=lambda row: row[0].encode("utf-16-be", "surrogatepass"))
        body = "\n".join(f"{kind}\t{path}" for path, kind in rows)
        return (
            f"Here're the files and directories up to 2 levels deep in {resolved.display}, "
            "excluding hidden items, node_modules, and Python cache directories:\n"
            + self.clip(body + "\n")
            + "\n"
        )

    def create(self, resolved: Resolved, file_text: str) -> str:
        if os.path.lexists(resolved.real) or stat_or_none(resolved) is not None:
            raise ValueError(
                f"File already exists at: {resolved.display}. Cannot overwrite files using "
                "command `create`."
            )
        self.write(resolved, file_text)
        return f"New file created successfully at: {resolved.display}"

    def str_replace(self, resolved: Resolved, old: str, new: str) -> str:
        content, _st, _data = self.read_text(resolved, "str_replace")
        path = resolved.display
        count = content.count(old)
        if count == 0:
            raise FsError(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.",
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
        self.write(resolved, content.replace(old, new, 1))
        return f"The file {path} has been edited successfully."

    def insert(self, resolved: Resolved, line: int, new: str) -> str:
        content, _st, _data = self.read_text(resolved, "insert")
        lines = content.split("\n")
        if line < 0 or line > len(lines):
            raise ValueError(
                f"Invalid `insert_line` parameter: {line}. It should be within the range of "
                f"lines of the file: [0, {len(lines)}]"
            )
        self.write(resolved, "\n".join([*lines[:line], *new.split("\n"), *lines[line:]]))
        return f"The file {resolved.display} has been edited successfully."


def _required(name: str, command: str) -> ValueError:
    return ValueError(f"Parameter `{name}` is required for command: {command}")


def build_str_replace_editor(cfg: ToolsConfig) -> ToolDefinition:
    """The ``str_replace_editor`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        command = args["command"]
        raw = args["path"]
        if not raw.strip():
            raise ValueError("path must be a non-empty string")
        if not os.path.isabs(raw):
            raise ValueError(
                f"The path {raw} is not an absolute path, it should start with `/`. "
                f"Maybe you meant /{raw}?"
            )
        editor = _Editor(cfg, cfg.fs_policy, ctx.agent)
        resolved = cfg.workspace.resolve(raw, write=command != "view")
        if command == "view":
            view_range = arg(args, "view_range")
            return await anyio.to_thread.run_sync(editor.view, resolved, view_range)
        if command == "create":
            file_text = arg(args, "file_text")
            if file_text is None:
                raise _required("file_text", command)
            return await anyio.to_thread.run_sync(editor.create, resolved, file_text)
        if command == "str_replace":
            old = arg(args, "old_str")
            if old is None:
                raise _required("old_str", command)
            if old == "":
                raise ValueError("Parameter `old_str` is empty for command: str_replace")
            new = arg(args, "new_str")
            return await anyio.to_thread.run_sync(
                editor.str_replace, resolved, old, "" if new is None else new
            )
        line = arg(args, "insert_line")
        if line is None:
            raise _required("insert_line", command)
        new = arg(args, "new_str")
        if new is None:
            raise _required("new_str", command)
        return await anyio.to_thread.run_sync(editor.insert, resolved, line, new)

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
