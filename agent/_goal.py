"""Session goals: ``create_goal``, ``get_goal``, ``update_goal`` and the goal rounds.

One goal per session. A human asks for something long-running; the model records it with
``create_goal``; from then on, each time a turn ends normally while the goal is ``active``,
the agent starts another turn on its own — a *goal round* — with a context message naming
the objective, until the model reports ``complete`` or ``blocked`` through ``update_goal``,
or the rounds run out (``max_goal_rounds``).

Values (every tool; rendered as compact JSON)::

    {"goal": null | {"id", "revision", "objective", "phase", "roundsStarted",
                     "maxGoalRounds", "blockedReason"?: {"code", "message"}},
     "activation": "armed" | "disarmed"}

``phase`` is ``active``, ``paused``, ``blocked`` or ``complete``; ``activation`` is
``armed`` exactly when another goal round will start once the current turn ends (an active
goal with rounds left). ``revision`` starts at 1 and grows with every change the tools
make (an update must name the current one, so a model acting on a stale read is refused);
starting a round changes ``roundsStarted`` but not the revision. ``blockedReason`` is
``{"code": "reported", "message": <the model's blocked_reason>}`` or, when the rounds ran
out, ``{"code": "max_goal_rounds", "message": ...}``.

Authority (the agent's ``TurnOrigin``): ``create_goal`` and the ``edit``/``pause``/
``resume`` updates need a direct human request (a ``user`` turn of a top-level agent);
during a goal round only ``complete`` and ``blocked`` are allowed; turns started by a
schedule or the host may read the goal only; a subagent (an agent with a ``parent``) may not
create or change one. ``blocked`` also needs at least ``block_threshold`` consecutive goal
rounds (counted since the goal was created, edited or resumed, or the human last spoke).
A goal round that ends in ``complete``/``blocked`` defers a wrap-up context message so the
model closes the task for the user.

Codes (``GoalError``): ``GOAL_TOOL_NO_AGENT`` (no agent session, or goals not enabled),
``GOAL_TOOL_AUTHORITY``, ``GOAL_TOOL_INVALID_CREATE``, ``GOAL_TOOL_INVALID_UPDATE``,
``GOAL_TOOL_EXISTS`` (an unfinished goal is already set), ``GOAL_TOOL_NOT_FOUND``,
``GOAL_TOOL_STALE_REVISION``, ``GOAL_TOOL_INVALID_TRANSITION``,
``GOAL_TOOL_BLOCK_THRESHOLD``, ``GOAL_TOOL_PERSISTENCE`` (the session log refused the
change; nothing changed).

Persistence: every change appends ``agent/goal {at, goal: {... , consecutiveRounds}}`` to
the session log; ``enable_goals`` replays the last one, so ``--resume`` continues the goal.
"""

from __future__ import annotations

import json
import weakref
from typing import Any, Literal

import msgspec

from codemode.engine import ToolDefinition, ToolOutput, text
from codemode.engine.json import thaw
from codemode.tools import define_catalog_tool

from ._errors import GoalError
from ._loop import Agent, Continuation, TurnOutcome, agent_for
from ._session import utc_iso

__all__ = [
    "DEFAULT_BLOCK_THRESHOLD",
    "DEFAULT_MAX_GOAL_ROUNDS",
    "Goal",
    "GoalService",
    "build_goal_tools",
    "enable_goals",
]

DEFAULT_MAX_GOAL_ROUNDS = 20
DEFAULT_BLOCK_THRESHOLD = 3
MAX_SAFE_INTEGER = 2**53 - 1
MAX_OBJECTIVE_CHARS = 8000
MAX_REASON_CHARS = 4000

Phase = Literal["active", "paused", "blocked", "complete"]


class BlockedReason(msgspec.Struct, frozen=True):
    """Why a goal is blocked: ``reported`` by the model, or ``max_goal_rounds``."""

    code: str
    message: str


class Goal(msgspec.Struct, frozen=True, rename="camel"):
    """The session's goal (see the module docstring for the fields' meaning)."""

    id: str
    revision: int
    objective: str
    phase: Phase
    rounds_started: int
    max_goal_rounds: int
    blocked_reason: BlockedReason | None = None
    # Goal rounds in a row since the goal was created, edited or resumed, or the human last
    # spoke: what the ``blocked`` threshold counts. Not part of the tool value.
    consecutive_rounds: int = 0

    def view(self) -> dict[str, Any]:
        """The goal as the tools return it (without the internal round streak)."""
        out: dict[str, Any] = {
            "id": self.id,
            "revision": self.revision,
            "objective": self.objective,
            "phase": self.phase,
            "roundsStarted": self.rounds_started,
            "maxGoalRounds": self.max_goal_rounds,
        }
        if self.blocked_reason is not None:
            out["blockedReason"] = {
                "code": self.blocked_reason.code,
                "message": self.blocked_reason.message,
            }
        return out


_SERVICES: weakref.WeakKeyDictionary[Agent, GoalService] = weakref.WeakKeyDictionary()


def _safe_int(value: object) -> int | None:
    """``value`` as a positive safe integer (``3`` or ``3.0``), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if 1 <= number <= MAX_SAFE_INTEGER else None


class GoalService:
    """One agent's goal and its rounds (a ``ContinuationSource``; see ``enable_goals``)."""

    def __init__(
        self,
        agent: Agent,
        *,
        default_max_goal_rounds: int = DEFAULT_MAX_GOAL_ROUNDS,
        block_threshold: int = DEFAULT_BLOCK_THRESHOLD,
    ) -> None:
        if _safe_int(default_max_goal_rounds) is None:
            raise ValueError("default_max_goal_rounds must be a positive integer")
        if _safe_int(block_threshold) is None:
            raise ValueError("block_threshold must be a positive integer")
        self._agent = weakref.ref(agent)
        self.default_max_goal_rounds = int(default_max_goal_rounds)
        self.block_threshold = int(block_threshold)
        self.goal: Goal | None = None
        # How many goals this session has had: ids are never reused.
        self._created = 0
        self._replay()

    @staticmethod
    def of(agent: Agent | None) -> GoalService | None:
        """The goal service ``enable_goals`` attached to ``agent``."""
        return None if agent is None else _SERVICES.get(agent)

    @property
    def agent(self) -> Agent:
        """The agent this service belongs to."""
        agent = self._agent()
        if agent is None:  # pragma: no cover - the agent holds the service's only users
            raise RuntimeError("the goal service outlived its agent")
        return agent

    # ------------------------------------------------------------------ state

    def _replay(self) -> None:
        log = self.agent.scope.session
        for raw in log.events if log is not None else ():
            if raw.get("type") != "agent/goal":
                continue
            try:
                goal = msgspec.convert(thaw(raw).get("goal"), Goal)
            except msgspec.ValidationError:
                continue  # a damaged record: the previous good one stays
            self.goal = goal
            self._created = max(self._created, _goal_number(goal.id))

    def value(self) -> dict[str, Any]:
        """``{goal, activation}`` as every goal tool returns it."""
        goal = self.goal
        return {
            "goal": None if goal is None else goal.view(),
            "activation": "armed" if self.armed else "disarmed",
        }

    @property
    def armed(self) -> bool:
        """Whether another goal round starts when the current turn ends."""
        goal = self.goal
        return (
            goal is not None
            and goal.phase == "active"
            and goal.rounds_started < goal.max_goal_rounds
            and self.agent.parent is None
        )

    async def _commit(self, goal: Goal) -> None:
        """Persist ``goal`` first, then adopt it: a refused write changes nothing."""
        log = self.agent.scope.session
        if log is not None:
            try:
                await log.append(
                    {"type": "agent/goal", "at": utc_iso(), "goal": msgspec.to_builtins(goal)}
                )
            except Exception as exc:
                raise GoalError(
                    f"the goal change could not be saved to the session log ({exc}); "
                    "nothing was changed",
                    "GOAL_TOOL_PERSISTENCE",
                ) from exc
        self.goal = goal
        self.agent.emit({"type": "goal", **self.value()})

    # ------------------------------------------------------------- tool bodies

    def _require_human(self, what: str) -> None:
        agent = self.agent
        if agent.parent is not None:
            raise GoalError(
                f"{what} is not available to subagents: goals belong to the top-level "
                "session and its human",
                "GOAL_TOOL_AUTHORITY",
            )
        if agent.origin != "user":
            raise GoalError(
                f"{what} requires a direct top-level human request; this turn was started "
                f"by {_started_by(agent.origin)}",
                "GOAL_TOOL_AUTHORITY",
            )

    async def create(self, objective: object, max_goal_rounds: object) -> dict[str, Any]:
        """``create_goal``."""
        self._require_human("create_goal")
        if not isinstance(objective, str) or not objective.strip():
            raise GoalError("objective must be a non-empty string", "GOAL_TOOL_INVALID_CREATE")
        objective = objective.strip()
        if len(objective) > MAX_OBJECTIVE_CHARS:
            raise GoalError(
                f"objective must be at most {MAX_OBJECTIVE_CHARS} characters "
                f"(got {len(objective)})",
                "GOAL_TOOL_INVALID_CREATE",
            )
        rounds = self.default_max_goal_rounds
        if max_goal_rounds is not None:
            parsed = _safe_int(max_goal_rounds)
            if parsed is None:
                raise GoalError(
                    "max_goal_rounds must be a positive safe integer", "GOAL_TOOL_INVALID_CREATE"
                )
            rounds = parsed
        current = self.goal
        if current is not None and current.phase != "complete":
            raise GoalError(
                f"this session already has goal {current.id} (phase {current.phase}); "
                "read it with get_goal and change it with update_goal",
                "GOAL_TOOL_EXISTS",
            )
        self._created += 1
        await self._commit(
            Goal(
                id=f"goal-{self._created}",
                revision=1,
                objective=objective,
                phase="active",
                rounds_started=0,
                max_goal_rounds=rounds,
            )
        )
        return self.value()

    async def update(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """``update_goal``."""
        goal_id, revision = args.get("goal_id"), args.get("revision")
        if not isinstance(goal_id, str) or not goal_id.strip() or _safe_int(revision) is None:
            raise GoalError(
                "goal_id must be non-empty and revision must be a positive safe integer",
                "GOAL_TOOL_INVALID_UPDATE",
            )
        action = args["action"]
        self._check_fields(action, args)
        agent = self.agent
        if action in ("edit", "pause", "resume") or agent.parent is not None:
            self._require_human(f"update_goal {action}")
        elif agent.origin not in ("user", "goal"):
            raise GoalError(
                f"update_goal {action} requires a direct human request or an automatic round "
                f"of the goal; this turn was started by {_started_by(agent.origin)}",
                "GOAL_TOOL_AUTHORITY",
            )
        goal = self.goal
        if goal is None:
            raise GoalError("this session has no goal; create one first", "GOAL_TOOL_NOT_FOUND")
        if goal_id != goal.id:
            raise GoalError(
                f"goal {goal_id} is not this session's goal (the current goal is {goal.id})",
                "GOAL_TOOL_NOT_FOUND",
            )
        if _safe_int(revision) != goal.revision:
            raise GoalError(
                f"revision {revision} of {goal.id} is stale: the current revision is "
                f"{goal.revision}; call get_goal and decide again",
                "GOAL_TOOL_STALE_REVISION",
            )
        updated = self._apply(goal, action, args)
        await self._commit(updated)
        if agent.origin == "goal" and action in ("complete", "blocked"):
            ctx.defer_context({"role": "user", "content": [text(self._wrap_up(updated))]})
        return self.value()

    @staticmethod
    def _check_fields(action: str, args: dict[str, Any]) -> None:
        for field in ("objective", "max_goal_rounds"):
            if field in args and action != "edit":
                raise GoalError(
                    f"{field} is valid only with action edit", "GOAL_TOOL_INVALID_UPDATE"
                )
        if "blocked_reason" in args and action != "blocked":
            raise GoalError(
                "blocked_reason is valid only with action blocked", "GOAL_TOOL_INVALID_UPDATE"
            )
        if action == "blocked":
            reason = args.get("blocked_reason")
            if not isinstance(reason, str) or not reason.strip():
                raise GoalError(
                    "blocked_reason is required with action blocked", "GOAL_TOOL_INVALID_UPDATE"
                )
            if len(reason) > MAX_REASON_CHARS:
                raise GoalError(
                    f"blocked_reason must be at most {MAX_REASON_CHARS} characters",
                    "GOAL_TOOL_INVALID_UPDATE",
                )
        if action == "edit":
            if "objective" not in args and "max_goal_rounds" not in args:
                raise GoalError(
                    "edit needs objective or max_goal_rounds", "GOAL_TOOL_INVALID_UPDATE"
                )
            objective = args.get("objective", "x")
            if not isinstance(objective, str) or not objective.strip():
                raise GoalError("objective must be a non-empty string", "GOAL_TOOL_INVALID_UPDATE")
            if len(objective.strip()) > MAX_OBJECTIVE_CHARS:
                raise GoalError(
                    f"objective must be at most {MAX_OBJECTIVE_CHARS} characters",
                    "GOAL_TOOL_INVALID_UPDATE",
                )
            if "max_goal_rounds" in args and _safe_int(args["max_goal_rounds"]) is None:
                raise GoalError(
                    "max_goal_rounds must be a positive safe integer", "GOAL_TOOL_INVALID_UPDATE"
                )

    def _apply(self, goal: Goal, action: str, args: dict[str, Any]) -> Goal:
        def transition(allowed: tuple[str, ...]) -> None:
            if goal.phase not in allowed:
                raise GoalError(
                    f"cannot {action} goal {goal.id}: it is {goal.phase} "
                    f"({action} needs a goal that is {' or '.join(allowed)})",
                    "GOAL_TOOL_INVALID_TRANSITION",
                )

        replace = msgspec.structs.replace
        bumped = goal.revision + 1
        if action == "edit":
            transition(("active", "paused", "blocked"))
            rounds = goal.max_goal_rounds
            if "max_goal_rounds" in args:
                rounds = _safe_int(args["max_goal_rounds"]) or rounds
            return replace(
                goal,
                revision=bumped,
                objective=str(args.get("objective", goal.objective)).strip(),
                max_goal_rounds=rounds,
                consecutive_rounds=0,
            )
        if action == "pause":
            transition(("active",))
            return replace(goal, revision=bumped, phase="paused")
        if action == "resume":
            transition(("paused", "blocked"))
            if goal.rounds_started >= goal.max_goal_rounds:
                raise GoalError(
                    f"goal {goal.id} has used {_all_rounds(goal.max_goal_rounds)}; "
                    "edit it with a larger max_goal_rounds to continue",
                    "GOAL_TOOL_INVALID_TRANSITION",
                )
            return replace(
                goal, revision=bumped, phase="active", blocked_reason=None, consecutive_rounds=0
            )
        if action == "complete":
            transition(("active",))
            return replace(goal, revision=bumped, phase="complete", blocked_reason=None)
        # blocked
        transition(("active",))
        current = goal.consecutive_rounds if self.agent.origin == "goal" else 0
        if current < self.block_threshold:
            raise GoalError(
                f"blocked requires at least {self.block_threshold} consecutive goal rounds; "
                f"current round is {current}",
                "GOAL_TOOL_BLOCK_THRESHOLD",
            )
        reason = BlockedReason("reported", str(args["blocked_reason"]).strip())
        return replace(goal, revision=bumped, phase="blocked", blocked_reason=reason)

    @staticmethod
    def _wrap_up(goal: Goal) -> str:
        from ._words import count_of

        if goal.phase == "complete":
            return (
                f"[goal] Goal {goal.id} is complete after "
                f"{count_of(goal.rounds_started, 'goal round')}; no further rounds will start. "
                "Wrap up now: tell the user briefly "
                "what was achieved and where the results are."
            )
        reason = goal.blocked_reason.message if goal.blocked_reason else ""
        return (
            f"[goal] Goal {goal.id} is blocked: {reason}. No further rounds will start. "
            "Wrap up now: tell the user what blocks the goal, what you tried, and what "
            "they could do to unblock it."
        )

    # ------------------------------------------------------------- goal rounds

    async def next_continuation(self, agent: Agent, last: TurnOutcome) -> Continuation | None:
        """Start the next goal round after a turn that ended normally (``Agent.run``)."""
        goal = self.goal
        if goal is None or goal.phase != "active" or agent.parent is not None:
            return None
        streak = goal.consecutive_rounds if last.origin == "goal" else 0
        if goal.rounds_started >= goal.max_goal_rounds:
            # The last round ended without an answer: record why nothing continues.
            reason = BlockedReason(
                "max_goal_rounds",
                f"the goal used {_all_rounds(goal.max_goal_rounds, 'automatic goal round')} "
                "without being completed",
            )
            await self._commit(
                msgspec.structs.replace(
                    goal,
                    revision=goal.revision + 1,
                    phase="blocked",
                    blocked_reason=reason,
                    consecutive_rounds=streak,
                )
            )
            return None
        round_no = goal.rounds_started + 1
        await self._commit(
            msgspec.structs.replace(goal, rounds_started=round_no, consecutive_rounds=streak + 1)
        )
        return Continuation("goal", self._round_prompt(self.goal or goal, round_no))

    def _round_prompt(self, goal: Goal, round_no: int) -> str:
        return (
            f"[goal round {round_no} of {goal.max_goal_rounds}] This is an automatic "
            f"continuation of the session goal {goal.id} (revision {goal.revision}), not a "
            f"new message from the user. Objective: {goal.objective}\n"
            "Keep working toward it. When the objective is fully met, call update_goal with "
            "action complete. If a concrete condition outside your control keeps blocking "
            "progress across rounds, call update_goal with action blocked and explain it in "
            f"blocked_reason (possible from consecutive round {self.block_threshold} on)."
        )


def _started_by(origin: str | None) -> str:
    return {
        "goal": "an automatic goal round",
        "schedule": "a schedule reminder",
        "host": "the host",
        None: "no turn (the agent is idle)",
    }.get(origin, str(origin))


def _goal_number(goal_id: str) -> int:
    head, _, number = goal_id.partition("-")
    return int(number) if head == "goal" and number.isdigit() else 0


def enable_goals(
    agent: Agent,
    *,
    default_max_goal_rounds: int = DEFAULT_MAX_GOAL_ROUNDS,
    block_threshold: int = DEFAULT_BLOCK_THRESHOLD,
) -> GoalService:
    """Give ``agent`` a goal: replay the one its session log holds, and continue the
    session with goal rounds (the service joins ``agent.sources``). Idempotent."""
    existing = _SERVICES.get(agent)
    if existing is not None:
        return existing
    service = GoalService(
        agent, default_max_goal_rounds=default_max_goal_rounds, block_threshold=block_threshold
    )
    _SERVICES[agent] = service
    agent.sources.append(service)
    return service


_GOAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "goal": {
            "required": True,
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "id": {"type": "string", "required": True},
                        "revision": {"type": "integer", "required": True},
                        "objective": {"type": "string", "required": True},
                        "phase": {
                            "type": "string",
                            "enum": ["active", "paused", "blocked", "complete"],
                            "required": True,
                        },
                        "roundsStarted": {"type": "integer", "required": True},
                        "maxGoalRounds": {"type": "integer", "required": True},
                        "blockedReason": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "code": {"type": "string", "required": True},
                                "message": {"type": "string", "required": True},
                            },
                        },
                    },
                },
            ],
        },
        "activation": {"type": "string", "enum": ["armed", "disarmed"], "required": True},
    },
}


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    return [text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))]


def _service(ctx: Any, tool: str) -> GoalService:
    agent = agent_for(ctx.agent)
    if agent is None:
        raise GoalError(
            f"{tool} requires a calling agent session (no agent drives this scope)",
            "GOAL_TOOL_NO_AGENT",
        )
    service = GoalService.of(agent)
    if service is None:
        raise GoalError(
            f"{tool} is unavailable: this agent session has no goal service",
            "GOAL_TOOL_NO_AGENT",
        )
    return service


def build_goal_tools() -> list[ToolDefinition]:
    """``create_goal``, ``get_goal`` and ``update_goal``, acting on the calling agent's
    ``GoalService`` (``enable_goals``); exclusive (a goal change is ordered)."""
    output = ToolOutput(schema=_GOAL_SCHEMA, render=_render)

    async def create(args: Any, ctx: Any) -> Any:
        return await _service(ctx, "create_goal").create(
            args.get("objective"), args.get("max_goal_rounds")
        )

    async def get(args: Any, ctx: Any) -> Any:
        return _service(ctx, "get_goal").value()

    async def update(args: Any, ctx: Any) -> Any:
        return await _service(ctx, "update_goal").update(dict(args), ctx)

    def call_card(title: str) -> Any:
        return lambda args: {"card": "generic", "title": title}

    return [
        define_catalog_tool(
            "create_goal", output=output, execute=create, present_call=call_card("Create goal")
        ),
        define_catalog_tool(
            "get_goal",
            output=output,
            execute=get,
            is_concurrency_safe=lambda args: True,
            present_call=call_card("Read goal"),
        ),
        define_catalog_tool(
            "update_goal",
            output=output,
            execute=update,
            present_call=lambda args: {
                "card": "generic",
                "title": f"Update goal: {args.get('action')}",
            },
        ),
    ]


def _all_rounds(n: int, noun: str = "round") -> str:
    """``all 20 rounds``, or ``its only round`` for one (never ``all 1 rounds``)."""
    from ._words import count_of

    return f"its only {noun}" if n == 1 else f"all {count_of(n, noun)}"
