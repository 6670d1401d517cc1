"""Child agents: the kernel every delegating tool builds on (subagent, workflow, ralph).

A child is an ``Agent`` of its own — its own conversation, its own session log, its own
scope — parented under the agent that started it: ``runtime.scope(..., parent=parent
scope)``, so every guard and restriction registered on an ancestor scope applies to it too;
it shares the parent's runtime (tools, workspace, code runtime) and model client. Its
``SessionInfo.parent_id`` is the parent's session id, so session queries show the lineage.

``ChildHost`` (one per top-level agent, found from any agent of its tree with
``ChildHost.of(agent)``) makes children: ``await host.run_child(parent, prompt)`` runs one
child to the end of its turn and returns a ``ChildResult``; the signal passed in reaches the
child's model stream and tool calls, so a parent's cancellation reaches every descendant
started through it. Depth (``max_depth``) and the total number of children of a tree
(``max_children``) are bounded, because a model that delegates recursively must not be
able to fork-bomb the host.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from codemode.engine import (
    AbortController,
    AbortSignal,
    HarnessError,
    MemorySessionLog,
    SessionLog,
    SqliteSessionLog,
)

from ._loop import Agent, TurnOutcome
from ._model import ModelClient
from ._session import new_session_info

__all__ = [
    "CHILD_PROMPT",
    "ChildHost",
    "ChildLimitError",
    "ChildResult",
    "ChildStatus",
    "json_candidates",
]

#: How a child's run ended: ``completed`` (its turn ended normally), ``cancelled`` (its
#: signal fired), ``failed`` (the model could not be asked, or the host failed),
#: ``step_limit`` (it used every step of its turn).
ChildStatus = Literal["completed", "cancelled", "failed", "step_limit"]

#: Appended to a child's system prompt: who it works for and what its result is.
CHILD_PROMPT = (
    "\n\nYou are a subagent: another agent started you for one task and sees only what you "
    "hand back, not your steps. Work in the shared workspace; when you are done, answer with "
    "a self-contained final result (what you found or changed, and where)."
)

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n```", re.DOTALL)


def json_candidates(answer: str) -> list[str]:
    """The texts in a child's ``answer`` that may hold its JSON result, the most likely
    first: its ```json fences from the last one back, else the whole answer."""
    fenced = [m.group(1) for m in _FENCE.finditer(answer)]
    return list(reversed(fenced)) if fenced else [answer.strip()]


_HOSTS: weakref.WeakKeyDictionary[Agent, ChildHost] = weakref.WeakKeyDictionary()


class ChildLimitError(HarnessError):
    """A child could not be started: depth or count cap reached (``SUBAGENT_LIMIT``)."""

    code = "SUBAGENT_LIMIT"


class ChildResult(msgspec.Struct, frozen=True):
    """The end of one child run: its ``status``, the final (or partial) assistant
    ``text``, a ``diagnostic`` for the non-completed ends, and the child ``agent`` itself
    (its session id is ``agent.session_id``)."""

    status: ChildStatus
    text: str
    agent: Agent
    diagnostic: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the child completed."""
        return self.status == "completed"


def _status(outcome: TurnOutcome) -> ChildStatus:
    if outcome.ok:
        return "completed"
    return {"interrupted": "cancelled", "max_steps": "step_limit"}.get(outcome.reason, "failed")  # type: ignore[return-value]


class ChildHost:
    """Makes and tracks the child agents of one top-level agent's tree.

    ``session_dir``: where children's session files go (``None``: in memory — nothing
    durable, no lineage on disk). ``max_steps`` is each child turn's step limit.
    ``on_child(child)`` hears every child made (a host attaches services or UI to it).
    """

    def __init__(
        self,
        root: Agent,
        *,
        session_dir: str | os.PathLike[str] | None = None,
        max_depth: int = 3,
        max_children: int = 200,
        max_steps: int | None = None,
        on_child: Callable[[Agent], None] | None = None,
    ) -> None:
        if root.parent is not None:
            raise ValueError("ChildHost belongs to a top-level agent (one without a parent)")
        self._root = weakref.ref(root)
        self.session_dir = None if session_dir is None else Path(session_dir)
        self.max_depth = max_depth
        self.max_children = max_children
        self.max_steps = max_steps if max_steps is not None else root.max_steps
        self.on_child = on_child
        self.started = 0
        self._logs: list[SessionLog] = []
        _HOSTS[root] = self

    @staticmethod
    def of(agent: Agent | None) -> ChildHost | None:
        """The host of ``agent``'s tree (its top-level ancestor's), if it has one."""
        while agent is not None and agent.parent is not None:
            agent = agent.parent
        return None if agent is None else _HOSTS.get(agent)

    @staticmethod
    def depth(agent: Agent) -> int:
        """0 for a top-level agent, 1 for its children, ..."""
        n = 0
        while agent.parent is not None:
            agent, n = agent.parent, n + 1
        return n

    def _log(self, session_id: str) -> SessionLog:
        if self.session_dir is None:
            log: SessionLog = MemorySessionLog()
        else:
            self.session_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            log = SqliteSessionLog(self.session_dir / f"{session_id}.db")
        self._logs.append(log)
        return log

    def make_child(
        self, parent: Agent, *, label: str = "", client: ModelClient | None = None
    ) -> Agent:
        """A new child agent of ``parent`` (not started), within the caps; it talks to
        ``client`` (default: the parent's model client)."""
        from ._words import count_of

        if self.depth(parent) + 1 > self.max_depth:
            raise ChildLimitError(
                f"subagents may nest at most {count_of(self.max_depth, 'level')} deep; this agent is "
                f"already at depth {self.depth(parent)}"
            )
        if self.started >= self.max_children:
            raise ChildLimitError(
                f"this session already started {count_of(self.started, 'subagent')} (the limit); finish "
                "with what the existing ones produced"
            )
        self.started += 1
        info = new_session_info(
            title=label, workspace=parent.info.workspace, parent_id=parent.session_id
        )
        runtime = parent.runtime
        scope = runtime.scope(
            f"{parent.scope.name}/{info.id}", parent=parent.scope, session=self._log(info.id)
        )
        child = Agent(
            runtime,
            scope,
            parent.client if client is None else client,
            system_prompt=parent.system_prompt + CHILD_PROMPT,
            max_steps=self.max_steps,
            max_parallel=parent.max_parallel,
            session=info,
            parent=parent,
            attachments=parent.attachments,
        )
        if self.on_child is not None:
            self.on_child(child)
        return child

    async def run_child(
        self,
        parent: Agent,
        prompt: str,
        *,
        label: str = "",
        signal: AbortSignal | None = None,
        child: Agent | None = None,
    ) -> ChildResult:
        """Run ``prompt`` as one turn of a new child (or of ``child``) and its continuations.

        Never raises for the child's own failures (they are the result's ``status``); a
        cap reached raises ``ChildLimitError``.
        """
        agent = child if child is not None else self.make_child(parent, label=label)
        signal = signal or AbortController().signal
        try:
            outcomes = await agent.run(prompt, signal=signal)
        except Exception as exc:  # a host failure inside the child (its log refused, ...)
            return ChildResult("failed", "", agent, diagnostic=f"{type(exc).__name__}: {exc}")
        last = outcomes[-1]
        status = _status(last)
        diagnostic = None if status == "completed" else last.note
        return ChildResult(status, last.text, agent, diagnostic=diagnostic)

    def close(self) -> None:
        """Close the children's session logs (the host's end)."""
        logs, self._logs = self._logs, []
        for log in logs:
            log.close()
