"""The host's frame codec for heavy payloads (``_frames``): sliced decoding and the
nesting cap, checked against msgspec on generated values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import json_values

import codemode.sandbox.worker._frames as frames
from codemode.sandbox.worker._frames import (
    CallFrame,
    DoneFrame,
    HostInbound,
    LogFrame,
    NestingError,
    TooDeep,
    decode_frame,
    decode_host_frame_sliced,
    dumps_deep,
    encode_frame,
    encode_payload,
    loads_deep,
    loads_sliced,
    nesting_exceeds,
)

HOST = msgspec.json.Decoder(HostInbound)


def nested(depth: int, leaf: Any = "leaf") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def tiny_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    # Slices of a few bytes, so values are cut at every level (and no container is
    # "few members", which would be decoded whole).
    monkeypatch.setattr(frames, "_SLICE_BYTES", 8)
    monkeypatch.setattr(frames, "_FEW_MEMBERS", 0)


@contextmanager
def slices_of(size: int) -> Iterator[None]:
    saved = frames._SLICE_BYTES, frames._FEW_MEMBERS
    frames._SLICE_BYTES, frames._FEW_MEMBERS = size, 0
    try:
        yield
    finally:
        frames._SLICE_BYTES, frames._FEW_MEMBERS = saved


@settings(max_examples=300)
@given(value=json_values(max_leaves=40), indent=st.sampled_from([None, 1]))
def test_sliced_decoding_agrees_with_msgspec(value: Any, indent: int | None) -> None:
    data = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    frame = encode_frame(CallFrame(id=7, global_name="tools", name="x", args=value))[4:]
    with slices_of(8):
        assert loads_sliced(data) == value
        assert decode_host_frame_sliced(frame) == HOST.decode(frame)


@pytest.mark.parametrize(
    "data",
    [
        b"[1,2,3,4,5,6,7,8,9,]",
        b"[1,2,3,4,5,6,7,8,9 10]",
        b'{"a":1,"b":2,"c":3,}',
        b"[[1,2,3,4,5,6,7,8,9,10] [1]]",
        b'{"a" [1,2,3,4,5,6,7,8,9,10,11]}',
        b'{"a":[1,2,3,4,5,6,7,8,9,10,11] "b":1}',
        b"[1,2,3,4,5,6,7,8,9,10",
        b"{1:[1,2,3,4,5,6,7,8,9,10,11]}",
        b"[1,2,3,4,5,6,7,8,9,10]]",
    ],
)
def test_sliced_decoding_refuses_malformed_json(tiny_slices: None, data: bytes) -> None:
    with pytest.raises(ValueError):
        loads_sliced(data)


def test_sliced_decoding_enforces_the_cap(tiny_slices: None) -> None:
    value = nested(60, "padding-" * 4)
    data = msgspec.json.encode(value)
    assert loads_sliced(data, max_depth=60) == value
    with pytest.raises(NestingError, match="value nests deeper than 59 levels"):
        loads_sliced(data, max_depth=59)
    frame = encode_frame(CallFrame(id=1, global_name="tools", name="x", args=value))[4:]
    decoded = decode_host_frame_sliced(frame, max_depth=59)
    assert isinstance(decoded, CallFrame) and decoded.id == 1
    assert isinstance(decoded.args, TooDeep) and decoded.args.limit == 59


def test_sliced_frames_keep_every_frame_type() -> None:
    big = {f"k{i}": [i, "x" * 10] for i in range(20_000)}
    done = encode_frame(DoneFrame(value=big))[4:]
    assert decode_host_frame_sliced(done) == DoneFrame(value=big)
    assert decode_host_frame_sliced(encode_frame(DoneFrame())[4:]) == DoneFrame()
    assert decode_host_frame_sliced(encode_frame(DoneFrame(value=None))[4:]) == DoneFrame(
        value=None
    )
    log = encode_frame(LogFrame(text="y" * 200_000))[4:]
    assert decode_host_frame_sliced(log) == LogFrame(text="y" * 200_000)
    deep = encode_frame(CallFrame(id=2, global_name="tools", name="x", args=nested(5_000)))[4:]
    assert dumps_deep(decode_host_frame_sliced(deep, max_depth=10_000).args) == dumps_deep(
        nested(5_000)
    )


@pytest.mark.parametrize("depth", [10_001, 200_000])
def test_too_deep_values_are_skipped_not_built(depth: int) -> None:
    payload = encode_frame(CallFrame(id=3, global_name="tools", name="x", args=nested(depth)))[4:]
    frame = decode_frame(HOST, payload, max_depth=10_000)
    assert isinstance(frame, CallFrame) and frame.id == 3 and isinstance(frame.args, TooDeep)
    assert dumps_deep(decode_frame(HOST, payload).args) == dumps_deep(nested(depth))  # no cap


def test_the_cap_counts_levels_exactly() -> None:
    assert not nesting_exceeds(nested(10), 10) and nesting_exceeds(nested(11), 10)
    assert loads_deep(b"[[1]]", max_depth=2) == [[1]]
    with pytest.raises(NestingError):
        loads_deep(b"[[[1]]]", max_depth=2)
    assert dumps_deep(nested(3), max_depth=3) == b'[[["leaf"]]]'
    with pytest.raises(NestingError):
        dumps_deep(nested(3), max_depth=2)
    # Results above msgspec's reach and below it are both refused past the cap.
    with pytest.raises(NestingError):
        encode_payload(CallFrame(id=1, global_name="t", args=nested(5_001)), max_depth=5_000)
    with pytest.raises(NestingError):
        encode_payload(CallFrame(id=1, global_name="t", args=nested(51)), max_depth=50)
    assert encode_payload(CallFrame(id=1, global_name="t", args=nested(50)), max_depth=50)


def test_deep_junk_outside_a_value_field_is_still_dropped() -> None:
    deep = b"[" * 20_000 + b"]" * 20_000
    with pytest.raises(msgspec.DecodeError):
        decode_frame(HOST, b'{"type":"log","text":"x","junk":' + deep + b"}", max_depth=10_000)


@settings(max_examples=200)
@given(
    sizes=st.lists(st.integers(0, 3_000), min_size=1, max_size=12),
    cuts=st.lists(st.integers(1, 900), min_size=1, max_size=40),
    collect=st.sampled_from([1, 7, 500, 1 << 20]),
)
def test_frame_buffer_collects_large_frames_in_pieces(
    sizes: list[int], cuts: list[int], collect: int
) -> None:
    frames_in = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames_in)
    saved = frames._COLLECT_BYTES
    frames._COLLECT_BYTES = collect
    try:
        buffer = frames.FrameBuffer(2_000)
        out: list[bytes] = []
        pos, i = 0, 0
        while pos < len(stream):
            step = cuts[i % len(cuts)]
            out += buffer.feed(stream[pos : pos + step])
            pos, i = pos + step, i + 1
    finally:
        frames._COLLECT_BYTES = saved
    assert out == [f for f in frames_in if len(f) <= 2_000]
    assert buffer.pending == 0
    assert buffer.oversized == sum(len(f) > 2_000 for f in frames_in)


def test_a_big_value_of_few_members_is_decoded_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 1 MB string argument: slicing it cost 15 ms of regex scanning; whole, it is one
    # msgspec call. Many members still go through the slicer.
    pieces: list[int] = []
    original = frames._whole

    def counting(data: bytes, depth: int, max_depth: int | None) -> object:
        pieces.append(len(data))
        return original(data, depth, max_depth)

    monkeypatch.setattr(frames, "_whole", counting)
    few = {"s": "a" * 1_000_000, "t": ['x\\"y' * 50_000, 1, None]}
    assert loads_sliced(msgspec.json.encode(few)) == few
    assert len(pieces) == 1
    pieces.clear()
    many = {"k": list(range(100_000))}
    assert loads_sliced(msgspec.json.encode(many)) == many
    assert len(pieces) > 1
