"""The ``lsp`` tool: one navigation request to the language server that owns a file.

A call validates its position (one-based UTF-16, as the model counts), resolves
``file_path`` through the workspace like the file tools (a path outside is refused with
their error), reads the file's current contents and makes the server see them (``didOpen``
once, ``didChange`` whenever the file changed on disk since), then sends one request with
zero-based positions. Values keep the server's zero-based positions; ``render`` shows
one-based ``path:line:char`` lines.

LSP codes: ``LSP_INVALID_ARGS`` (a non-positive or fractional position, a blank path),
``LSP_WORKSPACE_REQUIRED`` (the workspace directory is gone), ``LSP_UNAVAILABLE`` (no
server handles the file), ``LSP_UNSUPPORTED`` (the server does not offer the operation),
``LSP_SERVER_ERROR`` (the server failed the request or exited; it is restarted on the next
call), ``LSP_TIMEOUT`` (no answer within the manager's ``request_timeout_s``).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import arg, as_positive_int, is_blank
from .._config import ToolsConfig
from .._errors import FsError, LspError, io_error
from .._text import utf16_head, utf16_len
from ..fs._io import check_regular, decode_utf8, open_readable, read_fd
from ._positions import (
    UTF16,
    convert_column,
    line_text,
    read_source,
    relocate,
    wanted_lines,
)
from ._server import LanguageServer, LspManager

__all__ = ["MAX_LOCATIONS", "MAX_RENDER_CHARS", "OPERATIONS", "build_lsp_tool", "render_lsp"]

OPERATIONS = ("goToDefinition", "findReferences", "goToImplementation", "hover")
MAX_LOCATIONS = 100
MAX_RENDER_CHARS = 16000
# The largest source file sent to a server: beyond it the server would be the bottleneck
# (and a multi-gigabyte "source file" is an attack on host memory, not code to navigate).
MAX_FILE_BYTES = 8 * 1024 * 1024
# Result files read from disk to convert columns (a server's own encoding) per call.
_MAX_SOURCES = 128

_METHODS = {
    "goToDefinition": ("textDocument/definition", "definitionProvider"),
    "findReferences": ("textDocument/references", "referencesProvider"),
    "goToImplementation": ("textDocument/implementation", "implementationProvider"),
    "hover": ("textDocument/hover", "hoverProvider"),
}

_POSITION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "line": {"type": "integer", "required": True},
        "character": {"type": "integer", "required": True},
    },
}
_RANGE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "start": {**_POSITION, "required": True},
        "end": {**_POSITION, "required": True},
    },
}
_OUTPUT_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "enum": ["locations"], "required": True},
                "locations": {
                    "type": "array",
                    "required": True,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "uri": {"type": "string", "required": True},
                            "range": {**_RANGE, "required": True},
                        },
                    },
                },
                "resolvedWorkspaceUri": {"type": "string", "required": True},
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "enum": ["hover"], "required": True},
                "hover": {
                    "required": True,
                    "oneOf": [
                        {"type": "null"},
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "contents": {"type": "string", "required": True},
                                "range": _RANGE,
                            },
                        },
                    ],
                },
            },
        },
    ]
}


# -- arguments -----------------------------------------------------------------------------


def _position(args: Any, key: str) -> int:
    value = as_positive_int(arg(args, key))
    if value is None:
        raise LspError(f"{key} must be a positive integer (one-based)", "LSP_INVALID_ARGS")
    return value


def _checked(args: Any) -> tuple[str, str, int, int]:
    operation = arg(args, "operation")
    if operation not in OPERATIONS:
        raise LspError(f"operation must be one of {', '.join(OPERATIONS)}", "LSP_INVALID_ARGS")
    file_path = arg(args, "file_path")
    if is_blank(file_path):
        raise LspError("file_path must be a non-empty string", "LSP_INVALID_ARGS")
    assert isinstance(file_path, str)
    return operation, file_path, _position(args, "line"), _position(args, "character")


# -- the file ------------------------------------------------------------------------------


def _load(cfg: ToolsConfig, raw: str) -> tuple[str, str]:
    """``(real path, text)`` of the file ``raw`` names, read from the resolved descriptor."""
    with cfg.workspace.open(raw) as handle:
        if handle.st is None:
            raise FsError(f'cannot read "{handle.display}": not found', "FS_NOT_FOUND")
        check_regular(handle.st, handle.display, "read", allow_hardlinks=cfg.allow_hardlinks)
        fd = open_readable(handle)
        try:
            data = read_fd(fd, MAX_FILE_BYTES)
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise FsError(
                f'cannot read "{handle.display}": larger than {MAX_FILE_BYTES} bytes',
                "FS_TOO_LARGE",
            )
        if b"\x00" in data:
            raise FsError(f'cannot read "{handle.display}": binary file', "FS_NOT_TEXT")
        try:
            content = decode_utf8(data)
        except UnicodeDecodeError:
            raise FsError(
                f'cannot read "{handle.display}": invalid UTF-8 text', "FS_NOT_TEXT"
            ) from None
        return handle.real, content


# -- values --------------------------------------------------------------------------------


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an integer")
    return value


def _range(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValueError("not a range")
    out: dict[str, Any] = {}
    for end in ("start", "end"):
        pos = raw.get(end)
        if not isinstance(pos, Mapping):
            raise ValueError("not a position")
        out[end] = {"line": _int(pos.get("line")), "character": _int(pos.get("character"))}
    return out


def _location(raw: Any) -> dict[str, Any] | None:
    """A ``Location`` or ``LocationLink`` as ``{uri, range}``; ``None`` if malformed."""
    if not isinstance(raw, Mapping):
        return None
    try:
        if isinstance(raw.get("targetUri"), str):
            target = raw.get("targetSelectionRange") or raw.get("targetRange")
            return {"uri": raw["targetUri"], "range": _range(target)}
        if isinstance(raw.get("uri"), str):
            return {"uri": raw["uri"], "range": _range(raw.get("range"))}
    except ValueError:
        return None
    return None


def locations_of(result: Any) -> list[dict[str, Any]]:
    """Whatever a definition/references/implementation request answered, as a list."""
    items = result if isinstance(result, list) else [] if result is None else [result]
    return [loc for loc in (_location(item) for item in items) if loc is not None]


def _marked(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        value = item.get("value")
        if not isinstance(value, str):
            return ""
        language = item.get("language")
        if isinstance(language, str) and "kind" not in item:
            return f"```{language}\n{value}\n```"
        return value
    return ""


def hover_text(contents: Any) -> str:
    """``MarkupContent``, a ``MarkedString`` or a list of them, as text."""
    if isinstance(contents, list):
        return "\n\n".join(part for part in (_marked(item) for item in contents) if part)
    return _marked(contents)


def hover_of(result: Any) -> dict[str, Any] | None:
    """A hover answer as ``{contents, range?}``, ``None`` when there is nothing to show."""
    if not isinstance(result, Mapping):
        return None
    contents = hover_text(result.get("contents"))
    if not contents.strip():
        return None
    hover: dict[str, Any] = {"contents": contents}
    if result.get("range") is not None:
        try:
            hover["range"] = _range(result["range"])
        except ValueError:
            pass
    return hover


# -- rendering -----------------------------------------------------------------------------


def _file_path(uri: str) -> str | None:
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return unquote(parts.path)


def _shown(uri: str, root: str | None) -> str:
    path = _file_path(uri)
    if path is None:
        return uri
    if root is not None and (path == root or path.startswith(root.rstrip("/") + "/")):
        return posixpath.relpath(path, root)
    return path


def _capped(body: str, what: str) -> str:
    if utf16_len(body) <= MAX_RENDER_CHARS:
        return body
    return (
        utf16_head(body, MAX_RENDER_CHARS)
        + f"\n… {what} truncated (limit {MAX_RENDER_CHARS} characters)."
    )


def render_lsp(args: Any, value: Any) -> list[dict[str, Any]]:
    """The model-facing text of a value (pure: positions shown one-based)."""
    if value["kind"] == "hover":
        hover = value["hover"]
        if hover is None:
            return [text("No hover information.")]
        return [text(_capped(hover["contents"], "hover"))]
    locations = value["locations"]
    if not locations:
        return [text("No results.")]
    root = _file_path(value["resolvedWorkspaceUri"])
    groups: dict[str, list[str]] = {}
    for loc in locations:
        shown = _shown(loc["uri"], root)
        start = loc["range"]["start"]
        groups.setdefault(shown, []).append(f"{shown}:{start['line'] + 1}:{start['character'] + 1}")
    lines = [line for group in groups.values() for line in group]
    body = "\n".join(lines[:MAX_LOCATIONS])
    if len(lines) > MAX_LOCATIONS:
        omitted = len(lines) - MAX_LOCATIONS
        body += f"\n… {omitted} more location(s) omitted (limit {MAX_LOCATIONS})."
    return [text(_capped(body, "locations"))]


def _present_call(args: Any) -> dict[str, Any] | None:
    op, path = arg(args, "operation"), arg(args, "file_path")
    line, char = arg(args, "line"), arg(args, "character")
    if not isinstance(op, str) or not isinstance(path, str):
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (line, char)):
        return None

    def num(v: Any) -> str:
        return str(int(v)) if float(v).is_integer() else str(v)

    return {
        "card": "generic",
        "title": f"LSP {op} {path}:{num(line)}:{num(char)}",
        "kind": "search",
        "rawInput": dict(args),
    }


def _source_lines(uri: str, known: str | None, lines: set[int]) -> dict[int, str]:
    text = known if known is not None else read_source(uri)
    return wanted_lines(text, lines) if text is not None else {}


async def _lines_of(
    server: LanguageServer, locations: list[dict[str, Any]]
) -> dict[str, dict[int, str]]:
    """The lines ``locations`` name, per file, to convert their columns: from what the server
    was given for open documents, else from the file on disk (at most ``_MAX_SOURCES``
    files read per call)."""
    needed: dict[str, set[int]] = {}
    for loc in locations:
        rng = loc["range"]
        needed.setdefault(loc["uri"], set()).update((rng["start"]["line"], rng["end"]["line"]))
    found: dict[str, dict[int, str]] = {}
    read = 0
    for uri, lines in needed.items():
        known = server.document_text(uri)
        if known is None:
            if read >= _MAX_SOURCES:
                continue
            read += 1
        found[uri] = await anyio.to_thread.run_sync(_source_lines, uri, known, lines)
    return found


# -- the tool ------------------------------------------------------------------------------


def build_lsp_tool(cfg: ToolsConfig, servers: LspManager) -> ToolDefinition:
    """The ``lsp`` tool for ``cfg``'s workspace, its servers run by ``servers`` (entered)."""

    async def execute(args: Any, ctx: Any) -> Any:
        operation, file_path, line, character = _checked(args)
        root = cfg.workspace.root
        if not await anyio.to_thread.run_sync(os.path.isdir, root):
            raise LspError(
                "the lsp tool requires a session workspace cwd", "LSP_WORKSPACE_REQUIRED"
            )
        # The provider is chosen by the name as written, before the file system is touched.
        spec = servers.provider_for(file_path)
        if spec is None:
            raise LspError(f'no LSP provider handles "{file_path}"', "LSP_UNAVAILABLE")
        try:
            real, content = await anyio.to_thread.run_sync(_load, cfg, file_path)
        except OSError as exc:
            raise io_error(exc, "read", file_path) from exc
        method, capability = _METHODS[operation]
        uri = Path(real).as_uri()
        params: dict[str, Any] = {
            "textDocument": {"uri": uri},
            "position": {"line": line - 1, "character": character - 1},
        }
        if operation == "findReferences":
            params["context"] = {"includeDeclaration": True}
        result: Any = None
        with anyio.move_on_after(servers.request_timeout_s) as scope:
            server = await servers.server(root, spec)
            offered = server.capabilities.get(capability)
            # ``true`` or an options object (even an empty one) means the server offers it.
            if offered is not True and not isinstance(offered, dict):
                raise LspError(
                    f'language server "{spec.name}" does not support {operation}',
                    "LSP_UNSUPPORTED",
                )
            encoding = server.position_encoding
            params["position"]["character"] = convert_column(
                line_text(content, line - 1), character - 1, UTF16, encoding
            )
            await server.sync(uri, file_path, content)
            result = await server.request(method, params)
        if scope.cancelled_caught:
            raise LspError(
                f'language server "{spec.name}" did not answer {operation} within '
                f"{servers.request_timeout_s:g} s",
                "LSP_TIMEOUT",
            )
        if operation == "hover":
            hover = hover_of(result)
            if hover is not None and "range" in hover:
                rng = hover["range"]
                lines = wanted_lines(content, {rng["start"]["line"], rng["end"]["line"]})
                [moved] = relocate([{"uri": uri, "range": rng}], {uri: lines}, encoding)
                hover["range"] = moved["range"]
            return {"kind": "hover", "hover": hover}
        locations = locations_of(result)
        if encoding != UTF16:
            locations = relocate(locations, await _lines_of(server, locations), encoding)
        return {
            "kind": "locations",
            "locations": locations,
            "resolvedWorkspaceUri": Path(root).as_uri(),
        }

    return define_catalog_tool(
        "lsp",
        package="@deepseek-ai/dsh-tool-lsp",
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render_lsp),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        timeout_ms=60_000,
        present_call=_present_call,
    )
