"""The bridge codec's deep path (``_frames``): values nested past msgspec's recursion
limit (a 5,000-deep argument from QuickJS) are written and read iteratively, so the
host never raises ``RecursionError`` on a frame, whatever its nesting."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from strategies import json_values

from codemode.sandbox.worker._frames import (
    CallFrame,
    DoneFrame,
    HostInbound,
    ResultFrame,
    WorkerInbound,
    decode_frame,
    dumps_deep,
    encode_frame,
    loads_deep,
)


def nested(depth: int, leaf: Any = "leaf") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if depth % 2 else {"k": value}
    return value


@given(json_values())
def test_deep_codec_agrees_with_msgspec(value: Any) -> None:
    data = msgspec.json.encode(value)
    assert dumps_deep(value) == data
    assert loads_deep(data) == value
    assert loads_deep(json.dumps(value, indent=2).encode()) == value


@pytest.mark.parametrize(
    "data",
    [b"", b"[", b"[1,]", b'{"a"}', b"{,}", b"1 2", b'{"a":1,}', b"tru", b'"x', b"[1 2]", b"{1:2}"],
)
def test_loads_deep_refuses_malformed_json(data: bytes) -> None:
    with pytest.raises(ValueError):
        loads_deep(data)


@pytest.mark.parametrize("depth", [5_000, 100_001])
def test_deep_frames_cross_both_ways(depth: int) -> None:
    value = nested(depth)
    call = encode_frame(CallFrame(id=1, global_name="tools", name="echo", args=value))
    frame = decode_frame(msgspec.json.Decoder(HostInbound), call[4:])
    assert isinstance(frame, CallFrame) and (frame.id, frame.name) == (1, "echo")
    assert dumps_deep(frame.args) == dumps_deep(value)
    result = encode_frame(ResultFrame(id=1, ok=True, value=value))
    back = decode_frame(msgspec.json.Decoder(WorkerInbound), result[4:])
    assert isinstance(back, ResultFrame) and dumps_deep(back.value) == dumps_deep(value)


def test_deep_junk_outside_the_value_is_a_decode_error() -> None:
    deep = b"[" * 5_000 + b"]" * 5_000
    decoder = msgspec.json.Decoder(HostInbound)
    with pytest.raises(msgspec.ValidationError):
        decode_frame(decoder, b'{"type":"done","error":' + deep + b"}")
    with pytest.raises(msgspec.DecodeError):
        decode_frame(decoder, b'{"type":"done","value":' + deep + b",}")
    frame = decode_frame(decoder, b'{"type":"done","value":' + deep + b"}")
    assert isinstance(frame, DoneFrame)
