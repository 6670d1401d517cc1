"""``codemode.agent``: a reference host — a model client, an agent loop and sessions.

Built only on the public API of ``codemode.engine``, ``codemode.sandbox`` and
``codemode.tools``, the way any embedder would use them.

Layout: ``_model`` (``ModelClient``: streamed OpenAI-compatible Chat Completions, our own
client on ``httpx`` with its own Server-Sent Events parsing, tool-call deltas assembled by
index, usage, a retry policy, cancellation), ``_loop`` (``Agent``: the turn loop over a ``ToolRuntime`` in
native, code or both mode, with deferred contexts, ``concludeTurn``, a step limit and an
abort signal; continuation sources that start turns on their own; ``agent_for(scope)``),
``_session`` (the ``agent/*`` events in the ``SessionLog``, ``SessionInfo``, rebuilding a
conversation from them for ``--resume``), ``_errors`` (the agent-bound tools' coded
errors), ``_goal`` (goals and goal rounds), ``_schedule``/``_schedule_time`` (reminders, their
selectors and delivery), ``_host`` (``agent_tools`` and
``enable_services``: what ``codemode agent`` composes), ``_store`` (``SessionStore``: session files
and their FTS5 index), ``_query`` (the session-query tools), ``_children`` (``ChildHost``: the
child-agent kernel), ``_subagent`` (subagent tools and the tree's registry), ``_ralph`` (fresh-child rounds), ``_workflow``
(scripts in the QuickJS guest that orchestrate children).

Embedding::

    async with ModelClient(ModelConfig(base_url, model), api_key=key) as client:
        agent = Agent(runtime, runtime.scope("agent", session=SqliteSessionLog(path)), client)
        agent.resume()                      # continue what the file holds (optional)
        outcome = await agent.run_turn("fix the failing test", signal=controller.signal)

No model SDK is needed: the client speaks the wire protocol over ``httpx`` (a core
dependency). The ``agent`` extra (``pip install 'codemode[agent]'``) now only adds
``tzdata`` (IANA time zones for schedules where the system has no zoneinfo database).

Running ``codemode agent`` against a real endpoint (the key is read from the environment
variable ``--api-key-env`` names, ``OPENAI_API_KEY`` by default, and never printed; with the
default unset no ``Authorization`` header is sent, as keyless local servers expect)::

    # OpenAI
    codemode agent "summarise README.md" -w . --model gpt-4.1-mini
    # DeepSeek
    DEEPSEEK_API_KEY=... codemode agent -w . --base-url https://api.deepseek.com/v1 \\
        --model deepseek-chat --api-key-env DEEPSEEK_API_KEY
    # vLLM (vllm serve MODEL --enable-auto-tool-choice --tool-call-parser hermes)
    codemode agent -w . --base-url http://localhost:8000/v1 \\
        --model Qwen/Qwen2.5-7B-Instruct
    # Ollama
    codemode agent -w . --base-url http://localhost:11434/v1 \\
        --model qwen2.5-coder:7b
    # LM Studio
    codemode agent -w . --base-url http://localhost:1234/v1 \\
        --model qwen2.5-7b-instruct

``CODEMODE_BASE_URL`` and ``CODEMODE_MODEL`` are the environment fallbacks of
``--base-url`` and ``--model``; ``--mode code`` gives the model only ``run_code`` and the
SDK in its system prompt.
"""

from __future__ import annotations

from ._children import CHILD_PROMPT as CHILD_PROMPT
from ._children import ChildHost as ChildHost
from ._children import ChildResult as ChildResult
from ._errors import GoalError as GoalError
from ._errors import RalphError as RalphError
from ._errors import SessionQueryError as SessionQueryError
from ._errors import SubagentError as SubagentError
from ._errors import WorkflowError as WorkflowError
from ._goal import Goal as Goal
from ._goal import GoalService as GoalService
from ._goal import build_goal_tools as build_goal_tools
from ._goal import enable_goals as enable_goals
from ._host import agent_tools as agent_tools
from ._host import enable_services as enable_services
from ._loop import BASE_PROMPT as BASE_PROMPT
from ._loop import Agent as Agent
from ._loop import AgentEvent as AgentEvent
from ._loop import Continuation as Continuation
from ._loop import ContinuationSource as ContinuationSource
from ._loop import TurnHook as TurnHook
from ._loop import TurnOrigin as TurnOrigin
from ._loop import TurnOutcome as TurnOutcome
from ._loop import agent_for as agent_for
from ._loop import chat_tool as chat_tool
from ._loop import content_text as content_text
from ._model import INSTALL_HINT as INSTALL_HINT
from ._model import ChatMessage as ChatMessage
from ._model import ModelClient as ModelClient
from ._model import ModelConfig as ModelConfig
from ._model import ModelError as ModelError
from ._model import ModelReply as ModelReply
from ._model import ModelToolCallRequest as ModelToolCallRequest
from ._model import RetryPolicy as RetryPolicy
from ._model import Usage as Usage
from ._query import build_session_query_tools as build_session_query_tools
from ._ralph import build_ralph_tool as build_ralph_tool
from ._ralph import parse_report as parse_report
from ._schedule import ScheduleService as ScheduleService
from ._schedule import build_schedule_tools as build_schedule_tools
from ._schedule import enable_schedules as enable_schedules
from ._session import INTERRUPTED_TOOL_TEXT as INTERRUPTED_TOOL_TEXT
from ._session import SessionInfo as SessionInfo
from ._session import load_conversation as load_conversation
from ._session import new_session_info as new_session_info
from ._store import SessionRecord as SessionRecord
from ._store import SessionStore as SessionStore
from ._subagent import SubagentConfig as SubagentConfig
from ._subagent import Subagents as Subagents
from ._subagent import build_subagent_tools as build_subagent_tools
from ._subagent import enable_subagents as enable_subagents
from ._workflow import WORKFLOW_LIMITS as WORKFLOW_LIMITS
from ._workflow import WorkflowRuntime as WorkflowRuntime
from ._workflow import build_workflow_tool as build_workflow_tool
from ._workflow import render_workflow_value as render_workflow_value

__all__ = [
    "Agent",
    "AgentEvent",
    "BASE_PROMPT",
    "CHILD_PROMPT",
    "ChatMessage",
    "ChildHost",
    "ChildResult",
    "Continuation",
    "ContinuationSource",
    "Goal",
    "GoalError",
    "GoalService",
    "INSTALL_HINT",
    "INTERRUPTED_TOOL_TEXT",
    "ModelClient",
    "ModelConfig",
    "ModelError",
    "ModelReply",
    "ModelToolCallRequest",
    "RalphError",
    "RetryPolicy",
    "ScheduleService",
    "SessionInfo",
    "SessionQueryError",
    "SessionRecord",
    "SessionStore",
    "SubagentConfig",
    "SubagentError",
    "Subagents",
    "TurnHook",
    "TurnOrigin",
    "TurnOutcome",
    "Usage",
    "WORKFLOW_LIMITS",
    "WorkflowError",
    "WorkflowRuntime",
    "agent_for",
    "agent_tools",
    "build_goal_tools",
    "build_ralph_tool",
    "build_schedule_tools",
    "build_session_query_tools",
    "build_subagent_tools",
    "build_workflow_tool",
    "chat_tool",
    "content_text",
    "enable_goals",
    "enable_schedules",
    "enable_services",
    "enable_subagents",
    "load_conversation",
    "new_session_info",
    "parse_report",
    "render_workflow_value",
]
