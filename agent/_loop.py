"""The agent loop: model steps and tool steps until the model answers without tools.

A turn starts with the user's prompt (and any injected messages), then repeats: ask the
model (streamed) with the runtime's tool schemas; if it asked for tools, run them through
``run_tool_calls`` (parallel-safe siblings overlap), append one ``tool`` message per call
in model order, then the calls' deferred contexts as user messages; stop when the model
answers without tools (``done``), when a result concludes the turn (``concluded``), at the
step limit (``max_steps``), when the turn's abort signal fires (``interrupted``) or when
the model cannot be asked (``error``). Every message is persisted (see ``_session``).

The system prompt is rebuilt for every request from the base prompt and the runtime's
live ``system_prompt_sections`` (``tools:code-only`` and ``tools:sdk`` in code modes), so
registry changes between steps reach the model.
"""

from __future__ import annotations

import base64
import contextlib
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

import anyio
import msgspec

from codemode.engine import AbortController, AbortSignal, Scope, ToolRuntime
from codemode.engine.json import thaw
from codemode.engine.scheduling import ModelToolCall, run_tool_calls

from ._model import ChatMessage, ImagePart, ModelClient, ModelError, Usage
from ._session import (
    SessionInfo,
    load_conversation,
    message_event,
    new_session_info,
    recorded_usage,
    repair,
    session_info,
    utc_iso,
)

__all__ = [
    "BASE_PROMPT",
    "Agent",
    "AgentEvent",
    "Continuation",
    "ContinuationSource",
    "TurnHook",
    "TurnOrigin",
    "TurnOutcome",
    "agent_for",
    "content_text",
]

BASE_PROMPT = (
    "You are a careful software agent working in the user's workspace through tools. "
    "Use the tools to inspect and change files instead of guessing; keep going until the "
    "task is done, then answer briefly with what you did. If a tool fails, read its error "
    "and adapt."
)

#: A UI/stream event: ``{"type": ..., ...}`` (see ``Agent``).
AgentEvent = dict[str, Any]
TurnReason = Literal["done", "concluded", "max_steps", "interrupted", "error"]
#: Who started a turn: the human (``user``: a prompt typed or passed on the command line),
#: an automatic goal round (``goal``), a schedule coming due (``schedule``), or a host
#: turn made only of injected messages (``host``). Tools with authority rules read it
#: (``create_goal`` accepts only ``user``).
TurnOrigin = Literal["user", "goal", "schedule", "host"]


class TurnOutcome(msgspec.Struct, frozen=True):
    """How a turn ended: ``reason``, the last assistant text, steps taken, the turn's usage,
    for ``error``/``max_steps`` a note saying why, and who started the turn (``origin``)."""

    turn: int
    reason: TurnReason
    text: str
    steps: int
    usage: Usage
    note: str | None = None
    origin: TurnOrigin = "user"

    @property
    def ok(self) -> bool:
        """Whether the task ran to its end (``done`` or ``concluded``)."""
        return self.reason in ("done", "concluded")


#: Called after every turn (``await hook(agent, outcome)``): the seam for goal rounds and
#: schedule delivery, which may ``inject`` messages and start another turn.
TurnHook = Callable[["Agent", TurnOutcome], Awaitable[None]]


class Continuation(msgspec.Struct, frozen=True):
    """A turn the agent starts on its own after another ended: ``prompt`` is delivered as
    a context message (not the user's words), the turn runs with ``origin``."""

    origin: TurnOrigin
    prompt: str


class ContinuationSource(Protocol):
    """Something that may continue the session after a turn (goal rounds, schedules).

    ``Agent.run`` asks each source, in order, after every turn that ended normally; the
    first ``Continuation`` returned starts the next turn. A source does its own
    bookkeeping (a goal counts the round) before returning. A source that comes due by
    time also has ``next_due_in() -> float | None`` (seconds, 0 when due; see
    ``Agent.due_in``).
    """

    async def next_continuation(
        self, agent: Agent, last: TurnOutcome
    ) -> Continuation | None:  # pragma: no cover - protocol
        """The next turn to run, or ``None``."""
        ...


# scope -> the Agent driving it, for tools that act on "their" agent (goals, schedules,
# session queries). Keyed by id(); the entry lives exactly as long as its Agent, which
# holds the scope, so an id cannot be reused while it is registered.
_AGENTS: weakref.WeakValueDictionary[int, Agent] = weakref.WeakValueDictionary()


def _bad_arguments(scope: Scope | None, call_id: str) -> str | None:
    """The invalid-JSON error of the running step's call ``call_id`` of the agent in
    ``scope`` (see ``_arguments``)."""
    agent = agent_for(scope)
    return None if agent is None else agent._bad_arguments.get(call_id)


def agent_for(scope: Scope | None) -> Agent | None:
    """The ``Agent`` whose conversation runs in ``scope`` (``ctx.agent`` of a tool call),
    or ``None`` when no agent drives it (a plain ``codemode run``, another host)."""
    if scope is None:
        return None
    agent = _AGENTS.get(id(scope))
    return agent if agent is not None and agent.scope is scope else None


def content_text(blocks: Any) -> str:
    """The text of content blocks (a string passes through; non-text blocks are named)."""
    if isinstance(blocks, str):
        return blocks
    parts: list[str] = []
    for block in blocks or ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping):
            parts.append(f"[{block.get('type')} content]")
    return "\n".join(parts)


def _title(prompt: str) -> str:
    """A session title from its first prompt: the first non-blank line, at most 80 chars."""
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    return line if len(line) <= 80 else line[:79] + "…"


def chat_tool(schema: Any) -> dict[str, Any]:
    """A ``ToolSchema`` as a Chat Completions ``tools`` entry."""
    return {
        "type": "function",
        "function": {
            "name": schema.name,
            "description": schema.description,
            "parameters": thaw(schema.parameters),
        },
    }


class Agent:
    """A conversation with a model over a ``ToolRuntime``, persisted in ``scope.session``.

    ``on_event`` receives, in order: ``turn-start {turn}``, ``text {delta}``,
    ``tool-call {id, name, arguments}`` (before the step's calls run), ``tool-result {id,
    name, isError, content}``, ``step-events {events}`` (the step's session events, with
    presentation cards), ``context {content}`` and ``turn-end {turn, reason, steps, text, usage,
    sessionUsage, note?}`` (``sessionUsage``: every turn of the session, resumed ones too).
    ``max_steps`` bounds the model requests of one turn.

    ``session`` names the conversation (id, title, workspace, parent); without one a fresh
    id is made. It is written to the log as ``agent/session`` before the first turn, and a
    resumed log's own record wins. ``parent`` is the agent that started this one (a
    subagent); authority rules treat such an agent as non-human. ``sources`` continue the
    session after a turn (see ``run``). ``attachments`` is where ``read_image`` keeps its
    images (a ``codemode.tools.MemoryAttachmentStore``, or anything with ``get(id) ->
    (bytes, media type, name) | None``): with one, an image a tool result carries (a
    native ``read_image``, or one a ``run_code`` program read) reaches the model as an
    image part of a user message; without one it is named in text only.
    """

    def __init__(
        self,
        runtime: ToolRuntime,
        scope: Scope,
        client: ModelClient,
        *,
        system_prompt: str = BASE_PROMPT,
        max_steps: int = 50,
        max_parallel: int = 10,
        on_event: Callable[[AgentEvent], None] | None = None,
        session: SessionInfo | None = None,
        parent: Agent | None = None,
        attachments: Any = None,
    ) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError("Agent(max_steps=...) must be a positive integer")
        if scope.session is None:
            raise ValueError(
                "Agent needs a scope with a session log (runtime.scope(..., session=...))"
            )
        self.runtime = runtime
        self.scope = scope
        self.client = client
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.max_parallel = max_parallel
        self.attachments = attachments
        self.on_event = on_event
        self.messages: list[ChatMessage] = []
        self.turn = 0
        # Every turn's usage, including the turns a resumed file already holds.
        self.session_usage = Usage()
        self.turn_hooks: list[TurnHook] = []
        self.sources: list[ContinuationSource] = []
        self.parent = parent
        self.info = session if session is not None else new_session_info()
        # The origin of the running turn (None between turns) and its current step (the
        # model request being answered; 0 before the first): session queries leave the
        # calling step's own events out.
        self.origin: TurnOrigin | None = None
        self.step = 0
        self._info_written = False
        self._inbox: list[ChatMessage] = []
        self._running = False
        #: The abort signal of the running ``run`` (``None`` between runs): a continuation
        #: source that waits (for background subagents) stops waiting when it fires.
        self.run_signal: AbortSignal | None = None
        # The running step's calls whose argument string is not JSON: call id -> error.
        self._bad_arguments: dict[str, str] = {}
        _AGENTS[id(scope)] = self

    # ------------------------------------------------------------------ session

    def resume(self) -> int:
        """Load the conversation already in the session log; returns its message count."""
        events = self._log.events
        self.messages, self.turn = load_conversation(events)
        self.session_usage = recorded_usage(events)
        recorded = session_info(events)
        if recorded is not None:
            self.info, self._info_written = recorded, True
        return len(self.messages)

    @property
    def session_id(self) -> str:
        """The conversation's id (``SessionInfo.id``)."""
        return self.info.id

    @property
    def live(self) -> bool:
        """Whether a turn is running now."""
        return self._running

    @property
    def _log(self) -> Any:
        return self.scope.session

    def inject(self, text: str, *, context: bool = True) -> None:
        """Queue a user message for the next model request (``context``: not the user's
        own words, e.g. a schedule firing)."""
        self._inbox.append(ChatMessage(role="user", content=text, context=context))

    def system_message(self) -> ChatMessage:
        """The system prompt for the next request, from the live prompt sections."""
        sections = self.runtime.system_prompt_sections(self.scope)
        parts = [self.system_prompt]
        for key in ("tools:code-only", "tools:sdk"):
            if sections.get(key):
                parts.append(sections[key])
        return ChatMessage(role="system", content="\n\n".join(parts))

    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` list of the next request."""
        return [chat_tool(s) for s in self.runtime.schemas(self.scope)]

    # --------------------------------------------------------------------- loop

    def emit(self, event: AgentEvent) -> None:
        """Pass ``event`` to ``on_event`` (services report through it too: ``goal``,
        ``schedule``)."""
        if self.on_event is not None:
            self.on_event(event)

    _emit = emit

    async def _add(self, message: ChatMessage, step: int) -> None:
        self.messages.append(message)
        await self._log.append(message_event(message, turn=self.turn, step=step))

    async def run(
        self,
        prompt: str | None,
        *,
        signal: AbortSignal | None = None,
        origin: TurnOrigin | None = None,
    ) -> list[TurnOutcome]:
        """Run ``prompt``'s turn, then every turn the ``sources`` continue with.

        After each turn that ended ``done`` or ``concluded`` the sources are asked in order;
        the first continuation is injected as a context message and runs as the next turn
        (with its own origin). It stops when no source continues, or at a turn that did not
        end normally (interrupted, error, step limit): a stopped goal round does not start
        the next one. Returns every turn's outcome, the first one's included. ``origin`` is
        the first turn's (see ``run_turn``).
        """
        signal = signal or AbortController().signal
        previous, self.run_signal = self.run_signal, signal
        try:
            outcomes = [await self.run_turn(prompt, signal=signal, origin=origin)]
            while outcomes[-1].ok and not signal.aborted:
                if self._inbox:
                    # Injected after the turn's last model request (a child finished just
                    # then): it would otherwise wait for the user's next prompt.
                    outcomes.append(await self.run_turn(None, signal=signal, origin="host"))
                    continue
                follow = await self.next_continuation(outcomes[-1])
                if follow is None:
                    break
                self.inject(follow.prompt)
                outcomes.append(await self.run_turn(None, signal=signal, origin=follow.origin))
            return outcomes
        finally:
            self.run_signal = previous

    def due_in(self) -> float | None:
        """Seconds until a source wants to start a turn on its own (0: now), or ``None``.

        Sources that come due by time (schedules) say so through an optional
        ``next_due_in()`` method; a host waiting for the user's next prompt waits at most
        this long and then calls ``run_due``.
        """
        if self._inbox:
            return 0.0
        times = [
            t
            for source in self.sources
            if (probe := getattr(source, "next_due_in", None)) is not None
            and (t := probe()) is not None
        ]
        return max(0.0, min(times)) if times else None

    async def run_due(self, *, signal: AbortSignal | None = None) -> list[TurnOutcome]:
        """While idle: run what a time-bound source has due now (and what continues it).

        Only sources whose ``next_due_in()`` is 0 are asked, so an idle session does not
        start goal rounds the user stopped; returns ``[]`` when nothing was due.
        """
        if self._inbox:
            return await self.run(None, signal=signal, origin="host")
        idle = TurnOutcome(self.turn, "done", "", 0, Usage(), origin="host")
        for source in list(self.sources):
            probe = getattr(source, "next_due_in", None)
            if probe is None or probe() != 0:
                continue
            follow = await source.next_continuation(self, idle)
            if follow is not None:
                self.inject(follow.prompt)
                return await self.run(None, signal=signal, origin=follow.origin)
        return []

    async def next_continuation(self, last: TurnOutcome) -> Continuation | None:
        """The first continuation any source offers after ``last`` (see ``run``)."""
        for source in list(self.sources):
            follow = await source.next_continuation(self, last)
            if follow is not None:
                return follow
        return None

    async def run_turn(
        self,
        prompt: str | None,
        *,
        signal: AbortSignal | None = None,
        origin: TurnOrigin | None = None,
    ) -> TurnOutcome:
        """Run one turn: ``prompt`` (``None``: only the injected messages) to its end.

        ``origin`` defaults to ``user`` with a prompt and ``host`` without one.
        ``signal`` aborting stops the turn: the model stream is closed, running tool calls
        are aborted and drain, and the turn ends ``interrupted`` with the session intact.
        """
        if self._running:
            raise RuntimeError("Agent.run_turn: a turn is already running")
        self._running = True
        self.origin = origin or ("user" if prompt is not None else "host")
        try:
            return await self._turn(prompt, signal or AbortController().signal)
        finally:
            self._running = False
            self.origin = None

    async def _write_info(self, prompt: str | None) -> None:
        if self._info_written:
            return
        if not self.info.title and prompt:
            self.info = msgspec.structs.replace(self.info, title=_title(prompt))
        await self._log.append({"type": "agent/session", **msgspec.to_builtins(self.info)})
        self._info_written = True

    async def _turn(self, prompt: str | None, signal: AbortSignal) -> TurnOutcome:
        await self._write_info(prompt)
        self.turn += 1
        turn = self.turn
        usage = Usage()
        await self._log.append(
            {
                "type": "agent/turn-start",
                "turn": turn,
                "at": utc_iso(),
                "prompt": prompt,
                "origin": self.origin,
            }
        )
        self._emit({"type": "turn-start", "turn": turn, "origin": self.origin})
        # Whatever a previous, interrupted turn left unanswered is answered first.
        self.messages = repair(self.messages)
        if prompt is not None:
            await self._add(ChatMessage(role="user", content=prompt), 0)
        try:
            outcome = await self._steps(turn, usage, signal)
        except BaseException as exc:
            # Cancelled from outside (not through ``signal``), or a host failure (the
            # session log refused an event): record the end anyway, then re-raise.
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            ended = TurnOutcome(
                turn,
                "interrupted" if cancelled else "error",
                "",
                0,
                usage,
                note=None if cancelled else f"{type(exc).__name__}: {exc}",
                origin=self.origin or "user",
            )
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self._end(ended, record_only=True)
            raise
        outcome = msgspec.structs.replace(outcome, origin=self.origin or "user")
        await self._end(outcome)
        for hook in list(self.turn_hooks):
            await hook(self, outcome)
        return outcome

    async def _end(self, outcome: TurnOutcome, *, record_only: bool = False) -> None:
        event: dict[str, Any] = {
            "type": "agent/turn-end",
            "turn": outcome.turn,
            "at": utc_iso(),
            "reason": outcome.reason,
            "steps": outcome.steps,
            "usage": outcome.usage.to_json(),
        }
        if outcome.note is not None:
            event["note"] = outcome.note
        await self._log.append(event)
        self.session_usage.add(outcome.usage)
        if not record_only:
            self._emit(
                {
                    "type": "turn-end",
                    "turn": outcome.turn,
                    "reason": outcome.reason,
                    "steps": outcome.steps,
                    "text": outcome.text,
                    "usage": outcome.usage.to_json(),
                    "sessionUsage": self.session_usage.to_json(),
                    **({"note": outcome.note} if outcome.note is not None else {}),
                }
            )

    async def _ask(
        self, signal: AbortSignal, usage: Usage, step: int
    ) -> tuple[ChatMessage | None, str]:
        """One model request; ``(None, partial text)`` when ``signal`` stopped it."""
        partial: list[str] = []

        def on_text(delta: str) -> None:
            partial.append(delta)
            self._emit({"type": "text", "delta": delta})

        wire = [self.system_message(), *self.messages]
        tools = self.tools()
        with anyio.CancelScope() as scope:
            dispose = signal.add_listener(lambda _s: scope.cancel())
            try:
                if signal.aborted:
                    scope.cancel()
                reply = await self.client.complete(wire, tools, on_text=on_text)
            finally:
                dispose()
        if scope.cancelled_caught or signal.aborted:
            return None, "".join(partial)
        usage.add(reply.usage)
        return reply.message, "".join(partial)

    async def _steps(self, turn: int, usage: Usage, signal: AbortSignal) -> TurnOutcome:
        text = ""
        for step in range(1, self.max_steps + 1):
            self.step = step
            for message in self._inbox:
                await self._add(message, step)
            self._inbox.clear()
            try:
                reply, partial = await self._ask(signal, usage, step)
            except ModelError as exc:
                return TurnOutcome(turn, "error", text, step - 1, usage, note=str(exc))
            if reply is None:
                if partial:
                    await self._add(ChatMessage(role="assistant", content=partial), step)
                return TurnOutcome(turn, "interrupted", partial, step - 1, usage)
            await self._add(reply, step)
            text = reply.content or ""
            if not reply.tool_calls:
                return TurnOutcome(turn, "done", text, step, usage)
            concluded = await self._run_tools(reply, turn, step, signal)
            if signal.aborted:
                return TurnOutcome(turn, "interrupted", text, step, usage)
            if concluded:
                return TurnOutcome(turn, "concluded", text, step, usage)
        note = (
            f"stopped after {self.max_steps} model steps (the step limit) before the task "
            "was finished; raise --max-steps or continue the session"
        )
        return TurnOutcome(turn, "max_steps", text, self.max_steps, usage, note=note)

    def _images(self, blocks: Any) -> tuple[ImagePart, ...]:
        """The image blocks of ``blocks`` whose bytes ``attachments`` holds, as parts."""
        store = self.attachments
        if store is None or isinstance(blocks, str):
            return ()
        parts = []
        for block in blocks or ():
            if not isinstance(block, Mapping) or block.get("type") != "image":
                continue
            attachment = block.get("attachment")
            found = (
                store.get(str(attachment.get("attachmentId")))
                if isinstance(attachment, Mapping)
                else None
            )
            if found is not None:
                data, media_type, _name = found
                parts.append(ImagePart(media_type, base64.b64encode(data).decode("ascii")))
        return tuple(parts)

    async def _run_tools(
        self, reply: ChatMessage, turn: int, step: int, signal: AbortSignal
    ) -> bool:
        from ._arguments import install_invalid_json_wrapper, invalid_json_message

        calls = [ModelToolCall(c.id, c.name, c.arguments) for c in reply.tool_calls]
        for c in calls:
            self._emit(
                {"type": "tool-call", "id": c.call_id, "name": c.name, "arguments": c.arguments}
            )
        # Argument strings that are not JSON fail with the parser's own words (the
        # wrapper reads them here), not as "arguments must be an object".
        self._bad_arguments = {
            c.call_id: complaint
            for c in calls
            if (complaint := invalid_json_message(c.arguments)) is not None
        }
        if self._bad_arguments:
            install_invalid_json_wrapper(self.runtime, _bad_arguments)
        before = len(self._log.events)
        try:
            results = await run_tool_calls(
                self.runtime,
                calls,
                agent=self.scope,
                signal=signal,
                turn=turn,
                step=step,
                max_parallel=self.max_parallel,
            )
        finally:
            self._bad_arguments = {}
        self._emit({"type": "step-events", "events": [thaw(e) for e in self._log.events[before:]]})
        contexts: list[ChatMessage] = []
        concluded = False
        for call, result in zip(calls, results, strict=True):
            body = content_text(result.content)
            await self._add(ChatMessage(role="tool", content=body, tool_call_id=call.call_id), step)
            # A tool message carries text only: the images a result holds follow it in a
            # user message of their own.
            shown = self._images(result.content)
            if shown:
                contexts.append(
                    ChatMessage(
                        role="user",
                        content=f"[the image{'s' if len(shown) > 1 else ''} {call.name} returned]",
                        context=True,
                        images=shown,
                    )
                )
            self._emit(
                {
                    "type": "tool-result",
                    "id": call.call_id,
                    "name": call.name,
                    "isError": result.is_error,
                    "content": body,
                }
            )
            for extra in result.additional_contexts:
                contexts.append(
                    ChatMessage(
                        role="user",
                        content=content_text(extra.get("content")),
                        context=True,
                        images=self._images(extra.get("content")),
                    )
                )
            concluded = concluded or (not result.is_error and result.concludes_turn)
        for message in contexts:
            await self._add(message, step)
            self._emit({"type": "context", "content": message.content})
        return concluded
