"""The bridge protocol: frame types, the length-prefixed codec, and JSON byte metering.

Every frame is ``<u32 big-endian length><JSON object>``; the object's ``type`` key is the
tag. Only JSON crosses (msgspec's JSON codec: no pickle, no extension types), and every
frame is capped by ``Limits.frame_bytes`` on both sides.

::

    host -> worker   run{guest, program, bindings, maxOutputBytes, maxFrameBytes,
                         maxSubCalls, options}
                     result{id, ok, value? | message, code?}
    worker -> host   ready{pid, notes}          (once, after the boundary is up)
                     call{id, global, name, args}
                     log{text}
                     done{value? | error{kind, message}}

The same codec frames the fork-server control channel (``_forkserver``). This module is
imported by worker processes too, so it depends on msgspec and the stdlib only.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "BindingSpec",
    "CallFrame",
    "DoneFrame",
    "ErrorClassSpec",
    "ErrorSpec",
    "FrameBuffer",
    "LogFrame",
    "ReadyFrame",
    "ResultFrame",
    "RunFrame",
    "encode_frame",
    "json_string_length",
    "sanitize_text",
    "truncate_to_json_length",
]

_HEADER = 4


class ErrorClassSpec(msgspec.Struct, frozen=True, rename="camel"):
    """The guest-side error class for failed calls of one binding."""

    name: str
    member_name_property: str


class BindingSpec(msgspec.Struct, frozen=True, rename="camel"):
    """One namespace global the guest exposes (``tools``) and its function names."""

    global_name: str = msgspec.field(name="global")
    names: list[str] = msgspec.field(default_factory=list)
    error_class: ErrorClassSpec | None = None


class RunFrame(msgspec.Struct, frozen=True, tag="run", tag_field="type", rename="camel"):
    """Host -> worker: run one program. ``guest`` picks the guest implementation."""

    guest: str
    program: str
    bindings: list[BindingSpec]
    max_output_bytes: int
    max_frame_bytes: int
    max_sub_calls: int
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class ResultFrame(
    msgspec.Struct, frozen=True, tag="result", tag_field="type", rename="camel", omit_defaults=True
):
    """Host -> worker: the settlement of call ``id`` (``ok`` with ``value``, or a failure)."""

    id: int
    ok: bool
    value: Any = None
    message: str = ""
    code: str | None = None


class ReadyFrame(msgspec.Struct, frozen=True, tag="ready", tag_field="type", rename="camel"):
    """Worker -> host: the boundary is up; ``notes`` lists layers that degraded."""

    pid: int
    notes: list[str] = msgspec.field(default_factory=list)


class CallFrame(msgspec.Struct, frozen=True, tag="call", tag_field="type", rename="camel"):
    """Worker -> host: invoke ``<global>.<name>(args)``; answered by ``result{id}``."""

    id: int
    global_name: str = msgspec.field(name="global")
    name: str = ""
    args: Any = None


class LogFrame(msgspec.Struct, frozen=True, tag="log", tag_field="type", rename="camel"):
    """Worker -> host: one log entry (one printed line, newline stripped)."""

    text: str


class ErrorSpec(msgspec.Struct, frozen=True, rename="camel"):
    """A guest-reported failure."""

    kind: str
    message: str


class DoneFrame(
    msgspec.Struct, frozen=True, tag="done", tag_field="type", rename="camel", omit_defaults=True
):
    """Worker -> host: the program finished, with a value (or none) or an error."""

    value: Any = msgspec.UNSET
    error: ErrorSpec | None = None


HostInbound = CallFrame | LogFrame | DoneFrame | ReadyFrame
WorkerInbound = RunFrame | ResultFrame

_encoder = msgspec.json.Encoder()


def encode_frame(frame: msgspec.Struct) -> bytes:
    """Serialise one frame with its length prefix."""
    payload = _encoder.encode(frame)
    return len(payload).to_bytes(_HEADER, "big") + payload


class FrameBuffer:
    """Incremental splitter of a length-prefixed byte stream into frame payloads.

    A frame whose announced length exceeds ``max_frame_bytes`` is skipped without being
    buffered (its bytes are discarded as they arrive) and counted in ``oversized``.
    """

    __slots__ = ("_buf", "_max", "_skip", "oversized")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes
        self._skip = 0
        self.oversized = 0

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the complete payloads now available, in order."""
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        end = len(buf)
        while True:
            if self._skip:
                step = min(self._skip, end - pos)
                pos += step
                self._skip -= step
                if self._skip:
                    break
            if end - pos < _HEADER:
                break
            size = int.from_bytes(buf[pos : pos + _HEADER], "big")
            if size > self._max:
                self.oversized += 1
                pos += _HEADER
                self._skip = size
                continue
            if end - pos - _HEADER < size:
                break
            out.append(bytes(buf[pos + _HEADER : pos + _HEADER + size]))
            pos += _HEADER + size
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes buffered towards an incomplete frame."""
        return len(self._buf)


def sanitize_text(text: str) -> str:
    """Replace lone surrogates (not encodable as UTF-8 JSON) with U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def json_string_length(text: str) -> int:
    """Bytes of ``JSON.stringify(text)`` in UTF-8 (quotes included)."""
    return len(_encoder.encode(text))


def truncate_to_json_length(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose JSON string form takes at most ``budget`` bytes.

    Returns ``""`` when not even the quotes fit (callers check ``budget >= 2``).
    """
    if json_string_length(text) <= budget:
        return text
    # Every character costs at least one byte, so the answer is shorter than the budget.
    lo, hi = 0, min(len(text), max(budget - 2, 0))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if json_string_length(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
