"""Diff hunks for ``diff`` cards: ``[{path, oldText | None, newText}]`` with 3 context lines.

The cost is linear in the texts plus a bounded amount of ``difflib``: the common prefix and
suffix lines are trimmed first, and only a changed middle of at most
``_DIFFLIB_MAX_LINES`` lines goes through ``SequenceMatcher`` (whose worst case is
quadratic); a larger middle is compared line by line when both sides have the same number
of lines, and becomes one hunk otherwise. A hunk whose text would exceed
``_HUNK_MAX_CHARS`` is summarised (line and character counts) instead of copied, so the
card metadata a session persists stays small however large the edit.
"""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["diff_hunks"]

_CONTEXT = 3
_DIFFLIB_MAX_LINES = 2000
_HUNK_MAX_CHARS = 64 * 1024


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    out = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _size(lines: list[str]) -> int:
    return sum(len(line) for line in lines)


def _hunk(path: str, old: list[str], new: list[str]) -> dict[str, Any]:
    old_chars, new_chars = _size(old), _size(new)
    if old_chars + new_chars > _HUNK_MAX_CHARS:
        return {
            "path": path,
            "oldText": f"({len(old)} lines, {old_chars} characters; too large to show)"
            if old
            else None,
            "newText": f"({len(new)} lines, {new_chars} characters; too large to show)",
        }
    return {"path": path, "oldText": "".join(old) if old else None, "newText": "".join(new)}


def _aligned(path: str, a: list[str], b: list[str]) -> list[dict[str, Any]]:
    """Hunks of two equally long line lists compared position by position (linear): the
    common shape of edits that change lines without adding or removing any."""
    hunks: list[dict[str, Any]] = []
    n = len(a)
    i = 0
    while i < n:
        if a[i] == b[i]:
            i += 1
            continue
        start = i
        end = i + 1  # one past the last differing line of this hunk
        j = end
        while j < n:
            if a[j] != b[j]:
                end = j = j + 1
            elif j - end >= 2 * _CONTEXT:
                break
            else:
                j += 1
        lo, hi = max(0, start - _CONTEXT), min(n, end + _CONTEXT)
        hunks.append(_hunk(path, a[lo:hi], b[lo:hi]))
        i = end
    return hunks


def diff_hunks(path: str, before: str, after: str) -> list[dict[str, Any]]:
    """The hunks turning ``before`` into ``after`` (``[]`` when they are equal)."""
    if before == after:
        return []
    a, b = _lines(before), _lines(after)
    limit = min(len(a), len(b))
    prefix = 0
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    start = max(0, prefix - _CONTEXT)
    a_mid = a[start : len(a) - suffix + min(suffix, _CONTEXT)]
    b_mid = b[start : len(b) - suffix + min(suffix, _CONTEXT)]
    if len(a_mid) + len(b_mid) > _DIFFLIB_MAX_LINES:
        if len(a_mid) == len(b_mid):
            return _aligned(path, a_mid, b_mid)
        return [_hunk(path, a_mid, b_mid)]
    matcher = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False)
    hunks = []
    for group in matcher.get_grouped_opcodes(_CONTEXT):
        if all(op == "equal" for op, *_ in group):
            continue
        i1, j1 = group[0][1], group[0][3]
        i2, j2 = group[-1][2], group[-1][4]
        hunks.append(_hunk(path, a_mid[i1:i2], b_mid[j1:j2]))
    return hunks
