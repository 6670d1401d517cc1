"""``Limits``: every budget a sandboxed run is held to, validated at construction.

Every cap is named ``max_<what>`` with its unit, the one vocabulary of the project: the
CLI builds a ``Limits``, the TypeScript guest derives its QuickJS limits from one, and
error messages name fields as ``Limits.<field>``. Defaults: 60 s of busy compute, a
600 s wall-clock ceiling, 64 MiB of JSON-metered output and 512 MiB of memory (the budgets
programs written for other code-mode hosts expect), plus the sub-call cap, the
argument-bytes budget, the nesting cap, the bridge frame cap and the warm pool size.
"""

from __future__ import annotations

import math

import msgspec

__all__ = ["Limits"]

# A frame must hold the largest log entry or completion value the output ledger can
# accept, plus the envelope; anything bigger is bound to overflow the ledger anyway.
_FRAME_OVERHEAD = 1 << 20
_MIN_FRAME_BYTES = 64 * 1024


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-run limits of a sandbox runtime; every field must be a positive number.

    - ``max_compute_ms``: CPU time the worker may burn. Awaiting a binding accrues only
      the brief poll before the worker sleeps (at most 0.3 ms per wait and, per run,
      1 s or 5% of this budget, whichever is less; see ``worker._bridge.Spin``).
    - ``max_wall_ms``: wall-clock ceiling of one run.
    - ``max_output_bytes``: JSON bytes of the log array plus the value or diagnostic.
    - ``max_memory_bytes``: address-space limit of the worker process.
    - ``max_sub_calls``: binding calls one run may make.
    - ``max_call_bytes``: JSON bytes of all binding-call arguments of one run; crossing it
      ends the run (``call-bytes-limit``).
    - ``max_nesting_depth``: how deep a value crossing the bridge (call arguments and
      results, the completion value) may nest; checked while it is decoded, before any
      work is done on it. 5,000-deep values are ordinary JSON and must keep working.
    - ``max_frame_bytes``: cap of one bridge frame; ``None`` derives it from
      ``max_output_bytes`` (+1 MiB).
    - ``pool_size``: warm workers kept ready.
    """

    max_compute_ms: float = 60_000
    max_wall_ms: float = 600_000
    max_output_bytes: int = 64 * 2**20
    max_memory_bytes: int = 512 * 2**20
    max_sub_calls: int = 10_000
    max_call_bytes: int = 64 * 2**20
    max_nesting_depth: int = 10_000
    max_frame_bytes: int | None = None
    pool_size: int = 2

    def __post_init__(self) -> None:
        for key in (
            "max_compute_ms",
            "max_wall_ms",
            "max_output_bytes",
            "max_memory_bytes",
            "max_sub_calls",
            "max_call_bytes",
            "max_nesting_depth",
            "pool_size",
        ):
            _check_positive(key, getattr(self, key))
        if self.max_frame_bytes is not None:
            _check_positive("max_frame_bytes", self.max_frame_bytes)
        for key in (
            "max_output_bytes",
            "max_memory_bytes",
            "max_sub_calls",
            "max_call_bytes",
            "max_nesting_depth",
            "pool_size",
        ):
            if not isinstance(getattr(self, key), int):
                raise ValueError(f"Limits.{key} must be an integer")
        if self.max_output_bytes < 4:
            raise ValueError("Limits.max_output_bytes must be at least 4")
        if self.max_frame_bytes is not None:
            if not isinstance(self.max_frame_bytes, int):
                raise ValueError("Limits.max_frame_bytes must be an integer")
            if self.max_frame_bytes < _MIN_FRAME_BYTES:
                raise ValueError(f"Limits.max_frame_bytes must be at least {_MIN_FRAME_BYTES}")
        if self.frame_bytes >= 2**32:
            raise ValueError("Limits.max_frame_bytes must be below 4 GiB")

    @property
    def frame_bytes(self) -> int:
        """The effective bridge frame cap."""
        if self.max_frame_bytes is not None:
            return self.max_frame_bytes
        return self.max_output_bytes + _FRAME_OVERHEAD


def _check_positive(key: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"Limits.{key} must be a positive number")
