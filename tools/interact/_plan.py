"""Plan mode: a per-scope state and ``exit_plan_mode``, the user's review of the plan.

PLAN codes: ``PLAN_NO_AGENT``, ``PLAN_NOT_ACTIVE``, ``PLAN_INVALID`` (empty or no leading
``#`` heading), ``PLAN_NO_CHANNEL`` (no question provider), ``PLAN_DISMISSED``,
``PLAN_KEEP_PLANNING``, ``PLAN_RELOADED`` (plan mode changed while the plan was under
review), ``PLAN_ABORTED`` (the caller aborted during the review).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import arg, result_parts, text_of
from .._config import ToolsConfig
from .._errors import PlanModeError
from ._questions import PlanReview, PlanReviewOutcome, QuestionProvider, until_aborted

if TYPE_CHECKING:
    from codemode.engine import Scope

__all__ = ["PlanMode", "build_exit_plan_mode", "plan_title"]

APPROVED = "Plan approved — plan mode exited; carry out the plan starting with your next step."
_NO_AGENT = "exit_plan_mode requires a calling agent (no session to switch)"
_NOT_ACTIVE = "exit_plan_mode is only available in plan mode"
_INVALID = "exit_plan_mode requires a non-empty markdown plan starting with a # heading"
_NO_CHANNEL = (
    "no user-questions channel is available to review the plan; ask the user to switch the "
    "session mode instead"
)
_DISMISSED = (
    "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and "
    "wait for their message."
)
_KEEP = "The user chose to keep planning; revise the plan and present it again."
_KEEP_FEEDBACK = "The user chose to keep planning; their feedback: {custom}"
_RELOADED = (
    "the plan-mode service was reloaded while the plan was under review; present the plan again"
)

# An ATX heading (CommonMark: up to three spaces of indentation, one to six #s, a space,
# optional closing #s). Any level counts: "## Plan" still names the plan.
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")

Listener = Callable[["Scope", bool], None]


def _first_heading(plan: str) -> tuple[int, str] | None:
    for number, line in enumerate(plan.split("\n")):
        match = _HEADING.match(line.rstrip("\r"))
        if match and match.group(1).strip():
            return number, match.group(1).strip()
    return None


def plan_title(plan: str) -> str:
    """The plan's first ``#`` heading, or ``Plan``."""
    found = _first_heading(plan)
    return found[1] if found is not None else "Plan"


def _valid_plan(plan: object) -> bool:
    if not isinstance(plan, str) or not plan.strip():
        return False
    # The heading must open the plan: only blank lines may precede it.
    lines = plan.split("\n")
    first = next(i for i, line in enumerate(lines) if line.strip())
    found = _first_heading(plan)
    return found is not None and found[0] == first


class _State:
    __slots__ = ("active", "generation")

    def __init__(self) -> None:
        self.active = False
        self.generation = 0


class PlanMode:
    """Which scopes are in plan mode.

    The state is each scope's own: entering plan mode for an agent does not put its child
    scopes (subagents) in plan mode, nor does a child's state leak to its parent. Every
    ``enter``/``exit``/``reload`` counts as a change; a plan review that sees its scope
    change while the user was reviewing fails with the "reloaded" text, because its verdict
    was about a state that no longer exists. ``on_change`` lets a host react (restrict the
    editing tools while in plan mode, update a status line).
    """

    def __init__(self) -> None:
        # Weak keys: a scope that is gone takes its state with it.
        self._states: weakref.WeakKeyDictionary[Scope, _State] = weakref.WeakKeyDictionary()
        self._epoch = 0
        self._listeners: list[Listener] = []

    def _state(self, scope: Scope) -> _State:
        state = self._states.get(scope)
        if state is None:
            state = self._states[scope] = _State()
        return state

    def _set(self, scope: Scope, active: bool) -> None:
        state = self._state(scope)
        state.generation += 1
        changed = state.active != active
        state.active = active
        if changed:
            for listener in list(self._listeners):
                listener(scope, active)

    def enter(self, scope: Scope) -> None:
        """Put ``scope`` in plan mode."""
        self._set(scope, True)

    def exit(self, scope: Scope) -> None:
        """Take ``scope`` out of plan mode (a no-op state-wise when it is not in it)."""
        self._set(scope, False)

    def is_active(self, scope: Scope) -> bool:
        """Whether ``scope`` itself is in plan mode."""
        state = self._states.get(scope)
        return state is not None and state.active

    def reload(self) -> None:
        """Forget every scope's state (a host reloading its mode service); reviews under
        way fail with the "reloaded" text."""
        self._epoch += 1
        active = [scope for scope, state in self._states.items() if state.active]
        self._states = weakref.WeakKeyDictionary()
        for scope in active:
            for listener in list(self._listeners):
                listener(scope, False)

    def on_change(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(scope, active)`` whenever a scope enters or leaves plan mode;
        returns a disposer."""
        self._listeners.append(listener)

        def dispose() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return dispose

    def _token(self, scope: Scope) -> tuple[int, int]:
        return self._epoch, self._state(scope).generation


def build_exit_plan_mode(
    cfg: ToolsConfig, plan_mode: PlanMode, questions: QuestionProvider | None
) -> ToolDefinition:
    """The ``exit_plan_mode`` tool: reviews the plan through ``questions`` and, on approval,
    takes the calling scope out of ``plan_mode``."""

    async def execute(args: Any, ctx: Any) -> Any:
        scope = ctx.agent
        if scope is None:
            raise PlanModeError(_NO_AGENT, "PLAN_NO_AGENT")
        if not plan_mode.is_active(scope):
            raise PlanModeError(_NOT_ACTIVE, "PLAN_NOT_ACTIVE")
        plan = args["plan"]
        if not _valid_plan(plan):
            raise PlanModeError(_INVALID, "PLAN_INVALID")
        if questions is None:
            raise PlanModeError(_NO_CHANNEL, "PLAN_NO_CHANNEL")
        provider = questions
        token = plan_mode._token(scope)
        review = PlanReview(plan=plan, title=plan_title(plan))

        async def ask() -> PlanReviewOutcome:
            return await provider.review_plan(review, scope=scope, signal=ctx.signal)

        outcome = await until_aborted(
            ask,
            ctx.signal,
            lambda: PlanModeError(
                "exit_plan_mode was aborted before the user reviewed the plan", "PLAN_ABORTED"
            ),
        )
        if plan_mode._token(scope) != token or not plan_mode.is_active(scope):
            raise PlanModeError(_RELOADED, "PLAN_RELOADED")
        if not isinstance(outcome, PlanReviewOutcome):
            raise PlanModeError(
                f"the user-questions provider returned {type(outcome).__name__}, not a plan "
                "review outcome",
                "PLAN_ERROR",
            )
        if outcome.decision == "approve":
            plan_mode.exit(scope)
            return {"approved": True}
        if outcome.decision == "dismiss":
            raise PlanModeError(_DISMISSED, "PLAN_DISMISSED")
        feedback = (outcome.feedback or "").strip()
        if feedback:
            raise PlanModeError(_KEEP_FEEDBACK.format(custom=feedback), "PLAN_KEEP_PLANNING")
        raise PlanModeError(_KEEP, "PLAN_KEEP_PLANNING")

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(APPROVED)]

    def present_call(args: Any) -> Any:
        plan = arg(args, "plan")
        if not isinstance(plan, str):
            return None
        return {"card": "generic", "title": plan_title(plan), "content": [text(plan)]}

    def present_result(args: Any, result: Any) -> Any:
        # The outcome text (approval or the user's verdict) is the card's body.
        content, _is_error, _meta = result_parts(result)
        card: dict[str, Any] = {"card": "generic", "title": "Plan review"}
        body = text_of(content)
        if body is not None:
            card["content"] = [text(body)]
        return card

    return define_catalog_tool(
        "exit_plan_mode",
        output=ToolOutput(
            schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {"approved": {"type": "boolean", "enum": [True], "required": True}},
            },
            render=render,
        ),
        execute=execute,
        present_call=present_call,
        present_result=present_result,
    )
