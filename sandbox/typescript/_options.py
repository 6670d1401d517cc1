"""``TsGuestOptions``: the part of ``Limits`` a TypeScript worker builds its QuickJS context from.

Pure data, imported on both sides: the host (``TypeScriptRuntime``) builds it from its
``Limits``; the worker (``_worker``) turns it into QuickJS limits.
"""

from __future__ import annotations

import msgspec

from .._limits import Limits

__all__ = ["TsGuestOptions"]


class TsGuestOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What a TypeScript worker needs of the runtime's ``Limits`` to build its QuickJS
    context; the same fields, under the same names. It travels as a plain dict in the
    ``run`` frame and in the fork server's warm options (``msgspec.to_builtins``)."""

    max_compute_ms: float
    max_output_bytes: int
    max_memory_bytes: int

    @classmethod
    def from_limits(cls, limits: Limits) -> TsGuestOptions:
        """The options of a runtime held to ``limits``."""
        return cls(
            max_compute_ms=limits.max_compute_ms,
            max_output_bytes=limits.max_output_bytes,
            max_memory_bytes=limits.max_memory_bytes,
        )
