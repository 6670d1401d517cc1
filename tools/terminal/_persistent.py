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
from .._common import result_parts, text_of
from .._config import ToolsConfig, ensure_private_dir
from .._errors import TerminalError
from .._text import utf16_head, utf16_len
from ..shell._bash import managed_env
from ._pty import PtySession
from ._sessions import TerminalManager

__all__ = ["build_persistent_bash"]

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


def _clip(body: str, lost: bool, max_chars: int) -> str:
    if lost:
        return LOST + utf16_head(body, max_chars) + CLIP
    if utf16_len(body) > max_chars:
        return utf16_head(body, max_chars) + CLIP
    return body


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
    seconds = int(timeout_ms / 1000 + 0.5)

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

    def exit_text(pty: PtySession, partial: str) -> str:
        status = pty.status
        if status.get("signal"):
            marker = f"[shell killed by signal: {status['signal']}]"
        elif status.get("exitCode") is not None:
            marker = f"[shell exited: code {status['exitCode']}]"
        else:
            marker = "[shell exited]"
        return "\n".join([*([partial] if partial else []), marker, RESET])

    async def execute(args: Any, ctx: Any) -> Any:
        command = args["command"]
        if not isinstance(command, str) or not command.strip():
            raise TerminalError("command must be a non-empty string", "TERMINAL_INVALID_ARGS")
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
            quoted = "'" + path.replace("'", "'\\''") + "'"
            line = f'builtin eval "$(< {quoted})" </dev/null; {_marker_command(nonce)}\n'
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
                    with anyio.move_on_after(timeout_ms / 1000) as deadline:
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
            if matched is not None:
                end, code = matched
                body = _clip(
                    _tidy(raw[: end - max(start, pty.dropped_chars)]), lost, max_output_chars
                )
                if code != 0:
                    body = f"{body}\n[exit code: {code}]" if body else f"[exit code: {code}]"
                return body
            partial = _clip(_tidy(raw), lost, max_output_chars)
            if aborted:
                raise AbortError("tool call aborted")
            if timed_out:
                return (
                    f"Your command timed out after {seconds} seconds or experienced an OOM error. "
                    f"Below is partial output:\n{partial}\n{RESET}"
                )
            return exit_text(pty, partial)

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(value)]

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
        output=ToolOutput(schema={"type": "string"}, render=render),
        execute=execute,
        present_call=lambda args: {"card": "terminal", "title": args["command"]},
        present_result=present_result,
    )
