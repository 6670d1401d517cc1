"""Big strings lifted out of a received frame (``host/_lift``): the value decoded from the
skeleton and restored is the value of the original JSON, bit for bit; a payload that
cannot be lifted is left alone; what is not JSON stays refused; and the payload's
copied pages are given back."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import pytest

from codemode.sandbox.host import _lift
from codemode.sandbox.host._bridge import HostBridge
from codemode.sandbox.worker._frames import (
    CallFrame,
    DoneFrame,
    LogFrame,
    encode_frame,
    unfilled_bytearray,
)

BIG = _lift.BIG_BYTES
WIDE = 5 * BIG  # past the size the bridge decodes on its loop


def _payload(data: bytes) -> bytearray:
    """``data`` in a buffer as the frame reader hands big frames out."""
    out = unfilled_bytearray(len(data))
    out[:] = data
    return out


def _lifted(document: bytes) -> Any:
    """``document`` decoded the lifted way (``None`` when nothing was lifted)."""
    out = _lift.lift(_payload(document))
    if out is None:
        return None
    skeleton, lifted = out
    assert len(skeleton) < len(document) - BIG + 64  # the big strings left it
    return lifted.restore(msgspec.json.decode(skeleton))


def _bridge() -> HostBridge:
    bridge = HostBridge.__new__(HostBridge)
    bridge._max_depth = 10_000
    bridge._decoder = msgspec.json.Decoder(CallFrame | LogFrame | DoneFrame)
    return bridge


def test_lifting_works_on_this_interpreter() -> None:
    # CPython with glibc: the path the host takes here must be the lifted one.
    assert _lift.AVAILABLE


@pytest.mark.parametrize(
    "value",
    [
        "a" * BIG,
        {"blob": "b" * BIG, "n": [1, 2.5, None, True], "small": 'q"u\\o\u00e9\n'},
        ["c" * BIG, "d" * (BIG + 7), {"e" * BIG: "key"}],
        [[["~" * BIG]]],
        {"text": "\u00e9" * 10, "payload": " !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}~" * (BIG // 30)},
    ],
    ids=["bare", "beside-escapes", "several-and-a-key", "nested", "printable-range"],
)
def test_a_lifted_value_is_the_value_of_the_original_json(value: Any) -> None:
    document = msgspec.json.encode(value)
    assert _lifted(document) == value == msgspec.json.decode(document)


@pytest.mark.parametrize(
    "value",
    [
        "x" * (BIG - 1),  # too short to be worth it
        "\u00e9" * BIG,  # past ASCII: msgspec decodes it
        "tab\there" * (BIG // 8),  # an escape inside
        ["s"] * 5000,  # many small strings: the sliced decode's case
    ],
    ids=["short", "non-ascii", "escaped", "many-strings"],
)
def test_what_cannot_be_lifted_is_left_alone(value: Any) -> None:
    document = msgspec.json.encode(value)
    payload = _payload(document)
    assert _lift.lift(payload) is None
    assert payload == document  # untouched: the ordinary decode reads it next


def test_the_copied_pages_of_the_payload_are_given_back() -> None:
    document = msgspec.json.encode({"blob": "z" * (4 * BIG)})
    payload = _payload(document)
    assert _lift.lift(payload) is not None
    # Private anonymous memory given back with MADV_DONTNEED reads as zeros again.
    middle = len(payload) // 2
    assert payload[middle : middle + 4096] == bytes(4096)


def test_a_marker_cannot_be_spelled_by_a_program() -> None:
    # A string of the program's own that looks like a marker (an escaped NUL, hex, an
    # index) stays itself: the nonce of each lift is unknown to the program.
    spoof = "\x00" + "0" * 16 + ":0"
    value = {"spoof": spoof, "blob": "k" * BIG}
    assert _lifted(msgspec.json.encode(value)) == value


@pytest.mark.parametrize(
    "document",
    [
        b'{"blob":"' + b"x" * BIG,  # unterminated
        b'{"blob":"' + b"x" * BIG + b'\x01"}',  # a raw control character
        b'{"blob":"' + b"x" * BIG + b'"',  # unclosed object
        b'{"blob":"' + b"x" * BIG + b'" "more":1}',  # a missing comma
    ],
    ids=["unterminated", "control-character", "unclosed", "missing-comma"],
)
def test_what_is_not_json_is_still_refused(document: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(document)
    out = _lift.lift(_payload(document))
    if out is not None:
        with pytest.raises(msgspec.DecodeError):
            msgspec.json.decode(out[0])


def _heavy(frame: msgspec.Struct) -> Any:
    return _bridge()._decode_heavy([bytearray(encode_frame(frame)[4:])])


def test_a_call_frame_arrives_whole_with_the_digest_of_its_arguments() -> None:
    args = {"blob": "x" * WIDE, "note": 'caf\u00e9 "quoted"', "n": [1, 2]}
    frame = _heavy(CallFrame(id=3, global_name="take", name="take", args=args))
    assert isinstance(frame, CallFrame)
    assert (frame.id, frame.name, frame.args) == (3, "take", args)
    data = json.dumps(args, separators=(",", ":"), ensure_ascii=False).encode()
    assert frame.args._digest == (len(data), hashlib.sha256(data).hexdigest(), data[:4096])


def test_done_and_log_frames_get_their_big_strings_back() -> None:
    done = _heavy(DoneFrame(value="v" * WIDE))
    assert isinstance(done, DoneFrame) and done.value == "v" * WIDE
    log = _heavy(LogFrame(text="w" * WIDE))
    assert isinstance(log, LogFrame) and log.text == "w" * WIDE


def test_an_unfilled_buffer_is_a_bytearray_of_its_size() -> None:
    buffer = unfilled_bytearray(3 * BIG)
    assert type(buffer) is bytearray and len(buffer) == 3 * BIG
    buffer[-1:] = b"!"
    assert bytes(buffer[-1:]) == b"!"


def test_a_payload_of_escaped_quotes_is_given_up_on_within_the_budget() -> None:
    # A million escaped quotes in one string: the scan stops at its budget of quotes
    # (the payload is then decoded as before), it does not walk them all in Python.
    value = {"q": '"' * 1_000_000, "blob": "x" * BIG}
    document = msgspec.json.encode(value)
    payload = _payload(document)
    assert _lift.lift(payload) is None
    assert payload == document
