"""Coded errors of the agent-bound tools.

::

    engine.HarnessError
    ├── GoalError          GOAL_TOOL_* codes (create_goal, get_goal, update_goal)
    ├── SessionQueryError  SESSION_QUERY_* codes (session_search, session_event_*, session_trace)
    ├── SubagentError      SUBAGENT_* codes (subagent, list_agents, send_message,
    │                      interrupt_agent, report)
    ├── RalphError         RALPH_* codes (ralph)
    └── WorkflowError      WORKFLOW_* codes (workflow)

Schedule tools report their failures as values (``{code, message}``, §11 of the tool
outputs), so they have no error class; a schedule tool called outside an agent session
still returns such a value.
"""

from __future__ import annotations

from codemode.engine import HarnessError

__all__ = ["GoalError", "RalphError", "SessionQueryError", "SubagentError", "WorkflowError"]


class GoalError(HarnessError):
    """A goal tool failure; ``code`` is one of the ``GOAL_TOOL_*`` codes."""

    family = "GOAL_TOOL_"
    code = "GOAL_TOOL_ERROR"


class SessionQueryError(HarnessError):
    """A session-query failure; ``code`` is one of the ``SESSION_QUERY_*`` codes:
    ``NO_AGENT``, ``INVALID_QUERY``, ``INVALID_TIME``, ``INVALID_ARGUMENT``,
    ``SESSION_NOT_FOUND``, ``EVENT_NOT_FOUND``, ``UNAVAILABLE``, ``INDEX_ERROR`` (each
    prefixed ``SESSION_QUERY_``; what each means is in ``agent/_query.py``)."""

    family = "SESSION_QUERY_"
    code = "SESSION_QUERY_ERROR"


class SubagentError(HarnessError):
    """A subagent tool failure; ``code`` is one of the ``SUBAGENT_*`` codes."""

    family = "SUBAGENT_"
    code = "SUBAGENT_ERROR"


class RalphError(HarnessError):
    """A ``ralph`` failure; ``code`` is one of the ``RALPH_*`` codes."""

    family = "RALPH_"
    code = "RALPH_ERROR"


class WorkflowError(HarnessError):
    """A ``workflow`` failure; ``code`` is one of ``WORKFLOW_META`` (the ``meta`` block),
    ``WORKFLOW_SCRIPT`` (the script, before it runs), ``WORKFLOW_NO_AGENT``,
    ``WORKFLOW_CANCELLED`` (the caller's signal fired) or ``WORKFLOW_FAILED`` (the run:
    the script threw, a hook was misused, a limit was hit)."""

    family = "WORKFLOW_"
    code = "WORKFLOW_ERROR"
