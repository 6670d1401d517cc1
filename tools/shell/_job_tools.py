"""``job_list``, ``job_output`` and ``job_kill``: the calling agent's background jobs.

Every failure is a ``JobError`` with a stable code (``JOB_INVALID_ID``, ``JOB_NOT_FOUND``,
``JOB_INVALID_WAIT_TIMEOUT``) or an ``AbortError``. Another session's job is
deliberately ``unknown job {id}`` (``JOB_NOT_FOUND``), exactly like an id that never existed.
"""

from __future__ import annotations

from typing import Any

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import arg, result_parts, text_of
from .._config import ToolsConfig
from .._errors import JobError
from .._text import js_json
from ._jobs import Job, status_line, unknown_job

__all__ = ["build_job_kill", "build_job_list", "build_job_output"]

_JOB = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "required": True},
        "kind": {"type": "string", "required": True},
        "label": {"type": "string", "required": True},
        "status": {
            "type": "string",
            "enum": ["running", "stopping", "completed", "killed", "failed"],
            "required": True,
        },
        "detail": {"type": "string"},
        "startedAt": {"type": "integer", "required": True},
        "finishedAt": {"type": "integer"},
    },
}


def _lookup(cfg: ToolsConfig, args: Any, ctx: Any) -> Job:
    job_id = args["job_id"]
    if not job_id.strip():
        raise JobError(
            f"invalid job_id: expected a non-empty string, got {js_json(job_id)}",
            "JOB_INVALID_ID",
        )
    if cfg.jobs is None:
        raise unknown_job(job_id)
    return cfg.jobs.lookup(job_id, ctx.agent)


def _with_job(properties: dict[str, Any]) -> dict[str, Any]:
    """A closed object of ``properties`` followed by the required ``job`` snapshot."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {**properties, "job": {**_JOB, "required": True}},
    }


def build_job_list(cfg: ToolsConfig) -> ToolDefinition:
    """The ``job_list`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        if cfg.jobs is None:
            return []
        return [job.snapshot() for job in cfg.jobs.visible(ctx.agent)]

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        if not value:
            return [text("(no background jobs)")]
        rows = (f"{j['id']} [{j['kind']}] {j['status']} — {j['label']}" for j in value)
        return [text("\n".join(rows))]

    return define_catalog_tool(
        "job_list",
        output=ToolOutput(schema={"type": "array", "items": _JOB}, render=render),
        execute=execute,
        present_call=lambda args: {
            "card": "generic",
            "title": "List background jobs",
            "kind": "read",
        },
    )


def build_job_output(cfg: ToolsConfig) -> ToolDefinition:
    """The ``job_output`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        job = _lookup(cfg, args, ctx)
        if arg(args, "wait") is True:
            jobs = cfg.jobs
            assert jobs is not None
            requested = arg(args, "timeout_ms")
            if requested is not None and not requested > 0:
                raise JobError(
                    "invalid wait timeout: expected a positive number of milliseconds, "
                    f"got {js_json(requested)}",
                    "JOB_INVALID_WAIT_TIMEOUT",
                )
            timeout = jobs.wait_timeout_ms if requested is None else requested
            await jobs.wait(job, min(timeout, jobs.max_wait_timeout_ms), ctx.signal)
        terminal = job.terminal
        text_out = job.take_text()
        if terminal:
            job.reported = True
        return {"text": text_out, "job": job.snapshot()}

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        body = value["text"] or "(no new output)"
        if not body.endswith("\n"):
            body += "\n"
        return [text(body + status_line(value["job"]))]

    def present_result(args: Any, result: Any) -> Any:
        # A job's output is terminal output: show it (and its status line) as a terminal
        # card. Failures keep the generic card, which shows the error text.
        content, is_error, _meta = result_parts(result)
        body = text_of(content)
        if is_error or body is None:
            return None
        return {"card": "terminal", "title": f"background job {args['job_id']}", "output": body}

    schema = _with_job({"text": {"type": "string", "required": True}})
    return define_catalog_tool(
        "job_output",
        output=ToolOutput(schema=schema, render=render),
        execute=execute,
        present_call=lambda args: {
            "card": "generic",
            "title": f"Read output from background job {args['job_id']}",
            "kind": "read",
            "rawInput": args["job_id"],
        },
        present_result=present_result,
    )


def build_job_kill(cfg: ToolsConfig) -> ToolDefinition:
    """The ``job_kill`` tool bound to ``cfg``."""

    async def execute(args: Any, ctx: Any) -> Any:
        job = _lookup(cfg, args, ctx)
        if job.terminal:
            return {"outcome": "already-finished", "job": job.snapshot()}
        reason = arg(args, "reason")
        job.request_kill(reason if isinstance(reason, str) else None)
        return {"outcome": "cancellation-requested", "job": job.snapshot()}

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        job = value["job"]
        if value["outcome"] == "already-finished":
            return [text(f"job {job['id']} had already finished {status_line(job)}")]
        return [text(f"requested cancellation of job {job['id']}")]

    outcome = {
        "type": "string",
        "enum": ["cancellation-requested", "already-finished"],
        "required": True,
    }
    return define_catalog_tool(
        "job_kill",
        output=ToolOutput(schema=_with_job({"outcome": outcome}), render=render),
        execute=execute,
        present_call=lambda args: {
            "card": "generic",
            "title": f"Kill background job {args['job_id']}",
            "kind": "execute",
        },
    )
