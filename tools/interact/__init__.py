"""Questions and plan review: ``ask_user_question``, ``exit_plan_mode`` and their providers.

Layout:

- ``_questions.py``: the ``QuestionProvider`` protocol (``ask`` for questions,
  ``review_plan`` for plan reviews), the request/answer types, argument and answer
  validation, and ``ScriptedQuestionProvider`` (tests, unattended hosts).
- ``_ask.py``: ``build_ask_user_question``.
- ``_plan.py``: ``PlanMode`` (which scopes are in plan mode) and ``build_exit_plan_mode``.

The CLI's terminal provider lives in ``codemode.cli`` (``InteractiveQuestionProvider``).
Wiring: one ``PlanMode`` and one provider (or ``None``) per host, shared by both tools::

    plan_mode = PlanMode()
    tools = [build_ask_user_question(cfg, provider),
             build_exit_plan_mode(cfg, plan_mode, provider)]
    plan_mode.enter(agent_scope)  # when the user switches the session to plan mode
"""

from .._errors import PlanModeError, QuestionError
from ._ask import build_ask_user_question
from ._plan import PlanMode, build_exit_plan_mode, plan_title
from ._questions import (
    Answer,
    PlanDecision,
    PlanReview,
    PlanReviewOutcome,
    Question,
    QuestionOption,
    QuestionProvider,
    ScriptedQuestionProvider,
)

__all__ = [
    "Answer",
    "PlanDecision",
    "PlanMode",
    "PlanModeError",
    "PlanReview",
    "PlanReviewOutcome",
    "Question",
    "QuestionError",
    "QuestionOption",
    "QuestionProvider",
    "ScriptedQuestionProvider",
    "build_ask_user_question",
    "build_exit_plan_mode",
    "plan_title",
]
