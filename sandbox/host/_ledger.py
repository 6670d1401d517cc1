"""The host's output ledger: the run's logs, metered by ``worker._ledger.LogLedger``.

The host's count is the one the run reports: a guest's own metering only decides when
it stops sending. On overflow the run fails with ``output-limit``: ``outer output exceeded
<N> bytes``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from codemode.engine.json import js_number

from ..worker._frames import dumps_deep, sanitize_text
from ..worker._ledger import LogLedger

__all__ = ["OutputLedger", "json_value_length"]

_encode = msgspec.json.Encoder().encode


#: Entries this short are kept as one shared object per distinct text (``OutputLedger``).
_SHARED_CHARS = 32
#: How many distinct short texts a run shares (beyond them, entries are kept as they come).
_SHARED_TEXTS = 4096


class OutputLedger:
    """The logs a run keeps, metered as they stream in.

    A short entry is kept as the one object already holding the same text, when there is
    one: each decoded frame is a new string of ~50 bytes beside its list slot, so a
    program printing ``"."`` in a loop cost the host ~58 bytes per entry against the 4
    bytes the ledger meters (430 MiB in 60 s of compute). Shared, such an entry costs its
    list slot alone.
    """

    __slots__ = ("_meter", "_shared", "logs")

    def __init__(self, max_bytes: int) -> None:
        self._meter = LogLedger(max_bytes)
        self._shared: dict[str, str] = {}
        self.logs: list[str] = []

    @property
    def max_bytes(self) -> int:
        """The cap: ``Limits.max_output_bytes``."""
        return self._meter.max_bytes

    @property
    def overflowed(self) -> bool:
        """True once an entry did not fit (the run fails with ``output-limit``)."""
        return self._meter.overflowed

    @property
    def message(self) -> str:
        """The ``output-limit`` diagnostic."""
        return f"outer output exceeded {self.max_bytes} bytes"

    def add_log(self, text: str) -> bool:
        """Append one entry; on overflow keep the fitting prefix and return False."""
        kept = self._meter.add(sanitize_text(text))
        if kept is not None:
            if len(kept) <= _SHARED_CHARS:
                shared = self._shared
                if len(shared) < _SHARED_TEXTS:
                    kept = shared.setdefault(kept, kept)
                else:
                    kept = shared.get(kept, kept)
            self.logs.append(kept)
        return not self._meter.overflowed

    def fits(self, extra_bytes: int) -> bool:
        """Whether a value or diagnostic of ``extra_bytes`` still fits after the logs."""
        return not self._meter.overflowed and self._meter.fits(extra_bytes)


def json_value_length(value: Any) -> int:
    """Bytes of ``JSON.stringify(value)`` for a lossless JSON value (JS number format).

    msgspec encodes everything like JavaScript except floats (``1.0`` vs ``1``, ``1e21``
    vs ``1e+21``), so floats are re-measured with JavaScript's number formatting.
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
