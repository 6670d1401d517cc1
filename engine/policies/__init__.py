"""Installable policies: cooperative timeouts and result spilling.

Each policy is an object with ``install(runtime) -> disposer`` that only registers
listeners on a ``ToolRuntime``: ``_timeout`` (``TimeoutPolicy``, a ``tools/execute``
wrapper deriving a deadline from a tool's ``timeout_ms``), ``_spill`` (``SpillPolicy``,
bounding oversized text results), ``_spill_store`` (where spilled text is saved) and
``_spill_preview`` (the head/tail preview that replaces it).
"""

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
