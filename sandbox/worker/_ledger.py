"""The output ledger: one meter of a run's output, shared by the host and both guests.

One hard cap, ``max_bytes`` (``Limits.max_output_bytes``), over the exact UTF-8 bytes of
``JSON.stringify(logs)`` -- 2 for ``[]``, plus each entry's JSON string length, plus one
comma between entries -- with the completion value's JSON bytes or the failure message's
JSON string bytes added on top. On overflow the logs are kept as the fitting prefix (the
last entry possibly truncated) and the run fails with ``output-limit``. Values are never
truncated or substituted.

Three places meter with it: the host (``host._ledger.OutputLedger``, the authority: what
it keeps is what the run reports), the TypeScript guest (which stops a program at the
cap itself, in the middle of a slice) and the Python guest (which goes quiet once the
host must have seen the overflow, rather than stream output nobody keeps). It lives on
the worker side so that the guests can import it without loading the host.
"""

from __future__ import annotations

from ._frames import json_string_length, truncate_to_json_length

__all__ = ["LogLedger"]


class LogLedger:
    """Meters log entries against ``max_bytes``; see the module docstring."""

    __slots__ = ("count", "max_bytes", "overflowed", "used")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 2  # "[]"
        self.count = 0
        self.overflowed = False

    def cost(self, entry: str) -> int:
        """What ``entry`` would add: its JSON string bytes, and a comma after the first."""
        return (1 if self.count else 0) + json_string_length(entry)

    def room(self) -> int:
        """JSON string bytes the next entry may take and still fit (negative when none)."""
        return self.max_bytes - self.used - (1 if self.count else 0)

    def fits(self, extra_bytes: int) -> bool:
        """Whether ``extra_bytes`` more (an entry's cost, a value, a message) still fit."""
        return self.used + extra_bytes <= self.max_bytes

    def record(self, entry: str) -> None:
        """Count ``entry`` as sent, whether or not it fit (callers decide that)."""
        self.used += self.cost(entry)
        self.count += 1

    def add(self, entry: str) -> str | None:
        """Meter one entry: the entry itself if it fits; past the cap, once, the longest
        prefix that fits (``None`` if not even that); after that, ``None``."""
        if self.overflowed:
            return None
        if self.fits(self.cost(entry)):
            self.record(entry)
            return entry
        self.overflowed = True
        room = self.room()
        prefix = truncate_to_json_length(entry, room) if room > 2 else ""
        if not prefix:
            return None
        self.record(prefix)
        return prefix
