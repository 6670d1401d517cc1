"""Big strings of a received frame, built while the GIL is free.

A call whose argument is one 50 MB string cost the host, in one piece each: msgspec
walking the string to skip it while it decoded the frame (~20 ms here), then building
the ``str``, 12,200 fresh pages taken in faults (~53 ms), in one call that holds the GIL.
The event loop waited that long in its thread, twice as long beside a CPU hog (issue 25:
the loop lags at most 50 ms there).

``lift`` takes such strings out of a frame's payload before it is decoded. A string
token whose content is at least ``BIG_BYTES`` of printable ASCII with no escape (a blob,
base64, a repeated character: what programs send in bulk) is found with ``memchr`` and
``strcspn`` and copied into a new ``str`` with ``memmove``: libc through ctypes, which lets
the GIL go, so the scan, the copy and its page faults leave the loop running. What is
left, the *skeleton*, is the same JSON with each lifted token's content replaced by a
marker; it is small, decodes as any frame does, and ``Lifted.restore`` puts each string
back in place of its marker. A token with an escape, a control character or a byte past
ASCII is left in the skeleton and decoded by msgspec as before (text in other scripts
still costs the loop its decode).

Each copied piece of the payload is handed back to the kernel right after its copy
(``MADV_DONTNEED``): the host holds the big value about once at its peak, not twice.

Only CPython's compact ASCII ``str`` layout is relied on, and it is checked once, on a
probe, when this module loads: anything else disables lifting (``AVAILABLE``).
"""

from __future__ import annotations

import ctypes
import mmap
import secrets
import sys
from typing import Any

import msgspec

#: The shortest string content (bytes) worth lifting.
BIG_BYTES = 1 << 20
# Quotes looked at (escaped ones included) before giving up on a payload: it has many
# strings, so its bytes are not in a few big ones, and the sliced decode takes it.
_MAX_TOKENS = 4096
# A string ending in more backslashes than this (each has to be counted to know whether
# the quote after them ends it) is not walked past here: the payload is decoded as before.
_MAX_RUN_OF_BACKSLASHES = 64
# Copied, and given back, in pieces of this size: the pages of the payload are freed as
# the string fills, so both never take their whole size at once.
_COPY_BYTES = 4 << 20
_PAGE = mmap.PAGESIZE
_QUOTE, _BACKSLASH = 0x22, 0x5C
# What ends the clean content of a string for ``strcspn`` (so does a NUL, which it
# takes for the end of its string): a quote, an escape, a control character, or a byte
# past ASCII.
_STOP = bytes(range(1, 0x20)) + b'"\\' + bytes(range(0x7F, 0x100))

_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _memchr = _libc.memchr
    _memchr.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
    _memchr.restype = ctypes.c_void_p
    _strcspn = _libc.strcspn
    _strcspn.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
    _strcspn.restype = ctypes.c_size_t
    _memmove = _libc.memmove
    _memmove.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    _memmove.restype = ctypes.c_void_p
    _madvise = _libc.madvise
    _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    _madvise.restype = ctypes.c_int
    # Through ``pythonapi``: called with the GIL held, as the C API requires.
    _new_str = ctypes.pythonapi.PyUnicode_New
    _new_str.argtypes = (ctypes.c_ssize_t, ctypes.c_uint32)
    _new_str.restype = ctypes.py_object
except (AttributeError, OSError):  # pragma: no cover - not glibc/CPython
    _libc = None
# Where a compact ASCII string's characters start: right after its header, whose size
# ``sys.getsizeof`` gives (the header, the characters, their NUL).
_ASCII_DATA = sys.getsizeof("") - 1


def _ascii(source: int, size: int, release: bool = False) -> str:
    """A new ``str`` of the ``size`` ASCII bytes at address ``source`` (the caller has
    checked them). With ``release``, the source's whole pages are handed back to the
    kernel once copied (the caller owns that buffer and never reads it again)."""
    text: str = _new_str(size, 0x7F)
    target = id(text) + _ASCII_DATA
    done = 0
    while done < size:
        step = min(_COPY_BYTES, size - done)
        _memmove(target + done, source + done, step)  # lets the GIL go
        done += step
        if release:
            # Whole pages of the copied span only: the rest of the buffer is still read,
            # and the allocator's own bookkeeping sits just outside it.
            first = source + _PAGE - 1
            first -= first % _PAGE
            last = source + done
            last -= last % _PAGE
            if last > first:
                _madvise(first, last - first, mmap.MADV_DONTNEED)
    return text


def _probe() -> bool:
    """Whether ``_ascii`` builds a sound ``str`` on this interpreter."""
    if _libc is None or sys.implementation.name != "cpython":
        return False
    sample = b"codemode-lift-probe"
    buffer = ctypes.create_string_buffer(sample, len(sample))
    try:
        text = _ascii(ctypes.addressof(buffer), len(sample))
    except (OSError, ValueError, ctypes.ArgumentError):  # pragma: no cover
        return False
    return (
        text == sample.decode()
        and text.isascii()
        and len(text) == len(sample)
        and hash(text) == hash(sample.decode())
    )


#: Lifting works here (CPython with a C library that has the functions above).
AVAILABLE = _probe()


class Lifted:
    """The strings lifted out of one payload and the markers that stand for them."""

    __slots__ = ("_escaped", "strings", "table")

    def __init__(self, nonce: str) -> None:
        #: marker (as decoded) -> the string it stands for
        self.table: dict[str, str] = {}
        #: the lifted strings, in payload order
        self.strings: list[str] = []
        # A marker's bytes in the skeleton: an escaped NUL, a nonce no program can guess
        # (so no string of its own decodes to a marker), then the string's index.
        self._escaped = f"\\u0000{nonce}:".encode()

    def marker(self, text: str) -> bytes:
        """Record ``text`` and return the skeleton bytes that stand for it."""
        index = len(self.strings)
        self.strings.append(text)
        escaped = self._escaped + str(index).encode()
        self.table["\x00" + escaped[6:].decode()] = text
        return escaped

    def restore(self, value: Any) -> Any:
        """``value`` (decoded from the skeleton) with every marker replaced by its string,
        in place where it is a ``dict``/``list`` (the decoder's own, shared with no one)."""
        table = self.table
        if type(value) is str:
            return table.get(value, value)
        stack = [value]
        while stack:
            node = stack.pop()
            if type(node) is dict:
                if any(type(key) is str and key in table for key in node):
                    swapped = {table.get(key, key): item for key, item in node.items()}
                    node.clear()
                    node.update(swapped)
                items: Any = node.items()
            elif type(node) is list:
                items = enumerate(node)
            else:
                continue
            for slot, item in list(items):
                kind = type(item)
                if kind is str:
                    if item in table:
                        node[slot] = table[item]
                elif kind is dict or kind is list:
                    stack.append(item)
        return value

    def restore_frame(self, frame: Any) -> Any:
        """``frame`` (a msgspec struct decoded from the skeleton) with ``restore`` applied
        to each field, and to the fields of any struct it holds (an error's message)."""
        changed: dict[str, Any] = {}
        for name in frame.__struct_fields__:
            value = getattr(frame, name)
            if isinstance(value, msgspec.Struct):
                restored = self.restore_frame(value)
            else:
                restored = self.restore(value)
            if restored is not value:
                changed[name] = restored
        return msgspec.structs.replace(frame, **changed) if changed else frame

    def expand(self, skeleton: Any) -> list[Any]:
        """The original bytes of ``skeleton`` (bytes of the skeleton, e.g. a value's raw
        JSON), as buffers in order: markers give way to their strings' bytes."""
        data = bytes(skeleton)
        pieces: list[Any] = []
        start = 0
        while True:
            at = data.find(self._escaped, start)
            if at < 0:
                break
            digits = at + len(self._escaped)
            end = digits
            while end < len(data) and 0x30 <= data[end] <= 0x39:
                end += 1
            text = self.strings[int(data[digits:end])]
            pieces.append(data[start:at])
            pieces.append(
                memoryview((ctypes.c_char * len(text)).from_address(id(text) + _ASCII_DATA))
            )
            start = end
        pieces.append(data[start:])
        return pieces


def _string_end(data: bytearray, start: int, end: int, budget: int) -> tuple[int, int]:
    """The index of the quote that ends the string whose content goes on at ``start``
    (past an escape), and the quotes looked at (at most ``budget``); -1 when there is
    none before ``end`` or it is not worth finding (the budget is spent, or a long run
    of backslashes)."""
    at = start
    for looked in range(1, budget + 1):
        quote = data.find(b'"', at, end)
        if quote < 0:
            return -1, looked
        run = 0
        while data[quote - 1 - run] == _BACKSLASH:
            run += 1
            if run > _MAX_RUN_OF_BACKSLASHES:
                return -1, looked
        if run % 2 == 0:
            return quote, looked
        at = quote + 1
    return -1, budget


def lift(payload: bytes | bytearray) -> tuple[bytes, Lifted] | None:
    """Take the big clean strings out of ``payload`` (one frame's JSON; see the module
    docstring): the skeleton to decode in its place, and what ``restore`` needs. None
    when nothing is lifted (the payload is then untouched); otherwise the payload's
    bytes are partly given back to the kernel and it must be dropped, unread.
    """
    # A bytearray only (what the frame reader makes of a big frame): it is writable, so
    # ctypes can take its address, and ends in a NUL, so ``strcspn`` stops within it.
    if not AVAILABLE or type(payload) is not bytearray or len(payload) < BIG_BYTES:
        return None
    end = len(payload)
    holder = (ctypes.c_char * end).from_buffer(payload)
    try:
        base = ctypes.addressof(holder)
        # Content spans (start, stop) of the strings to lift, before anything is copied.
        spans: list[tuple[int, int]] = []
        pos = 0
        budget = _MAX_TOKENS  # quotes looked at, escaped ones included
        while pos < end:
            found = _memchr(base + pos, _QUOTE, end - pos)
            if not found:
                break
            budget -= 1
            if budget < 0:
                return None
            start = found - base + 1
            # A bytearray keeps a NUL after its last byte, so ``strcspn`` stops by then.
            stop = start + _strcspn(base + start, _STOP)
            if stop < end and payload[stop] == _QUOTE:
                if stop - start >= BIG_BYTES:
                    spans.append((start, stop))
            else:
                stop, looked = _string_end(payload, stop, end, budget)
                budget -= looked
                if stop < 0:
                    return None
            pos = stop + 1
        if not spans:
            return None
        lifted = Lifted(secrets.token_hex(8))
        parts: list[bytes] = []
        previous = 0
        for start, stop in spans:
            parts.append(bytes(payload[previous:start]))
            parts.append(lifted.marker(_ascii(base + start, stop - start, release=True)))
            previous = stop
        parts.append(bytes(payload[previous:]))
        return b"".join(parts), lifted
    finally:
        del holder  # the payload's export ends here
