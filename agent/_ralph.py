"""``ralph``: a fresh child per round toward one immutable objective.

Each round starts a **new** child (``ChildHost.make_child``: no copy of the caller's
conversation, no earlier round's session) whose prompt is the objective, the round number
and the previous round's structured report; the shared workspace is the only long-term
memory. A worker ends its turn with a JSON report::

    {"status": "complete" | "blocked" | "in_progress", "summary": str,
     "evidence": [str], "nextSteps": [str], "blocker": str | null}

(in a ``json`` code fence or as the whole answer; the last such object counts). The loop
stops when a worker reports ``complete``, or ``blocked`` with a concrete (non-empty)
``blocker``, or after ``maxRounds`` rounds (default 5, at most the host's ``max_rounds``
ceiling, default 20). Only the bounded report crosses rounds: each string is cut at 2,000
characters, each list at 20 entries.

Value ``{runId, agentsStarted, result: {status: 'complete'|'blocked'|'budget-limited',
roundsStarted, report}}``; render ``Ralph worker reported completion after {n round(s)}.``
/ ``Ralph worker reported a blocker after {n round(s)}.`` / ``Ralph reached its {n
round(s)} limit; the worker reported work remaining.``, then ``↵Final report:↵{report as
2-space JSON}``, the whole cut at 16384 chars with ``↵… [truncated]``. A round whose
child fails or ends without a valid report is an error ``Ralph round {n} child failed
before producing a structured report.`` plus the last handoff (the previous report) when
there is one (``RalphError``, ``RALPH_ROUND_FAILED``); other codes ``RALPH_NO_AGENT``,
``RALPH_INVALID_ARGS``, ``RALPH_LIMIT``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from codemode.engine import ToolDefinition, ToolOutput, text
from codemode.tools import define_catalog_tool

from ._children import ChildHost, ChildLimitError, json_candidates
from ._errors import RalphError
from ._loop import Agent, agent_for

__all__ = ["build_ralph_tool", "parse_report"]

MAX_SAFE_INTEGER = 2**53 - 1
RENDER_CAP = 16384
_STRING_CAP = 2000
_LIST_CAP = 20


def _clip(value: str) -> str:
    return value if len(value) <= _STRING_CAP else value[: _STRING_CAP - 1] + "…"


def _strings(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [_clip(v) for v in value[:_LIST_CAP]]


def parse_report(answer: str) -> dict[str, Any] | None:
    """The worker's structured report in ``answer`` (bounded), or ``None`` when there is
    no valid one."""
    for raw in json_candidates(answer):
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # model text: malformed, or nested past the parser
            continue
        if not isinstance(data, dict):
            continue
        status, summary = data.get("status"), data.get("summary")
        evidence, steps = _strings(data.get("evidence", [])), _strings(data.get("nextSteps", []))
        blocker = data.get("blocker")
        if (
            status not in ("complete", "blocked", "in_progress")
            or not isinstance(summary, str)
            or evidence is None
            or steps is None
            or not (blocker is None or isinstance(blocker, str))
        ):
            continue
        return {
            "status": status,
            "summary": _clip(summary),
            "evidence": evidence,
            "nextSteps": steps,
            "blocker": None if blocker is None else _clip(blocker),
        }
    return None


def _rounds(n: int) -> str:
    return f"{n} round" if n == 1 else f"{n} rounds"


def _prompt(objective: str, round_no: int, limit: int, last: dict[str, Any] | None) -> str:
    handoff = (
        "This is the first round: nothing was done before you."
        if last is None
        else "The previous round's report (the only thing that crosses rounds; check the "
        "workspace itself for the real state):\n" + json.dumps(last, indent=2)
    )
    return (
        f"Ralph round {round_no} of at most {limit}. You are a fresh worker toward one "
        f"fixed objective; the shared workspace is your long-term memory.\n\nObjective:\n"
        f"{objective}\n\n{handoff}\n\nMake as much verified progress as you can. End your "
        'final answer with a JSON report in a ```json fence: {"status": "complete" | '
        '"blocked" | "in_progress", "summary": "...", "evidence": ["..."], "nextSteps": '
        '["..."], "blocker": null or "the concrete blocking condition"}. Say "complete" only '
        'when the objective is met and verified; "blocked" only with a concrete blocker '
        "outside your control."
    )


def build_ralph_tool(*, default_rounds: int = 5, max_rounds: int = 20) -> ToolDefinition:
    """The ``ralph`` tool; children come from the caller's ``ChildHost`` (the subagent
    service of ``codemode agent`` provides it). ``max_rounds`` is the deployment ceiling."""

    async def execute(args: Any, ctx: Any) -> Any:
        parent = agent_for(ctx.agent)
        if parent is None:
            raise RalphError(
                "ralph requires a calling agent (exec.agent was undefined)", "RALPH_NO_AGENT"
            )
        host = ChildHost.of(parent)
        if host is None:
            raise RalphError(
                "ralph is unavailable: this agent session cannot start subagents",
                "RALPH_NO_AGENT",
            )
        objective = args.get("objective")
        if not isinstance(objective, str) or not objective.strip():
            raise RalphError("objective must be a non-empty string", "RALPH_INVALID_ARGS")
        limit = default_rounds
        if args.get("maxRounds") is not None:
            value = args["maxRounds"]
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not float(value).is_integer()
                or not 1 <= value <= MAX_SAFE_INTEGER
            ):
                raise RalphError("maxRounds must be a positive safe integer", "RALPH_INVALID_ARGS")
            if value > max_rounds:
                raise RalphError(
                    f"maxRounds must be at most {max_rounds} (this deployment's ceiling)",
                    "RALPH_INVALID_ARGS",
                )
            limit = int(value)
        return await _loop(parent, host, objective.strip(), limit, ctx)

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        result = value["result"]
        n = result["roundsStarted"]
        head = {
            "complete": f"Ralph worker reported completion after {_rounds(n)}.",
            "blocked": f"Ralph worker reported a blocker after {_rounds(n)}.",
        }.get(
            result["status"],
            f"Ralph reached its {_rounds(n)} limit; the worker reported work remaining.",
        )
        body = (
            f"{head}\nFinal report:\n{json.dumps(result['report'], indent=2, ensure_ascii=False)}"
        )
        if len(body) > RENDER_CAP:
            tail = "\n… [truncated]"
            body = body[: RENDER_CAP - len(tail)] + tail
        return [text(body)]

    report_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "status": {
                "type": "string",
                "enum": ["complete", "blocked", "in_progress"],
                "required": True,
            },
            "summary": {"type": "string", "required": True},
            "evidence": {"type": "array", "items": {"type": "string"}, "required": True},
            "nextSteps": {"type": "array", "items": {"type": "string"}, "required": True},
            "blocker": {"oneOf": [{"type": "string"}, {"type": "null"}], "required": True},
        },
    }
    return define_catalog_tool(
        "ralph",
        output=ToolOutput(
            schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "runId": {"type": "string", "required": True},
                    "agentsStarted": {"type": "integer", "required": True},
                    "result": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": True,
                        "properties": {
                            "status": {
                                "type": "string",
                                "enum": ["complete", "blocked", "budget-limited"],
                                "required": True,
                            },
                            "roundsStarted": {"type": "integer", "required": True},
                            "report": {**report_schema, "required": True},
                        },
                    },
                },
            },
            render=render,
        ),
        execute=execute,
        present_call=lambda args: {
            "card": "generic",
            "title": f"Ralph: {str(args.get('objective', ''))[:80]}",
        },
    )


async def _loop(
    parent: Agent, host: ChildHost, objective: str, limit: int, ctx: Any
) -> dict[str, Any]:
    run_id = f"ralph-{secrets.token_hex(6)}"
    last: dict[str, Any] | None = None
    for round_no in range(1, limit + 1):
        try:
            child = host.make_child(parent, label=f"ralph round {round_no}")
        except ChildLimitError as exc:
            raise RalphError(exc.message, "RALPH_LIMIT") from None
        result = await host.run_child(
            parent, _prompt(objective, round_no, limit, last), child=child, signal=ctx.signal
        )
        report = parse_report(result.text) if result.ok else None
        if report is None:
            message = f"Ralph round {round_no} child failed before producing a structured report."
            if result.diagnostic:
                message += f"\nDiagnostic: {result.diagnostic}"
            if last is not None:
                message += "\nLast handoff:\n" + json.dumps(last, indent=2, ensure_ascii=False)
            raise RalphError(message, "RALPH_ROUND_FAILED")
        last = report
        done = report["status"] == "complete" or (
            report["status"] == "blocked" and bool((report["blocker"] or "").strip())
        )
        if done:
            return {
                "runId": run_id,
                "agentsStarted": round_no,
                "result": {"status": report["status"], "roundsStarted": round_no, "report": report},
            }
    assert last is not None
    return {
        "runId": run_id,
        "agentsStarted": limit,
        "result": {"status": "budget-limited", "roundsStarted": limit, "report": last},
    }
