"""Column conversion between the tool's UTF-16 positions and a server's encoding.

The tool's contract is UTF-16 (what the model counts and LSP's default). Servers may
negotiate ``utf-8`` or ``utf-32`` instead (``positionEncoding``); ``jedi-language-server``
in fact reports code-point columns whatever it advertises, so the client offers
``utf-32`` first and converts here. Converting a column needs its line's text: the queried
file's current contents going in, each result file's lines (from an open document, else read
from disk, bounded; only the lines named are kept) coming out. A column on a line that cannot be read is left as is.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["UTF16", "convert_column", "line_text", "read_source", "relocate", "wanted_lines"]

UTF16 = "utf-16"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MAX_SOURCE_BYTES = 8 * 1024 * 1024


def _units(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(ch) > 0xFFFF else 1


def line_text(text: str, line: int) -> str | None:
    """Line ``line`` (zero-based) of ``text`` split as LSP splits lines, if it exists."""
    if line < 0:
        return None
    lines = _LINE_BREAK.split(text)
    return lines[line] if line < len(lines) else None


def convert_column(line: str | None, column: int, source: str, target: str) -> int:
    """``column`` counted in ``source`` units on ``line``, counted in ``target`` units."""
    if line is None or source == target or column <= 0 or line.isascii():
        return column
    seen = converted = 0
    for ch in line:
        if seen >= column:
            return converted
        seen += _units(ch, source)
        converted += _units(ch, target)
    return converted + max(0, column - seen)  # past the end: the excess as given


def read_source(uri: str) -> str | None:
    """The text of a ``file:`` URI's regular file (bounded, non-blocking open), or ``None``."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    try:
        fd = os.open(unquote(parts.path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_SOURCE_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(_MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MAX_SOURCE_BYTES:
        return None
    return data.decode("utf-8", "replace")


def wanted_lines(text: str, lines: set[int]) -> dict[int, str]:
    """The ``lines`` (zero-based) of ``text`` that exist, by number (the rest is dropped, so
    converting columns across many files keeps only the lines it needs)."""
    found: dict[int, str] = {}
    for number, line in enumerate(_LINE_BREAK.split(text)):
        if number in lines:
            found[number] = line
    return found


def relocate(
    locations: list[dict[str, Any]], lines: Mapping[str, Mapping[int, str]], encoding: str
) -> list[dict[str, Any]]:
    """``locations`` with every column converted from ``encoding`` to UTF-16; ``lines``
    holds, per URI, the text of the lines they name (a missing line keeps its column)."""
    if encoding == UTF16:
        return locations
    out: list[dict[str, Any]] = []
    for loc in locations:
        known = lines.get(loc["uri"], {})
        rng = {}
        for end in ("start", "end"):
            pos = loc["range"][end]
            rng[end] = {
                "line": pos["line"],
                "character": convert_column(
                    known.get(pos["line"]), pos["character"], encoding, UTF16
                ),
            }
        out.append({"uri": loc["uri"], "range": rng})
    return out
