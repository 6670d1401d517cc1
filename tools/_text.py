"""Text conventions shared by the tools (tool-outputs.md §0.3).

Caps count UTF-16 code units ("chars", JavaScript's ``string.length``) or UTF-8 bytes; cuts
never split a code point, and JSON is rendered the way ``JSON.stringify`` renders it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "crlf_to_lf",
    "js_json",
    "utf8_head",
    "utf8_tail",
    "utf16_head",
    "utf16_len",
]


def utf16_len(s: str) -> int:
    """The JavaScript ``length`` of ``s`` (astral characters count twice)."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def utf16_head(s: str, units: int) -> str:
    """The longest prefix of ``s`` whose UTF-16 length is at most ``units``.

    JavaScript's ``slice`` can leave half a surrogate pair behind; Python strings cannot carry
    one into lossless JSON, so a pair straddling the cut is dropped whole.
    """
    if len(s) <= units and (s.isascii() or utf16_len(s) <= units):
        return s
    if s.isascii():
        return s[:units]
    count = 0
    for index, ch in enumerate(s):
        count += 2 if ord(ch) > 0xFFFF else 1
        if count > units:
            return s[:index]
    return s


def utf8_head(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of ``data``, dropping a partial trailing code point."""
    if len(data) <= limit:
        return data
    cut = limit
    # Back up over continuation bytes, then drop the lead byte if its sequence was cut.
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def utf8_tail(data: bytes, limit: int) -> bytes:
    """The last ``limit`` bytes of ``data``, dropping leading continuation bytes."""
    if len(data) <= limit:
        return data
    start = len(data) - limit
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact, insertion-ordered, no ASCII escaping."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def crlf_to_lf(s: str) -> str:
    """Normalise CRLF line endings to LF (a lone CR is kept)."""
    return s.replace("\r\n", "\n")
