"""Installable policies: cooperative timeouts and result spilling."""

from __future__ import annotations

from ._spill import SpillPolicy as SpillPolicy
from ._spill_store import LocalSpillStore as LocalSpillStore
from ._spill_store import SpillStore as SpillStore
from ._timeout import TimeoutPolicy as TimeoutPolicy

__all__ = ["LocalSpillStore", "SpillPolicy", "SpillStore", "TimeoutPolicy"]
