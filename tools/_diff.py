"""Diff hunks for ``diff`` cards: ``[{path, oldText | None, newText}]`` with 3 context lines.

Small texts use ``difflib`` (one hunk per group of nearby changes); large ones fall back to a
single hunk found by trimming the common prefix and suffix, which is linear and still exact
about what changed.
"""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["diff_hunks"]

_CONTEXT = 3
_DIFFLIB_MAX_LINES = 5000


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    out = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _hunk(path: str, old: list[str], new: list[str]) -> dict[str, Any]:
    return {"path": path, "oldText": "".join(old) if old else None, "newText": "".join(new)}


def diff_hunks(path: str, before: str, after: str) -> list[dict[str, Any]]:
    """The hunks turning ``before`` into ``after`` (``[]`` when they are equal)."""
    if before == after:
        return []
    a, b = _lines(before), _lines(after)
    if len(a) <= _DIFFLIB_MAX_LINES and len(b) <= _DIFFLIB_MAX_LINES:
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        hunks = []
        for group in matcher.get_grouped_opcodes(_CONTEXT):
            if all(op == "equal" for op, *_ in group):
                continue
            i1, j1 = group[0][1], group[0][3]
            i2, j2 = group[-1][2], group[-1][4]
            hunks.append(_hunk(path, a[i1:i2], b[j1:j2]))
        return hunks
    prefix = 0
    limit = min(len(a), len(b))
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    start = max(0, prefix - _CONTEXT)
    return [
        _hunk(
            path,
            a[start : len(a) - suffix + min(suffix, _CONTEXT)],
            b[start : len(b) - suffix + min(suffix, _CONTEXT)],
        )
    ]
