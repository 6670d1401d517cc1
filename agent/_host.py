"""What a host adds to a runtime and an agent for the agent-bound catalog rows.

``agent_tools()`` is the list of tool definitions to register (goals, schedules, session
queries, subagents, workflow, ralph), ``enable_services(agent, ...)`` gives one ``Agent`` the services those tools act
on, in the order its continuations run after a turn: due schedule reminders first (they are
time-bound), then what its subagents said, then goal rounds. ``codemode agent`` is built this way; an embedder can pick
single pieces instead (``build_goal_tools`` + ``enable_goals``, ...).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from codemode.engine import ToolDefinition
from codemode.tools import JobManager

from ._goal import DEFAULT_BLOCK_THRESHOLD, DEFAULT_MAX_GOAL_ROUNDS, build_goal_tools, enable_goals
from ._loop import Agent
from ._query import build_session_query_tools
from ._ralph import build_ralph_tool
from ._schedule import build_schedule_tools, enable_schedules
from ._store import SessionStore
from ._subagent import SubagentConfig, Subagents, build_subagent_tools, enable_subagents
from ._workflow import build_workflow_tool

__all__ = ["agent_tools", "enable_services"]


def agent_tools(
    store: SessionStore | None = None,
    *,
    subagents: SubagentConfig | None = None,
    workflow_runtime: Any = None,
) -> list[ToolDefinition]:
    """The agent-bound tools: goals, schedules, session queries over ``store`` (left out
    without one), subagents (``subagent``, ``subagent_fork``, ``list_agents``,
    ``send_message``, ``interrupt_agent``, ``report``), ``workflow`` (running its scripts
    in ``workflow_runtime``, a ``TypeScriptRuntime``; left out without one), ``ralph``."""
    queries = build_session_query_tools(store) if store is not None else []
    workflow = [build_workflow_tool(workflow_runtime)] if workflow_runtime is not None else []
    return [
        *build_goal_tools(),
        *build_schedule_tools(),
        *queries,
        *build_subagent_tools(subagents),
        *workflow,
        build_ralph_tool(),
    ]


def enable_services(
    agent: Agent,
    *,
    max_goal_rounds: int = DEFAULT_MAX_GOAL_ROUNDS,
    block_threshold: int = DEFAULT_BLOCK_THRESHOLD,
    clock: Callable[[], float] | None = None,
    session_dir: str | os.PathLike[str] | None = None,
    jobs: JobManager | None = None,
    wait_for_children: bool = True,
    store: SessionStore | None = None,
) -> Subagents:
    """Attach the services of ``agent_tools()`` to ``agent`` (after ``agent.resume()``, so
    they replay what the session log holds); returns the subagent service, which the host
    enters (``async with``) for the lifetime of the session.

    ``clock`` is the schedules' wall clock; ``session_dir`` is where children's session files
    go (``None``: in memory); ``jobs`` runs background subagents; ``wait_for_children``: a
    turn's continuation waits for every running descendant — continuable children and
    background subagent jobs — and hears what they say (one-shot tasks; the run's abort
    signal ends the wait; ``Subagents.on_wait`` hears what it waits for); ``store``
    learns of the session (and, through ``session_dir``, of its children's).
    """
    if store is not None:
        store.attach(agent)
    enable_schedules(agent, clock=clock)
    subagents = enable_subagents(
        agent, session_dir=session_dir, jobs=jobs, wait_for_children=wait_for_children
    )
    enable_goals(agent, default_max_goal_rounds=max_goal_rounds, block_threshold=block_threshold)
    return subagents
