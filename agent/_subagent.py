"""Subagents: ``subagent`` (and its forking variant), ``list_agents``, ``send_message``,
``interrupt_agent`` and ``report``.

A subagent is a child ``Agent`` made by the tree's ``ChildHost`` (``_children``): its own
conversation and session (``parentId`` = the caller's session id), the caller's runtime,
workspace and model client, and a scope parented under the caller's, so every guard and
restriction on an ancestor applies to it. Its id is its session id (``ses-…``), durable
across processes.

``subagent`` runs in one of three ways:

* **foreground** (the default of ``background_mode="one-shot"``): the call waits for the
  child's turn and returns ``{kind: 'foreground', runId, output: [text blocks]}`` (render:
  the text). A child that did not complete raises ``subagent run was cancelled`` /
  ``subagent run failed`` / ``subagent run ended abnormally (max_steps)``, plus
  ``\\nDiagnostic: {d}`` and ``\\nPartial output before the run ended:\\n{text}`` when
  present (``SubagentError``). The call's abort signal reaches the child's model stream and
  tool calls: interrupting the parent stops it.
* **background one-shot** (``run_in_background: true``): a final-output job of kind
  ``subagent`` in the host's ``JobManager`` (``{kind: 'background', jobId}``, render
  ``started background subagent job {id}``); ``job_output`` returns the child's final text
  once it completed (a failure settles the job ``failed`` with the reason), ``job_kill``
  stops it.
* **continuable** (the default of ``background_mode="continuable"``): the child starts its
  first turn in the background and stays available: ``{kind: 'continuable', subagentId}``
  (render ``started subagent {id}``). When a turn of it ends, its parent is told (a context
  message with the child's final text, delivered into the parent's running turn, or as a
  turn of its own when the parent is idle); ``send_message`` queues its next turn,
  ``interrupt_agent`` stops its current turn only, ``list_agents`` lists it, and ``report``
  (inside it) sends content to its parent the same way.

``list_agents`` value ``({kind: 'child', id, label, status, parent?, depth?} | {kind:
'diagnostic', id, reason, parent?, depth?})[]``; status ``running`` (a turn is running),
``idle`` (loaded, between turns) or ``ready`` (only in storage: a child of an earlier
process of this session, resumable with ``send_message``). Render ``(no subagents)`` or
``{id} [{status}]{ parent=… depth=…} — {label}`` lines (position only for scope
``descendants``, which walks the tree in stable pre-order). ``send_message`` → ``{messageId}``
(``message queued as the next turn for subagent {id}``; only direct children);
``interrupt_agent`` → ``{accepted: true}`` (``interrupt requested for agent {id}``; any
descendant; a finished one is an accepted no-op); ``report`` → ``{messageId}`` (``report
accepted by the agent that started you as message {id}``). Without an agent every tool
raises ``{tool} requires a calling agent (exec.agent was undefined)``.

Codes (``SubagentError``): ``SUBAGENT_NO_AGENT``, ``SUBAGENT_INVALID_ARGS``,
``SUBAGENT_CANCELLED``, ``SUBAGENT_FAILED``, ``SUBAGENT_ABNORMAL``, ``SUBAGENT_LIMIT``,
``SUBAGENT_NOT_FOUND``, ``SUBAGENT_NOT_DIRECT_CHILD``, ``SUBAGENT_NOT_CONTINUABLE``,
``SUBAGENT_UNAVAILABLE`` (no job manager / service).
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from codemode.engine import (
    AbortController,
    AbortSignal,
    SqliteSessionLog,
    ToolDefinition,
    ToolOutput,
    text,
)
from codemode.tools import Job, JobManager, catalog_entry, define_catalog_tool, parameter_spec

from ._children import CHILD_PROMPT, ChildHost, ChildLimitError, ChildResult
from ._errors import SubagentError
from ._loop import Agent, Continuation, TurnOutcome, agent_for
from ._session import SessionInfo, session_info

__all__ = ["SubagentConfig", "Subagents", "build_subagent_tools", "enable_subagents"]

BackgroundMode = Literal["one-shot", "continuable"]
Status = Literal["running", "idle", "ready"]

_FORK_DESCRIPTION = (
    "Fork this conversation into a subagent: a separate agent that starts with a copy of "
    "everything said so far, then works on the prompt in its own context, so focused work "
    "(an experiment, a scoped change, a deep dive) does not consume this conversation's "
    "context. It returns its result, not its intermediate steps. Because it already knows "
    "this conversation, the prompt only needs to say what to do next."
)
_BACKGROUND_SENTENCE = (
    " This call waits for the result by default. Set `run_in_background: true` to return a "
    "job id; collect with `job_output` and stop with `job_kill`."
)
_CONTINUABLE_SENTENCE = (
    " By default it runs in the background and this call returns its subagent id at once: "
    "you are told when its turn ends, `send_message` gives it its next turn, "
    "`interrupt_agent` stops its current turn and `list_agents` lists it. Set "
    "`run_in_background: false` to wait for its result instead."
)


class SubagentConfig(msgspec.Struct, frozen=True):
    """How a ``subagent`` tool looks and runs.

    ``tool_name`` (``subagent``; ``subagent_fork`` forks by default), ``fork`` (the child
    starts with a copy of the caller's conversation), ``background_mode`` (``one-shot``:
    foreground unless ``run_in_background``, which makes a job; ``continuable``: background
    by default, the child stays available), ``enable_run_in_background`` (``False`` drops the
    parameter and its sentence: always the mode's default).
    """

    tool_name: str = "subagent"
    fork: bool | None = None
    background_mode: BackgroundMode = "one-shot"
    enable_run_in_background: bool = True

    @property
    def forks(self) -> bool:
        """Whether children start from the caller's conversation."""
        return self.fork if self.fork is not None else self.tool_name == "subagent_fork"


class _Entry:
    """One subagent the service knows: loaded (``agent``) or only stored (``path``)."""

    def __init__(self, child_id: str, parent_id: str, label: str) -> None:
        self.id = child_id
        self.parent_id = parent_id
        self.label = label
        self.agent: Agent | None = None
        self.path: Path | None = None
        self.continuable = False
        self.diagnostic: str | None = None
        self.queue: list[str] = []
        self.turn: AbortController | None = None
        self.wake = anyio.Event()
        self.driving = False

    @property
    def status(self) -> Status:
        if self.turn is not None:
            return "running"
        return "idle" if self.agent is not None else "ready"


_SERVICES: weakref.WeakKeyDictionary[Agent, Subagents] = weakref.WeakKeyDictionary()


class Subagents:
    """The subagents of one top-level agent's tree (``async with``: the background turns
    run in its task group and stop when it closes).

    ``wait_for_children``: after a turn of the root agent ends, its continuation waits for
    every running descendant — continuable children (and theirs, through them) and
    background subagent jobs (``run_in_background`` in one-shot mode) started anywhere in
    the tree — and delivers what they say (a one-shot task should not exit while the
    children it started still work); the run's abort signal ends the wait. ``False``
    (interactive) delivers only what arrived, and ``due_in`` wakes the idle host for the
    rest. ``on_wait(waiting)`` (optional) hears, each time the root starts waiting for a
    different set, what it waits for (``["background subagent job subagent-1 (look)",
    ...]``), so a host can say why it has not exited yet.

    A background subagent job that settles (completed or failed) unread by ``job_output``
    is announced to the agent that started it with the catalog's completion notice
    (``background job {id} ({kind}: {label}) finished [status: …]. Read its output with
    job_output.``): into its running turn, else as the root's next continuation.
    """

    def __init__(
        self,
        root: Agent,
        children: ChildHost,
        *,
        jobs: JobManager | None = None,
        wait_for_children: bool = True,
    ) -> None:
        self.root = root
        self.children = children
        self.jobs = jobs
        self.wait_for_children = wait_for_children
        self.on_wait: Callable[[list[str]], None] | None = None
        # Background subagent jobs not yet settled and announced: (job, owner, label).
        self._jobs: list[tuple[Job, Agent, str]] = []
        self._entries: dict[str, _Entry] = {}
        self._pending: dict[str, list[str]] = {}
        self._arrived = anyio.Event()
        self._messages = itertools.count(1)
        self._group: anyio.abc.TaskGroup | None = None
        _SERVICES[root] = self
        self._sources: weakref.WeakSet[Agent] = weakref.WeakSet()
        self.attach(root)
        self._discover()

    @staticmethod
    def of(agent: Agent | None) -> Subagents | None:
        """The service of ``agent``'s tree."""
        while agent is not None and agent.parent is not None:
            agent = agent.parent
        return None if agent is None else _SERVICES.get(agent)

    def attach(self, agent: Agent) -> None:
        """Make ``agent`` (the root or a child) receive its children's messages."""
        if agent not in self._sources:
            self._sources.add(agent)
            agent.sources.append(_Inbox(self, agent))

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        if group is None:
            return None
        group.cancel_scope.cancel()
        try:
            return await group.__aexit__(exc_type, exc, tb)
        finally:
            self.children.close()

    # ---------------------------------------------------------------- registry

    def _discover(self) -> None:
        """Children of earlier processes of this session (their files in the session
        folder): ``ready`` entries, or diagnostics for files that cannot be read."""
        folder = self.children.session_dir
        if folder is None or not folder.is_dir():
            return
        known = {self.root.session_id}
        found: list[tuple[SessionInfo, Path]] = []
        for path in sorted(folder.glob("ses-*.db")):
            try:
                info = session_info(SqliteSessionLog.read(path))
            except (OSError, ValueError) as exc:
                entry = _Entry(path.stem, self.root.session_id, "")
                entry.diagnostic = "corrupt" if isinstance(exc, ValueError) else "unavailable"
                entry.path = path
                self._entries.setdefault(path.stem, entry)
                continue
            if info is not None and info.parent_id is not None:
                found.append((info, path))
        # Parents before children: keep those whose chain reaches the root.
        progress = True
        while progress:
            progress = False
            for info, path in found:
                if info.id not in known and info.parent_id in known:
                    entry = _Entry(info.id, str(info.parent_id), info.title)
                    entry.path = path
                    entry.continuable = True
                    self._entries[info.id] = entry
                    known.add(info.id)
                    progress = True
        # A diagnostic entry is only ours when nothing else claims it; keep it under root.

    def _children_of(self, parent_id: str) -> list[_Entry]:
        return [e for e in self._entries.values() if e.parent_id == parent_id]

    def listing(self, caller: Agent, scope: str) -> list[dict[str, Any]]:
        """``list_agents``'s value for ``caller``."""
        out: list[dict[str, Any]] = []

        def walk(parent_id: str, depth: int) -> None:
            for entry in self._children_of(parent_id):
                item: dict[str, Any]
                if entry.diagnostic is not None:
                    item = {"kind": "diagnostic", "id": entry.id, "reason": entry.diagnostic}
                else:
                    item = {
                        "kind": "child",
                        "id": entry.id,
                        "label": entry.label,
                        "status": entry.status,
                    }
                if scope == "descendants":
                    item["parent"] = entry.parent_id
                    item["depth"] = depth
                out.append(item)
                if scope == "descendants":
                    walk(entry.id, depth + 1)

        walk(caller.session_id, 1)
        return out

    def _descendant(self, caller: Agent, agent_id: str) -> _Entry | None:
        entry = self._entries.get(agent_id)
        node = entry
        while node is not None:
            if node.parent_id == caller.session_id:
                return entry
            node = self._entries.get(node.parent_id)
        return None

    # ------------------------------------------------------------- delivery

    def deliver(self, parent_id: str, message: str) -> None:
        """Give ``message`` to agent ``parent_id``: into its running turn, else as the next
        turn (a continuable child's queue) or continuation (the root)."""
        target = self._agent(parent_id)
        if target is not None and target.live:
            target.inject(message)
            return
        entry = self._entries.get(parent_id)
        if entry is not None and entry.agent is not None:
            self._queue_turn(entry, message)
            return
        self._pending.setdefault(parent_id, []).append(message)
        self._arrived.set()

    def _agent(self, agent_id: str) -> Agent | None:
        if agent_id == self.root.session_id:
            return self.root
        entry = self._entries.get(agent_id)
        return None if entry is None else entry.agent

    def take_pending(self, agent: Agent) -> str | None:
        """The messages waiting for ``agent`` (joined), removing them."""
        waiting = self._pending.pop(agent.session_id, [])
        return "\n\n".join(waiting) if waiting else None

    def has_pending(self, agent: Agent) -> bool:
        """Whether messages wait for ``agent``."""
        return bool(self._pending.get(agent.session_id))

    def running_children(self, agent: Agent) -> bool:
        """Whether a continuable descendant of ``agent`` is running or has a turn queued
        (a grandchild's end becomes its parent's turn, whose end reaches ``agent``), or,
        for the root, whether a background subagent job of the tree is still running."""
        return bool(self.waiting_for(agent))

    def waiting_for(self, agent: Agent) -> list[str]:
        """What ``running_children`` sees, one phrase each: ``subagent ses-… (label)`` for
        a running continuable descendant, ``background subagent job subagent-1 (label)``
        for a job (only for the root: a job's notice may reach it)."""
        found: list[str] = []
        todo, seen = [agent.session_id], set()
        while todo:
            parent_id = todo.pop()
            for entry in self._children_of(parent_id):
                if entry.status == "running" or (entry.queue and entry.agent is not None):
                    found.append(f"subagent {entry.id}{_label(entry.label)}")
                if entry.id not in seen:
                    seen.add(entry.id)
                    todo.append(entry.id)
        if agent is self.root:
            found.extend(
                f"background subagent job {job.id}{_label(label)}" for job, _, label in self._jobs
            )
        return found

    async def wait_arrival(self, signal: AbortSignal | None = None) -> None:
        """Until a message arrives for any agent (or a child or job settles), or until
        ``signal`` fires."""
        if signal is not None and signal.aborted:
            return
        arrived = self._arrived
        dispose = signal.add_listener(lambda _s: arrived.set()) if signal is not None else None
        try:
            await arrived.wait()
        finally:
            if dispose is not None:
                dispose()
        if self._arrived is arrived:
            self._arrived = anyio.Event()

    def track_job(self, job: Job, owner: Agent, label: str) -> None:
        """Wait for background subagent job ``job`` (started by ``owner``) like for a
        running child, and announce its settlement to ``owner`` unless it was read."""
        self._jobs.append((job, owner, label))
        self._spawn(self._watch_job, job, owner)

    async def _watch_job(self, job: Job, owner: Agent) -> None:
        try:
            await job.settled.wait()
            # A ``job_output(wait=true)`` woken by the same settlement reads it (and marks
            # it reported) within a few scheduling rounds: no notice is needed then.
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            if job.reported or job.status == "killed":
                return
            notice = (
                f"background job {job.id} ({job.kind}: {job.label}) finished "
                f"{_status_line(job)}. Read its output with job_output."
            )
            entry = self._entries.get(owner.session_id)
            # A one-shot child whose turn is over has no one to tell (its result went back
            # already); the root and continuable children hear of it.
            if owner is self.root or owner.live or (entry is not None and entry.continuable):
                self.deliver(owner.session_id, notice)
        finally:
            self._jobs = [t for t in self._jobs if t[0] is not job]
            self._arrived.set()

    # ---------------------------------------------------------- child turns

    def _spawn(self, fn: Any, *args: Any) -> None:
        if self._group is None:
            raise SubagentError(
                "background subagents are unavailable: the subagent service is not running "
                "(enter it with `async with`)",
                "SUBAGENT_UNAVAILABLE",
            )
        self._group.start_soon(fn, *args)

    def register(self, child: Agent, label: str, *, continuable: bool) -> _Entry:
        """Track ``child`` (made by the ``ChildHost``) under its parent."""
        assert child.parent is not None
        entry = _Entry(child.session_id, child.parent.session_id, label)
        entry.agent = child
        entry.continuable = continuable
        self._entries[child.session_id] = entry
        self.attach(child)
        return entry

    def _queue_turn(self, entry: _Entry, message: str) -> None:
        entry.queue.append(message)
        if not entry.driving:
            entry.driving = True
            self._spawn(self._drive, entry)

    async def _drive(self, entry: _Entry) -> None:
        """Run ``entry``'s queued turns one after another, telling its parent after each."""
        try:
            while entry.queue and entry.agent is not None:
                message = entry.queue.pop(0)
                controller = AbortController()
                entry.turn = controller
                try:
                    result = await self.children.run_child(
                        entry.agent, message, child=entry.agent, signal=controller.signal
                    )
                finally:
                    entry.turn = None
                self.deliver(entry.parent_id, _finished_text(entry, result))
        finally:
            entry.driving = False
            self._arrived.set()

    def load(self, entry: _Entry) -> Agent:
        """A ``ready`` entry's agent, loaded from its session file."""
        if entry.agent is not None:
            return entry.agent
        parent = self._agent(entry.parent_id)
        if parent is None or entry.path is None:
            raise SubagentError(
                f"subagent {entry.id} cannot be loaded: its parent is not loaded",
                "SUBAGENT_UNAVAILABLE",
            )
        log = SqliteSessionLog(entry.path)
        self.children._logs.append(log)
        runtime = parent.runtime
        scope = runtime.scope(f"{parent.scope.name}/{entry.id}", parent=parent.scope, session=log)
        child = Agent(
            runtime,
            scope,
            parent.client,
            system_prompt=parent.system_prompt + CHILD_PROMPT,
            max_steps=self.children.max_steps,
            max_parallel=parent.max_parallel,
            parent=parent,
            attachments=parent.attachments,
        )
        child.resume()
        entry.agent = child
        self.attach(child)
        if self.children.on_child is not None:
            self.children.on_child(child)
        return child

    def send(self, caller: Agent, child_id: str, message: str) -> str:
        """``send_message``: queue ``message`` as ``child_id``'s next turn."""
        entry = self._entries.get(child_id)
        if entry is None or self._descendant(caller, child_id) is None:
            raise SubagentError(f"unknown subagent {child_id}", "SUBAGENT_NOT_FOUND")
        if entry.parent_id != caller.session_id:
            raise SubagentError(
                f"subagent {child_id} was started by {entry.parent_id}, not by you: "
                "send_message reaches only your direct subagents (interrupt_agent reaches "
                "deeper ones)",
                "SUBAGENT_NOT_DIRECT_CHILD",
            )
        if entry.diagnostic is not None:
            raise SubagentError(
                f"subagent {child_id} is {entry.diagnostic} and cannot take messages",
                "SUBAGENT_UNAVAILABLE",
            )
        if not entry.continuable:
            raise SubagentError(
                f"subagent {child_id} is not continuable (it ran once in the foreground or "
                "as a job)",
                "SUBAGENT_NOT_CONTINUABLE",
            )
        self.load(entry)
        self._queue_turn(entry, message)
        return f"msg-{next(self._messages)}"

    def interrupt(self, caller: Agent, agent_id: str) -> None:
        """``interrupt_agent``: stop ``agent_id``'s current turn (a no-op when idle)."""
        entry = self._descendant(caller, agent_id)
        if entry is None:
            raise SubagentError(f"unknown agent {agent_id}", "SUBAGENT_NOT_FOUND")
        if entry.turn is not None:
            entry.turn.abort("interrupted by interrupt_agent")

    def report(self, child: Agent, output: str) -> str:
        """``report``: deliver ``output`` to ``child``'s direct parent."""
        entry = self._entries.get(child.session_id)
        if entry is None or not entry.continuable or child.parent is None:
            raise SubagentError(
                "report is only available inside a continuable subagent",
                "SUBAGENT_NOT_CONTINUABLE",
            )
        message_id = f"msg-{next(self._messages)}"
        label = f" ({entry.label})" if entry.label else ""
        self.deliver(
            entry.parent_id,
            f"[report from subagent {entry.id}{label}, message {message_id}]\n{output}",
        )
        return message_id


class _Inbox:
    """The continuation source that hands an agent what its children said."""

    def __init__(self, service: Subagents, agent: Agent) -> None:
        self._service = weakref.ref(service)
        self._agent = weakref.ref(agent)

    def next_due_in(self) -> float | None:
        service, agent = self._service(), self._agent()
        if service is None or agent is None:
            return None
        return 0.0 if service.has_pending(agent) else None

    async def next_continuation(self, agent: Agent, last: TurnOutcome) -> Continuation | None:
        service = self._service()
        if service is None:
            return None
        shown: list[str] = []
        while True:
            pending = service.take_pending(agent)
            if pending is not None:
                return Continuation("host", pending)
            # Only the root waits (a one-shot task must not exit under working children).
            # A child's turn ends when its own work does: its parent hears of it now, and
            # what its children say later is queued as the child's next turn.
            if not (service.wait_for_children and agent.parent is None):
                return None
            signal = agent.run_signal
            waiting = service.waiting_for(agent)
            if not waiting or (signal is not None and signal.aborted):
                return None
            if service.on_wait is not None and waiting != shown:
                service.on_wait(waiting)
            shown = waiting
            await service.wait_arrival(signal)


def _status_line(job: Job) -> str:
    """The catalog's ``[status: s]`` / ``[status: s, detail]``."""
    return f"[status: {job.status}, {job.detail}]" if job.detail else f"[status: {job.status}]"


def _label(label: str) -> str:
    return f" ({label})" if label else ""


def _finished_text(entry: _Entry, result: ChildResult) -> str:
    label = f" ({entry.label})" if entry.label else ""
    head = f"[subagent {entry.id}{label} finished its turn: {result.status}]"
    body = result.text or "(no final text)"
    if result.diagnostic:
        body += f"\nDiagnostic: {result.diagnostic}"
    return f"{head}\n{body}\n(continue it with send_message, or leave it: it stays available)"


def _failure(result: ChildResult) -> SubagentError:
    if result.status == "cancelled":
        message, code = "subagent run was cancelled", "SUBAGENT_CANCELLED"
    elif result.status == "failed":
        message, code = "subagent run failed", "SUBAGENT_FAILED"
    else:
        message, code = "subagent run ended abnormally (max_steps)", "SUBAGENT_ABNORMAL"
    if result.diagnostic:
        message += f"\nDiagnostic: {result.diagnostic}"
    if result.text:
        message += f"\nPartial output before the run ended:\n{result.text}"
    return SubagentError(message, code)


def _fork_messages(parent: Agent) -> list[Any]:
    """The parent's conversation without the step that is calling the fork tool."""
    messages = list(parent.messages)
    while messages and messages[-1].role == "tool":
        messages.pop()
    if messages and messages[-1].role == "assistant" and messages[-1].tool_calls:
        messages.pop()
    return messages


def _caller(ctx: Any, tool: str) -> tuple[Agent, Subagents]:
    agent = agent_for(ctx.agent)
    if agent is None:
        raise SubagentError(
            f"{tool} requires a calling agent (exec.agent was undefined)", "SUBAGENT_NO_AGENT"
        )
    service = Subagents.of(agent)
    if service is None:
        raise SubagentError(
            f"{tool} is unavailable: this agent session has no subagent service",
            "SUBAGENT_UNAVAILABLE",
        )
    return agent, service


def _nonempty(args: Any, key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SubagentError(f"{key} must be a non-empty string", "SUBAGENT_INVALID_ARGS")
    return value


def _render_text(args: Any, value: Any) -> list[dict[str, Any]]:
    return [text(value)]


def build_subagent_tool(config: SubagentConfig | None = None) -> ToolDefinition:
    """The ``subagent`` tool (or the variant ``config`` describes)."""
    cfg = config or SubagentConfig()
    catalog_description = str(catalog_entry("subagent")["description"])
    base = catalog_description.replace(_BACKGROUND_SENTENCE, "")
    if cfg.forks:
        base = _FORK_DESCRIPTION
    description = base
    if cfg.enable_run_in_background:
        description += (
            _CONTINUABLE_SENTENCE if cfg.background_mode == "continuable" else _BACKGROUND_SENTENCE
        )
    spec = parameter_spec("subagent")
    if not cfg.enable_run_in_background:
        spec.pop("run_in_background", None)
    if cfg.forks:
        spec["prompt"] = {
            "type": "string",
            "description": "What the forked subagent should do next; it already knows this "
            "conversation.",
            "required": True,
        }

    async def execute(args: Any, ctx: Any) -> Any:
        parent, service = _caller(ctx, cfg.tool_name)
        description_text = _nonempty(args, "description").strip()
        prompt = _nonempty(args, "prompt")
        background = args.get("run_in_background")
        if not cfg.enable_run_in_background or background is None:
            background = cfg.background_mode == "continuable"
        try:
            child = service.children.make_child(parent, label=description_text)
        except ChildLimitError as exc:
            raise SubagentError(exc.message, "SUBAGENT_LIMIT") from None
        if cfg.forks:
            child.messages = _fork_messages(parent)
        continuable = bool(background) and cfg.background_mode == "continuable"
        record = service.register(child, description_text, continuable=continuable)
        if continuable:
            service._queue_turn(record, prompt)
            return {"kind": "continuable", "subagentId": child.session_id}
        if background:
            return _start_job(service, ctx, child, description_text, prompt)
        result = await service.children.run_child(parent, prompt, child=child, signal=ctx.signal)
        if not result.ok:
            raise _failure(result)
        return {
            "kind": "foreground",
            "runId": child.session_id,
            "output": [text(result.text)] if result.text else [],
        }

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        kind = value.get("kind")
        if kind == "background":
            return [text(f"started background subagent job {value['jobId']}")]
        if kind == "continuable":
            return [text(f"started subagent {value['subagentId']}")]
        parts = [b.get("text", "") for b in value.get("output", []) if b.get("type") == "text"]
        return [text("".join(parts))]

    return _define(
        cfg.tool_name,
        description,
        spec,
        ToolOutput(schema=_SUBAGENT_VALUE, render=render),
        execute,
        safe=True,
        card=lambda args: {
            "card": "generic",
            "title": f"Subagent: {args.get('description', '')}",
        },
    )


def _start_job(service: Subagents, ctx: Any, child: Agent, label: str, prompt: str) -> Any:
    jobs = service.jobs
    if jobs is None:
        raise SubagentError(
            "background subagents need a job manager; run it in the foreground",
            "SUBAGENT_UNAVAILABLE",
        )

    async def produce(job: Any) -> None:
        assert child.parent is not None
        result = await service.children.run_child(child.parent, prompt, child=child)
        if result.ok:
            job.stdout.feed(result.text.encode("utf-8"))
            job.settle("completed", None)
        else:
            detail = _failure(result).message
            job.stderr.feed(detail.encode("utf-8"))
            job.settle("failed", detail.splitlines()[0])

    job = jobs.start(kind="subagent", label=label, agent=ctx.agent, run=produce)
    assert child.parent is not None
    service.track_job(job, child.parent, label)
    return {"kind": "background", "jobId": job.id}


_SUBAGENT_VALUE: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "enum": ["background"], "required": True},
                "jobId": {"type": "string", "required": True},
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "enum": ["continuable"], "required": True},
                "subagentId": {"type": "string", "required": True},
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "enum": ["foreground"], "required": True},
                "runId": {"type": "string", "required": True},
                "output": {
                    "type": "array",
                    "required": True,
                    "items": {"type": "object", "additionalProperties": True, "properties": {}},
                },
            },
        },
    ]
}


def _define(
    name: str,
    description: str,
    spec: dict[str, Any],
    output: ToolOutput,
    execute: Any,
    *,
    safe: bool,
    card: Any,
) -> ToolDefinition:
    from codemode.engine import define_tool

    return define_tool(
        name=name,
        description=description,
        parameters=spec,
        output=output,
        execute=execute,
        is_concurrency_safe=(lambda args: True) if safe else None,
        present_call=card,
    )


def build_control_tools() -> list[ToolDefinition]:
    """``list_agents``, ``send_message``, ``interrupt_agent`` and ``report``."""

    async def list_agents(args: Any, ctx: Any) -> Any:
        agent, service = _caller(ctx, "list_agents")
        return service.listing(agent, str(args.get("scope") or "children"))

    def render_list(args: Any, value: Any) -> list[dict[str, Any]]:
        if not value:
            return [text("(no subagents)")]
        lines = []
        for item in value:
            where = ""
            if "depth" in item:
                where = f" parent={item['parent']} depth={item['depth']}"
            if item["kind"] == "diagnostic":
                lines.append(f"{item['id']} [diagnostic: {item['reason']}]{where}")
            else:
                lines.append(f"{item['id']} [{item['status']}]{where} — {item['label']}")
        return [text("\n".join(lines))]

    async def send_message(args: Any, ctx: Any) -> Any:
        agent, service = _caller(ctx, "send_message")
        child_id = _nonempty(args, "subagent_id").strip()
        message = _nonempty(args, "message")
        return {"messageId": service.send(agent, child_id, message)}

    async def interrupt(args: Any, ctx: Any) -> Any:
        agent, service = _caller(ctx, "interrupt_agent")
        service.interrupt(agent, _nonempty(args, "agent_id").strip())
        return {"accepted": True}

    async def report(args: Any, ctx: Any) -> Any:
        agent, service = _caller(ctx, "report")
        return {"messageId": service.report(agent, _nonempty(args, "output"))}

    message_value = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"messageId": {"type": "string", "required": True}},
    }
    listing_value = {
        "type": "array",
        "items": {"type": "object", "additionalProperties": True, "properties": {}},
    }
    return [
        define_catalog_tool(
            "list_agents",
            output=ToolOutput(schema=listing_value, render=render_list),
            execute=list_agents,
            is_concurrency_safe=lambda args: True,
        ),
        define_catalog_tool(
            "send_message",
            output=ToolOutput(
                schema=message_value,
                render=lambda args, value: [
                    text(f"message queued as the next turn for subagent {args['subagent_id']}")
                ],
            ),
            execute=send_message,
        ),
        define_catalog_tool(
            "interrupt_agent",
            output=ToolOutput(
                schema={
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"accepted": {"type": "boolean", "required": True}},
                },
                render=lambda args, value: [
                    text(f"interrupt requested for agent {args['agent_id']}")
                ],
            ),
            execute=interrupt,
        ),
        define_catalog_tool(
            "report",
            output=ToolOutput(
                schema=message_value,
                render=lambda args, value: [
                    text(
                        "report accepted by the agent that started you as message "
                        f"{value['messageId']}"
                    )
                ],
            ),
            execute=report,
        ),
    ]


def build_subagent_tools(
    config: SubagentConfig | None = None, *, fork: bool = True
) -> list[ToolDefinition]:
    """``subagent`` (per ``config``), ``subagent_fork`` (when ``fork``) and the control
    tools."""
    cfg = config or SubagentConfig()
    tools = [build_subagent_tool(cfg)]
    if fork:
        tools.append(
            build_subagent_tool(msgspec.structs.replace(cfg, tool_name="subagent_fork", fork=True))
        )
    return [*tools, *build_control_tools()]


def enable_subagents(
    root: Agent,
    *,
    session_dir: str | os.PathLike[str] | None = None,
    jobs: JobManager | None = None,
    wait_for_children: bool = True,
    max_depth: int = 3,
    max_children: int = 200,
) -> Subagents:
    """A ``Subagents`` service for ``root``'s tree (enter it with ``async with``)."""
    existing = Subagents.of(root)
    if existing is not None:
        return existing
    host = ChildHost(root, session_dir=session_dir, max_depth=max_depth, max_children=max_children)
    return Subagents(root, host, jobs=jobs, wait_for_children=wait_for_children)
