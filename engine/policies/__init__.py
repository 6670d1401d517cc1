"""Installable policies: cooperative timeouts and result spilling."""

from __future__ import annotations

from ._spill import SpillPolicy as SpillPolicy
from ._spill_preview import utf8_head_bytes as utf8_head_bytes
from ._spill_preview import utf8_tail_bytes as utf8_tail_bytes
from ._spill_store import LocalSpillStore as LocalSpillStore
from ._spill_store import SpillStore as SpillStore
from ._timeout import TimeoutPolicy as TimeoutPolicy

__all__ = [
    "LocalSpillStore",
    "SpillPolicy",
    "SpillStore",
    "TimeoutPolicy",
    "utf8_head_bytes",
    "utf8_tail_bytes",
]
