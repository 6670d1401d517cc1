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

Values may nest deeper than msgspec's codec can recurse (a 5,000-deep argument is
lossless JSON, and QuickJS builds one iteratively): ``encode_payload`` and
``decode_frame`` fall back to iterative writers/readers for the ``args``/``value`` field
when msgspec raises ``RecursionError``. Given ``max_depth`` (the host passes
``Limits.max_nesting_depth``), both bound the nesting while they work: ``decode_frame``
replaces a value field nested deeper than the cap with a ``TooDeep`` marker (the
container past the cap is skipped, never built), so the host can fail that one call
cheaply; ``encode_payload`` raises ``NestingError``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import msgspec

__all__ = [
    "BindingSpec",
    "CallFrame",
    "DoneFrame",
    "ErrorClassSpec",
    "ErrorSpec",
    "FrameBuffer",
    "LogFrame",
    "MAX_PREPARED_BYTES",
    "NeedsDeepDecode",
    "NestingError",
    "Payload",
    "PreparedFrame",
    "ReadyFrame",
    "ResultFrame",
    "RunFrame",
    "TooDeep",
    "decode_frame",
    "decode_host_frame_sliced",
    "decode_host_frame_sliced_raw",
    "dumps_deep",
    "encode_frame",
    "encode_payload",
    "few_members",
    "loads_deep",
    "loads_sliced",
    "json_string_length",
    "nesting_exceeds",
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
    #: The host has seen this program before: send its prepared form (``PreparedFrame``).
    prepare: bool = False
    #: What an earlier worker of this guest made of this same program (the guest's own
    #: format, e.g. a marshalled code object), to use instead of making it again.
    prepared: bytes = b""
    #: Seconds of polling for binding results the run may spend (``Spin``): its compute
    #: budget counts them.
    poll_allowance_s: float = 0.1


class ResultFrame(
    msgspec.Struct, frozen=True, tag="result", tag_field="type", rename="camel", omit_defaults=True
):
    """Host -> worker: the settlement of call ``id`` (``ok`` with ``value``, or a failure).

    ``poll``: the host serves no other run right now, so the worker may poll briefly for
    its next result before it sleeps (``WorkerBridge``'s ``Spin``).
    """

    id: int
    ok: bool
    value: Any = None
    message: str = ""
    code: str | None = None
    poll: bool = False


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


#: The largest prepared form a worker sends and the host keeps (``PreparedFrame``).
MAX_PREPARED_BYTES = 1 << 20


class PreparedFrame(msgspec.Struct, frozen=True, tag="prepared", tag_field="type"):
    """Worker -> host, asked for by ``RunFrame.prepare`` and only as the first frame,
    written before any program code ran: what the guest made of the program (its
    compiled form), for the host to give to the next workers that run the same one."""

    data: bytes


class DoneFrame(
    msgspec.Struct, frozen=True, tag="done", tag_field="type", rename="camel", omit_defaults=True
):
    """Worker -> host: the program finished, with a value (or none) or an error."""

    value: Any = msgspec.UNSET
    error: ErrorSpec | None = None


HostInbound = CallFrame | LogFrame | DoneFrame | PreparedFrame | ReadyFrame
WorkerInbound = RunFrame | ResultFrame

_encoder = msgspec.json.Encoder()
_T = TypeVar("_T")
_S = TypeVar("_S", bound=msgspec.Struct)
# The only fields that carry program values (and so may nest arbitrarily deep).
_VALUE_FIELDS = ("args", "value")


class NestingError(ValueError):
    """A value nests deeper than the cap it was checked against."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"value nests deeper than {limit:,} levels")
        self.limit = limit


class NeedsDeepDecode(Exception):
    """``decode_frame(..., deep=False)``: the payload needs the (slower) iterative reader."""


class TooDeep:
    """What ``decode_frame`` puts in place of a value field nested deeper than its cap."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __repr__(self) -> str:
        return f"TooDeep({self.limit})"


def _native_bounded(max_depth: int) -> bool:
    # msgspec recurses once per nesting level and raises RecursionError at the
    # interpreter's limit, so a value it handled nests less deeply than that limit; only
    # a cap below it needs a separate check.
    return max_depth >= sys.getrecursionlimit()


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers (dict/list/tuple) more than ``limit`` levels deep.

    Iterative, and stops at the first container past the cap. A scalar has depth 0,
    ``[1]`` depth 1.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth += 1
        if depth > limit:
            return True
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list, tuple)))
    return False


def encode_payload(frame: msgspec.Struct, *, max_depth: int | None = None) -> bytes:
    """Serialise one frame (no length prefix); deep ``args``/``value`` are written iteratively.

    With ``max_depth``, raises ``NestingError`` when a value field nests deeper.
    """
    try:
        data = _encoder.encode(frame)
    except RecursionError:
        return _encoder.encode(_written_deep(frame, max_depth))
    _check_nesting(frame, max_depth)
    return data


def encode_frame(frame: msgspec.Struct, *, max_depth: int | None = None) -> bytearray:
    """Serialise one frame with its length prefix (``max_depth``: see ``encode_payload``).

    The payload is written after a reserved header that is filled in afterwards: one
    buffer, where prefixing an encoded payload copied it once more (for a 1 MB value in
    a fresh worker, ~250 page faults and 0.5 ms).
    """
    out = bytearray(_HEADER)
    try:
        _encoder.encode_into(frame, out, _HEADER)
    except RecursionError:
        del out[_HEADER:]
        _encoder.encode_into(_written_deep(frame, max_depth), out, _HEADER)
    else:
        _check_nesting(frame, max_depth)
    out[:_HEADER] = (len(out) - _HEADER).to_bytes(_HEADER, "big")
    return out


def _check_nesting(frame: msgspec.Struct, max_depth: int | None) -> None:
    """After msgspec encoded ``frame``: ``NestingError`` past a cap below its own reach."""
    if max_depth is not None and not _native_bounded(max_depth):
        for name in _VALUE_FIELDS:
            if nesting_exceeds(getattr(frame, name, None), max_depth):
                raise NestingError(max_depth)


def _written_deep(frame: _S, max_depth: int | None) -> _S:
    """``frame`` with its value fields pre-encoded iteratively (too deep for msgspec)."""
    changes = {
        name: msgspec.Raw(dumps_deep(getattr(frame, name), max_depth=max_depth))
        for name in _VALUE_FIELDS
        if isinstance(getattr(frame, name, None), (dict, list, tuple))
    }
    return msgspec.structs.replace(frame, **changes)


def decode_frame(
    decoder: msgspec.json.Decoder[_T],
    payload: Payload,
    *,
    max_depth: int | None = None,
    deep: bool = True,
) -> _T:
    """``decoder.decode(payload)``, reading a too-deep ``args``/``value`` iteratively.

    Raises ``msgspec.DecodeError``/``ValidationError`` like the decoder (never
    ``RecursionError``, whatever the nesting). With ``max_depth``, an ``args``/``value``
    nested deeper than that is replaced by ``TooDeep(max_depth)`` (skipped, not built);
    anything else nested that deep is a ``DecodeError``. With ``deep=False``, raises
    ``NeedsDeepDecode`` instead of running the iterative reader (so a caller can run it
    elsewhere, e.g. off its event loop).
    """
    try:
        frame = decoder.decode(payload)
    except RecursionError:
        if not deep:
            raise NeedsDeepDecode from None
    else:
        if max_depth is not None and not _native_bounded(max_depth):
            changes = {
                name: TooDeep(max_depth)
                for name in _VALUE_FIELDS
                if nesting_exceeds(getattr(frame, name, None), max_depth)
            }
            if changes:
                frame = msgspec.structs.replace(frame, **changes)  # type: ignore[type-var]
        return frame
    try:
        # The frame object is one level above its value fields.
        obj, overflow = _loads(payload, None if max_depth is None else max_depth + 1)
    except ValueError as exc:
        raise msgspec.DecodeError(str(exc)) from None
    if not isinstance(obj, dict):
        raise msgspec.ValidationError("expected a frame object")
    if overflow is not None and overflow not in _VALUE_FIELDS:
        raise msgspec.DecodeError("frame nests too deeply outside its value")
    deep_fields: dict[str, Any] = {
        k: obj[k] for k in _VALUE_FIELDS if isinstance(obj.get(k), (dict, list))
    }
    if overflow is not None:
        assert max_depth is not None
        deep_fields[overflow] = TooDeep(max_depth)
    shallow = {k: (None if k in deep_fields else v) for k, v in obj.items()}
    try:
        frame = decoder.decode(_encoder.encode(shallow))
    except RecursionError:
        raise msgspec.DecodeError("frame nests too deeply outside its value") from None
    fields = getattr(frame, "__struct_fields__", ())
    changes = {k: v for k, v in deep_fields.items() if k in fields}
    return msgspec.structs.replace(frame, **changes)  # type: ignore[type-var]


# The only queued literals equal to these are the closers (the others are "[", "," and
# '{"key":'-like prefixes), so popping one of them leaves a container.
_CLOSE_OBJECT = b"}"
_CLOSE_ARRAY = b"]"


def dumps_deep(value: Any, *, max_depth: int | None = None) -> bytes:
    """Compact JSON of ``value`` without recursion (containers: dict, list, tuple).

    With ``max_depth``, raises ``NestingError`` on reaching a container nested deeper.
    """
    parts: list[bytes] = []
    stack: list[Any] = [value]
    encode = _encoder.encode
    limit = max_depth if max_depth is not None else -1
    depth = 0
    while stack:
        item = stack.pop()
        if type(item) is bytes:  # a literal queued below; JSON values are never bytes
            if item == _CLOSE_OBJECT or item == _CLOSE_ARRAY:
                depth -= 1
            parts.append(item)
        elif isinstance(item, dict):
            if depth == limit:
                raise NestingError(limit)
            if not item:
                parts.append(b"{}")
                continue
            depth += 1
            stack.append(_CLOSE_OBJECT)
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                key, child = entries[i]
                if not isinstance(key, str):
                    raise TypeError("JSON object keys must be strings")
                stack.append(child)
                stack.append((b"," if i else b"{") + encode(key) + b":")
        elif isinstance(item, (list, tuple)):
            if depth == limit:
                raise NestingError(limit)
            if not item:
                parts.append(b"[]")
                continue
            depth += 1
            stack.append(_CLOSE_ARRAY)
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                stack.append(b"," if i else b"[")
        else:
            parts.append(encode(item))
    return b"".join(parts)


# JSON strings are matched possessively (``*+``): a string cannot end anywhere but at its
# closing quote, so backtracking into one only re-scans it (a window cut inside a 1 MB
# string cost 11 ms of backtracking before).
_TOKEN = re.compile(
    rb'[ \t\n\r]*(?:([\[\]{},:])|("[^"\\]*+(?:\\.[^"\\]*+)*+")|(-?[0-9][-+.0-9eE]*)|(true|false|null))',
    re.DOTALL,
)
_SCALARS = {b"true": True, b"false": False, b"null": None}
_END = re.compile(rb"[ \t\n\r]*")


# Runs of openers, runs of closers, strings, and anything else: a 200,000-deep run of
# brackets is two matches.
_SKIP_TOKEN = re.compile(rb'([\[{]+)|([\]}]+)|"[^"\\]*+(?:\\.[^"\\]*+)*+"|[^\[\]{}"]+', re.DOTALL)


def _skip(data: Payload, pos: int) -> int:
    """The position just after the container whose opening bracket ends at ``pos``.

    Only brackets and strings are looked at: the container is refused whatever it holds,
    so it is measured, not parsed (linear, and nothing is built).
    """
    depth = 1
    while True:
        match = _SKIP_TOKEN.match(data, pos)
        if match is None:
            raise ValueError(f"unterminated container or string at byte {pos}")
        opens, closes = match.group(1), match.group(2)
        if opens:
            depth += len(opens)
        elif closes:
            if len(closes) >= depth:
                return match.start() + depth
            depth -= len(closes)
        pos = match.end()


def loads_deep(data: bytes, *, max_depth: int | None = None) -> Any:
    """Parse JSON without recursion; ``ValueError`` when ``data`` is not one JSON value.

    Strings and numbers are decoded by msgspec token by token (flat, so no recursion).
    With ``max_depth``, raises ``NestingError`` (a ``ValueError``) as soon as a
    container would nest deeper, without reading that container.
    """
    value, overflow = _loads(data, max_depth)
    if overflow is not None:
        assert max_depth is not None
        raise NestingError(max_depth)
    return value


_ROOT = "<root>"


def _loads(data: Payload, max_depth: int | None) -> tuple[Any, str | None]:
    """``loads_deep``'s parser; containers past ``max_depth`` become ``None`` and the
    second item names where the first one was: the root object's key it sits under, or
    ``"<root>"`` when the root is not an object."""
    decode = msgspec.json.decode
    # Each open container: [container, key awaiting its value (objects only)].
    stack: list[list[Any]] = []
    root: list[Any] = []
    overflow: str | None = None
    root_key: str | None = None  # the root object's key whose value is being read
    limit = max_depth if max_depth is not None else -1
    # States: "value" (a value is required), "first" (a value or "]"), "key" (a key or
    # "}"), "colon", "next" ("," or the closing bracket).
    state = "value"
    pos = 0
    size = len(data)
    while True:
        if state == "next" and not stack:
            end = _END.match(data, pos)
            if end is None or end.end() != size:
                raise ValueError("trailing data after the JSON value")
            return root[0], overflow
        match = _TOKEN.match(data, pos)
        if match is None:
            raise ValueError(f"invalid JSON at byte {pos}")
        pos = match.end()
        punct, string, number, word = match.groups()
        top = stack[-1] if stack else None
        if state == "colon":
            if punct != b":":
                raise ValueError(f"expected ':' at byte {pos}")
            state = "value"
            continue
        if state == "next":
            assert top is not None
            closer = b"]" if isinstance(top[0], list) else b"}"
            if punct == b",":
                state = "value" if closer == b"]" else "key"
            elif punct == closer:
                stack.pop()
                state = "next"
            else:
                raise ValueError(f"expected ',' or {closer.decode()!r} at byte {pos}")
            continue
        if state == "key":
            if punct == b"}" and top is not None and not top[0] and top[1] is None:
                stack.pop()
                state = "next"
                continue
            if string is None:
                raise ValueError(f"expected a string key at byte {pos}")
            assert top is not None
            top[1] = decode(string)
            if len(stack) == 1:
                root_key = top[1]
            state = "colon"
            continue
        # "value" or "first"
        if punct == b"]" and state == "first":
            stack.pop()
            state = "next"
            continue
        value: Any
        opened = False
        if punct in (b"[", b"{") and len(stack) == limit:
            # One level too deep: measure the container instead of building it.
            if overflow is None:
                overflow = root_key if stack and isinstance(stack[0][0], dict) else _ROOT
            pos = _skip(data, pos)
            value = None
        elif punct == b"[":
            value, opened = [], True
        elif punct == b"{":
            value, opened = {}, True
        elif punct is not None:
            raise ValueError(f"unexpected {punct.decode()!r} at byte {pos}")
        elif string is not None or number is not None:
            try:
                value = decode(string if string is not None else number)
            except msgspec.DecodeError as exc:
                raise ValueError(str(exc)) from None
        else:
            value = _SCALARS[word]
        if top is None:
            root.append(value)
        elif isinstance(top[0], list):
            top[0].append(value)
        else:
            top[0][top[1]] = value
            top[1] = None
        if opened:
            stack.append([value, None])
            state = "first" if isinstance(value, list) else "key"
        else:
            state = "next"


# -- sliced decoding: big values in bounded pieces -------------------------------------
#
# msgspec decodes a value in one C call that holds the GIL throughout: a 10 MB object
# takes 100-500 ms, and decoding it in a worker thread would still stall the host's event
# loop for all of it. ``decode_frame_sliced`` cuts a big container into runs of members
# of about ``_SLICE_BYTES`` at its top level (recursing into members that are big
# containers themselves) and decodes each run separately, so no single C call sees more
# than a slice; between slices the GIL changes hands as usual.

_SLICE_BYTES = 128 * 1024
_MAX_SLICED_DEPTH = 64  # below this, a big container is decoded whole (rare shapes)
# Fewer commas than this in a big container's bytes (counted at every depth, strings
# included, so never an undercount of members): it is decoded whole.
_FEW_MEMBERS = 256
# Top-level tokens of a container body: runs of anything but brackets, commas and
# strings-with-their-contents (one match per member, usually), a comma, or a bracket.
_TOP = re.compile(rb'(?:[^"\[\]{},]+|"[^"\\]*+(?:\\.[^"\\]*+)*+")+|(,)|([\[{])|([\]}])', re.DOTALL)
# Many whole members with their commas in one match (a window of them: see ``_sliced``).
_MEMBERS = re.compile(rb'(?:(?:[^"\[\]{},]+|"[^"\\]*+(?:\\.[^"\\]*+)*+")+,)+', re.DOTALL)
_WS = b" \t\n\r"


def _whole(data: Any, depth: int, max_depth: int | None) -> Any:
    """One JSON value in one piece, at ``depth`` levels below the sliced value's top
    (``data``: any buffer)."""
    remaining = None if max_depth is None else max_depth - depth
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        return loads_deep(bytes(data), max_depth=remaining)
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from None
    if remaining is not None and not _native_bounded(remaining):
        if nesting_exceeds(value, remaining):
            raise NestingError(max_depth)  # type: ignore[arg-type]
    return value


def loads_sliced(data: bytes, *, max_depth: int | None = None) -> Any:
    """``loads_deep`` for big values: parsed in slices of about ``_SLICE_BYTES``.

    Raises ``ValueError`` for malformed JSON and ``NestingError`` past ``max_depth``.
    """
    start, end = 0, len(data)
    while start < end and data[start] in _WS:
        start += 1
    while end > start and data[end - 1] in _WS:
        end -= 1
    return _sliced(data, start, end, 0, max_depth)


def few_members(payload: Payload) -> bool:
    """Whether ``payload`` holds fewer than ``_FEW_MEMBERS`` commas anywhere: its bytes
    are in a few big scalars, so msgspec decodes it at about memcpy speed."""
    return _few_commas(payload, 0, len(payload))


def _few_commas(data: Payload, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` holds fewer than ``_FEW_MEMBERS`` commas.

    Stops at the last one it needs: a wide value answers within its first members
    (``bytes.count`` over 10 MB held the GIL for milliseconds), a sparse one at memchr
    speed.
    """
    pos = start
    for _ in range(_FEW_MEMBERS):
        pos = data.find(b",", pos, end)
        if pos < 0:
            return True
        pos += 1
    return False


def _sliced(data: bytes, start: int, end: int, depth: int, max_depth: int | None) -> Any:
    if (
        end - start <= _SLICE_BYTES
        or depth >= _MAX_SLICED_DEPTH
        or data[start] not in b"[{"
        or _few_commas(data, start, end)
    ):
        # Small, or a scalar (a big string decodes at memcpy speed), or a container of
        # few members at every depth (its bytes are in big scalars, so it decodes as
        # fast: a 1 MB-string argument took 15 ms to slice and 0.4 ms whole), or deep
        # in a shape no program needs: one piece.
        return _whole(data[start:end], depth, max_depth)
    if max_depth is not None and depth >= max_depth:
        raise NestingError(max_depth)
    is_object = data[start] == 0x7B
    if data[end - 1] != (0x7D if is_object else 0x5D):
        raise ValueError(f"unterminated container at byte {start}")
    out: Any = {} if is_object else []
    opener, closer = (b"{", b"}") if is_object else (b"[", b"]")
    body_end = end - 1
    chunk = member = pos = start + 1  # current run, current member, scan position

    def flush(upto: int) -> None:
        piece = data[chunk:upto]
        if piece.strip(_WS):
            part = _whole(opener + piece + closer, depth, max_depth)
            if is_object:
                out.update(part)
            else:
                out.extend(part)

    while pos < body_end:
        if chunk != -1:
            # Fast path: whole flat members up to the last comma in the next window.
            run = _MEMBERS.match(data, pos, min(pos + _SLICE_BYTES, body_end))
            if run is not None:
                pos = member = run.end()
                if pos - chunk >= _SLICE_BYTES:
                    flush(pos - 1)
                    chunk = pos
                continue
        match = _TOP.match(data, pos, body_end)
        if match is None:
            raise ValueError(f"invalid JSON at byte {pos}")
        comma, opens, closes = match.groups()
        if closes:
            raise ValueError(f"unbalanced {closes.decode()!r} at byte {match.start()}")
        if opens:
            if chunk == -1:  # a big member must be followed by a comma or the end
                raise ValueError(f"expected ',' at byte {match.start()}")
            value_start = match.start()
            value_end = _skip(data, match.end())
            if value_end - value_start > _SLICE_BYTES:
                # A big member: the run before it in one piece, the member on its own.
                if member > chunk:
                    flush(member - 1)  # up to its comma
                value = _sliced(data, value_start, value_end, depth + 1, max_depth)
                if is_object:
                    head = data[member:value_start].strip(_WS)
                    if not head.endswith(b":"):
                        raise ValueError(f"expected a key before byte {value_start}")
                    key = msgspec.json.decode(head[:-1].strip(_WS))
                    if not isinstance(key, str):
                        raise ValueError(f"expected a string key before byte {value_start}")
                    out[key] = value
                else:
                    if data[member:value_start].strip(_WS):
                        raise ValueError(f"unexpected data before byte {value_start}")
                    out.append(value)
                # The next run starts after this member's comma.
                chunk = member = -1
            pos = value_end
            continue
        pos = match.end()
        if comma:
            if chunk == -1:  # the comma closing a big member
                chunk = pos
            elif pos - chunk >= _SLICE_BYTES:
                flush(pos - 1)
                chunk = pos
            member = pos
        elif chunk == -1 and data[match.start() : pos].strip(_WS):
            raise ValueError(f"expected ',' at byte {match.start()}")
    if chunk != -1:
        flush(body_end)
    return out


class _CallWire(msgspec.Struct, frozen=True, tag="call", tag_field="type", rename="camel"):
    """``CallFrame`` with its arguments left as JSON text (decoded in slices)."""

    id: int
    global_name: str = msgspec.field(name="global")
    name: str = ""
    args: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))


class _DoneWire(
    msgspec.Struct, frozen=True, tag="done", tag_field="type", rename="camel", omit_defaults=True
):
    """``DoneFrame`` with its value left as JSON text (decoded in slices)."""

    value: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b""))  # b"": absent
    error: ErrorSpec | None = None


_sliced_decoder = msgspec.json.Decoder(
    _CallWire | _DoneWire | LogFrame | PreparedFrame | ReadyFrame
)


def decode_host_frame_sliced(payload: bytes, *, max_depth: int | None = None) -> Any:
    """A worker -> host frame (``HostInbound``) with its value decoded in slices.

    The same result as ``decode_frame(Decoder(HostInbound), payload, max_depth=...)``,
    but no single C call decodes more than about ``_SLICE_BYTES`` of a big value, so a
    thread running it leaves the GIL to the event loop between slices. Raises
    ``msgspec.DecodeError``/``ValidationError`` for frames to drop.
    """
    return decode_host_frame_sliced_raw(payload, max_depth=max_depth)[0]


def decode_host_frame_sliced_raw(
    payload: Payload | list[Payload],
    *,
    max_depth: int | None = None,
    on_raw: Callable[[Any], object] | None = None,
) -> tuple[Any, Any]:
    """``decode_host_frame_sliced`` plus the value field's JSON bytes as received (None
    when the frame has none or took the iterative path): a buffer (``bytes``, or a
    ``msgspec.Raw`` view of the payload), to read before it is let go.

    ``payload`` may come in a one-item list holding its only reference: it is then let go
    as soon as nothing needs it (a 50 MB argument is held twice at most: its bytes and
    its value). ``on_raw``, when given, is called with a call's argument bytes before they
    are decoded (the host hashes them meanwhile, in another thread).
    """
    if isinstance(payload, list):
        payload = payload.pop()
    try:
        wire = _sliced_decoder.decode(payload)
    except RecursionError:
        # Too deep for msgspec to skip: the iterative reader (pure Python, so the GIL
        # changes hands as it goes).
        return decode_frame(_host_decoder, payload, max_depth=max_depth), None
    if not isinstance(wire, (_CallWire, _DoneWire)):
        return wire, None
    # Few members anywhere (a big string, a few big fields): the value decodes at memcpy
    # speed, whole and straight from its view of the payload. Otherwise its bytes are
    # copied out (the payload let go) and decoded in slices.
    whole = _few_commas(payload, 0, len(payload))
    del payload
    view: Any = wire.args if isinstance(wire, _CallWire) else wire.value
    raw: Any = view if whole else bytes(view)
    del view
    if isinstance(wire, _CallWire):
        ident, global_name, name = wire.id, wire.global_name, wire.name
        del wire
        if on_raw is not None:
            on_raw(raw)
        args = _value_or_marker(raw, max_depth, whole)
        return CallFrame(id=ident, global_name=global_name, name=name, args=args), raw
    error = wire.error
    del wire
    if not len(raw):
        return DoneFrame(error=error), None
    return DoneFrame(value=_value_or_marker(raw, max_depth, whole), error=error), raw


def _value_or_marker(data: Any, max_depth: int | None, whole: bool = False) -> Any:
    try:
        return _whole(data, 0, max_depth) if whole else loads_sliced(data, max_depth=max_depth)
    except NestingError:
        assert max_depth is not None
        return TooDeep(max_depth)
    except ValueError as exc:
        raise msgspec.DecodeError(str(exc)) from None


_host_decoder = msgspec.json.Decoder(HostInbound)


# A frame at least this large is collected into one buffer of its announced size, read
# into directly (``receive``): growing, slicing and copying a 60 MiB bytearray cost tens
# of ms per frame, joining received pieces one more copy, and in a fresh worker each
# copy of 1 MB is ~250 page faults (0.4 ms).
_COLLECT_BYTES = 64 << 10

# At most this much of a large frame per read: a read takes its page faults (the
# buffer is fresh memory) with the reader's thread held, ~1.5 ms per MB here and twice
# that beside a CPU hog, and a 50 MB frame already in a widened socket came in a few
# reads, 53 ms in one turn of the host's loop.
_BIG_READ_BYTES = 1 << 20

_unfilled: Callable[[int], bytearray] | None = None


def unfilled_bytearray(size: int) -> bytearray:
    """``bytearray(size)`` without its zeroing.

    ``bytearray(n)`` writes n zero bytes: a 50 MB frame's buffer took its 12,200 page
    faults (34 ms here) in one call on the host's loop before a byte of it arrived.
    Left unwritten, the pages are faulted in by the reads that fill them, a slice at a
    time. The bytes are unspecified until written (the buffer's users read only what
    was received); the NUL after the last one is there, as in every ``bytearray``.
    """
    global _unfilled
    if _unfilled is None:
        try:  # ctypes on first use: most processes never receive a large frame
            import ctypes

            make = ctypes.pythonapi.PyByteArray_FromStringAndSize
            make.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)
            make.restype = ctypes.py_object
            _unfilled = partial(make, None)
        except (ImportError, AttributeError):  # pragma: no cover - not CPython
            _unfilled = bytearray
    return _unfilled(size)


#: What ``FrameBuffer`` hands out: ``bytes``, or the ``bytearray`` a big frame was read into.
Payload = bytes | bytearray


class FrameBuffer:
    """Incremental splitter of a length-prefixed byte stream into frame payloads.

    A frame whose announced length exceeds ``max_frame_bytes`` is skipped without being
    buffered (its bytes are discarded as they arrive) and counted in ``oversized``. A
    large frame is collected in one buffer of its size, which ``receive`` reads into
    straight from the socket (no intermediate copy).
    """

    __slots__ = ("_big", "_buf", "_filled", "_max", "_skip", "oversized", "read_size", "short")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes
        self._skip = 0
        self._big: bytearray | None = None  # a large frame being collected
        self._filled = 0  # bytes of it received so far
        self.oversized = 0
        #: What one ``recv`` asks for (0: unknown); ``short``: the last ``receive`` got less
        #: than it asked for, so the socket was empty right after it (a reader can wait
        #: for readiness instead of reading again only to get ``EAGAIN``).
        self.read_size = 0
        self.short = False

    def receive(self, sock: Any, recv: Any, flags: int = 0) -> list[Payload] | None:
        """One read from ``sock``; the complete payloads it made available, ``None`` at
        the end of the stream. The socket's exceptions (``BlockingIOError``...) propagate.

        While a large frame is being collected the read goes straight into its buffer;
        otherwise ``recv(sock)`` reads (a callable returning ``bytes``) and the data is
        fed as by ``feed``.
        """
        big = self._big
        if big is None:
            data = recv(sock)
            self.short = len(data) < self.read_size
            return self.feed(data) if data else None
        view = memoryview(big)[self._filled : self._filled + _BIG_READ_BYTES]
        n: int = sock.recv_into(view, 0, flags)
        if not n:
            return None
        self.short = n < len(view)
        self._filled += n
        if self._filled < len(big):
            return []
        self._big, self._filled = None, 0
        return [big]

    def feed(self, data: bytes | memoryview) -> list[Payload]:
        """Add received bytes; return the complete payloads now available, in order."""
        out: list[Payload] = []
        big = self._big
        if big is not None:
            view = memoryview(data)
            take = min(len(view), len(big) - self._filled)
            big[self._filled : self._filled + take] = view[:take]
            self._filled += take
            if self._filled < len(big):
                return out
            out.append(big)
            self._big, self._filled = None, 0
            data = view[take:]
            if not data:
                return out
        buf = self._buf
        buf += data
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
            have = end - pos - _HEADER
            if have < size:
                if size >= _COLLECT_BYTES:
                    # Collect the rest in one buffer (see _COLLECT_BYTES).
                    big = self._big = unfilled_bytearray(size)
                    big[:have] = memoryview(buf)[pos + _HEADER : end]
                    self._filled = have
                    pos = end
                break
            out.append(bytes(buf[pos + _HEADER : pos + _HEADER + size]))
            pos += _HEADER + size
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes buffered towards an incomplete frame."""
        return len(self._buf) + self._filled


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
