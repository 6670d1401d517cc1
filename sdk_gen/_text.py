"""Text primitives shared by both SDK flavours.

The SDK text must read exactly as a JavaScript renderer would print it, so several
string rules are JavaScript's: the whitespace class behind ``\\s`` and ``trim()``, the escapes of
``JSON.stringify`` and the digits of ``Number.prototype.toString``. Python's own
``str.split()``/``json.dumps``/``repr`` differ in small ways (``\\x1c`` is whitespace to
Python, ``json.dumps`` passes lone surrogates through raw, ``repr(1e-07)`` keeps the
zero), and those differences would show up as prompt-text drift, so they are spelled out
here once.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

__all__ = [
    "collapse_whitespace",
    "js_number",
    "js_string",
    "pad",
    "utf16_key",
]

# ECMAScript WhiteSpace + LineTerminator (what `\s` and `String.prototype.trim` use):
# TAB, LF, VT, FF, CR, the Zs category, ZWNBSP (U+FEFF), LS and PS. Python's `\s` adds
# U+001C..U+001F and U+0085 and drops U+FEFF, which would change collapsed descriptions.
_JS_WHITESPACE_RUN = re.compile(
    "[\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"
)

_JSON_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
# Everything JSON.stringify escapes: the quote, the backslash, C0 controls and (since
# ES2019's well-formed stringify) unpaired surrogates.
_JSON_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')


def collapse_whitespace(text: str) -> str:
    """Fold every run of JavaScript whitespace into one space and trim the ends."""
    # After the fold only a single U+0020 can sit at either end, so stripping spaces is
    # exactly JavaScript's trim() here.
    return _JS_WHITESPACE_RUN.sub(" ", text).strip(" ")


def _escape_json_char(match: re.Match[str]) -> str:
    char = match.group(0)
    short = _JSON_SHORT_ESCAPES.get(char)
    return short if short is not None else f"\\u{ord(char):04x}"


def js_string(value: str) -> str:
    """Quote ``value`` exactly as JavaScript's ``JSON.stringify`` does.

    Unlike ``json.dumps(..., ensure_ascii=False)`` this escapes lone surrogates
    (``\\ud800``), which can appear in a Python ``str`` but cannot be encoded as UTF-8.
    """
    return '"' + _JSON_NEEDS_ESCAPE.sub(_escape_json_char, value) + '"'


def js_number(value: int | float) -> str:
    """Format a number the way ECMAScript ``Number::toString`` (``String(n)``) does.

    Both languages pick the shortest round-tripping digit string; only the layout
    differs (``10000000000000000`` vs ``1e+16``, ``1.5e-7`` vs ``1.5e-07``, ``100`` vs
    ``100.0``). Integers below 1e21 print exactly; larger ones as the double JavaScript
    would hold (``Infinity`` past the double range); booleans as ``true``/``false``.
    This is the project's one implementation: the engine's JSON rendering uses it too.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            value = math.inf if value > 0 else -math.inf
    if not math.isfinite(value):
        # Not reachable through a validated schema; mirrors String(NaN)/String(Infinity).
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    exact = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = exact.as_tuple()
    assert isinstance(exponent, int)  # finite by the guard above
    digits = "".join(str(d) for d in digit_tuple)
    k = len(digits)
    n = exponent + k  # value == 0.digits * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def utf16_key(name: str) -> bytes:
    """Sort key equal to JavaScript's ``<`` on strings (UTF-16 code-unit order).

    Big-endian UTF-16 bytes compare like the code units they encode; ``surrogatepass``
    keeps lone surrogates sortable instead of raising.
    """
    return name.encode("utf-16-be", "surrogatepass")


def pad(level: int, width: int) -> str:
    """Indentation for ``level`` nesting levels of ``width`` spaces each."""
    return " " * (level * width)
