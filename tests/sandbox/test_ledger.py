"""The one output ledger the host and both guests meter with (``worker._ledger``)."""

from __future__ import annotations

import json

from codemode.sandbox.host._ledger import OutputLedger
from codemode.sandbox.worker._ledger import LogLedger


def stringify(logs: list[str]) -> int:
    return len(json.dumps(logs, ensure_ascii=False, separators=(",", ":")).encode())


def test_used_is_the_bytes_of_the_log_array() -> None:
    ledger = LogLedger(1000)
    entries = ["a", 'quote " and \\ slash', "é ✓ 😀", "line\nbreak\ttab\x01"]
    for entry in entries:
        assert ledger.add(entry) == entry
        assert ledger.used == stringify(entries[: ledger.count])
    assert ledger.count == 4 and not ledger.overflowed


def test_overflow_keeps_the_fitting_prefix_once_then_nothing() -> None:
    ledger = LogLedger(2 + 5 + 1 + 6)  # ["abc","defg"] fits exactly
    assert ledger.add("abc") == "abc"
    assert ledger.add("defghij") == "defg"
    assert (ledger.used, ledger.overflowed) == (14, True)
    assert ledger.add("x") is None
    assert ledger.used == 14


def test_no_prefix_when_not_even_the_quotes_fit() -> None:
    ledger = LogLedger(2 + 3 + 1 + 2)
    assert ledger.add("a") == "a"
    assert ledger.add("bcd") is None
    assert (ledger.count, ledger.overflowed) == (1, True)


def test_fits_counts_values_after_the_logs() -> None:
    ledger = LogLedger(10)
    ledger.add("abc")  # 7 bytes used
    assert ledger.fits(3) and not ledger.fits(4)


def test_the_host_ledger_keeps_what_the_meter_admits() -> None:
    host = OutputLedger(2 + 5 + 1 + 6)
    assert host.add_log("abc") is True
    assert host.add_log("defghij") is False
    assert host.add_log("more") is False
    assert host.logs == ["abc", "defg"]
    assert host.overflowed and not host.fits(0)
    assert host.message == "outer output exceeded 14 bytes"
