"""The persistent ``bash`` (catalog package ``dsh-tool-bash-persistent``).

One PTY shell per owning scope, created on first use and kept by the ``TerminalManager``;
calls of one owner run one at a time (its slot's lock), so the current directory and
exported variables carry over from call to call.

Each call writes the command to a private file and types one line into the shell:
``builtin eval "$(< FILE)" </dev/null; builtin printf '\\036%s:%d\\037\\n' NONCE "$?"``.
The nonce is fresh and random for every call and never part of the command, and the
command cannot read the rest of the typed line (its standard input is ``/dev/null``), so
output cannot fake the end of a call; the marker's control bytes are not what the typed
line contains either, so even re-enabled echo cannot match it, and ``builtin`` skips any
``eval``/``printf`` functions the command defined. (A command that deliberately reads its
own shell's memory could still find the nonce: the shell is the caller's own.) A timeout,
an abort or the shell's exit resets the owner's shell (its whole tree is killed); the next
call starts a fresh one.
"""

from __future__ import annotations

import os
import re
import secrets
from typing import Any

import anyio

from codemode.engine import AbortError, ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import BACKGROUND_VALUE_SCHEMA, arg, is_blank, result_parts, text_of
from .._config import ToolsConfig, ensure_private_dir
from .._errors import BashError, TerminalError
from .._text import utf16_head, utf16_len
from ..shell._bash import (
    FOREGROUND_VALUE_SCHEMA,
    background_job,
    check_timeout,
    managed_env,
    resolve_workdir,
)
from ._pty import PtySession
from ._sessions import TerminalManager

__all__ = ["build_persistent_bash", "render_persistent"]

_PACKAGE = "@deepseek-ai/dsh-tool-bash-persistent"
CLIP = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
    "You should retry this tool after you have searched inside the file with `grep -n` in "
    "order to find the line numbers of what you are looking for.</NOTE>"
)
LOST = (
    "<response clipped><NOTE>The beginning of this command output was dropped by the terminal "
    "scrollback limit. The following text is the earliest retained output.</NOTE>\n"
)
RESET = (
    "The persistent bash shell was reset; the next bash call starts from the workspace with a "
    "fresh current directory and environment."
)
_INIT_TIMEOUT_S = 10.0
# The one-shot bash's value, plus ``reset``: the shell was reset (a timeout or its exit), so
# the next call starts afresh. A PTY merges the streams: ``stderr`` is always empty, and
# ``stdout.truncated`` says the text was clipped (its head is kept, as the catalog's text).
_FOREGROUND = {
    **FOREGROUND_VALUE_SCHEMA,
    "properties": {
        **FOREGROUND_VALUE_SCHEMA["properties"],
        "reset": {"type": "boolean", "required": True},
    },
}
_OUTPUT_SCHEMA = {"oneOf": [BACKGROUND_VALUE_SCHEMA, _FOREGROUND]}
_EXIT_MARKER = re.compile(r"\n\[exit code: (-?\d+)\]$")
_SHELL_ARGV = ("bash", "--norc", "--noprofile", "--noediting", "-i")
# No echo (typed lines stay out of the output), no CR before LF, no history (the typed line
# with the nonce stays out of reach of ``history``), no job-control notices, no prompts.
_INIT = (
    "stty -echo -onlcr 2>/dev/null; set +o history; history -c; set +m; "
    "unset HISTFILE PROMPT_COMMAND; "
    "PS1=''; PS2=''; "
)


def _marker_command(nonce: str) -> str:
    # ``builtin``: a function the command defines named ``printf`` is not called.
    return f"builtin printf '\\036%s:%d\\037\\n' {nonce} \"$?\""


def _marker(nonce: str) -> re.Pattern[str]:
    return re.compile("\x1e" + nonce + r":(\d+)\x1f\n?")


def _clip(body: str, lost: bool, max_chars: int) -> tuple[str, bool]:
    """The text as the catalog shows it, and whether anything was cut."""
    if lost:
        return LOST + utf16_head(body, max_chars) + CLIP, True
    if utf16_len(body) > max_chars:
        return utf16_head(body, max_chars) + CLIP, True
    return body, False


def render_persistent(value: dict[str, Any]) -> str:
    """The catalog's text of a persistent bash value (``reset``: the timeout's or the
    shell exit's wording; otherwise the output and a non-zero exit marker)."""
    if value["kind"] == "background":
        return f"started background job {value['jobId']}"
    body = str(value["stdout"]["text"])
    if value["timedOut"]:
        seconds = int(value["timeoutMs"] / 1000 + 0.5)
        return (
            f"Your command timed out after {seconds} seconds or experienced an OOM error. "
            f"Below is partial output:\n{body}\n{RESET}"
        )
    if value["reset"]:
        if value["signal"]:
            marker = f"[shell killed by signal: {value['signal']}]"
        elif value["exitCode"] is not None:
            marker = f"[shell exited: code {value['exitCode']}]"
        else:
            marker = "[shell exited]"
        return "\n".join([*([body] if body else []), marker, RESET])
    code = value["exitCode"]
    if code:
        return f"{body}\n[exit code: {code}]" if body else f"[exit code: {code}]"
    return body


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def _tidy(raw: str) -> str:
    body = raw.replace("\r\n", "\n")
    return body[:-1] if body.endswith("\n") else body


async def _await_marker(
    pty: PtySession, start: int, pattern: re.Pattern[str]
) -> tuple[int, int] | None:
    """``(absolute position, exit status)`` of the marker once it appears after ``start``
    (``None`` if the shell exits first)."""
    searched = start
    while True:
        # Only the new text (plus a marker's length before it) is searched again.
        origin = max(start, searched - 64, pty.dropped_chars)
        raw, _lost = pty.text_since(origin)
        match = pattern.search(raw)
        if match is not None:
            return origin + match.start(), int(match.group(1))
        searched = pty.end
        if pty.exited.is_set():
            return None
        await pty.changed()


def build_persistent_bash(
    cfg: ToolsConfig,
    shells: TerminalManager,
    *,
    timeout_ms: int = 300_000,
    max_output_chars: int = 16000,
    description: str | None = None,
) -> ToolDefinition:
    """The persistent ``bash`` tool: one shell per owning scope, kept by ``shells``."""
    for label, value in (("timeout_ms", timeout_ms), ("max_output_chars", max_output_chars)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{label} must be a positive integer")

    async def start_shell(ctx: Any) -> PtySession:
        root = cfg.workspace.root
        env = {**managed_env(cfg, root, ctx), "TERM": "dumb", "PS1": "", "PS2": "", "HISTFILE": ""}
        pty = await shells.spawn(_SHELL_ARGV, cwd=root, env=env)
        nonce = secrets.token_hex(16)
        start = pty.end
        matched = None
        with anyio.move_on_after(_INIT_TIMEOUT_S):
            await pty.write((_INIT + _marker_command(nonce) + "\n").encode())
            matched = await _await_marker(pty, start, _marker(nonce))
        if matched is None:
            await pty.close()
            raise TerminalError(
                "persistent bash shell did not accept initialization", "TERMINAL_SHELL_INIT_FAILED"
            )
        return pty

    async def execute(args: Any, ctx: Any) -> Any:
        command = args["command"]
        if not isinstance(command, str) or not command.strip():
            raise TerminalError("command must be a non-empty string", "TERMINAL_INVALID_ARGS")
        # The one-shot bash's arguments, which the catalog's schema of this variant does not
        # list (it stays byte-exact): a description is only shown, a deadline applies to
        # this call, a workdir is where the command starts (a ``cd`` first, so the shell
        # stays there, as it would after a typed ``cd``), and a background command runs as
        # a one-shot job (a fresh shell: not this one, which runs one command at a time).
        description = arg(args, "description")
        if description is not None and is_blank(description):
            raise BashError(
                "invalid description: expected a non-empty string", "BASH_INVALID_DESCRIPTION"
            )
        limit = check_timeout(args, timeout_ms, max(timeout_ms, cfg.bash_max_timeout_ms))
        cwd = resolve_workdir(cfg, args) if arg(args, "workdir") is not None else None
        if arg(args, "run_in_background") is True:
            return background_job(cfg, args, ctx, cwd or cfg.workspace.root)
        owner = getattr(ctx, "agent", None)
        if owner is None:
            raise TerminalError("bash requires an owning agent session", "TERMINAL_NO_AGENT")
        slot = shells.shell_slot(owner)
        async with slot.lock:
            if slot.pty is not None and slot.pty.exited.is_set():
                await slot.pty.close()
                slot.pty = None
            if slot.pty is None:
                slot.pty = await start_shell(ctx)
            pty = slot.pty
            nonce = secrets.token_hex(16)
            directory = ensure_private_dir(os.path.join(shells.work_dir, "bash"))
            path = os.path.join(directory, f"{nonce}.sh")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(command)
            line = f'builtin eval "$(< {_quote(path)})" </dev/null; {_marker_command(nonce)}\n'
            if cwd is not None:
                line = f"builtin cd -- {_quote(cwd)} && {line}"
            start = pty.end
            matched: tuple[int, int] | None = None
            timed_out = aborted = False
            try:
                async with anyio.create_task_group() as group:

                    async def watch() -> None:
                        nonlocal aborted
                        await ctx.signal.wait()
                        aborted = True
                        group.cancel_scope.cancel()

                    group.start_soon(watch)
                    with anyio.move_on_after(limit / 1000) as deadline:
                        await pty.write(line.encode())
                        matched = await _await_marker(pty, start, _marker(nonce))
                    timed_out = deadline.cancelled_caught
                    group.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    os.unlink(path)
                    if matched is None:
                        # Timeout, abort, exit or cancellation: the shell is reset.
                        slot.pty = None
                        await pty.close()
            raw, lost = pty.text_since(start)
            value: dict[str, Any] = {
                "kind": "foreground",
                "exitCode": None,
                "signal": None,
                "timedOut": False,
                "aborted": False,
                "timeoutMs": limit,
                "stdout": {},
                "stderr": {"text": "", "truncated": False},
                "reset": matched is None,
            }
            if matched is not None:
                end, code = matched
                raw = raw[: end - max(start, pty.dropped_chars)]
                value["exitCode"] = code
            elif aborted:
                raise AbortError("tool call aborted")
            elif timed_out:
                value["timedOut"] = True
            else:
                status = pty.status
                value["signal"] = status.get("signal") or None
                if value["signal"] is None:
                    value["exitCode"] = status.get("exitCode")
            body, clipped = _clip(_tidy(raw), lost, max_output_chars)
            value["stdout"] = {"text": body, "truncated": clipped}
            return value

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(render_persistent(value))]

    def present_call(args: Any) -> Any:
        card: dict[str, Any] = {"card": "terminal", "title": args["command"]}
        if isinstance(arg(args, "description"), str):
            card["description"] = args["description"]
        if isinstance(arg(args, "workdir"), str):
            card["cwd"] = args["workdir"]
        return card

    def present_result(args: Any, result: Any) -> Any:
        content, is_error, _meta = result_parts(result)
        body = text_of(content)
        if body is None or is_error:
            return None
        match = _EXIT_MARKER.search(body) or re.fullmatch(r"\[exit code: (-?\d+)\]", body)
        if match is None:
            return {"card": "terminal", "output": body, "exitCode": 0}
        return {
            "card": "terminal",
            "output": body[: match.start()],
            "exitCode": int(match.group(1)),
        }

    return define_catalog_tool(
        "bash",
        package=_PACKAGE,
        description=description,
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=render),
        execute=execute,
        present_call=present_call,
        present_result=present_result,
    )
