"""The question-provider interface, its request/answer types and a scripted provider.

A *question provider* is how a host reaches its user: the CLI's interactive provider asks on
the terminal, a chat host forwards to its UI, tests and unattended hosts use
``ScriptedQuestionProvider``. It answers two kinds of request: questions
(``ask_user_question``) and plan reviews (``exit_plan_mode``).

QUESTION codes: ``QUESTION_NO_AGENT`` (a call without a calling agent),
``QUESTION_INVALID`` (an empty list, blank or duplicate ids, blank question texts or option
labels), ``QUESTION_NO_PROVIDER``, ``QUESTION_ABORTED`` (the caller aborted before the answer),
``QUESTION_INVALID_ANSWER`` (a provider answered something that does not fit the questions),
``QUESTION_UNAVAILABLE`` (a provider cannot reach its user: no terminal, closed input).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

import anyio
import msgspec

from .._errors import QuestionError

if TYPE_CHECKING:
    from codemode.engine import AbortSignal, Scope

__all__ = [
    "Answer",
    "PlanDecision",
    "PlanReview",
    "PlanReviewOutcome",
    "Question",
    "QuestionOption",
    "QuestionProvider",
    "ScriptedQuestionProvider",
    "check_answers",
    "parse_questions",
    "until_aborted",
]

T = TypeVar("T")


class QuestionOption(msgspec.Struct, frozen=True, kw_only=True):
    """One choice of a question: a short label and an optional one-sentence description."""

    label: str
    description: str | None = None


class Question(msgspec.Struct, frozen=True, kw_only=True):
    """One question of an ``ask_user_question`` call (already validated)."""

    id: str
    question: str
    header: str | None = None
    options: tuple[QuestionOption, ...] = ()
    multi_select: bool = False


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """The user's answer to one question.

    ``selected`` holds the chosen option labels (empty for a free-text question);
    ``custom`` the free text the user typed instead of, or besides, a listed option.
    """

    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None

    def to_value(self) -> dict[str, Any]:
        """The canonical JSON value ``{id, selected, custom?}``."""
        value: dict[str, Any] = {"id": self.id, "selected": list(self.selected)}
        if self.custom is not None:
            value["custom"] = self.custom
        return value


PlanDecision = Literal["approve", "keep_planning", "dismiss"]


class PlanReview(msgspec.Struct, frozen=True, kw_only=True):
    """A plan presented for the user's review: its markdown and its title (first heading)."""

    plan: str
    title: str


class PlanReviewOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The user's verdict on a plan: approve it, keep planning (with optional feedback), or
    dismiss the review to speak instead."""

    decision: PlanDecision
    feedback: str | None = None


@runtime_checkable
class QuestionProvider(Protocol):
    """How the tools reach the user.

    Both methods may take as long as the user needs; the tools abandon them (cancelling the
    awaiting task) when the caller's ``signal`` aborts, so a provider need not watch it, but
    may (to tear down its UI). ``scope`` is the calling agent, for hosts that route per agent.
    Raise ``QuestionError`` (code ``QUESTION_UNAVAILABLE``) when the user cannot be reached.
    """

    async def ask(
        self, questions: Sequence[Question], *, scope: Scope, signal: AbortSignal
    ) -> Sequence[Answer]:
        """Ask ``questions`` and return one answer per question."""
        ...

    async def review_plan(
        self, review: PlanReview, *, scope: Scope, signal: AbortSignal
    ) -> PlanReviewOutcome:
        """Show a plan and return the user's verdict."""
        ...


ScriptedReply = Sequence[Answer | Mapping[str, Any]] | PlanReviewOutcome | BaseException
ScriptedFunction = Callable[
    [Sequence[Question] | PlanReview], "ScriptedReply | Awaitable[ScriptedReply]"
]


class ScriptedQuestionProvider:
    """A question provider that answers from a script, for tests and unattended hosts.

    ``replies`` is either a queue (each item answers one request, in order: a list of answers,
    as ``Answer`` or ``{id, selected?, custom?}`` mappings, for a question request; a
    ``PlanReviewOutcome`` for a plan review; an exception to raise) or a callable given the
    request (``Sequence[Question]`` or ``PlanReview``) and returning such a reply, or an
    awaitable of one. ``hold`` (when given) is awaited before each reply, so a test can keep a
    request pending. ``asked`` records every request in order.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedReply] | ScriptedFunction = (),
        *,
        hold: anyio.Event | None = None,
    ) -> None:
        self._fn: ScriptedFunction | None = None
        self._queue: deque[ScriptedReply] = deque()
        if callable(replies):
            self._fn = replies
        else:
            self._queue.extend(replies)
        self._hold = hold
        self.asked: list[Sequence[Question] | PlanReview] = []
        self.scopes: list[Scope] = []

    def push(self, reply: ScriptedReply) -> None:
        """Append one reply to the queue."""
        self._queue.append(reply)

    async def _reply(self, request: Sequence[Question] | PlanReview, scope: Scope) -> Any:
        self.asked.append(request)
        self.scopes.append(scope)
        if self._hold is not None:
            await self._hold.wait()
        if self._fn is not None:
            reply: Any = self._fn(request)
            if isinstance(reply, Awaitable):
                reply = await reply
        elif self._queue:
            reply = self._queue.popleft()
        else:
            raise QuestionError(
                "the scripted question provider has no reply left", "QUESTION_UNAVAILABLE"
            )
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def ask(
        self, questions: Sequence[Question], *, scope: Scope, signal: AbortSignal
    ) -> Sequence[Answer]:
        """The next scripted answers (mappings are converted to ``Answer``)."""
        reply = await self._reply(tuple(questions), scope)
        if isinstance(reply, PlanReviewOutcome):
            raise QuestionError(
                "the scripted reply is a plan review outcome, not answers",
                "QUESTION_INVALID_ANSWER",
            )
        try:
            return [a if isinstance(a, Answer) else msgspec.convert(a, Answer) for a in reply]
        except (TypeError, msgspec.ValidationError) as exc:
            raise QuestionError(
                f"the scripted answers are malformed: {exc}", "QUESTION_INVALID_ANSWER"
            ) from exc

    async def review_plan(
        self, review: PlanReview, *, scope: Scope, signal: AbortSignal
    ) -> PlanReviewOutcome:
        """The next scripted plan-review outcome."""
        reply = await self._reply(review, scope)
        if not isinstance(reply, PlanReviewOutcome):
            raise QuestionError(
                "the scripted reply is not a plan review outcome", "QUESTION_INVALID_ANSWER"
            )
        return reply


def _invalid(message: str) -> QuestionError:
    return QuestionError(message, "QUESTION_INVALID")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_questions(raw: Any) -> list[Question]:
    """Validate the ``questions`` argument (beyond its schema) into ``Question`` values."""
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise _invalid("ask_user_question requires at least one question")
    questions: list[Question] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        qid = _text(item.get("id"))
        if qid is None or not qid.strip():
            raise _invalid(f"question {index + 1} needs a non-empty id")
        if qid in seen:
            raise _invalid(f'duplicate question id "{qid}"')
        seen.add(qid)
        text = _text(item.get("question"))
        if text is None or not text.strip():
            raise _invalid(f'question "{qid}" needs a non-empty question text')
        options: list[QuestionOption] = []
        labels: set[str] = set()
        for option in item.get("options") or ():
            label = _text(option.get("label"))
            if label is None or not label.strip():
                raise _invalid(f'question "{qid}" has an option with an empty label')
            if label in labels:
                raise _invalid(f'question "{qid}" lists the option "{label}" twice')
            labels.add(label)
            options.append(
                QuestionOption(label=label, description=_text(option.get("description")))
            )
        questions.append(
            Question(
                id=qid,
                question=text,
                header=_text(item.get("header")),
                options=tuple(options),
                multi_select=item.get("multi_select") is True,
            )
        )
    return questions


def check_answers(questions: Sequence[Question], answers: Sequence[Answer]) -> list[Answer]:
    """The provider's answers in question order, refusing any that do not fit.

    Each question gets exactly one answer; selected labels must be the question's own
    options (at most one unless ``multi_select``), and an answer without a selection must
    carry custom text.
    """

    def bad(message: str) -> QuestionError:
        return QuestionError(
            f"the user-questions provider returned an invalid answer: {message}",
            "QUESTION_INVALID_ANSWER",
        )

    if not isinstance(answers, Sequence) or isinstance(answers, str):
        raise bad(f"expected a sequence of answers, got {type(answers).__name__}")
    by_id: dict[str, Answer] = {}
    for answer in answers:
        if not isinstance(answer, Answer):
            raise bad(f"expected an Answer, got {type(answer).__name__}")
        if answer.id in by_id:
            raise bad(f'two answers for question "{answer.id}"')
        by_id[answer.id] = answer
    known = {q.id for q in questions}
    for answer_id in by_id:
        if answer_id not in known:
            raise bad(f'an answer for unknown question "{answer_id}"')
    ordered: list[Answer] = []
    for question in questions:
        given = by_id.get(question.id)
        if given is None:
            raise bad(f'no answer for question "{question.id}"')
        answer = given
        labels = {o.label for o in question.options}
        for label in answer.selected:
            if label not in labels:
                raise bad(f'"{label}" is not an option of question "{question.id}"')
        if len(set(answer.selected)) != len(answer.selected):
            raise bad(f'an option was selected twice for question "{question.id}"')
        if len(answer.selected) > 1 and not question.multi_select:
            raise bad(f'question "{question.id}" takes a single choice')
        if not answer.selected and not answer.custom:
            raise bad(f'the answer to question "{question.id}" is empty')
        ordered.append(answer)
    return ordered


async def until_aborted(
    work: Callable[[], Awaitable[T]], signal: AbortSignal, aborted: Callable[[], Exception]
) -> T:
    """``await work()``, abandoning it (cancelled) and raising ``aborted()`` if ``signal``
    aborts first."""
    if signal.aborted:
        raise aborted()
    # A cancel scope, not a task group: the work's own exceptions propagate unwrapped, and an
    # outer cancellation (a timeout) is not mistaken for the caller's abort.
    with anyio.CancelScope() as scope:
        dispose = signal.add_listener(lambda _signal: scope.cancel())
        try:
            return await work()
        finally:
            dispose()
    raise aborted()
