"""``terminal_open``, ``terminal_send``, ``terminal_read``, ``terminal_signal``,
``terminal_list`` and ``terminal_close``: the calling scope's persistent terminals.

Every rendered text is bounded to ``max_result_bytes`` UTF-8 bytes: a render tail-cuts its
body and keeps its ``[…]`` metadata lines plus ``[output truncated]``; a final pass
head-cuts whatever is still over the cap. Values are bounded the same way (``viewport`` and
``text`` keep their newest output), with ``truncated`` saying so.
"""

from __future__ import annotations

import os
import signal as signal_mod
import stat as stat_mod
from typing import Any

import anyio

from codemode.engine import AbortError, ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import BACKGROUND_VALUE_SCHEMA, arg, result_parts, text_of
from .._config import ToolsConfig
from .._errors import FsError, TerminalError
from ..shell._bash import managed_env
from ..shell._jobs import Job
from ._pty import PtySession, WaitReason, clean_terminal_text
from ._sessions import TerminalManager, TerminalSession

__all__ = ["bound_text", "build_terminal_tools"]

_TRUNCATED = "\n[output truncated]"
_STATUS = {
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {"kind": {"type": "string", "const": "running", "required": True}},
        },
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "const": "exited", "required": True},
                "exitCode": {"oneOf": [{"type": "integer"}, {"type": "null"}], "required": True},
                "signal": {"oneOf": [{"type": "string"}, {"type": "null"}], "required": True},
            },
        },
    ]
}
_SNAPSHOT_PROPS: dict[str, Any] = {
    "sessionId": {"type": "string", "required": True},
    "name": {"type": "string"},
    "type": {"type": "string", "required": True},
    "pid": {"type": "integer"},
    "status": {**_STATUS, "required": True},
}
_SNAPSHOT = {"type": "object", "additionalProperties": False, "properties": _SNAPSHOT_PROPS}


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _utf8_tail(s: str, n: int) -> str:
    # Leading continuation bytes of a cut code point are dropped.
    return s.encode("utf-8", "surrogatepass")[-n:].decode("utf-8", "ignore") if n > 0 else ""


def _utf8_head(s: str, n: int) -> str:
    # A trailing partial sequence is dropped.
    return s.encode("utf-8", "surrogatepass")[:n].decode("utf-8", "ignore") if n > 0 else ""


def bound_text(body: str, meta: list[str], truncated: bool, cap: int) -> str:
    """``body`` plus its metadata lines, within ``cap`` UTF-8 bytes (see the module doc)."""
    suffix = "".join("\n" + line for line in meta) + (_TRUNCATED if truncated else "")
    if _utf8_len(body) + _utf8_len(suffix) <= cap:
        return body + suffix
    if not truncated:
        suffix += _TRUNCATED
    room = cap - _utf8_len(suffix)
    out = _utf8_tail(body, room) + suffix
    if _utf8_len(out) <= cap:
        return out
    return _utf8_head(out, cap - _utf8_len(_TRUNCATED)) + _TRUNCATED


def _status_text(status: dict[str, Any]) -> str:
    if status["kind"] == "running":
        return "running"
    code = "null" if status["exitCode"] is None else str(status["exitCode"])
    sig = "null" if status["signal"] is None else str(status["signal"])
    return f"exited code={code} signal={sig}"


def _label(snapshot: dict[str, Any]) -> str:
    name = snapshot.get("name")
    return f"{snapshot['sessionId']} ({name})" if name is not None else snapshot["sessionId"]


def _owner(ctx: Any) -> object:
    agent = getattr(ctx, "agent", None)
    if agent is None:
        raise TerminalError("terminal tools require an initiating agent", "TERMINAL_NO_AGENT")
    return agent


def _session(terminals: TerminalManager, args: Any, ctx: Any) -> TerminalSession:
    owner = _owner(ctx)
    session_id = args["sessionId"]
    if not session_id.strip():
        raise TerminalError("sessionId must be a non-empty string", "TERMINAL_INVALID_ARGS")
    return terminals.lookup(owner, session_id)


def _cwd(cfg: ToolsConfig, raw: Any) -> str:
    if raw is None:
        return cfg.workspace.root
    if not raw.strip():
        raise TerminalError("cwd must be a non-empty string", "TERMINAL_INVALID_ARGS")
    try:
        resolved = cfg.workspace.resolve(raw, write=True)
    except FsError as exc:
        if exc.code != "FS_INVALID_PATH":
            raise
        raise TerminalError(f"invalid cwd: {exc}", "TERMINAL_INVALID_CWD") from None
    except ValueError as exc:
        raise TerminalError(f"invalid cwd: {exc}", "TERMINAL_INVALID_CWD") from None
    try:
        mode = os.stat(resolved.real).st_mode
    except OSError:
        raise TerminalError(
            f'invalid cwd: "{resolved.display}" does not exist', "TERMINAL_INVALID_CWD"
        ) from None
    if not stat_mod.S_ISDIR(mode):
        raise TerminalError(
            f'invalid cwd: "{resolved.display}" is not a directory', "TERMINAL_INVALID_CWD"
        )
    return resolved.real


def _non_negative_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0 and value != float("inf"):
        return int(value)
    return None


def _viewport(pty: PtySession, start: int, cap: int) -> tuple[str, bool]:
    raw, lost = pty.text_since(start)
    view = clean_terminal_text(raw)
    if _utf8_len(view) > cap:
        return _utf8_tail(view, cap), True
    return view, lost


def _input_bytes(args: Any) -> bytes:
    data = str(args["text"])
    # Enter is a carriage return on a terminal (the line discipline maps it for programs
    # in cooked mode; raw-mode programs expect it).
    if arg(args, "submit") is not False:
        data += "\r"
    return data.encode("utf-8", "surrogatepass")


async def _write_and_wait(
    pty: PtySession, data: bytes, idle_ms: int, timeout_ms: int
) -> WaitReason:
    """Type ``data``, then wait; the deadline covers both (a program that never reads its
    terminal leaves input unwritten once the terminal's input queue is full)."""
    deadline = anyio.current_time() + timeout_ms / 1000
    with anyio.move_on_after(timeout_ms / 1000):
        await pty.write(data)
        return await pty.wait_quiet(
            idle_s=idle_ms / 1000, timeout_s=max(0.0, deadline - anyio.current_time())
        )
    return "timeout"


def _generic(title: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {"card": "generic", "title": title, "kind": kind, **extra}


def build_terminal_tools(
    cfg: ToolsConfig, terminals: TerminalManager, *, max_result_bytes: int = 262144
) -> list[ToolDefinition]:
    """The six terminal tools bound to ``cfg`` and a running ``terminals`` manager."""
    if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int):
        raise ValueError("max_result_bytes must be an integer")
    if max_result_bytes < 64:
        raise ValueError("max_result_bytes must be at least 64")
    cap = max_result_bytes

    def bounded(body: str, meta: list[str], truncated: bool = False) -> list[dict[str, Any]]:
        return [text(bound_text(body, meta, truncated, cap))]

    # -- terminal_open ----------------------------------------------------------------

    async def open_execute(args: Any, ctx: Any) -> Any:
        owner = _owner(ctx)
        kind = args["type"]
        name = arg(args, "name")
        if name is not None and not name.strip():
            raise TerminalError("name must be a non-empty string", "TERMINAL_INVALID_ARGS")
        cwd = _cwd(cfg, arg(args, "cwd"))
        env = managed_env(cfg, cwd, ctx)
        session = await terminals.open(owner, kind, name, cwd=cwd, env=env)
        with anyio.move_on_after(terminals.startup_timeout_ms / 1000):
            await session.pty.wait_quiet(
                idle_s=terminals.idle_ms / 1000, timeout_s=terminals.startup_timeout_ms / 1000
            )
        motd, _lost = _viewport(session.pty, 0, cap)
        return {**session.snapshot(), "motd": motd}

    def open_render(args: Any, value: Any) -> list[dict[str, Any]]:
        head = f"started terminal session {_label(value)} [type: {value['type']}]"
        return bounded(head + "\n" + (value["motd"] or "(no startup output)"), [])

    open_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {**_SNAPSHOT_PROPS, "motd": {"type": "string", "required": True}},
    }

    # -- terminal_send ----------------------------------------------------------------

    async def send_execute(args: Any, ctx: Any) -> Any:
        session = _session(terminals, args, ctx)
        data = _input_bytes(args)
        if session.pty.exited.is_set():
            raise TerminalError(
                f"terminal session {session.id} has exited", "TERMINAL_SESSION_EXITED"
            )
        if session.busy_with is not None or session.lock.locked():
            # Only a background send can be running (the terminal tools are exclusive).
            raise TerminalError(
                f"terminal session {session.id} is busy with another send; wait for "
                f"{session.busy_with} with job_output or stop it with job_kill, or interrupt "
                "it with terminal_signal",
                "TERMINAL_BUSY",
            )
        if arg(args, "run_in_background") is True:
            return _background(session, args, ctx, data)
        aborted = False
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal aborted
                await ctx.signal.wait()
                aborted = True
                group.cancel_scope.cancel()

            group.start_soon(watch)
            async with session.lock:
                start = session.pty.end
                reason = await _write_and_wait(
                    session.pty, data, terminals.idle_ms, terminals.send_timeout_ms
                )
            group.cancel_scope.cancel()
        if aborted:
            raise AbortError("terminal send aborted")
        viewport, truncated = _viewport(session.pty, start, cap)
        return {
            "kind": "foreground",
            "viewport": viewport,
            "waitReason": reason,
            "sessionStatus": session.pty.status,
            "truncated": truncated,
        }

    def _background(session: TerminalSession, args: Any, ctx: Any, data: bytes) -> Any:
        jobs = cfg.jobs
        if jobs is None:
            raise TerminalError(
                "background jobs unavailable: no JobManager is configured "
                "(pass jobs=JobManager() to tools.default_tools)",
                "TERMINAL_JOBS_UNAVAILABLE",
            )
        pty = session.pty

        async def produce(job: Job) -> None:
            try:
                await run_send(job)
            finally:
                session.busy_with = None

        async def run_send(job: Job) -> None:
            async with session.lock:
                fed = pty.end

                def feed(final: bool) -> None:
                    # Complete lines only until the end: an escape sequence or a carriage
                    # return never straddles what one read sees and the next.
                    nonlocal fed
                    raw, _lost = pty.text_since(fed)
                    cut = len(raw) if final else raw.rfind("\n") + 1
                    if cut > 0:
                        job.stdout.feed(clean_terminal_text(raw[:cut]).encode("utf-8", "replace"))
                        fed += cut

                reason: WaitReason = "timeout"
                async with anyio.create_task_group() as group:

                    async def pump() -> None:
                        while True:
                            await pty.changed()
                            feed(False)
                            if pty.exited.is_set():
                                return

                    group.start_soon(pump)
                    try:
                        reason = await _write_and_wait(
                            pty, data, terminals.idle_ms, terminals.background_timeout_ms
                        )
                    except anyio.get_cancelled_exc_class():
                        feed(True)
                        job.settle("killed", "send cancelled")
                        raise
                    group.cancel_scope.cancel()
                feed(True)
            job.settle("completed", f"wait: {reason}")

        shown = args["text"] or "(input)"
        job = jobs.start(
            kind="pty-send", label=f"{session.id}: {shown}", agent=ctx.agent, run=produce
        )
        session.busy_with = job.id
        return {"kind": "background", "jobId": job.id}

    def send_render(args: Any, value: Any) -> list[dict[str, Any]]:
        if value["kind"] == "background":
            return [text(f"started background job {value['jobId']}")]
        meta = [
            f"[wait: {value['waitReason']}]",
            f"[session: {_status_text(value['sessionStatus'])}]",
        ]
        return bounded(value["viewport"] or "(no new output)", meta, value["truncated"])

    send_schema = {
        "oneOf": [
            BACKGROUND_VALUE_SCHEMA,
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "kind": {"type": "string", "const": "foreground", "required": True},
                    "viewport": {"type": "string", "required": True},
                    "waitReason": {
                        "type": "string",
                        "enum": ["stdin_read", "inferred_idle", "timeout", "session_exit"],
                        "required": True,
                    },
                    "sessionStatus": {**_STATUS, "required": True},
                    "truncated": {"type": "boolean", "required": True},
                },
            },
        ]
    }

    def send_present_call(args: Any) -> Any:
        shown = args["text"] or "(input)"
        if arg(args, "run_in_background") is True:
            return _generic(f"{args['sessionId']}: {shown}", "execute", rawInput=args["text"])
        return {"card": "terminal", "title": shown, "description": f"terminal {args['sessionId']}"}

    def send_present_result(args: Any, result: Any) -> Any:
        content, is_error, _meta = result_parts(result)
        body = text_of(content)
        if body is None or is_error or arg(args, "run_in_background") is True:
            return None
        return {"card": "terminal", "output": body}

    # -- terminal_read ----------------------------------------------------------------

    async def read_execute(args: Any, ctx: Any) -> Any:
        session = _session(terminals, args, ctx)
        raw_offset = arg(args, "offset")
        offset = _non_negative_int(0 if raw_offset is None else raw_offset)
        if offset is None:
            raise TerminalError("offset must be a non-negative integer", "TERMINAL_INVALID_ARGS")
        raw_count = arg(args, "count")
        count = _non_negative_int(500 if raw_count is None else raw_count)
        if not count:
            raise TerminalError("count must be a positive integer", "TERMINAL_INVALID_ARGS")
        count = min(count, terminals.read_max_lines)
        pty = session.pty
        lines = clean_terminal_text(pty.raw).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first = pty.dropped_lines + 1
        total = pty.dropped_lines + len(lines)
        end = total - offset
        if not lines or end < first:
            return {
                "text": "",
                "totalLines": total,
                "lineBegin": 0,
                "lineEnd": 0,
                "truncated": False,
            }
        begin = max(first, end - count + 1)
        chosen = lines[begin - first : end - first + 1]
        truncated = False
        # Keep the newest lines within the cap (room for the metadata line stays).
        room = cap - 64
        size = sum(_utf8_len(line) + 1 for line in chosen)
        while len(chosen) > 1 and size > room:
            size -= _utf8_len(chosen.pop(0)) + 1
            begin += 1
            truncated = True
        body = "\n".join(chosen)
        if _utf8_len(body) > room:
            body, truncated = _utf8_tail(body, room), True
        return {
            "text": body,
            "totalLines": total,
            "lineBegin": begin,
            "lineEnd": end,
            "truncated": truncated,
        }

    def read_render(args: Any, value: Any) -> list[dict[str, Any]]:
        meta = [f"[lines: {value['lineBegin']}-{value['lineEnd']} of {value['totalLines']}]"]
        return bounded(value["text"] or "(no retained output)", meta, value["truncated"])

    read_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "required": True},
            "totalLines": {"type": "integer", "required": True},
            "lineBegin": {"type": "integer", "required": True},
            "lineEnd": {"type": "integer", "required": True},
            "truncated": {"type": "boolean", "required": True},
        },
    }

    # -- terminal_signal --------------------------------------------------------------

    async def signal_execute(args: Any, ctx: Any) -> Any:
        session = _session(terminals, args, ctx)
        pty = session.pty
        if pty.exited.is_set():
            raise TerminalError(
                f"terminal session {session.id} has exited", "TERMINAL_SESSION_EXITED"
            )
        sig = signal_mod.Signals[args["signal"]]
        pgid = pty.foreground_pgid()
        if sig is signal_mod.SIGKILL and (pgid is None or pty.is_shell_group(pgid)):
            raise TerminalError(
                "SIGKILL would kill the terminal's shell; use terminal_close to end the session",
                "TERMINAL_SIGNAL_REJECTED",
            )
        return {"delivered": True, "targetPgid": pty.signal_foreground(sig)}

    def signal_render(args: Any, value: Any) -> list[dict[str, Any]]:
        line = f"delivered {args['signal']} to foreground process group {value['targetPgid']}"
        return bounded(line, [])

    signal_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "delivered": {"type": "boolean", "const": True, "required": True},
            "targetPgid": {"type": "integer", "required": True},
        },
    }

    # -- terminal_list ----------------------------------------------------------------

    async def list_execute(args: Any, ctx: Any) -> Any:
        owner = _owner(ctx)
        return [session.snapshot() for session in terminals.sessions(owner)]

    def list_render(args: Any, value: Any) -> list[dict[str, Any]]:
        if not value:
            return bounded("(no terminal sessions)", [])
        rows = []
        for snap in value:
            pid = f" pid={snap['pid']}" if "pid" in snap else ""
            rows.append(f"{_label(snap)} [{snap['type']}] {_status_text(snap['status'])}{pid}")
        return bounded("\n".join(rows), [])

    # -- terminal_close ---------------------------------------------------------------

    async def close_execute(args: Any, ctx: Any) -> Any:
        session = _session(terminals, args, ctx)
        closed = await terminals.close_session(session)
        return {"sessionId": session.id, "outcome": "closed" if closed else "already-closing"}

    def close_render(args: Any, value: Any) -> list[dict[str, Any]]:
        if value["outcome"] == "closed":
            return bounded(f"closed terminal session {value['sessionId']}", [])
        return bounded(f"terminal session {value['sessionId']} was already closing", [])

    close_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "sessionId": {"type": "string", "required": True},
            "outcome": {"type": "string", "enum": ["closed", "already-closing"], "required": True},
        },
    }

    package = "@deepseek-ai/dsh-tool-terminal"
    return [
        define_catalog_tool(
            "terminal_open",
            package=package,
            output=ToolOutput(schema=open_schema, render=open_render),
            execute=open_execute,
            present_call=lambda args: _generic(f"Open terminal ({args['type']})", "execute"),
        ),
        define_catalog_tool(
            "terminal_send",
            package=package,
            output=ToolOutput(schema=send_schema, render=send_render),
            execute=send_execute,
            present_call=send_present_call,
            present_result=send_present_result,
        ),
        define_catalog_tool(
            "terminal_read",
            package=package,
            output=ToolOutput(schema=read_schema, render=read_render),
            execute=read_execute,
            present_call=lambda args: _generic(f"Read terminal {args['sessionId']}", "read"),
        ),
        define_catalog_tool(
            "terminal_signal",
            package=package,
            output=ToolOutput(schema=signal_schema, render=signal_render),
            execute=signal_execute,
            present_call=lambda args: _generic(
                f"Send {args['signal']} to terminal {args['sessionId']}", "execute"
            ),
        ),
        define_catalog_tool(
            "terminal_list",
            package=package,
            output=ToolOutput(schema={"type": "array", "items": _SNAPSHOT}, render=list_render),
            execute=list_execute,
            present_call=lambda args: _generic("List terminal sessions", "read"),
        ),
        define_catalog_tool(
            "terminal_close",
            package=package,
            output=ToolOutput(schema=close_schema, render=close_render),
            execute=close_execute,
            present_call=lambda args: _generic(f"Close terminal {args['sessionId']}", "execute"),
        ),
    ]
