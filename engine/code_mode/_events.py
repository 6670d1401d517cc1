"""The sub-dispatch driver's two session events per sub-call, encoded in one step.

``tool/code-dispatch-start`` and ``tool/code-dispatch`` are written for every sub-call a
program makes. Built as dicts, each went through a sealed ``FrozenDict``, the log's
validation and its retention bound's pass over the fields before one encode: about a
third of the engine's own cost per sub-call. Built as these structs, an event is one
``msgspec`` encode, and a built-in memory log stores those bytes as they are
(``MemorySessionLog.append_encoded``).

The bytes are exactly those of the dict the driver writes otherwise (same keys, same
order, same values: ``tests/engine/test_dispatch_events.py`` compares them), so a log
reads the same either way. Only the common shape is encoded here: a tool with
presentation cards adds ``callCard``/``resultCard`` fields between ``arguments`` and
``timing``, and an event over the retention bound has its fields bounded one by one;
both go the dict way (an event known to be over it, ``too_big``, without an encode).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..json import FrozenDict, FrozenList

__all__ = [
    "UNENCODABLE",
    "SettleEvent",
    "SettleTiming",
    "StartEvent",
    "StartTiming",
    "encode_event",
    "too_big",
]


class StartTiming(msgspec.Struct, rename="camel"):
    """When a sub-call was queued and started (ms since the run's driver began)."""

    queued_ms: float
    started_ms: float
    in_flight: int


class SettleTiming(msgspec.Struct, rename="camel"):
    """A settled sub-call's clock readings (ms since the run's driver began)."""

    queued_ms: float
    started_ms: float | None
    settled_ms: float | None
    committed_ms: float
    in_flight: int


class _Head(msgspec.Struct, rename="camel"):
    """The fields both events start with, in this order (a subclass's follow them)."""

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: Any


class StartEvent(_Head, tag="tool/code-dispatch-start", tag_field="type"):
    """A sub-call passed its ordered start (its gate is next)."""

    timing: StartTiming


class SettleEvent(_Head, tag="tool/code-dispatch", tag_field="type"):
    """A sub-call committed: its durable outcome."""

    is_error: bool
    content: Any
    timing: SettleTiming


encode_event = msgspec.json.Encoder().encode
"""An event's compact JSON; raises one of ``UNENCODABLE`` where only the dict way can
write it (a lone surrogate, which UTF-8 cannot hold, or nesting deeper than ``msgspec``
goes)."""

UNENCODABLE = (UnicodeEncodeError, RecursionError, msgspec.EncodeError)
_FROZEN = (FrozenDict, FrozenList)


def too_big(value: Any, cap: int | None) -> bool:
    """Whether ``value`` is known, without encoding it, to be over ``cap`` bytes of JSON:
    a frozen container whose size was measured where its bytes were at hand (a big
    argument from a worker: ``_digest``), or a list of content blocks whose strings
    alone are longer. Such an event goes the dict way at once: encoding a 50 MB
    argument only to find it over the bound cost the event loop ~100 ms."""
    if cap is None:
        return False
    if type(value) in _FROZEN:
        known = getattr(value, "_digest", None)
        if known is not None:
            return bool(known[0] > cap)
    if type(value) is FrozenList:
        size = 0
        for block in value:
            if type(block) is FrozenDict:
                for item in block.values():
                    if type(item) is str:
                        size += len(item)
        return size > cap
    return False
