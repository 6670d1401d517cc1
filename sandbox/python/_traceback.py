"""Diagnostics of the Python guest: tracebacks trimmed to the program's own frames.

Format (CPython's, minus file names; line numbers as the program was written)::

    Traceback (most recent call last):
      line 3, in <program>
        total += helper(x)
      line 1, in helper
        def helper(x): return 1 / x
    ZeroDivisionError: division by zero

Frames of the guest runtime, the guards and library code are left out; the wrapper
function is shown as ``<program>``; three identical consecutive frames are followed by
``[Previous line repeated N more times]``; chained exceptions print oldest first with
CPython's separators. Compile errors read::

      line 2
        x = = 1
            ^
    SyntaxError: invalid syntax
"""

from __future__ import annotations

import re
import types
from typing import Any

from ._policy import MAIN

__all__ = [
    "FILENAME",
    "format_exception",
    "format_policy_errors",
    "format_syntax_error",
    "program_traceback",
]

FILENAME = "<program>"

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n"
_MAX_CHAIN = 8
_REPEAT = 3
_POLICY_LINE = re.compile(r"^Line (\d+|None): (.*)$", re.S)


def _source_line(lines: list[str], lineno: int | None) -> str:
    if lineno is None or not 1 <= lineno <= len(lines):
        return ""
    return lines[lineno - 1].strip()


def _frame_name(code: Any) -> str:
    if code.co_name == MAIN:
        return "<program>"
    qualname = str(getattr(code, "co_qualname", code.co_name))
    prefix = f"{MAIN}.<locals>."
    return qualname[len(prefix) :] if qualname.startswith(prefix) else qualname


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"


def _exception_line(exc: BaseException) -> str:
    name = type(exc).__name__
    message = _safe_str(exc)
    text = f"{name}: {message}" if message else name
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        text += "".join(f"\n{note}" for note in notes if isinstance(note, str))
    return text


def _format_single(exc: BaseException, lines: list[str]) -> list[str]:
    frames: list[tuple[int | None, str]] = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == FILENAME:
            frames.append((tb.tb_lineno, _frame_name(code)))
        tb = tb.tb_next
    out: list[str] = []
    if frames:
        out.append("Traceback (most recent call last):")
        previous: tuple[int | None, str] | None = None
        repeats = 0
        for frame in frames:
            if frame == previous:
                repeats += 1
                if repeats >= _REPEAT:
                    continue
            else:
                if repeats >= _REPEAT:
                    out.append(f"  [Previous line repeated {repeats - _REPEAT + 1} more times]")
                previous, repeats = frame, 0
            lineno, name = frame
            out.append(f"  line {lineno if lineno is not None else '?'}, in {name}")
            source = _source_line(lines, lineno)
            if source:
                out.append(f"    {source}")
        if repeats >= _REPEAT:
            out.append(f"  [Previous line repeated {repeats - _REPEAT + 1} more times]")
    out.append(_exception_line(exc))
    return out


def program_traceback(frame: types.FrameType | None) -> types.TracebackType | None:
    """A traceback of the program's frames on the stack from ``frame`` outwards.

    For an exception caught before it reached program code (a guard denial), so that
    its report shows the program lines that led to it, outermost first.
    """
    tb: types.TracebackType | None = None
    while frame is not None:
        if frame.f_code.co_filename == FILENAME:
            tb = types.TracebackType(tb, frame, frame.f_lasti, frame.f_lineno)
        frame = frame.f_back
    return tb


def format_exception(exc: BaseException, lines: list[str]) -> str:
    """The trimmed traceback of an uncaught program exception."""
    chain: list[tuple[BaseException, str | None]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < _MAX_CHAIN:
        seen.add(id(current))
        if current.__cause__ is not None:
            chain.append((current, _CAUSE))
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            chain.append((current, _CONTEXT))
            current = current.__context__
        else:
            chain.append((current, None))
            current = None
    out: list[str] = []
    for index in range(len(chain) - 1, -1, -1):
        link_exc, _link = chain[index]
        out.extend(_format_single(link_exc, lines))
        if index:
            out.append(chain[index - 1][1] or "")
    return "\n".join(out)


def format_syntax_error(exc: SyntaxError, lines: list[str]) -> str:
    """A compile error, CPython style, without the file name."""
    out: list[str] = []
    lineno = exc.lineno
    if lineno is not None:
        out.append(f"  line {lineno}")
    text = (
        exc.text
        if exc.text is not None
        else (lines[lineno - 1] if lineno and 0 < lineno <= len(lines) else "")
    )
    text = text.rstrip("\r\n")
    if text.strip():
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        out.append(f"    {stripped.rstrip()}")
        if exc.offset:
            start = max(exc.offset - 1 - indent, 0)
            width = 1
            end_offset = getattr(exc, "end_offset", None)
            if end_offset and exc.end_lineno == lineno and end_offset > exc.offset:
                width = end_offset - exc.offset
            out.append("    " + " " * start + "^" * width)
    out.append(f"{type(exc).__name__}: {exc.msg}")
    return "\n".join(out)


def format_policy_errors(errors: list[str] | tuple[str, ...], lines: list[str]) -> str:
    """RestrictedPython's ``Line N: message`` errors as SyntaxError blocks."""
    blocks: list[str] = []
    for error in errors:
        match = _POLICY_LINE.match(error)
        if match is None:
            blocks.append(f"SyntaxError: {error}")
            continue
        lineno = None if match.group(1) == "None" else int(match.group(1))
        block = [f"  line {lineno}"] if lineno is not None else []
        source = _source_line(lines, lineno)
        if source:
            block.append(f"    {source}")
        block.append(f"SyntaxError: {match.group(2)}")
        blocks.append("\n".join(block))
    return "\n".join(blocks)
