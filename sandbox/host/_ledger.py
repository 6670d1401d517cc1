"""The host-side output ledger (reference.md §3.3 item 9).

One hard cap, ``max_output_bytes``, over the exact UTF-8 bytes of
``JSON.stringify(logs)`` -- 2 for ``[]``, plus each entry's JSON string length, plus one
comma between entries -- with the completion value's JSON bytes or the failure
message's JSON string bytes added on top. On overflow the logs are kept as the fitting
prefix (the last entry possibly truncated) and the run fails with ``output-limit``:
``outer output exceeded <N> bytes``. Values are never truncated or substituted.
"""

from __future__ import annotations

from typing import Any

import msgspec
from codemode.engine.json import js_number

from ..worker._frames import dumps_deep, json_string_length, sanitize_text, truncate_to_json_length

__all__ = ["OutputLedger", "json_value_length"]

_encode = msgspec.json.Encoder().encode


class OutputLedger:
    """Meters logs as they stream in; see the module docstring."""

    __slots__ = ("_used", "logs", "max_bytes", "overflowed")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.logs: list[str] = []
        self._used = 2  # "[]"
        self.overflowed = False

    @property
    def message(self) -> str:
        """The ``output-limit`` diagnostic."""
        return f"outer output exceeded {self.max_bytes} bytes"

    def add_log(self, text: str) -> bool:
        """Append one entry; on overflow keep the fitting prefix and return False."""
        if self.overflowed:
            return False
        text = sanitize_text(text)
        sep = 1 if self.logs else 0
        cost = sep + json_string_length(text)
        if self._used + cost <= self.max_bytes:
            self.logs.append(text)
            self._used += cost
            return True
        self.overflowed = True
        budget = self.max_bytes - self._used - sep
        if budget > 2:
            prefix = truncate_to_json_length(text, budget)
            if prefix:
                self.logs.append(prefix)
                self._used += sep + json_string_length(prefix)
        return False

    def fits(self, extra_bytes: int) -> bool:
        """Whether a value or diagnostic of ``extra_bytes`` still fits after the logs."""
        return not self.overflowed and self._used + extra_bytes <= self.max_bytes


def json_value_length(value: Any) -> int:
    """Bytes of ``JSON.stringify(value)`` for a lossless JSON value (JS number format).

    msgspec encodes everything like JavaScript except floats (``1.0`` vs ``1``, ``1e21``
    vs ``1e+21``), so floats are re-measured with the reference's number formatting.
    """
    try:
        total = len(_encode(value))
    except RecursionError:
        total = len(dumps_deep(value))
    if not isinstance(value, (dict, list)):
        if isinstance(value, float):
            return len(js_number(value))
        return total
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, float):
                total += len(js_number(child)) - len(_encode(child))
            elif isinstance(child, (dict, list)):
                stack.append(child)
    return total
