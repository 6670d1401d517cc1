"""A rich ``Console`` that loads rich on first use, and plain lines that may not need it.

rich costs ~40 ms of every start-up (54 modules), which ``codemode agent "..."`` with
its output piped (no terminal, no tool call) does not need: all it prints on stderr is a
line or two of plain text, because rich writing to something that is not a terminal
drops every style. ``LazyConsole`` stands for ``rich.console.Console(**options)`` and
creates it when first used; ``LazyConsole.line`` prints styled spans and writes them
itself, without rich, when it can tell that rich would have written exactly those bytes
(see ``_plain``), else it hands them to rich as markup.
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["LazyConsole", "escape"]

# Characters rich prints as themselves, one cell each, when it writes to a file: printable
# ASCII but the backslash (which escaping and markup do not round-trip: rich prints ``\\``
# for an escaped trailing one) and the few punctuation marks the CLI's own lines use.
# Anything else (tabs, which rich expands; control characters, which it strips; wide or
# zero-width characters, which change where it wraps) takes rich's own path.
_NARROW = frozenset(map(chr, range(0x20, 0x7F))) - {"\\"} | frozenset("·…—─")
_BROKEN_ENCODING = "\n*** You may need to add PYTHONIOENCODING=utf-8 to your environment ***"


def escape(markup: str) -> str:
    """``rich.markup.escape``, imported when first called."""
    from rich.markup import escape as rich_escape

    return rich_escape(markup)


def _not_a_terminal(file: Any) -> bool:
    """Whether rich's ``Console.is_terminal`` is certainly False for ``file`` (rich 13-15:
    no Jupyter, no ``TTY_COMPATIBLE``/``FORCE_COLOR`` override, ``isatty()`` False). Any
    doubt answers False, and the caller asks rich."""
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return False
    if os.environ.get("TTY_COMPATIBLE", "") in ("0", "1") or "FORCE_COLOR" in os.environ:
        return False
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return False
    isatty = getattr(file, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except ValueError:
        return False


def _width() -> int:
    """The width rich wraps at when writing to a file (its ``Console.size``, neither
    ``width`` nor ``height`` given): ``COLUMNS``, else the first standard stream that is a
    terminal, else 80."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    return width or 80


class LazyConsole:
    """``rich.console.Console(**options)``, created on first use; its attributes read
    through. ``options`` must leave ``file``, ``width``, ``force_terminal``, ``markup``
    and ``emoji`` to rich's defaults: ``line`` relies on them."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_options" not in self.__dict__:
            # Protocols probed on the class (copy, pickle) and a half-built instance: not
            # rich's to answer.
            raise AttributeError(name)
        return getattr(self.console, name)

    @property
    def file(self) -> Any:
        """rich's ``Console.file`` for a console without ``file=``: the current stream."""
        if self._console is not None:
            return self._console.file
        file = sys.stderr if self._options.get("stderr") else sys.stdout
        file = getattr(file, "rich_proxied_file", file)
        return file if file is not None else self.console.file

    @property
    def is_terminal(self) -> bool:
        if self._console is None and _not_a_terminal(self.file):
            return False
        return self.console.is_terminal

    def line(
        self,
        *spans: str | tuple[str, str],
        soft_wrap: bool = False,
        highlight: bool | None = None,
    ) -> None:
        """Print one line made of ``spans``: plain text, or ``(style, text)``; text is
        never markup. What ``print("[style]escaped text[/]...", soft_wrap=..., highlight=...)``
        prints (highlighting adds styles only, which a file does not get)."""
        if self._console is None:
            plain = self._plain(spans, soft_wrap)
            if plain is not None:
                self._write(plain)
                return
        markup = "".join(
            escape(span)
            if isinstance(span, str)
            else (f"[{span[0]}]{escape(span[1])}[/]" if span[0] else escape(span[1]))
            for span in spans
        )
        self.console.print(markup, soft_wrap=soft_wrap, highlight=highlight)

    def _plain(self, spans: tuple[str | tuple[str, str], ...], soft_wrap: bool) -> str | None:
        """The bytes rich would write for ``spans``, when they are certainly just the text:
        not a terminal (so no style is written), only one-cell characters and no line
        break, no ``:name:`` emoji code (one colon at most), and, unless ``soft_wrap``, no
        longer than the width rich would wrap at. Else None."""
        text = "".join(span if isinstance(span, str) else span[1] for span in spans)
        if not _NARROW.issuperset(text) or text.count(":") > 1:
            return None
        if not _not_a_terminal(self.file):
            return None
        if not soft_wrap and len(text) > _width():
            return None
        return text + "\n"

    def _write(self, text: str) -> None:
        # As rich's ``Console._check_buffer`` writes a line: one write, a flush, its note on
        # an encoding error, and its handling of a closed pipe.
        file = self.file
        try:
            try:
                file.write(text)
            except UnicodeEncodeError as error:
                error.reason = f"{error.reason}{_BROKEN_ENCODING}"
                raise
            file.flush()
        except BrokenPipeError:
            self.console.on_broken_pipe()
