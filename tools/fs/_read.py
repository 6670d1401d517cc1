"""``read``: a numbered window of a UTF-8 text file (``N: text`` rows).

The file is always scanned to the end (``totalLines`` is exact) in 1 MiB chunks through an
incremental strict UTF-8 decoder, so a 10 MB file costs one pass and bounded memory; only the
requested window's lines are materialised.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
from typing import Any, BinaryIO

import anyio.to_thread

from codemode.engine import AbortSignal, ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool, parameter_spec
from .._common import arg, as_positive_int, is_blank, result_parts, text_of
from .._config import ToolsConfig
from .._errors import FsError, io_error
from .._text import utf16_head, utf16_len
from ._io import DIGEST_MAX_BYTES, FileVersion, check_regular, open_readable, version_of

__all__ = ["build_read", "language_of"]

_CHUNK = 1024 * 1024
_NUL_SCAN = 8192

_LANGS: dict[str, str] = {
    **dict.fromkeys(("ts", "mts", "cts"), "ts"),
    "tsx": "tsx",
    **dict.fromkeys(("js", "mjs", "cjs"), "js"),
    "jsx": "jsx",
    **dict.fromkeys(("json", "jsonc"), "json"),
    **{ext: ext for ext in ("py", "rb", "go", "rs", "java", "cs", "swift", "php", "toml")},
    **{ext: ext for ext in ("ini", "mdx", "css", "scss", "less", "sql", "xml", "lua")},
    **dict.fromkeys(("c", "h"), "c"),
    **dict.fromkeys(("cc", "cpp", "hpp", "cxx"), "cpp"),
    "kt": "kotlin",
    **dict.fromkeys(("sh", "bash", "zsh"), "sh"),
    **dict.fromkeys(("yaml", "yml"), "yaml"),
    **dict.fromkeys(("md", "markdown"), "md"),
    **dict.fromkeys(("html", "htm"), "html"),
}

_LINE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "number": {"type": "integer", "required": True},
        "text": {"type": "string", "required": True},
    },
}
_OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "required": True},
        "offset": {"type": "integer", "required": True},
        "lines": {"type": "array", "items": _LINE_SCHEMA, "required": True},
        "totalLines": {"type": "integer", "required": True},
    },
}

_ENVELOPE = re.compile(r"^<path>.*?</path>\n<type>file</type>\n<content>\n(.*)\n</content>$", re.S)


def language_of(path: str) -> str | None:
    """The card language of ``path`` from its lowercase extension (dotfiles: none)."""
    base = os.path.basename(path)
    stem, dot, ext = base.rpartition(".")
    if not dot or not stem:
        return None
    return _LANGS.get(ext.lower())


class _Window:
    """Collects the requested lines while the whole file streams past."""

    __slots__ = ("count", "end", "kept", "max_bytes", "max_line", "offset", "stopped", "used")

    def __init__(self, offset: int, limit: int, max_line: int, max_bytes: int) -> None:
        self.offset = offset
        self.end = offset + limit - 1
        self.max_line = max_line
        self.max_bytes = max_bytes
        self.kept: list[dict[str, Any]] = []
        self.used = 0
        self.stopped = False
        self.count = 0  # completed lines so far

    def wants(self, first: int, last: int) -> bool:
        return not self.stopped and first <= self.end and last >= self.offset

    def add(self, number: int, line: str, overlong: bool) -> None:
        if self.stopped or not (self.offset <= number <= self.end):
            return
        if line.endswith("\r") and not overlong:
            line = line[:-1]
        cap = self.max_line
        if overlong or (len(line) > cap // 2 and utf16_len(line) > cap):
            line = utf16_head(line, cap) + f"... (line truncated to {cap} chars)"
        cost = len(line.encode("utf-8")) + (1 if self.kept else 0)
        if self.used + cost > self.max_bytes:
            self.stopped = True
            return
        self.used += cost
        self.kept.append({"number": number, "text": line})


class _Partial:
    """The line being read: its first ``keep`` chars, whether more were dropped, emptiness."""

    __slots__ = ("keep", "nonempty", "over", "pieces", "size")

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.reset()

    def reset(self) -> None:
        self.pieces: list[str] = []
        self.size = 0
        self.over = False
        self.nonempty = False

    def extend(self, piece: str) -> None:
        if not piece:
            return
        self.nonempty = True
        room = self.keep - self.size
        if len(piece) > room:
            self.over = True
            piece = piece[:room]
        if piece:
            self.pieces.append(piece)
            self.size += len(piece)

    def text(self) -> str:
        return "".join(self.pieces)


def _feed(window: _Window, partial: _Partial, chunk: str) -> None:
    newlines = chunk.count("\n")
    current = window.count + 1
    if not window.wants(current, current + newlines):
        # Fast path: no line this chunk touches is in the window; only count.
        window.count += newlines
        if newlines:
            partial.reset()
            partial.nonempty = not chunk.endswith("\n")
        else:
            partial.nonempty = True
        return
    pieces = chunk.split("\n")
    for piece in pieces[:-1]:
        partial.extend(piece)
        window.count += 1
        window.add(window.count, partial.text(), partial.over)
        partial.reset()
    partial.extend(pieces[-1])


def _scan(
    cfg: ToolsConfig, raw: str, window: _Window, signal: AbortSignal
) -> tuple[str, str, tuple[int, FileVersion] | None]:
    """Resolve ``raw`` and stream the file into ``window``.

    Returns ``(display, real, (totalLines, version))``, the last ``None`` if missing. The
    bytes come from the descriptor resolution produced, never from a second path walk.
    """
    with cfg.workspace.open(raw) as handle:
        if handle.st is None:
            return handle.display, handle.real, None
        check_regular(handle.st, handle.display, "read", allow_hardlinks=cfg.allow_hardlinks)
        fd = open_readable(handle)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            return handle.display, handle.real, _stream(fh, st, handle.display, window, signal)


def _stream(
    fh: BinaryIO, st: os.stat_result, display: str, window: _Window, signal: AbortSignal
) -> tuple[int, FileVersion]:
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    hasher = hashlib.blake2b(digest_size=16) if st.st_size <= DIGEST_MAX_BYTES else None
    partial = _Partial(window.max_line + 2)  # enough of a long line to cut it and strip "\r"
    first = True
    while True:
        if signal.aborted:
            raise FsError("read aborted", "FS_ABORTED")
        raw = fh.read(_CHUNK)
        if first and b"\x00" in raw[:_NUL_SCAN]:
            raise FsError(f'cannot read "{display}": binary file', "FS_NOT_TEXT")
        if hasher is not None:
            hasher.update(raw)
        try:
            chunk = decoder.decode(raw, final=not raw)
        except UnicodeDecodeError:
            raise FsError(f'cannot read "{display}": invalid UTF-8 text', "FS_NOT_TEXT") from None
        if first:
            first = False
            if chunk.startswith("\ufeff"):
                chunk = chunk[1:]
        if not raw:
            break
        if chunk:
            _feed(window, partial, chunk)
    if partial.nonempty:
        window.count += 1
        window.add(window.count, partial.text(), partial.over)
    return window.count, version_of(st, hasher.digest() if hasher is not None else None)


def _limit_of(args: Any, default: int) -> int:
    value = as_positive_int(arg(args, "limit"))
    return value if value is not None else default


def _render(args: Any, value: Any, default_limit: int) -> list[dict[str, Any]]:
    lines = value["lines"]
    offset = value["offset"]
    total = value["totalLines"]
    limit = _limit_of(args, default_limit)
    end = lines[-1]["number"] if lines else offset - 1
    if len(lines) < limit and end < total:
        footer = f"(Output capped. Showing lines {offset}-{end}. Use offset={end + 1} to continue.)"
    elif end < total:
        footer = f"(Showing lines {offset}-{end} of {total}. Use offset={end + 1} to continue.)"
    else:
        footer = f"(End of file - total {total} lines)"
    rows = "\n".join(f"{line['number']}: {line['text']}" for line in lines)
    body = f"{rows}\n\n{footer}" if rows else footer
    return [text(f"<path>{value['path']}</path>\n<type>file</type>\n<content>\n{body}\n</content>")]


def build_read(cfg: ToolsConfig) -> ToolDefinition:
    """The ``read`` tool bound to ``cfg``."""
    spec = parameter_spec("read")
    default_limit = cfg.read_limit
    if default_limit != 2000:
        spec["limit"]["description"] = (
            f"Maximum number of lines to return. Defaults to {default_limit}."
        )

    async def execute(args: Any, ctx: Any) -> Any:
        file_path = args["file_path"]
        if is_blank(file_path):
            raise FsError("file_path must be a non-empty string", "FS_INVALID_ARGS")
        offset = 1
        if arg(args, "offset") is not None:
            checked = as_positive_int(args["offset"])
            if checked is None:
                raise FsError("offset must be a positive integer", "FS_INVALID_ARGS")
            offset = checked
        limit = default_limit
        if arg(args, "limit") is not None:
            checked = as_positive_int(args["limit"])
            if checked is None:
                raise FsError("limit must be a positive integer", "FS_INVALID_ARGS")
            if checked > default_limit:
                raise FsError(
                    f"limit must be less than or equal to {default_limit}", "FS_INVALID_ARGS"
                )
            limit = checked
        window = _Window(offset, limit, cfg.read_max_line_length, cfg.read_max_bytes)
        try:
            display, real, scanned = await anyio.to_thread.run_sync(
                _scan, cfg, file_path, window, ctx.signal
            )
        except OSError as exc:
            raise io_error(exc, "read", file_path) from exc
        policy = cfg.fs_policy
        if scanned is None:
            if policy is not None:
                policy.observe_absent(ctx.agent, real)
            raise FsError(f'cannot read "{display}": not found', "FS_NOT_FOUND")
        total, version = scanned
        if offset > total and not (total == 0 and offset == 1):
            raise FsError(
                f'offset {offset} is out of range for "{display}" ({total} lines)',
                "FS_NOT_FOUND",
            )
        if policy is not None:
            policy.observe_present(ctx.agent, real, version)
        return {
            "path": display,
            "offset": offset,
            "lines": window.kept,
            "totalLines": total,
        }

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return _render(args, value, default_limit)

    def meta(args: Any, value: Any) -> Any:
        out: dict[str, Any] = {
            "path": value["path"],
            "offset": value["offset"],
            "lines": len(value["lines"]),
            "totalLines": value["totalLines"],
        }
        lang = language_of(value["path"])
        if lang is not None:
            out["lang"] = lang
        return out

    def present_call(args: Any) -> Any:
        file_path = args["file_path"]
        offset = arg(args, "offset")
        limit = arg(args, "limit")
        title = f"Read {file_path}"
        start = offset if isinstance(offset, (int, float)) else 1
        if isinstance(limit, (int, float)) and limit > 0:
            title += f" ({_num(start)} - {_num(start + limit - 1)})"
        elif isinstance(offset, (int, float)):
            title += f" (from line {_num(offset)})"
        return {
            "card": "generic",
            "title": title,
            "kind": "read",
            "locations": [{"path": file_path, "line": start}],
        }

    def present_result(args: Any, result: Any) -> Any:
        content, is_error, card_meta = result_parts(result)
        if is_error or not isinstance(card_meta, dict):
            return None
        keys = ("path", "offset", "lines", "totalLines")
        if not all(isinstance(card_meta.get(k), str if k == "path" else int) for k in keys):
            return None
        body = text_of(content)
        match = _ENVELOPE.match(body) if body is not None else None
        if match is None:
            return None
        # The card's lines are ``{number, text}`` rows; the meta only counts them, so take
        # them back from the rendered ``N: text`` rows (the first ``lines`` of the body).
        rows: list[dict[str, Any]] = []
        for row in match.group(1).split("\n")[: card_meta["lines"]]:
            number, sep, line = row.partition(": ")
            if not sep or not number.isdigit():
                return None
            rows.append({"number": int(number), "text": line})
        card: dict[str, Any] = {
            "card": "read",
            "path": card_meta["path"],
            "offset": card_meta["offset"],
            "lines": rows,
            "totalLines": card_meta["totalLines"],
        }
        if isinstance(card_meta.get("lang"), str):
            card["lang"] = card_meta["lang"]
        return card

    return define_catalog_tool(
        "read",
        parameters=spec,
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render, presentation_meta=meta),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        present_call=present_call,
        present_result=present_result,
    )


def _num(value: float) -> str:
    # Arguments are JSON numbers; print 3.0 as JavaScript would ("3").
    return str(int(value)) if float(value).is_integer() else str(value)
