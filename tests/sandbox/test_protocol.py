"""Bridge codec, output ledger and seccomp program: pure units, no workers."""

from __future__ import annotations

import socket
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sandbox.host._ledger import OutputLedger, json_value_length
from codemode.sandbox.worker._frames import (
    CallFrame,
    DoneFrame,
    FrameBuffer,
    LogFrame,
    ResultFrame,
    encode_frame,
    encode_payload,
    json_string_length,
    truncate_to_json_length,
)
from codemode.sandbox.worker._seccomp import build_filter


def test_frames_use_camel_case_keys_and_a_type_tag() -> None:
    frame = encode_frame(CallFrame(id=3, global_name="tools", name="read", args={"a": 1}))
    assert frame[4:] == b'{"type":"call","id":3,"global":"tools","name":"read","args":{"a":1}}'
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert (
        encode_frame(ResultFrame(id=1, ok=True, value=None))[4:]
        == b'{"type":"result","id":1,"ok":true}'
    )
    assert encode_frame(DoneFrame())[4:] == b'{"type":"done"}'


@given(st.lists(st.text(max_size=50), max_size=20), st.integers(min_value=1, max_value=64))
def test_frame_buffer_reassembles_any_chunking(texts: list[str], chunk: int) -> None:
    stream = b"".join(encode_frame(LogFrame(text=t)) for t in texts)
    buffer = FrameBuffer(1 << 20)
    payloads: list[bytes] = []
    for start in range(0, len(stream), chunk):
        payloads += buffer.feed(stream[start : start + chunk])
    decoded = [msgspec.json.decode(p, type=LogFrame).text for p in payloads]
    assert decoded == texts and buffer.pending == 0


def test_frame_buffer_skips_oversized_frames_without_buffering_them() -> None:
    buffer = FrameBuffer(10)
    big = (1000).to_bytes(4, "big")
    assert buffer.feed(big + b"x" * 500) == []
    assert buffer.pending == 0  # discarded, not held
    assert buffer.feed(b"x" * 500 + encode_frame(LogFrame(text=""))[:0]) == []
    small = (2).to_bytes(4, "big") + b"{}"
    assert buffer.feed(small) == [b"{}"]
    assert buffer.oversized == 1


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("", 2),
        ("abc", 5),
        ("€", 5),
        ('"', 4),
        ("\\", 4),
        ("\n", 4),
        ("\x01", 8),
        ("\x7f", 3),
        ("\u2028", 5),
    ],
)
def test_json_string_length_matches_json_stringify(text: str, length: int) -> None:
    assert json_string_length(text) == length


def test_truncate_to_json_length() -> None:
    assert truncate_to_json_length("abcdef", 5) == "abc"
    assert truncate_to_json_length("€€€", 8) == "€€"
    assert truncate_to_json_length("€€€", 7) == "€"
    assert truncate_to_json_length("\n\n\n", 7) == "\n\n"
    assert truncate_to_json_length("abc", 100) == "abc"


def test_ledger_counts_the_value_after_the_logs() -> None:
    # ["abc"] is 7 bytes and "xy" 4: 11 fits exactly, 10 does not.
    ledger = OutputLedger(11)
    assert ledger.add_log("abc")
    assert ledger.fits(json_value_length("xy"))
    ledger = OutputLedger(10)
    assert ledger.add_log("abc")
    assert not ledger.fits(json_value_length("xy"))
    assert OutputLedger(7).fits(json_value_length("€") + 2 - 2) is True
    assert json_value_length("€") == 5


def test_ledger_keeps_a_fitting_prefix() -> None:
    ledger = OutputLedger(20)
    assert ledger.add_log("0123456789")  # 2 + 12
    assert not ledger.add_log("abcdefgh")  # needs 1 + 10 > 6 left
    assert ledger.logs == ["0123456789", "abc"] and ledger.overflowed
    assert not ledger.add_log("more")
    assert ledger.message == "outer output exceeded 20 bytes"


@pytest.mark.parametrize(
    ("value", "js"),
    [
        (1.0, "1"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        ([1.5, {"a": 2.0}], '[1.5,{"a":2}]'),
        (2**70, str(2**70)),
    ],
)
def test_value_length_uses_javascript_numbers(value: object, js: str) -> None:
    assert json_value_length(value) == len(js)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_seccomp_program_shape(machine: str) -> None:
    program = build_filter(1234, machine)
    assert len(program) < 512
    # Arch check first, allow last, and every jump stays inside the program.
    assert program[0] == (0x20, 0, 0, 4) and program[-1] == (0x06, 0, 0, 0x7FFF0000)
    for index, (code, jt, jf, _k) in enumerate(program):
        if code & 0x07 == 0x05:
            assert index + 1 + max(jt, jf) < len(program)


def test_encode_frame_is_the_payload_after_its_length() -> None:
    deep: Any = "leaf"
    for _ in range(5_000):  # past msgspec's recursion: written iteratively
        deep = [deep]
    for frame in (LogFrame(text="héllo"), DoneFrame(value={"a": [1, 2]}), DoneFrame(value=deep)):
        framed = encode_frame(frame)
        assert isinstance(framed, bytearray)
        assert bytes(framed[4:]) == encode_payload(frame)
        assert int.from_bytes(framed[:4], "big") == len(framed) - 4


def test_a_big_frame_is_read_straight_into_one_buffer_of_its_size() -> None:
    big = encode_frame(LogFrame(text="x" * 300_000))
    small = encode_frame(LogFrame(text="after"))
    reads: list[int] = []

    def recv(sock: socket.socket) -> bytes:
        data = sock.recv(4096)
        reads.append(len(data))
        return data

    host, worker = socket.socketpair()
    with host, worker:
        buffer = FrameBuffer(1 << 20)
        worker.sendall(big[:1000])
        assert buffer.receive(host, recv) == []  # the header announced a big frame
        assert buffer.pending == 996
        worker.sendall(big[1000:200_000])
        got: list[Any] = []
        rest_sent = False
        while not got:
            ready = buffer.receive(host, recv)
            assert ready is not None
            if not rest_sent:
                worker.sendall(big[200_000:])  # the rest once the first part is in
                rest_sent = True
            got += ready
        # One read through ``recv`` (the first); the rest went into the frame's buffer.
        assert reads == [1000]
        (payload,) = got
        assert isinstance(payload, bytearray) and len(payload) == len(big) - 4
        assert msgspec.json.decode(payload, type=LogFrame).text == "x" * 300_000
        assert buffer.pending == 0
        worker.sendall(small)
        assert buffer.receive(host, recv) == [bytes(small[4:])]
        worker.shutdown(socket.SHUT_WR)
        assert buffer.receive(host, recv) is None


def test_feed_completes_a_big_frame_and_goes_on_with_the_next() -> None:
    big = encode_frame(LogFrame(text="y" * 100_000))
    small = encode_frame(LogFrame(text="next"))
    buffer = FrameBuffer(1 << 20)
    stream = bytes(big + small)
    assert buffer.feed(stream[:70_000]) == []
    payloads = buffer.feed(stream[70_000:])
    assert [msgspec.json.decode(p, type=LogFrame).text for p in payloads] == ["y" * 100_000, "next"]
    assert buffer.pending == 0
