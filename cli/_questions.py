"""The CLI's question provider: asks ``ask_user_question`` and plan reviews on the terminal.

Questions are drawn with rich (a panel per question, numbered options) and answered by
number: one number for a single choice, comma-separated numbers for a multi-select, the last
number ("Other…") for free text; a question without options takes free text. Plan reviews
show the plan as Markdown and take approve / keep planning (with optional feedback) /
dismiss.

Input is read from the stdin file descriptor asynchronously, a line at a time (the terminal's
own line editing applies), so a call that is aborted leaves no thread blocked on ``input()``.
Everything the model wrote is shown as plain text with control characters made visible: a
question cannot smuggle escape sequences (retitling the window, moving the cursor to forge
output) or rich markup onto the user's terminal.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from codemode.tools.interact import (
    Answer,
    PlanReview,
    PlanReviewOutcome,
    Question,
    QuestionError,
)

if TYPE_CHECKING:
    from rich.console import Console

    from codemode.engine import AbortSignal, Scope

__all__ = ["InteractiveQuestionProvider", "NOT_A_TERMINAL", "visible"]

NOT_A_TERMINAL = (
    "cannot ask the user: stdin is not a terminal; run codemode from an interactive terminal "
    "(not with piped or redirected stdin) to answer questions, or write the program so it "
    "does not need to ask"
)
_OTHER = "Other…"
# Bidirectional overrides/isolates reorder what the user sees (a "Trojan Source" trick).
_BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_MAX_LINE = 64 * 1024


def visible(value: str) -> str:
    """``value`` with control characters (but newline and tab), bidi controls and other
    format characters shown as ``\\xNN``/``\\uNNNN`` escapes instead of acted upon."""
    out: list[str] = []
    for ch in value:
        if ch in "\n\t":
            out.append(ch)
        elif ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


class _EndOfInput(Exception):
    pass


class InteractiveQuestionProvider:
    """Ask on the terminal: prompts go to ``console`` (default: stderr), answers come from
    the file descriptor ``stdin`` (default: ``sys.stdin``'s).

    Requests are serialized (one prompt on screen at a time). Every request first checks that
    ``stdin`` is a terminal and fails with ``QuestionError`` (``QUESTION_UNAVAILABLE``,
    the ``NOT_A_TERMINAL`` text) when it is not; ``for_terminal()`` builds a provider only
    when it is.
    """

    def __init__(self, *, console: Console | None = None, stdin: int | None = None) -> None:
        if console is None:
            # rich loads here, and in the methods that draw: ``visible`` is all that
            # ``codemode agent`` needs of this module until a question is asked.
            from rich.console import Console

            console = Console(stderr=True)
        self._console = console
        self._fd = stdin if stdin is not None else sys.stdin.fileno()
        self._lock = anyio.Lock()
        self._buffer = b""

    @classmethod
    def for_terminal(cls, *, console: Console | None = None) -> InteractiveQuestionProvider | None:
        """A provider on ``sys.stdin`` when it is a terminal, else ``None``."""
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return None
        return cls(console=console, stdin=fd) if os.isatty(fd) else None

    def _check_terminal(self) -> None:
        try:
            is_tty = os.isatty(self._fd)
        except OSError:
            is_tty = False
        if not is_tty:
            raise QuestionError(NOT_A_TERMINAL, "QUESTION_UNAVAILABLE")

    async def _readline(self) -> str:
        # Whole lines only: the terminal (canonical mode) hands over a line once Enter is
        # pressed; the fd is awaited, so cancelling the call cancels the wait.
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise _EndOfInput
            self._buffer += chunk
            if len(self._buffer) > _MAX_LINE and b"\n" not in self._buffer:
                self._buffer = b""
                raise _EndOfInput
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace").rstrip("\r")

    def _warn(self, message: str) -> None:
        # Text, not a str: no markup parsing, no number highlighting splitting the words.
        from rich.text import Text

        self._console.print(Text(message, style="yellow"))

    async def _prompt(self, label: str) -> str:
        from rich.text import Text

        self._console.print(Text(label, style="bold"), end="")
        self._console.file.flush()
        return (await self._readline()).strip()

    async def ask(
        self, questions: Sequence[Question], *, scope: Scope, signal: AbortSignal
    ) -> list[Answer]:
        """Ask each question in turn and return the answers."""
        self._check_terminal()
        async with self._lock:
            # Typed-ahead input belongs to no question asked yet.
            self._buffer = b""
            try:
                return [await self._ask_one(q, i, len(questions)) for i, q in enumerate(questions)]
            except _EndOfInput:
                raise QuestionError(
                    "the user closed the input before answering", "QUESTION_UNAVAILABLE"
                ) from None

    async def _ask_one(self, question: Question, index: int, total: int) -> Answer:
        from rich.console import Group
        from rich.panel import Panel
        from rich.text import Text

        title = visible(question.header) if question.header else f"Question {index + 1}/{total}"
        body: list[Text] = [Text(visible(question.question))]
        labels = [o.label for o in question.options]
        if labels:
            lines = Text()
            for number, option in enumerate(question.options, 1):
                lines.append(f"\n{number}. ", style="bold cyan")
                lines.append(visible(option.label))
                if option.description:
                    lines.append(f" — {visible(option.description)}", style="dim")
            lines.append(f"\n{len(labels) + 1}. ", style="bold cyan")
            lines.append(_OTHER)
            body.append(lines)
        self._console.print(Panel(Group(*body), title=Text(title), title_align="left"))
        if not labels:
            return Answer(id=question.id, custom=await self._free_text("Your answer: "))
        other = len(labels) + 1
        if question.multi_select:
            prompt = f"Choose one or more (comma-separated, 1-{other}): "
        else:
            prompt = f"Choose 1-{other}: "
        while True:
            picked = self._numbers(await self._prompt(prompt), other, question.multi_select)
            if picked is not None:
                break
            self._warn(
                "Enter numbers separated by commas."
                if question.multi_select
                else f"Enter a number from 1 to {other}."
            )
        selected = tuple(labels[n - 1] for n in picked if n != other)
        custom = await self._free_text("Other: ") if other in picked else None
        return Answer(id=question.id, selected=selected, custom=custom)

    @staticmethod
    def _numbers(reply: str, top: int, multi: bool) -> list[int] | None:
        parts = [p.strip() for p in reply.split(",")] if multi else [reply]
        picked: list[int] = []
        for part in parts:
            if not part.isdigit() or not 1 <= int(part) <= top:
                return None
            if int(part) not in picked:
                picked.append(int(part))
        return picked or None

    async def _free_text(self, label: str) -> str:
        while True:
            reply = await self._prompt(label)
            if reply:
                return reply
            self._warn("Please type an answer.")

    async def review_plan(
        self, review: PlanReview, *, scope: Scope, signal: AbortSignal
    ) -> PlanReviewOutcome:
        """Show the plan and ask: approve, keep planning (with feedback) or dismiss."""
        self._check_terminal()
        async with self._lock:
            self._buffer = b""
            try:
                return await self._review(review)
            except _EndOfInput:
                raise QuestionError(
                    "the user closed the input before reviewing the plan", "QUESTION_UNAVAILABLE"
                ) from None

    async def _review(self, review: PlanReview) -> PlanReviewOutcome:
        # Imported here: rich's Markdown (markdown-it, pygments) costs ~15 ms of every
        # CLI start-up, and only a plan review renders Markdown.
        from rich.markdown import Markdown
        from rich.panel import Panel
        from rich.text import Text

        self._console.print(
            Panel(
                # Links show their target (no terminal hyperlinks hiding it).
                Markdown(visible(review.plan), hyperlinks=False),
                title=Text(f"Plan review: {visible(review.title)}"),
                title_align="left",
            )
        )
        choices = Text()
        choices.append("1. ", style="bold cyan")
        choices.append("Approve — leave plan mode and carry out the plan\n")
        choices.append("2. ", style="bold cyan")
        choices.append("Keep planning — send feedback\n")
        choices.append("3. ", style="bold cyan")
        choices.append("Dismiss — stay in plan mode and talk instead")
        self._console.print(choices)
        while True:
            reply = await self._prompt("Choose 1-3: ")
            if reply in ("1", "2", "3"):
                break
            self._warn("Enter 1, 2 or 3.")
        if reply == "1":
            return PlanReviewOutcome(decision="approve")
        if reply == "3":
            return PlanReviewOutcome(decision="dismiss")
        feedback = await self._prompt("Feedback (Enter for none): ")
        return PlanReviewOutcome(decision="keep_planning", feedback=feedback or None)
