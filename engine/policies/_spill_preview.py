"""The spill preview: a bounded head/tail view of an oversized text plus a retrieval notice.

Pure functions, no I/O. The spill policy saves the full text first (it needs the locator
for the notice), then asks ``build_spill_preview`` for the replacement, built like this:

- the replacement is ``<head><tail>\\n\\n(Omitted N bytes. Full formatted result stored at:
  <locator>. <retrievalHint>)``; when the preview comes out empty (a tiny cap or a long
  locator) the replacement is the notice alone, without the blank line;
- the preview budget is ``cap - (utf8 bytes of the notice priced at N = the full size + 2)``
  (the ``+ 2`` is the ``\\n\\n`` join); pricing at the full size bounds the real notice,
  whose N can only have as many digits or fewer;
- the head gets ``ceil(budget / 2)`` bytes, the tail ``floor(budget / 2)``, both cut on
  UTF-8 code-point boundaries, joined with no separator;
- ``N`` is the exact number of bytes not shown: the full size minus the bytes the head and
  tail actually kept after their boundary trims;
- a replacement that would still exceed the cap is refused (``None``): the caller keeps the
  original content.

Bytes are counted the way a JavaScript ``TextEncoder`` counts them: a lone surrogate
(which a Python ``str`` can hold but UTF-8 cannot encode) counts and is previewed as
U+FFFD.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "SpillPreview",
    "build_spill_preview",
    "spill_notice",
    "spill_preview",
    "utf8_bytes",
    "utf8_head",
    "utf8_head_bytes",
    "utf8_len",
    "utf8_tail",
    "utf8_tail_bytes",
]


def utf8_bytes(s: str) -> bytes:
    """``s`` encoded as UTF-8, lone surrogates replaced by U+FFFD (as ``TextEncoder`` does)."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        # Round-trip through UTF-16 with surrogatepass so valid pairs recombine into one
        # code point and only unpaired halves become U+FFFD.
        repaired = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return repaired.encode("utf-8")


def utf8_len(s: str) -> int:
    """The UTF-8 byte length of ``s`` (lone surrogates count as U+FFFD, 3 bytes)."""
    if s.isascii():
        return len(s)
    return len(utf8_bytes(s))


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def utf8_head_bytes(data: bytes, n: int) -> bytes:
    """The first ``n`` bytes of UTF-8 ``data``, minus a trailing partial sequence.

    The one byte-level cut shared by the spill preview and the first-party tools (grep's
    long-line cap). On bytes that are not valid UTF-8 it still returns a prefix of at most
    ``n`` bytes; decode it with ``errors="replace"`` then.
    """
    if n >= len(data):
        return data
    cut = data[:n]
    # Walk back over at most three continuation bytes to the lead byte of the last
    # sequence; drop that sequence if fewer bytes follow the lead than it declares.
    i = len(cut) - 1
    while i >= 0 and _is_continuation(cut[i]) and len(cut) - i <= 3:
        i -= 1
    if i < 0:
        return cut
    lead = cut[i]
    expected = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return cut[:i] if len(cut) - i < expected else cut


def utf8_tail_bytes(data: bytes, n: int) -> bytes:
    """The last ``n`` bytes of UTF-8 ``data``, minus leading continuation bytes.

    Shared like ``utf8_head_bytes`` (bash's output tail, ripgrep's stderr tail); any
    bytes are accepted.
    """
    if n >= len(data):
        return data
    cut = data[len(data) - n :] if n > 0 else b""
    start = 0
    while start < len(cut) and _is_continuation(cut[start]):
        start += 1
    return cut[start:]


def utf8_head(s: str, n: int) -> str:
    """The longest prefix of ``s`` whose UTF-8 encoding fits in ``n`` bytes.

    A code point that would straddle the cut is dropped whole. ``n`` must be ``>= 0``.
    """
    _check_budget(n, "n")
    return utf8_head_bytes(utf8_bytes(s), n).decode("utf-8")


def utf8_tail(s: str, n: int) -> str:
    """The longest suffix of ``s`` whose UTF-8 encoding fits in ``n`` bytes.

    A code point that would straddle the cut is dropped whole. ``n`` must be ``>= 0``.
    """
    _check_budget(n, "n")
    return utf8_tail_bytes(utf8_bytes(s), n).decode("utf-8")


def spill_notice(omitted_bytes: int, locator: str, hint: str) -> str:
    """The notice line: ``(Omitted N bytes. Full formatted result stored at: <locator>. <hint>)``.

    The wording is fixed, byte for byte (programs and models match on it): an exact
    omission reads ``Omitted <count> bytes.``, wrapped with the locator and the store's
    retrieval hint.
    """
    return f"(Omitted {omitted_bytes} bytes. Full formatted result stored at: {locator}. {hint})"


class SpillPreview(msgspec.Struct, frozen=True, kw_only=True):
    """One computed replacement.

    ``text`` is what replaces the content (``head + tail``, a blank line, ``notice``; or
    the notice alone when ``head + tail`` is empty). ``omitted_bytes`` is ``N`` in the
    notice: ``total_bytes`` minus the UTF-8 sizes of ``head`` and ``tail``.
    """

    text: str
    head: str
    tail: str
    notice: str
    total_bytes: int
    omitted_bytes: int
    budget: int


def _check_budget(value: object, name: str) -> None:
    # ``bool`` is an ``int`` in Python; a cap of ``True`` is a bug, not one byte.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer (got {value})")


def build_spill_preview(
    full_text: str, max_inline_bytes: int, locator: str, hint: str
) -> SpillPreview | None:
    """Compute the bounded replacement for ``full_text`` (as the module notes say), or ``None``.

    ``None`` means "keep the original": either ``full_text`` already fits in
    ``max_inline_bytes`` UTF-8 bytes, or even the smallest replacement (the notice alone)
    would exceed it. A returned preview's ``text`` is never larger than
    ``max_inline_bytes`` bytes, and so is always smaller than ``full_text``.

    Raises ``TypeError``/``ValueError`` when ``max_inline_bytes`` is not a non-negative int.
    """
    _check_budget(max_inline_bytes, "max_inline_bytes")
    data = utf8_bytes(full_text)
    total = len(data)
    if total <= max_inline_bytes:
        return None
    # Reserve the notice inside the cap, priced at the worst-case count (all bytes
    # omitted): the real count is smaller, so the real notice is never longer.
    reserve = utf8_len(spill_notice(total, locator, hint)) + 2
    budget = max(0, max_inline_bytes - reserve)
    head_budget = (budget + 1) // 2
    tail_budget = budget // 2
    # The two windows never overlap: budget < max_inline_bytes < total.
    head = utf8_head_bytes(data, head_budget)
    tail = utf8_tail_bytes(data, tail_budget)
    omitted = total - len(head) - len(tail)
    head_text = head.decode("utf-8")
    tail_text = tail.decode("utf-8")
    notice = spill_notice(omitted, locator, hint)
    preview = head_text + tail_text
    text = f"{preview}\n\n{notice}" if preview else notice
    if utf8_len(text) > max_inline_bytes:
        return None
    return SpillPreview(
        text=text,
        head=head_text,
        tail=tail_text,
        notice=notice,
        total_bytes=total,
        omitted_bytes=omitted,
        budget=budget,
    )


def spill_preview(full_text: str, max_inline_bytes: int, locator: str, hint: str) -> str | None:
    """The replacement text of ``build_spill_preview``, or ``None`` to keep the original."""
    built = build_spill_preview(full_text, max_inline_bytes, locator, hint)
    return None if built is None else built.text
