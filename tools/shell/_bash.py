"""``bash``: one ``bash -c`` process per call, in the workspace (or ``workdir``).

Every failure is a ``BashError`` with a stable ``BASH_*`` code (or a coded ``JobError``,
``FsError`` or ``AbortError``); see ``_process``, ``_launcher`` and ``_cgroup`` for how a
call's processes are contained and killed.

Foreground calls keep the last 64,000 bytes of each stream in memory and, once a stream
outgrows that, the whole stream in a spill file under the runtime-owned output directory
(dropped past 64 MiB). ``run_in_background`` hands the same process to the ``JobManager``.
"""

from __future__ import annotations

import os
import re
import stat as stat_mod
from typing import Any

import anyio

from codemode.engine import AbortError, ToolDefinition, ToolOutput, text
from codemode.engine.policies import utf8_tail_bytes

from .._catalog import catalog_entry, define_catalog_tool
from .._common import BACKGROUND_VALUE_SCHEMA, arg, is_blank, result_parts, text_of
from .._config import ToolsConfig, ensure_private_dir
from .._errors import BashError, FsError
from .._text import js_json
from ._env import host_env
from ._jobs import Job
from ._process import BashProcess, signal_name

__all__ = [
    "FOREGROUND_VALUE_SCHEMA",
    "background_job",
    "build_bash",
    "check_timeout",
    "managed_env",
    "render_bash",
    "resolve_workdir",
]

_STREAM = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "text": {"type": "string", "required": True},
        "truncated": {"type": "boolean", "required": True},
        "spillPath": {"type": "string"},
    },
}
_NULLABLE_INT = {"oneOf": [{"type": "integer"}, {"type": "null"}]}
_NULLABLE_STR = {"oneOf": [{"type": "string"}, {"type": "null"}]}
#: A finished (foreground) call's value; the persistent bash's adds ``reset``.
FOREGROUND_VALUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kind": {"type": "string", "const": "foreground", "required": True},
        "exitCode": {**_NULLABLE_INT, "required": True},
        "signal": {**_NULLABLE_STR, "required": True},
        "timedOut": {"type": "boolean", "required": True},
        "aborted": {"type": "boolean", "required": True},
        "timeoutMs": {"type": "number", "required": True},
        "stdout": {**_STREAM, "required": True},
        "stderr": {**_STREAM, "required": True},
    },
}
_OUTPUT_SCHEMA = {"oneOf": [BACKGROUND_VALUE_SCHEMA, FOREGROUND_VALUE_SCHEMA]}
_BAD_WORKDIR = "BASH_INVALID_WORKDIR"
_MARKER = re.compile(r"\n\[(killed by signal|exit code): ([^\]\n]+)\]$")


class _Capture:
    """One foreground stream: a bounded tail in memory, the whole stream spilled on overflow."""

    def __init__(self, tail_bytes: int, spill_max: int, spill_path: str) -> None:
        self.tail_bytes = tail_bytes
        self.spill_max = spill_max
        self.spill_path = spill_path
        self.buf = bytearray()
        self.total = 0
        self.file: Any = None
        self.spill_ok = True

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.buf.extend(data)
        if self.total > self.tail_bytes and self.spill_ok:
            try:
                if self.file is None:
                    ensure_private_dir(os.path.dirname(self.spill_path))
                    self.file = open(self.spill_path, "wb")  # closed in result()
                    self.file.write(self.buf)
                elif self.total > self.spill_max:
                    self.spill_ok = False
                else:
                    self.file.write(data)
            except OSError:
                self.spill_ok = False
        if len(self.buf) > 2 * self.tail_bytes:
            del self.buf[: len(self.buf) - self.tail_bytes]

    def result(self) -> dict[str, Any]:
        if self.file is not None:
            self.file.close()
            if not self.spill_ok:
                os.unlink(self.spill_path)
        if self.total <= self.tail_bytes:
            return {"text": bytes(self.buf).decode("utf-8", "replace"), "truncated": False}
        tail = utf8_tail_bytes(bytes(self.buf), self.tail_bytes).decode("utf-8", "replace")
        out: dict[str, Any] = {"text": tail, "truncated": True}
        if self.file is not None and self.spill_ok:
            out["spillPath"] = self.spill_path
        return out


def managed_env(
    cfg: ToolsConfig, workdir: str, ctx: Any, job_id: str | None = None
) -> dict[str, str]:
    """The child environment: the host's that ``cfg.bash_env`` lets through (``_env``),
    minus stale managed variables, plus the host's ``extra_env`` and fresh managed ones."""
    prefix = cfg.env_prefix
    env = host_env(cfg.bash_env, prefix)
    env.update(cfg.extra_env)
    env[f"{prefix}WORKSPACE"] = cfg.workspace.root
    env[f"{prefix}WORKDIR"] = workdir
    env[f"{prefix}OUTPUT_DIR"] = cfg.output_dir
    env[f"{prefix}CALL_ID"] = str(ctx.call_id)
    agent = getattr(ctx, "agent", None)
    if agent is not None:
        env[f"{prefix}AGENT"] = str(getattr(agent, "name", ""))
    if job_id is not None:
        env[f"{prefix}JOB_ID"] = job_id
    return env


def _stream_text(stream: dict[str, Any]) -> str:
    if not stream["truncated"]:
        return str(stream["text"])
    return f"{stream['text']}\n[output truncated; full output: {stream.get('spillPath') or '(unavailable)'}]"


def _fmt_ms(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def render_bash(value: dict[str, Any]) -> str:
    """The model-facing text of a bash value."""
    if value["kind"] == "background":
        return f"started background job {value['jobId']}"
    body = _stream_text(value["stdout"])
    err = _stream_text(value["stderr"])
    if err:
        if body and not body.endswith("\n"):
            body += "\n"
        body += f"[stderr]\n{err}"
    if not body:
        body = "(no output)"
    markers = []
    if value["timedOut"]:
        markers.append(f"[timed out after {_fmt_ms(value['timeoutMs'])}ms]")
    if value["signal"]:
        markers.append(f"[killed by signal: {value['signal']}]")
    elif value["exitCode"] != 0:
        markers.append(f"[exit code: {value['exitCode']}]")
    if markers:
        if not body.endswith("\n"):
            body += "\n"
        body += "\n".join(markers)
    return body


def resolve_workdir(cfg: ToolsConfig, args: Any) -> str:
    """``args``' ``workdir``, confined to the workspace and checked (the workspace without one)."""
    raw = arg(args, "workdir")
    if raw is None:
        return cfg.workspace.root
    if is_blank(raw):
        raise BashError("invalid workdir: expected a non-empty string", _BAD_WORKDIR)
    try:
        resolved = cfg.workspace.resolve(raw, write=True)
    except FsError as exc:
        # A malformed path (a NUL character) is a bad argument of this tool; confinement
        # refusals keep their FS_* code.
        if exc.code != "FS_INVALID_PATH":
            raise
        raise BashError(f"invalid workdir: {exc}", _BAD_WORKDIR) from None
    except ValueError as exc:
        raise BashError(f"invalid workdir: {exc}", _BAD_WORKDIR) from None
    try:
        st = os.stat(resolved.real)
    except OSError:
        raise BashError(
            f'invalid workdir: "{resolved.display}" does not exist', _BAD_WORKDIR
        ) from None
    if not stat_mod.S_ISDIR(st.st_mode):
        raise BashError(f'invalid workdir: "{resolved.display}" is not a directory', _BAD_WORKDIR)
    return resolved.real


async def _foreground(cfg: ToolsConfig, args: Any, ctx: Any, cwd: str, timeout_ms: float) -> Any:
    spill_base = os.path.join(cfg.output_dir, f"bash-{os.urandom(6).hex()}")
    out = _Capture(cfg.bash_tail_bytes, cfg.bash_spill_max_bytes, spill_base + ".stdout")
    err = _Capture(cfg.bash_tail_bytes, cfg.bash_spill_max_bytes, spill_base + ".stderr")
    proc = BashProcess(
        args["command"],
        cwd=cwd,
        env=managed_env(cfg, cwd, ctx),
        on_stdout=out.feed,
        on_stderr=err.feed,
    )
    await proc.start()
    aborted = False
    timed_out = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal aborted
            await ctx.signal.wait()
            aborted = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        timed_out = await proc.run(timeout_ms / 1000)
        group.cancel_scope.cancel()
    stdout, stderr = out.result(), err.result()
    if aborted:
        raise AbortError("tool call aborted")
    assert proc.process is not None
    code = proc.process.returncode
    sig = signal_name(code)
    return {
        "kind": "foreground",
        "exitCode": None if sig is not None else code,
        "signal": sig,
        "timedOut": timed_out,
        "aborted": False,
        "timeoutMs": timeout_ms,
        "stdout": stdout,
        "stderr": stderr,
    }


def background_job(cfg: ToolsConfig, args: Any, ctx: Any, cwd: str) -> Any:
    """Start ``args["command"]`` as a ``bash`` job of ``cfg.jobs``; its background value."""
    jobs = cfg.jobs
    if jobs is None:
        raise BashError(
            "background jobs unavailable: no JobManager is configured "
            "(pass jobs=JobManager() to tools.default_tools)",
            "BASH_JOBS_UNAVAILABLE",
        )
    command = args["command"]

    async def produce(job: Job) -> None:
        proc = BashProcess(
            command,
            cwd=cwd,
            env=managed_env(cfg, cwd, ctx, job.id),
            on_stdout=job.stdout.feed,
            on_stderr=job.stderr.feed,
        )
        await proc.start()
        assert proc.process is not None
        try:
            await proc.run(None)
        except anyio.get_cancelled_exc_class():
            sig = signal_name(proc.process.returncode)
            job.settle("killed", f"signal: {sig}" if sig else "killed before exit")
            raise
        code = proc.process.returncode
        sig = signal_name(code)
        if sig is not None or job.status == "stopping":
            job.settle("killed", f"signal: {sig}" if sig else "killed before exit")
        else:
            job.settle("completed", f"exit code: {code}")

    job = jobs.start(kind="bash", label=command, agent=ctx.agent, run=produce)
    return {"kind": "background", "jobId": job.id}


def check_timeout(args: Any, default_ms: float, max_ms: float) -> float:
    """The deadline of a call: ``timeoutMs`` (checked) or ``default_ms``, at most ``max_ms``."""
    requested = arg(args, "timeoutMs")
    if requested is not None and (
        isinstance(requested, bool)
        or not isinstance(requested, (int, float))
        or not (requested > 0 and requested != float("inf"))
    ):
        raise BashError(
            f"invalid timeoutMs: expected a positive number, got {js_json(requested)}",
            "BASH_INVALID_TIMEOUT",
        )
    limit = default_ms if requested is None else requested
    effective = min(limit, max_ms)
    if isinstance(effective, float) and effective.is_integer():
        effective = int(effective)
    return effective


def build_bash(cfg: ToolsConfig) -> ToolDefinition:
    """The ``bash`` tool bound to ``cfg``."""
    # The managed variables carry this project's prefix, so the description names it.
    description = catalog_entry("bash")["description"].replace("$DSH_*", f"${cfg.env_prefix}*")

    async def execute(args: Any, ctx: Any) -> Any:
        if is_blank(args["command"]):
            raise BashError("invalid command: expected a non-empty string", "BASH_INVALID_COMMAND")
        if is_blank(args["description"]):
            raise BashError(
                "invalid description: expected a non-empty string", "BASH_INVALID_DESCRIPTION"
            )
        effective = check_timeout(args, cfg.bash_default_timeout_ms, cfg.bash_max_timeout_ms)
        cwd = resolve_workdir(cfg, args)
        if arg(args, "run_in_background") is True:
            return background_job(cfg, args, ctx, cwd)
        return await _foreground(cfg, args, ctx, cwd, effective)

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(render_bash(value))]

    def present_call(args: Any) -> Any:
        command = args["command"]
        if arg(args, "run_in_background") is True:
            return {
                "card": "generic",
                "title": command,
                "kind": "execute",
                "rawInput": command,
                "content": [text(args["description"])],
            }
        card: dict[str, Any] = {
            "card": "terminal",
            "title": command,
            "description": args["description"],
        }
        if isinstance(arg(args, "workdir"), str):
            card["cwd"] = args["workdir"]
        return card

    def present_result(args: Any, result: Any) -> Any:
        content, is_error, _meta = result_parts(result)
        body = text_of(content)
        if body is None:
            return None
        if is_error or arg(args, "run_in_background") is True:
            console = "```console\n" + body.rstrip("\n") + "\n```"
            return {"card": "generic", "title": args["command"], "content": [text(console)]}
        card: dict[str, Any] = {"card": "terminal"}
        match = _MARKER.search(body)
        if match is None:
            card.update(output=body, exitCode=0)
        elif match.group(1) == "killed by signal":
            card.update(output=body[: match.start()], signal=match.group(2))
        else:
            try:
                code = int(match.group(2))
            except ValueError:
                return None
            card.update(output=body[: match.start()], exitCode=code)
        return card

    return define_catalog_tool(
        "bash",
        description=description,
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render),
        execute=execute,
        present_call=present_call,
        present_result=present_result,
    )
