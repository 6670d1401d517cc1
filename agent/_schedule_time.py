"""Selector and time parsing of the schedule tools, in integer epoch milliseconds.

Every instant is an ``int`` of milliseconds since 1970-01-01T00:00:00Z (the precision of
``scheduledAt``), computed with proleptic-Gregorian day arithmetic rather than
``datetime`` so an offset or a delay near the ends of the supported range cannot
overflow: a target is either within ``0001-01-01T00:00:00.000Z`` ..
``9999-12-31T23:59:59.999Z`` or refused (``time_out_of_range`` after, ``not_future``
before).

``at`` strings are strict RFC 3339 ``date-time``: ``YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)``
(``T``/``Z`` in either case, ASCII digits only, 1-9 fraction digits truncated to
milliseconds). A naive string (no offset), a date alone, a space instead of ``T``, a
leap second (``:60``) or an offset beyond ±23:59 is refused with a message saying which.

Local ``{date, time, time_zone}`` targets resolve through ``zoneinfo`` with an IANA zone
name from the installed tz database. Wall-clock times that do not exist or exist twice
are resolved the way ``Temporal``'s ``disambiguation: 'compatible'`` (and RFC 5545)
resolve them, which is also Python's ``fold=0``: a time in a DST **gap** (02:30 on a
spring-forward night) is moved forward by the gap's length (03:30 new time, the same
instant as 02:30 old time); a time in a **fold** (01:30 on a fall-back night) is the
earlier of its two instants (the first 01:30, still on summer time).
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from datetime import datetime, timedelta
from functools import cache
from typing import Any

__all__ = [
    "MAX_MS",
    "MAX_SAFE_INTEGER",
    "ScheduleRefusal",
    "civil_ms",
    "format_duration",
    "iso_ms",
    "js_number",
    "parse_at",
    "parse_iso_ms",
    "safe_integer",
]

#: ``Number.MAX_SAFE_INTEGER``: the largest integer a JavaScript program holds exactly.
MAX_SAFE_INTEGER = 2**53 - 1
_DAY_MS = 86_400_000
# The supported range of targets: years 0001 .. 9999 (what an ISO string can spell).
MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00.000Z
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
# Anything longer than this is no date-time; refusing early keeps messages short.
_MAX_TEXT = 64

# The patterns are kept as text and matched with `re.fullmatch`, which compiles each on
# its first use (and caches it): compiling all of them at import cost every
# `codemode agent` start-up, which never parses a time unless a schedule is asked for.
_RFC3339 = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_DATE = r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
_TIME = r"([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?"
# Looks like a date-time but lacks a piece: named in the refusal.
_NAIVE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?"
_SPACED = r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}.*"
_NO_SECONDS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}([Zz]|[+-][0-9]{2}:?[0-9]{2})"
_COMPACT_OFFSET = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?[+-][0-9]{2}([0-9]{2})?"
)
_OFFSET_TAIL = r".*[+-][0-9]{2}(:?[0-9]{2})?$|.*[Zz]$"
# Entries of the tz directory that are not zone names (``localtime`` is this machine's
# zone, whatever it is; ``posixrules`` a template).
_NOT_ZONES = frozenset({"localtime", "posixrules"})


class ScheduleRefusal(Exception):
    """A schedule request refused with a §11 ``code`` and a specific ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def value(self) -> dict[str, Any]:
        """The ``{code, message}`` value the tools return."""
        return {"code": self.code, "message": self.message}


def js_number(value: int | float) -> str:
    """``value`` as JavaScript's ``String(number)`` prints it (``300``, ``1.5``, ``1e+21``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, float):
        text = repr(value)
        # Python spells exponents ``1e+300`` / ``1e-07``; JavaScript ``1e+300`` / ``1e-7``.
        if "e" in text:
            mantissa, _, exponent = text.partition("e")
            sign = "-" if exponent.startswith("-") else "+"
            return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
        return text
    return str(value)


def safe_integer(value: Any) -> int | None:
    """``value`` as an ``int`` when it is a JavaScript safe integer (``300.0`` counts:
    JSON has one number type), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INTEGER else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return None


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Howard Hinnant's days_from_civil: days since 1970-01-01, any proleptic year.
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719_468
    era = (days if days >= 0 else days - 146_096) // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    year = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return year + (month <= 2), month, day


def civil_ms(year: int, month: int, day: int, hour: int, minute: int, second: int, ms: int) -> int:
    """Epoch milliseconds of a UTC wall-clock reading (fields already range-checked)."""
    days = _days_from_civil(year, month, day)
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + ms


def iso_ms(ms: int) -> str:
    """``ms`` as ISO 8601 UTC with milliseconds (``2026-12-02T08:00:00.000Z``)."""
    days, rest = divmod(ms, _DAY_MS)
    year, month, day = _civil_from_days(days)
    hour, rest = divmod(rest, 3_600_000)
    minute, rest = divmod(rest, 60_000)
    second, milli = divmod(rest, 1000)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


_ISO_MS = r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z"


def parse_iso_ms(text: Any) -> int | None:
    """The instant of a canonical ``iso_ms`` string, or ``None`` when ``text`` is not one
    (replay is strict: a record this module did not write is corrupt)."""
    if not isinstance(text, str):
        return None
    m = re.fullmatch(_ISO_MS, text)
    if m is None:
        return None
    y, mo, d, h, mi, s, milli = (int(g) for g in m.groups())
    if not _valid_fields(y, mo, d, h, mi, s) or y == 0:
        return None
    ms = civil_ms(y, mo, d, h, mi, s, milli)
    return ms if iso_ms(ms) == text else None


def _valid_fields(y: int, mo: int, d: int, h: int, mi: int, s: int) -> bool:
    if not (1 <= mo <= 12 and 1 <= d <= _month_days(y, mo)):
        return False
    return h <= 23 and mi <= 59 and s <= 59


def _month_days(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _fraction_ms(digits: str | None) -> int:
    # Truncated, not rounded: 23:59:59.9999 must not become the next day.
    return int((digits or "0").ljust(3, "0")[:3])


def format_duration(ms: int) -> str:
    """A lateness for the model: ``45s``, ``3m 20s``, ``1h 10m 5s``, ``2d 3h 4m`` (whole
    seconds; days drop the seconds)."""
    seconds = max(ms, 0) // 1000
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        parts = [f"{days}d", f"{hours}h", f"{minutes}m"]
    else:
        parts = [f"{hours}h", f"{minutes}m", f"{seconds}s"]
    # Zero units at either end are noise ("0h 3m 0s" is "3m"); keep at least one.
    while len(parts) > 1 and parts[0][:-1] == "0":
        parts.pop(0)
    while len(parts) > 1 and parts[-1][:-1] == "0":
        parts.pop()
    return " ".join(parts)


def _bad_at(text: str) -> ScheduleRefusal:
    shown = text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"
    quoted = _quote(shown)
    if re.fullmatch(_DATE, text):
        why = (
            "a date alone is not a target; add a time and an offset "
            f'("{text}T09:00:00Z") or pass {{date, time, time_zone}}'
        )
    elif re.fullmatch(_SPACED, text):
        why = 'separate the date and the time with "T", not a space'
    elif re.fullmatch(_NO_SECONDS, text):
        why = "include the seconds (HH:MM:SS), e.g. 09:00:00"
    elif re.fullmatch(_COMPACT_OFFSET, text):
        why = 'write the offset with a colon, as "±HH:MM" (e.g. "+02:00")'
    elif re.fullmatch(_NAIVE, text) and not re.fullmatch(_OFFSET_TAIL, text):
        why = (
            'it has no UTC offset; add "Z" or "±HH:MM", or pass '
            "{date, time, time_zone} for a wall-clock time in a named zone"
        )
    else:
        why = 'expected YYYY-MM-DDTHH:MM:SS[.fraction] followed by "Z" or "±HH:MM"'
    return ScheduleRefusal(
        "invalid_rule", f"at {quoted} is not a strict RFC 3339 date-time with an offset: {why}"
    )


def _quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)


def _check_range(ms: int, now_ms: int, shown: str) -> int:
    if ms > MAX_MS:
        raise ScheduleRefusal(
            "time_out_of_range",
            f"at {shown} is after {iso_ms(MAX_MS)}, the latest time a reminder can target",
        )
    if ms <= now_ms:
        utc = f" ({iso_ms(ms)})" if ms >= MIN_MS else ""
        raise ScheduleRefusal(
            "not_future",
            f"at {shown}{utc} is not in the future (now is {iso_ms(now_ms)}); give a "
            "later time, or after_seconds for a delay",
        )
    return ms


def _parse_offset_string(text: str, now_ms: int) -> int:
    if len(text) > _MAX_TEXT:
        raise _bad_at(text)
    m = re.fullmatch(_RFC3339, text)
    if m is None:
        raise _bad_at(text)
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    quoted = _quote(text)
    if s == 60:
        raise ScheduleRefusal(
            "invalid_rule",
            f"at {quoted} names a leap second (:60), which reminders do not support; "
            "use :59 or the next minute",
        )
    if not _valid_fields(y, mo, d, h, mi, s):
        raise ScheduleRefusal(
            "invalid_rule", f"at {quoted} is not a real calendar date and time of day"
        )
    zone = m.group(8)
    offset_min = 0
    if zone not in ("Z", "z"):
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            raise ScheduleRefusal(
                "invalid_rule", f"at {quoted} has an offset beyond ±23:59 ({zone})"
            )
        offset_min = (oh * 60 + om) * (-1 if zone[0] == "-" else 1)
    local = civil_ms(y, mo, d, h, mi, s, _fraction_ms(m.group(7)))
    return _check_range(local - offset_min * 60_000, now_ms, quoted)


@cache
def _zone_names() -> frozenset[str]:
    # The installed tz database (system zoneinfo plus the tzdata package); scanned once.
    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def _zone(name: Any) -> zoneinfo.ZoneInfo:
    if not isinstance(name, str) or not name.strip():
        raise ScheduleRefusal(
            "invalid_time_zone",
            'time_zone must be an IANA zone name such as "Europe/Paris" or "UTC"',
        )
    names = _zone_names()
    if name not in names:
        shown = _quote(name if len(name) <= _MAX_TEXT else name[:_MAX_TEXT] + "…")
        hint = ""
        folded = {n.casefold(): n for n in names}
        if name.casefold() in folded:
            hint = f'; did you mean "{folded[name.casefold()]}"? (names are case-sensitive)'
        elif len(name) <= _MAX_TEXT:
            close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.8)
            if close:
                hint = f'; did you mean "{close[0]}"?'
        if not hint and re.fullmatch(r"(UTC|GMT)?[+-][0-9]{1,2}(:?[0-9]{2})?", name):
            hint = (
                "; for a fixed offset pass at as an RFC 3339 string such as "
                '"2026-12-02T09:00:00+02:00"'
            )
        raise ScheduleRefusal(
            "invalid_time_zone",
            f"time_zone {shown} is not an IANA time zone name known to this system{hint}",
        )
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ScheduleRefusal(
            "invalid_time_zone", f"time_zone {_quote(name)} could not be loaded: {exc}"
        ) from None


def _parse_local(target: Any, now_ms: int) -> int:
    date, time_, zone_name = target.get("date"), target.get("time"), target.get("time_zone")
    zone = _zone(zone_name)
    if not isinstance(date, str) or (dm := re.fullmatch(_DATE, date)) is None:
        shown = _quote(str(date)[:_MAX_TEXT])
        raise ScheduleRefusal("invalid_rule", f"at.date {shown} must be a calendar date YYYY-MM-DD")
    if not isinstance(time_, str) or (tm := re.fullmatch(_TIME, time_)) is None:
        shown = _quote(str(time_)[:_MAX_TEXT])
        raise ScheduleRefusal(
            "invalid_rule",
            f"at.time {shown} must be a wall-clock time HH:MM or HH:MM:SS[.fraction] "
            "without an offset (the zone is time_zone)",
        )
    y, mo, d = (int(g) for g in dm.groups())
    h, mi = int(tm.group(1)), int(tm.group(2))
    s = int(tm.group(3) or 0)
    if y == 0 or not _valid_fields(y, mo, d, 0, 0, 0):
        raise ScheduleRefusal("invalid_rule", f'at.date "{date}" is not a real calendar date')
    if s == 60:
        raise ScheduleRefusal(
            "invalid_rule", f'at.time "{time_}" names a leap second (:60), which is not supported'
        )
    if not _valid_fields(2000, 1, 1, h, mi, s):
        raise ScheduleRefusal("invalid_rule", f'at.time "{time_}" is not a real time of day')
    milli = _fraction_ms(tm.group(4))
    # fold=0: a gap moves forward by its length, a fold takes the earlier instant (the
    # module docstring); utcoffset() alone, so no datetime arithmetic can overflow.
    offset = datetime(y, mo, d, h, mi, s, milli * 1000, tzinfo=zone, fold=0).utcoffset()
    offset_ms = (offset or timedelta(0)) // timedelta(milliseconds=1)
    local = civil_ms(y, mo, d, h, mi, s, milli)
    shown = f'{{date "{date}", time "{time_}", time_zone "{zone_name}"}}'
    return _check_range(local - offset_ms, now_ms, shown)


def parse_at(target: Any, now_ms: int) -> int:
    """The instant ``at`` names (an RFC 3339 string or ``{date, time, time_zone}``), in
    the future of ``now_ms`` and within range; raises ``ScheduleRefusal`` otherwise."""
    if isinstance(target, str):
        return _parse_offset_string(target, now_ms)
    return _parse_local(target, now_ms)
