"""Text conventions shared by the tools.

Caps count UTF-16 code units ("chars", JavaScript's ``string.length``, which is what a
JavaScript host counts) or UTF-8 bytes; cuts never split a code point
(the byte-level cuts are ``codemode.engine.policies.utf8_head_bytes``/``utf8_tail_bytes``),
and JSON is rendered the way ``JSON.stringify`` renders it (compact, no ASCII escaping).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "article",
    "crlf_to_lf",
    "js_json",
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


def js_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact, insertion-ordered, no ASCII escaping."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def crlf_to_lf(s: str) -> str:
    """Normalise CRLF line endings to LF (a lone CR is kept)."""
    return s.replace("\r\n", "\n")


def article(phrase: str) -> str:
    """``phrase`` with its indefinite article: ``an IPv4-mapped …``, ``an unspecified``,
    ``a loopback``, ``a 6to4``, ``an 8-byte``, ``an 11-byte``, ``an 18-byte``.

    By sound, as English reads the messages' words: a leading vowel letter is a vowel
    sound, and so are the numbers that are spoken starting with one (8, 11, 18, 80..89,
    800...)."""
    head = phrase.lstrip()
    if not head:
        return phrase
    digits = ""
    for ch in head:
        if not ch.isdigit():
            break
        digits += ch
    if digits:
        # "eight", "eleven", "eighteen", "eighty...", "eight hundred...", "eight thousand"
        value = int(digits)
        groups = f"{value:,}".split(",")
        lead = groups[0]
        vowel = lead.startswith("8") or (len(groups) == 1 and lead in ("11", "18"))
        if len(groups) > 1 and lead in ("11", "18"):
            vowel = True  # "eleven thousand", "eighteen million"
    else:
        vowel = head[0].lower() in "aeiou"
    return f"{'an' if vowel else 'a'} {phrase}"
