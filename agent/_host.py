"""What a host adds to a runtime and an agent for the agent-bound catalog rows.

``agent_tools()`` is the list of tool definitions to register (goals, schedules, session
queries), ``enable_services(agent, ...)`` gives one ``Agent`` the services those tools act
on, in the order its continuations run after a turn: due schedule reminders first (they are
time-bound), then goal rounds. ``codemode agent`` is built this way; an embedder can pick
single pieces instead (``build_goal_tools`` + ``enable_goals``, ...).
"""

from __future__ import annotations

from collections.abc import Callable

from codemode.engine import ToolDefinition

from ._goal import DEFAULT_BLOCK_THRESHOLD, DEFAULT_MAX_GOAL_ROUNDS, build_goal_tools, enable_goals
from ._loop import Agent
from ._schedule import build_schedule_tools, enable_schedules

__all__ = ["agent_tools", "enable_services"]


def agent_tools() -> list[ToolDefinition]:
    """The agent-bound tools, in catalog order."""
    return [*build_goal_tools(), *build_schedule_tools()]


def enable_services(
    agent: Agent,
    *,
    max_goal_rounds: int = DEFAULT_MAX_GOAL_ROUNDS,
    block_threshold: int = DEFAULT_BLOCK_THRESHOLD,
    clock: Callable[[], float] | None = None,
) -> None:
    """Attach the services of ``agent_tools()`` to ``agent`` (after ``agent.resume()``, so
    they replay what the session log holds). ``clock`` is the schedules' wall clock."""
    enable_schedules(agent, clock=clock)
    enable_goals(agent, default_max_goal_rounds=max_goal_rounds, block_threshold=block_threshold)
