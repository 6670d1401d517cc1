"""Session-local reminders: ``schedule_create``, ``schedule_list``, ``schedule_delete``.

A reminder is a prompt the model leaves for itself, delivered back to the same session
when it comes due: once ``after_seconds`` from creation, once ``at`` an absolute time
(parsing and DST rules in ``_schedule_time``), or ``every_seconds`` (at least 300) at a
fixed rate aligned on the creation time (``created + k * every``, ``k >= 1``).

Wiring (a host)::

    service = enable_schedules(agent)            # replays the log, joins agent.sources
    for tool in build_schedule_tools():
        runtime.register(tool)
    ...
    await agent.run(prompt)                      # due reminders continue the session
    while idle:                                  # an interactive host between prompts
        wait = service.next_due_in()             # None: nothing scheduled; 0: due now
        ...; await service.run_due()

**Authority and scope.** A schedule belongs to the session of the agent that created it
(``agent_for(ctx.agent)``) and is delivered only to that agent, by that agent's
``sources``; any turn origin may create one (a schedule turn may set the next reminder).
A subagent (``agent.parent is not None``) may use the tools too, against its own session
and only after ``enable_schedules(child)``: its reminders are its own and come due only
while something runs that child's turns. Delivery is ``session-local``: nothing fires
while the process is down; a reminder whose time passed is ``overdue`` (in
``schedule_list``) until the session runs again.

**Values** (§11 of the tool outputs; render is always ``JSON.stringify(value)``):
a view ``{id: 'schedule-{n}', kind: 'after'|'at'|'every', prompt, afterSeconds? |
everySeconds?, scheduledAt, state: 'scheduled'|'overdue', deliveryMode: 'session-local'}``
(``n`` counts every schedule the session ever created, so an id is never reused;
``scheduledAt`` is the next undelivered occurrence, ISO UTC with milliseconds; ``overdue``
means it passed and was not delivered yet), ``{id, deleted: true}``, ``{id, deleted:
false, code: 'schedule_not_found'}``, or a failure ``{code, message}`` /
``{code: 'persistence_uncertain', message, operation, id?}``.

**Delivery.** Between turns ``next_continuation`` batches every reminder due now into one
``Continuation(origin='schedule')``: a one-shot reminder is delivered and finished (gone
from ``schedule_list``); a fixed-rate rule is delivered once for its latest due
occurrence, the missed ones before it are skipped (and counted), and it moves to its next
future occurrence. The delivered context message reads::

    [Scheduled reminders] 2 reminders you created earlier in this session with schedule_create are due (now 2026-12-02T09:10:05.000Z). They are your own notes to act on, not new messages from the user.
    - schedule-1 (after_seconds=600) due 2026-12-02T09:10:00.000Z: "check the build"
    - schedule-3 (every_seconds=3600) due 2026-12-02T09:00:00.000Z, overdue by 10m 5s; 2 missed occurrences skipped; repeats, next at 2026-12-02T10:00:00.000Z (schedule_delete "schedule-3" stops it): "rotate the logs"

(one reminder: ``[Scheduled reminder] A reminder you created ... is due ... It is your
own note ...``). One line per reminder in creation order; the prompt is a JSON string, so
its own newlines or brackets cannot pass for the frame; ``overdue by`` appears when a
delivery is a minute or more late (after a resume, or a long turn).

**Durable form** (the agent's session log, replayed by ``enable_schedules``):

* ``agent/schedule-create`` ``{id, kind, prompt, createdAt, scheduledAt, afterSeconds? |
  everySeconds? | at?}`` (``at``: the selector as given);
* ``agent/schedule-delete`` ``{id}``;
* ``agent/schedule-fire`` ``{firedAt, deliveries: [{id, scheduledAt, skipped}]}``, written
  before the reminders are handed to the agent (at most once: a resumed session never
  delivers an occurrence again, even if the process died right after recording it).

Replay is strict: an event of these types that this module could not have written (an
unknown id, a misaligned occurrence, a bad timestamp) makes the service
``corrupt`` — every tool then answers ``corrupt_schedule_log`` and nothing is delivered,
rather than guessing which reminders are real. When appending to the log fails, the
change's outcome is ``persistence_uncertain``: a create is not active in this process
(its id stays used), a delete is applied in this process; either may differ after a
resume. A failed delivery record delivers nothing and retries 30 s later.
"""

from __future__ import annotations

import json
import math
import re
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec

from codemode.engine import AbortController, AbortSignal, ToolDefinition, ToolOutput, text
from codemode.engine.json import thaw
from codemode.tools import define_catalog_tool

from ._loop import Agent, Continuation, TurnOutcome, agent_for
from ._schedule_time import (
    MAX_MS,
    ScheduleRefusal,
    format_duration,
    iso_ms,
    js_number,
    parse_at,
    parse_iso_ms,
    safe_integer,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "MAX_ACTIVE_SCHEDULES",
    "MAX_PROMPT_CHARS",
    "MIN_EVERY_SECONDS",
    "ScheduleService",
    "build_schedule_tools",
    "enable_schedules",
]

#: The shortest fixed-rate interval (§11).
MIN_EVERY_SECONDS = 300
#: The longest reminder prompt, in UTF-16 code units (JavaScript ``length``): it must fit
#: one session-log field whole (64 KiB inline, even with every character escaped).
MAX_PROMPT_CHARS = 8000
#: Active reminders one session may hold; a runaway loop gets a refusal, not a log of
#: millions of events and a ``schedule_list`` nobody can read.
MAX_ACTIVE_SCHEDULES = 200
# A delivery this late or later says "overdue by ...".
_LATE_MS = 60_000
# After the log refused a delivery record: try again this much later (seconds).
_RETRY_S = 30.0

_CREATE, _DELETE, _FIRE = "agent/schedule-create", "agent/schedule-delete", "agent/schedule-fire"
_ID = re.compile(r"schedule-([1-9][0-9]{0,15})")
# JavaScript's String.prototype.trim set (Python's strip() differs on \x1c-\x1f, \x85, \ufeff).
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_SELECTORS = ("after_seconds", "at", "every_seconds")
_CODES = [
    "invalid_prompt",
    "invalid_selector",
    "invalid_rule",
    "invalid_time_zone",
    "not_future",
    "time_out_of_range",
    "frequency_too_high",
    "too_many_schedules",
    "corrupt_schedule_log",
    "internal_error",
]
Kind = Literal["after", "at", "every"]
Operation = Literal["create", "list", "delete"]


def _js_json(value: Any) -> str:
    # JSON.stringify(value): compact, insertion-ordered, no ASCII escaping.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


class _Rule(msgspec.Struct):
    """One active reminder; ``due_ms`` is its next undelivered occurrence."""

    id: str
    kind: Kind
    prompt: str
    created_ms: int
    due_ms: int
    seconds: int | None = None  # after_seconds or every_seconds

    def view(self, now_ms: int) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "prompt": self.prompt}
        if self.kind == "after":
            out["afterSeconds"] = self.seconds
        elif self.kind == "every":
            out["everySeconds"] = self.seconds
        out["scheduledAt"] = iso_ms(self.due_ms)
        out["state"] = "overdue" if self.due_ms <= now_ms else "scheduled"
        out["deliveryMode"] = "session-local"
        return out


class _Delivery(msgspec.Struct, frozen=True):
    rule: _Rule
    occurrence_ms: int
    skipped: int
    next_ms: int | None  # every rules: the next occurrence (None: past year 9999)


class _Corrupt(Exception):
    pass


# Agent -> its service. Weak keys: a service lives exactly as long as its agent (the
# service holds the agent weakly, so the entry does not keep the key alive).
_SERVICES: weakref.WeakKeyDictionary[Agent, ScheduleService] = weakref.WeakKeyDictionary()


class ScheduleService:
    """The reminders of one agent's session, a ``ContinuationSource`` of that agent.

    Made by ``enable_schedules``; the tools find it with ``ScheduleService.of(agent)``.
    ``clock()`` is the wall clock in seconds since the epoch. ``corrupt`` is the replay
    failure (``None`` when the log was sound); ``last_error`` the latest failed log
    append, for a host to show.
    """

    def __init__(self, agent: Agent, *, clock: Callable[[], float] | None = None) -> None:
        self._agent_ref = weakref.ref(agent)
        self.clock: Callable[[], float] = clock or time.time
        self._rules: dict[str, _Rule] = {}  # active ones, in creation order
        self._last_n = 0
        self._retry_ms: int | None = None
        self._lock = anyio.Lock()
        self.corrupt: str | None = None
        self.last_error: str | None = None
        try:
            # Agent() refuses a scope without a session log, so there is one.
            log = agent.scope.session
            self._replay(log.events if log is not None else ())
        except _Corrupt as exc:
            self.corrupt = str(exc)
            self._rules.clear()

    @staticmethod
    def of(agent: Agent | None) -> ScheduleService | None:
        """The service ``enable_schedules`` attached to ``agent``, or ``None``."""
        return None if agent is None else _SERVICES.get(agent)

    @property
    def agent(self) -> Agent | None:
        """The agent whose session this is (``None`` once it is gone)."""
        return self._agent_ref()

    # ----------------------------------------------------------------- replay

    def _replay(self, events: Iterable[Mapping[str, Any]]) -> None:
        for seq, raw in enumerate(events):
            kind = raw.get("type")
            if kind not in (_CREATE, _DELETE, _FIRE):
                continue
            event = thaw(raw)
            where = f"event #{seq} ({kind})"
            if kind == _CREATE:
                self._replay_create(event, where)
            elif kind == _DELETE:
                rule = self._active(event.get("id"), where)
                del self._rules[rule.id]
            else:
                self._replay_fire(event, where)

    def _active(self, sid: Any, where: str) -> _Rule:
        rule = self._rules.get(sid) if isinstance(sid, str) else None
        if rule is None:
            raise _Corrupt(
                f"{where} names {_js_json(sid)}, which is not an active schedule at that point"
            )
        return rule

    def _replay_create(self, event: dict[str, Any], where: str) -> None:
        sid = event.get("id")
        m = _ID.fullmatch(sid) if isinstance(sid, str) else None
        if m is None or int(m.group(1)) <= self._last_n:
            raise _Corrupt(f"{where} has id {_js_json(sid)}, not a new schedule-{{n}} id")
        kind, prompt = event.get("kind"), event.get("prompt")
        if kind not in ("after", "at", "every"):
            raise _Corrupt(f"{where} has an unknown kind {_js_json(kind)}")
        if (
            not isinstance(prompt, str)
            or not prompt
            or prompt.strip(_JS_SPACE) != prompt
            or _utf16_len(prompt) > MAX_PROMPT_CHARS
        ):
            raise _Corrupt(f"{where} has no valid prompt")
        created = parse_iso_ms(event.get("createdAt"))
        due = parse_iso_ms(event.get("scheduledAt"))
        if created is None or due is None or due <= created:
            raise _Corrupt(f"{where} has invalid createdAt/scheduledAt timestamps")
        seconds: int | None = None
        if kind in ("after", "every"):
            field = "afterSeconds" if kind == "after" else "everySeconds"
            seconds = safe_integer(event.get(field))
            floor = MIN_EVERY_SECONDS if kind == "every" else 1
            if seconds is None or seconds < floor or due != created + seconds * 1000:
                raise _Corrupt(f"{where} has a {field} that does not match its scheduledAt")
        self._last_n = int(m.group(1))
        self._rules[m.group(0)] = _Rule(m.group(0), kind, prompt, created, due, seconds)

    def _replay_fire(self, event: dict[str, Any], where: str) -> None:
        deliveries = event.get("deliveries")
        if parse_iso_ms(event.get("firedAt")) is None or not isinstance(deliveries, list):
            raise _Corrupt(f"{where} lacks firedAt or deliveries")
        for item in deliveries:
            if not isinstance(item, Mapping):
                raise _Corrupt(f"{where} has a delivery that is not an object")
            rule = self._active(item.get("id"), where)
            at = parse_iso_ms(item.get("scheduledAt"))
            if rule.kind != "every":
                if at != rule.due_ms:
                    raise _Corrupt(f"{where} delivers {rule.id} at a time it was not due")
                del self._rules[rule.id]
                continue
            step = (rule.seconds or 0) * 1000
            if at is None or at < rule.due_ms or (at - rule.created_ms) % step:
                raise _Corrupt(f"{where} delivers {rule.id} at a time off its fixed rate")
            self._advance(rule, at + step)

    def _advance(self, rule: _Rule, next_ms: int) -> None:
        if next_ms > MAX_MS:
            del self._rules[rule.id]  # no occurrence fits before year 10000
        else:
            rule.due_ms = next_ms

    # ------------------------------------------------------------------ tools

    def _now_ms(self) -> int:
        now = self.clock()
        if not math.isfinite(now):
            raise ValueError(f"the schedule clock returned {now!r}")
        return math.floor(now * 1000)

    def _corrupt_value(self) -> dict[str, Any]:
        return {
            "code": "corrupt_schedule_log",
            "message": (
                "the schedules recorded in this session's log cannot be trusted, so schedule "
                f"tools are disabled for this session: {self.corrupt}"
            ),
        }

    def list_views(self) -> list[dict[str, Any]] | dict[str, Any]:
        """``schedule_list``'s value: the active reminders' views in creation order."""
        if self.corrupt is not None:
            return self._corrupt_value()
        now = self._now_ms()
        return [rule.view(now) for rule in self._rules.values()]

    async def create(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``schedule_create``'s value for (schema-valid) ``args``."""
        if self.corrupt is not None:
            return self._corrupt_value()
        try:
            prompt, kind, seconds, due, now = self._validate(args)
        except ScheduleRefusal as refusal:
            return refusal.value()
        async with self._lock:
            if len(self._rules) >= MAX_ACTIVE_SCHEDULES:
                return ScheduleRefusal(
                    "too_many_schedules",
                    f"this session already has {len(self._rules)} active reminders, the "
                    f"most it may hold; delete some with schedule_delete first",
                ).value()
            self._last_n += 1  # taken even if the write fails: an id is never reused
            rule = _Rule(f"schedule-{self._last_n}", kind, prompt, now, due, seconds)
            event: dict[str, Any] = {
                "type": _CREATE,
                "id": rule.id,
                "kind": kind,
                "prompt": prompt,
                "createdAt": iso_ms(now),
                "scheduledAt": iso_ms(due),
            }
            if kind == "after":
                event["afterSeconds"] = seconds
            elif kind == "every":
                event["everySeconds"] = seconds
            else:
                event["at"] = thaw(args["at"])
            try:
                await self.agent_log().append(event)
            except Exception as exc:
                return self._uncertain(
                    "create",
                    rule.id,
                    f"recording {rule.id} in the session log failed ({_describe(exc)}); "
                    "it is not active now, but it may exist after a resume — check "
                    "schedule_list then",
                )
            self._rules[rule.id] = rule
            return rule.view(now)

    async def delete(self, sid: str) -> dict[str, Any]:
        """``schedule_delete``'s value for ``sid``."""
        if self.corrupt is not None:
            return self._corrupt_value()
        async with self._lock:
            if sid not in self._rules:
                return {"id": sid, "deleted": False, "code": "schedule_not_found"}
            # Gone here whatever the log says: a reminder the user cancelled must not fire.
            del self._rules[sid]
            try:
                await self.agent_log().append({"type": _DELETE, "id": sid})
            except Exception as exc:
                return self._uncertain(
                    "delete",
                    sid,
                    f"recording the deletion of {sid} in the session log failed "
                    f"({_describe(exc)}); it will not fire in this process, but it may "
                    "come back after a resume",
                )
            return {"id": sid, "deleted": True}

    def _uncertain(self, operation: Operation, sid: str | None, message: str) -> dict[str, Any]:
        self.last_error = message
        out: dict[str, Any] = {
            "code": "persistence_uncertain",
            "message": message,
            "operation": operation,
        }
        if sid is not None:
            out["id"] = sid
        return out

    def agent_log(self) -> Any:
        """The session log of the service's agent (raises once the agent is gone)."""
        agent = self.agent
        if agent is None:
            raise RuntimeError("the agent of this schedule service no longer exists")
        return agent.scope.session

    def _validate(self, args: Mapping[str, Any]) -> tuple[str, Kind, int | None, int, int]:
        raw = args.get("prompt")
        prompt = raw.strip(_JS_SPACE) if isinstance(raw, str) else ""
        if not prompt:
            raise ScheduleRefusal(
                "invalid_prompt",
                "prompt must be a non-empty string (it is blank after trimming whitespace): "
                "say what the reminder should tell you when it comes due",
            )
        if (size := _utf16_len(prompt)) > MAX_PROMPT_CHARS:
            raise ScheduleRefusal(
                "invalid_prompt",
                f"prompt is {size} characters long; a reminder prompt may be at most "
                f"{MAX_PROMPT_CHARS} (keep the details in a file and point to it)",
            )
        given = [name for name in _SELECTORS if name in args]
        if len(given) != 1:
            got = "none was given" if not given else "got " + " and ".join(given)
            raise ScheduleRefusal(
                "invalid_selector",
                f"give exactly one of after_seconds, at or every_seconds ({got})",
            )
        selector = given[0]
        now = self._now_ms()
        if selector == "at":
            return prompt, "at", None, parse_at(args["at"], now), now
        value = args[selector]
        seconds = safe_integer(value)
        if seconds is None or seconds <= 0:
            shown = js_number(value) if isinstance(value, int | float) else _js_json(value)
            rule = (
                "a positive safe integer: a whole number of seconds from 1"
                if selector == "after_seconds"
                else f"a safe integer: a whole number of seconds, at least {MIN_EVERY_SECONDS}"
            )
            raise ScheduleRefusal(
                "invalid_rule",
                f"{selector} must be {rule} up to 9007199254740991; got {shown}",
            )
        if selector == "every_seconds" and seconds < MIN_EVERY_SECONDS:
            raise ScheduleRefusal(
                "frequency_too_high",
                f"every_seconds is {seconds}; fixed-rate reminders must be at least "
                f"{MIN_EVERY_SECONDS} seconds (5 minutes) apart",
            )
        due = now + seconds * 1000
        if due > MAX_MS:
            first = "the target" if selector == "after_seconds" else "the first occurrence"
            raise ScheduleRefusal(
                "time_out_of_range",
                f"{selector} {seconds} puts {first} after {iso_ms(MAX_MS)}, the latest time "
                "a reminder can target",
            )
        return prompt, ("after" if selector == "after_seconds" else "every"), seconds, due, now

    # --------------------------------------------------------------- delivery

    def next_due_in(self) -> float | None:
        """Seconds until the earliest reminder is due (0 when one is due now), or ``None``
        when nothing is scheduled: what an idle host waits on."""
        if self.corrupt is not None or not self._rules:
            return None
        earliest = min(rule.due_ms for rule in self._rules.values())
        if self._retry_ms is not None:
            earliest = max(earliest, self._retry_ms)
        return max(earliest - self._now_ms(), 0) / 1000

    async def next_continuation(
        self, agent: Agent, last: TurnOutcome | None = None
    ) -> Continuation | None:
        """``ContinuationSource``: every reminder due now as one ``schedule`` turn, or
        ``None`` (nothing due, another agent, a turn running, a corrupt log)."""
        if agent is not self.agent or agent.live or self.corrupt is not None:
            return None
        prompt = await self._deliver_due()
        return None if prompt is None else Continuation(origin="schedule", prompt=prompt)

    async def run_due(self, *, signal: AbortSignal | None = None) -> list[TurnOutcome]:
        """Deliver what is due as a ``schedule`` turn of the agent, then let its sources
        continue as ``Agent.run`` does; ``[]`` when nothing was due or a turn is running.
        For a host that is idle between prompts."""
        agent = self.agent
        if agent is None:
            return []
        signal = signal or AbortController().signal
        follow = await self.next_continuation(agent)
        outcomes: list[TurnOutcome] = []
        while follow is not None:
            agent.inject(follow.prompt)
            outcomes.append(await agent.run_turn(None, signal=signal, origin=follow.origin))
            if not outcomes[-1].ok or signal.aborted:
                break
            follow = await agent.next_continuation(outcomes[-1])
        return outcomes

    async def _deliver_due(self) -> str | None:
        async with self._lock:
            now = self._now_ms()
            if self._retry_ms is not None and now < self._retry_ms:
                return None
            batch: list[_Delivery] = []
            for rule in self._rules.values():
                if rule.due_ms > now:
                    continue
                if rule.kind != "every":
                    batch.append(_Delivery(rule, rule.due_ms, 0, None))
                    continue
                step = (rule.seconds or 0) * 1000
                latest = rule.created_ms + (now - rule.created_ms) // step * step
                skipped = (latest - rule.due_ms) // step
                batch.append(_Delivery(rule, latest, skipped, latest + step))
            if not batch:
                return None
            event = {
                "type": _FIRE,
                "firedAt": iso_ms(now),
                "deliveries": [
                    {"id": d.rule.id, "scheduledAt": iso_ms(d.occurrence_ms), "skipped": d.skipped}
                    for d in batch
                ],
            }
            try:
                await self.agent_log().append(event)
            except Exception as exc:
                # Undelivered and unrecorded: they stay overdue and are tried again later
                # (not at once, or an idle host waiting on next_due_in() would spin).
                self._retry_ms = now + int(_RETRY_S * 1000)
                self.last_error = (
                    f"recording the delivery of {', '.join(d.rule.id for d in batch)} in the "
                    f"session log failed ({_describe(exc)}); retrying in {_RETRY_S:g} s"
                )
                return None
            self._retry_ms = None
            for d in batch:
                if d.next_ms is None:
                    del self._rules[d.rule.id]
                else:
                    self._advance(d.rule, d.next_ms)
            return _delivery_text(batch, now)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _delivery_text(batch: list[_Delivery], now: int) -> str:
    """The context message of one delivery (format in the module docstring)."""
    if len(batch) == 1:
        head = (
            "[Scheduled reminder] A reminder you created earlier in this session with "
            f"schedule_create is due (now {iso_ms(now)}). It is your own note to act on, "
            "not a new message from the user."
        )
    else:
        head = (
            f"[Scheduled reminders] {len(batch)} reminders you created earlier in this "
            f"session with schedule_create are due (now {iso_ms(now)}). They are your own "
            "notes to act on, not new messages from the user."
        )
    lines = [head]
    for d in batch:
        rule = d.rule
        if rule.kind == "after":
            how = f"after_seconds={rule.seconds}"
        elif rule.kind == "every":
            how = f"every_seconds={rule.seconds}"
        else:
            how = "at"
        line = f"- {rule.id} ({how}) due {iso_ms(d.occurrence_ms)}"
        late = now - d.occurrence_ms
        if late >= _LATE_MS:
            line += f", overdue by {format_duration(late)}"
        if rule.kind == "every":
            if d.skipped:
                noun = "occurrence" if d.skipped == 1 else "occurrences"
                line += f"; {d.skipped} missed {noun} skipped"
            if d.next_ms is not None and d.next_ms <= MAX_MS:
                line += (
                    f'; repeats, next at {iso_ms(d.next_ms)} (schedule_delete "{rule.id}" stops it)'
                )
            else:
                line += "; no later occurrence fits before year 10000, so it is finished"
        lines.append(f"{line}: {_js_json(rule.prompt)}")
    return "\n".join(lines)


def enable_schedules(agent: Agent, *, clock: Callable[[], float] | None = None) -> ScheduleService:
    """Attach a ``ScheduleService`` to ``agent``: replay the schedules its session log
    holds and add it to ``agent.sources``. Idempotent: an agent that already has one gets
    it back (``clock`` then is ignored). ``clock`` is the wall clock (seconds since the
    epoch, default ``time.time``).

    The replay reads the log itself, so it works before or after ``agent.resume()``; a
    corrupt record does not raise (the conversation can still resume) but leaves the
    service ``corrupt`` (see the module docstring)."""
    existing = _SERVICES.get(agent)
    if existing is not None:
        return existing
    service = ScheduleService(agent, clock=clock)
    _SERVICES[agent] = service
    agent.sources.append(service)
    return service


# ------------------------------------------------------------------ definitions

_VIEW: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "required": True},
        "kind": {"type": "string", "enum": ["after", "at", "every"], "required": True},
        "prompt": {"type": "string", "required": True},
        "afterSeconds": {"type": "integer"},
        "everySeconds": {"type": "integer"},
        "scheduledAt": {"type": "string", "required": True},
        "state": {"type": "string", "enum": ["scheduled", "overdue"], "required": True},
        "deliveryMode": {"type": "string", "enum": ["session-local"], "required": True},
    },
}
_ERROR: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "code": {"type": "string", "enum": _CODES, "required": True},
        "message": {"type": "string", "required": True},
    },
}
_UNCERTAIN: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "code": {"type": "string", "enum": ["persistence_uncertain"], "required": True},
        "message": {"type": "string", "required": True},
        "operation": {"type": "string", "enum": ["create", "list", "delete"], "required": True},
        "id": {"type": "string"},
    },
}
_DELETED: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "required": True},
        "deleted": {"type": "boolean", "enum": [True], "required": True},
    },
}
_NOT_FOUND: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "required": True},
        "deleted": {"type": "boolean", "enum": [False], "required": True},
        "code": {"type": "string", "enum": ["schedule_not_found"], "required": True},
    },
}


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    return [text(_js_json(thaw(value)))]


def _service(ctx: Any, tool: str) -> ScheduleService | dict[str, Any]:
    agent = agent_for(getattr(ctx, "agent", None))
    service = ScheduleService.of(agent)
    if service is not None:
        return service
    why = (
        "it was called outside an agent session"
        if agent is None
        else "this agent's host has not enabled schedules (enable_schedules(agent))"
    )
    return {"code": "internal_error", "message": f"{tool} needs a session with schedules: {why}"}


async def _guarded(tool: str, run: Callable[[ScheduleService], Any], ctx: Any) -> Any:
    found = _service(ctx, tool)
    if isinstance(found, dict):
        return found
    try:
        return await run(found)
    except Exception as exc:
        # Failures are values here (§0.2): a bug must not surface as a thrown tool error.
        return {"code": "internal_error", "message": f"{tool} failed: {_describe(exc)}"}


def _title(prompt: Any) -> str:
    line = next((ln.strip() for ln in str(prompt).splitlines() if ln.strip()), "")
    return line if len(line) <= 60 else line[:59] + "…"


def build_schedule_tools() -> list[ToolDefinition]:
    """``schedule_create``, ``schedule_list`` and ``schedule_delete``, acting on the
    ``ScheduleService`` of the calling agent (``enable_schedules``)."""

    async def create(args: Any, ctx: Any) -> Any:
        return await _guarded("schedule_create", lambda s: s.create(args), ctx)

    async def list_(args: Any, ctx: Any) -> Any:
        async def run(service: ScheduleService) -> Any:
            return service.list_views()

        return await _guarded("schedule_list", run, ctx)

    async def delete(args: Any, ctx: Any) -> Any:
        return await _guarded("schedule_delete", lambda s: s.delete(args["id"]), ctx)

    return [
        define_catalog_tool(
            "schedule_create",
            output=ToolOutput(schema={"oneOf": [_VIEW, _ERROR, _UNCERTAIN]}, render=_render),
            execute=create,
            present_call=lambda args: {
                "card": "generic",
                "title": f"Schedule: {_title(args.get('prompt', ''))}",
                "kind": "other",
            },
        ),
        define_catalog_tool(
            "schedule_list",
            output=ToolOutput(
                schema={"oneOf": [{"type": "array", "items": _VIEW}, _ERROR, _UNCERTAIN]},
                render=_render,
            ),
            execute=list_,
            is_concurrency_safe=lambda args: True,
            present_call=lambda args: {
                "card": "generic",
                "title": "List reminders",
                "kind": "other",
            },
        ),
        define_catalog_tool(
            "schedule_delete",
            output=ToolOutput(
                schema={"oneOf": [_DELETED, _NOT_FOUND, _ERROR, _UNCERTAIN]}, render=_render
            ),
            execute=delete,
            present_call=lambda args: {
                "card": "generic",
                "title": f"Delete reminder {_title(args.get('id', ''))}",
                "kind": "delete",
            },
        ),
    ]
