"""The conversation's durable form: ``agent/*`` events in the scope's session log.

Besides the engine's own tool events (``tool/call``, ``tool/result``, code dispatches),
the agent appends:

* ``agent/session`` ``{id, title, workspace, parentId, createdAt}`` once, before the first
  turn (``SessionInfo``: what session queries list and filter on);
* ``agent/turn-start`` ``{turn, prompt, origin}`` (``prompt`` is ``null`` for a turn started
  without user words, e.g. from injected messages; ``origin`` is ``TurnOrigin``);
* ``agent/message`` ``{turn, step, message}`` for every message of the conversation, in
  order, where ``message`` is ``{role, content, toolCalls?, toolCallId?, context?}``
  (``toolCalls``: ``[{id, name, arguments}]``, ``arguments`` the model's raw JSON text);
* ``agent/turn-end`` ``{turn, reason, steps, usage, error?}`` with ``reason`` one of
  ``done``, ``concluded``, ``max_steps``, ``interrupted``, ``error``.

Every ``agent/*`` event but ``agent/session`` (which has ``createdAt``) carries ``at``, the
ISO 8601 UTC time it was written; the engine's tool events carry none (their time is their
turn's). Services add their own ``agent/*`` events (goals, schedules).

``load_conversation`` rebuilds the message list from those events, so ``--resume`` sends
the model what it saw before. A tool call left without its tool message (the process died
mid-step) gets a synthetic error message, since the Chat Completions protocol requires
every call of an assistant message to be answered.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from codemode.engine.json import thaw

from ._model import ChatMessage, ModelToolCallRequest, Usage

__all__ = [
    "INTERRUPTED_TOOL_TEXT",
    "SessionInfo",
    "load_conversation",
    "message_event",
    "new_session_info",
    "recorded_usage",
    "repair",
    "session_info",
    "utc_iso",
]

INTERRUPTED_TOOL_TEXT = "Error: tool call interrupted before it returned a result"


class SessionInfo(msgspec.Struct, frozen=True, rename="camel"):
    """Who a session is: ``id``, a ``title`` (the first prompt's first line when not
    given), the ``workspace`` directory it worked in (absolute; ``None``: unknown), the
    ``parent_id`` of the session that started it (``None`` for a root session) and
    ``created_at`` (ISO 8601 UTC, millisecond precision)."""

    id: str
    title: str = ""
    workspace: str | None = None
    parent_id: str | None = None
    created_at: str = ""


def utc_iso(moment: datetime.datetime | None = None) -> str:
    """``moment`` (default: now) as ISO 8601 UTC with milliseconds: ``2026-12-02T07:34:04.123Z``."""
    moment = moment or datetime.datetime.now(datetime.UTC)
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_session_info(
    *, title: str = "", workspace: str | None = None, parent_id: str | None = None
) -> SessionInfo:
    """A ``SessionInfo`` with a fresh random id (``ses-`` and 16 hex digits) made now."""
    return SessionInfo(
        id=f"ses-{secrets.token_hex(8)}",
        title=title,
        workspace=workspace,
        parent_id=parent_id,
        created_at=utc_iso(),
    )


def session_info(events: Iterable[Mapping[str, Any]]) -> SessionInfo | None:
    """The ``agent/session`` record in ``events`` (the first), or ``None``."""
    for raw in events:
        if raw.get("type") == "agent/session":
            body = {k: v for k, v in thaw(raw).items() if k != "type"}
            try:
                return msgspec.convert(body, SessionInfo)
            except msgspec.ValidationError:
                return None
    return None


def message_event(message: ChatMessage, *, turn: int, step: int) -> dict[str, Any]:
    """The ``agent/message`` event of ``message``."""
    body: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        body["toolCalls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        body["toolCallId"] = message.tool_call_id
    if message.context:
        body["context"] = True
    return {"type": "agent/message", "turn": turn, "step": step, "at": utc_iso(), "message": body}


def _message(body: Mapping[str, Any]) -> ChatMessage | None:
    role = body.get("role")
    if role not in ("user", "assistant", "tool"):
        return None
    content = body.get("content")
    calls = tuple(
        ModelToolCallRequest(str(c.get("id")), str(c.get("name")), str(c.get("arguments", "")))
        for c in body.get("toolCalls") or ()
        if isinstance(c, Mapping)
    )
    call_id = body.get("toolCallId")
    return ChatMessage(
        role=role,
        content=None if content is None else str(content),
        tool_calls=calls,
        tool_call_id=None if call_id is None else str(call_id),
        context=bool(body.get("context")),
    )


def load_conversation(events: Iterable[Mapping[str, Any]]) -> tuple[list[ChatMessage], int]:
    """The conversation recorded in ``events`` and the last turn number (0 when none)."""
    messages: list[ChatMessage] = []
    last_turn = 0
    for raw in events:
        event = thaw(raw)
        kind = event.get("type")
        if kind in ("agent/turn-start", "agent/turn-end", "agent/message"):
            turn = event.get("turn")
            if isinstance(turn, int) and not isinstance(turn, bool):
                last_turn = max(last_turn, turn)
        if kind == "agent/message" and isinstance(event.get("message"), Mapping):
            message = _message(event["message"])
            if message is not None:
                messages.append(message)
    return repair(messages), last_turn


def recorded_usage(events: Iterable[Mapping[str, Any]]) -> Usage:
    """The usage of every turn recorded in ``events`` (``agent/turn-end``), summed."""
    total = Usage()
    for raw in events:
        if raw.get("type") != "agent/turn-end" or not isinstance(raw.get("usage"), Mapping):
            continue
        usage = raw["usage"]

        def count(key: str, usage: Mapping[str, Any] = usage) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        total.add(
            Usage(
                prompt_tokens=count("promptTokens"),
                completion_tokens=count("completionTokens"),
                total_tokens=count("totalTokens"),
                requests=count("requests"),
            )
        )
    return total


def repair(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` where every tool call of an assistant message is answered (a missing
    answer becomes an ``INTERRUPTED_TOOL_TEXT`` tool message right after its siblings')."""
    out: list[ChatMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        out.append(message)
        i += 1
        if message.role != "assistant" or not message.tool_calls:
            continue
        answered: set[str] = set()
        while i < len(messages) and messages[i].role == "tool":
            answered.add(str(messages[i].tool_call_id))
            out.append(messages[i])
            i += 1
        for call in message.tool_calls:
            if call.id not in answered:
                out.append(
                    ChatMessage(role="tool", content=INTERRUPTED_TOOL_TEXT, tool_call_id=call.id)
                )
    return out
