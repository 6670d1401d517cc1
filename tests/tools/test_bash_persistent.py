"""The persistent ``bash`` on a real PTY shell: state between calls, nonce-delimited output,
clipping, the reset texts of a timeout and of the shell's exit, ownership and teardown."""

# Blocking /proc and path reads are instant here; the tests stay linear.
# ruff: noqa: ASYNC240
from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import all_gone, error_of, text_of
from test_terminal import make_cfg, wait_for_pids

from codemode.engine import (
    AbortController,
    AbortSignal,
    MemorySessionLog,
    Scope,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.tools import JobManager, default_tools
from codemode.tools._catalog import catalog_entry
from codemode.tools.shell._bash import FOREGROUND_VALUE_SCHEMA
from codemode.tools.terminal import TerminalManager, build_persistent_bash
from codemode.tools.terminal._persistent import CLIP, LOST, RESET, render_persistent

pytestmark = pytest.mark.anyio

_ids = itertools.count(1)
PACKAGE = "@deepseek-ai/dsh-tool-bash-persistent"
FOREGROUND_KEYS = set(FOREGROUND_VALUE_SCHEMA["properties"])


class Shell:
    """A runtime with the persistent ``bash`` registered."""

    def __init__(self, workspace: Path, tmp_path: Path, terminals: TerminalManager, **kw: Any):
        self.rt = ToolRuntime()
        self.tool = build_persistent_bash(make_cfg(workspace, tmp_path), terminals, **kw)
        self.rt.register(self.tool)
        self.terminals = terminals
        self.agent: Scope = self.rt.scope("agent", session=MemorySessionLog())

    async def call(
        self,
        command: str,
        *,
        agent: Scope | str | None = "default",
        signal: AbortSignal | None = None,
        **extra: Any,
    ) -> ToolExecutionResult:
        scope = self.agent if agent == "default" else agent
        assert not isinstance(scope, str)
        return await self.rt.execute(
            ToolExecutionInput(
                call_id=f"call-{next(_ids)}",
                name="bash",
                arguments={"command": command, **extra},
                signal=signal or AbortController().signal,
                agent=scope,
            )
        )

    async def run(self, command: str, **kw: Any) -> str:
        """The call's text (checked to be the render of its value, the one-shot's shape)."""
        result = await self.call(command, **kw)
        assert not result.is_error, result.to_json()
        value = result.value
        assert set(value) == FOREGROUND_KEYS | {"reset"}, value
        assert value["stderr"] == {"text": "", "truncated": False}
        assert render_persistent(value) == text_of(result)
        return text_of(result)


@pytest.fixture
async def terminals(tmp_path: Path) -> AsyncIterator[TerminalManager]:
    async with TerminalManager(work_dir=tmp_path / "terms") as manager:
        yield manager


@pytest.fixture
def shell(workspace: Path, tmp_path: Path, terminals: TerminalManager) -> Shell:
    return Shell(workspace, tmp_path, terminals)


async def test_schema_and_flags(shell: Shell) -> None:
    entry = catalog_entry("bash", PACKAGE)
    assert shell.tool.name == "bash"
    assert shell.tool.description == entry["description"]
    assert json.dumps(shell.tool.parameters) == json.dumps(entry["parameters"])
    assert shell.tool.is_concurrency_safe is None and shell.tool.timeout_ms is None
    assert shell.tool.present_call is not None
    assert shell.tool.present_call({"command": "ls"}) == {"card": "terminal", "title": "ls"}


async def test_state_persists_between_calls(shell: Shell, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    assert await shell.run("pwd") == os.path.realpath(workspace)
    assert await shell.run("cd sub && export GREETING=hello && LOCAL=1") == ""
    assert await shell.run('pwd; echo "$GREETING $LOCAL"') == (
        f"{os.path.realpath(workspace / 'sub')}\nhello 1"
    )
    assert await shell.run("f() { echo fn:$1; }") == ""
    assert await shell.run("f x") == "fn:x"


async def test_output_exit_codes_and_trimming(shell: Shell) -> None:
    assert await shell.run("echo hi") == "hi"
    assert await shell.run("printf 'a\\n\\n'") == "a\n"
    assert await shell.run("printf 'no newline'") == "no newline"
    assert await shell.run("echo out; echo err >&2; exit_code() { return 3; }; exit_code") == (
        "out\nerr\n[exit code: 3]"
    )
    assert await shell.run("false") == "[exit code: 1]"
    syntax = await shell.run("if then")
    assert "syntax error near unexpected token `then'" in syntax
    assert syntax.endswith("\n[exit code: 2]")
    # Multi-line commands and heredocs run as one unit.
    assert await shell.run("cat <<'EOF'\nline 1\nline 2\nEOF\necho after") == (
        "line 1\nline 2\nafter"
    )
    long = "x" * 10_000  # longer than a terminal's line buffer
    assert await shell.run(f"echo {long} | wc -c") == "10001"


async def test_the_end_marker_cannot_be_forged(shell: Shell) -> None:
    # A marker of the right shape with a guessed nonce is just output.
    fake = "printf '\\036%s:%d\\037\\n' 0123456789abcdef0123456789abcdef 0"
    assert await shell.run(f"{fake}; echo still-running; false") == (
        "\x1e0123456789abcdef0123456789abcdef:0\x1f\nstill-running\n[exit code: 1]"
    )
    # The rest of the typed line (with this call's nonce) is out of the command's reach:
    # its standard input is /dev/null, not the terminal.
    assert await shell.run('read -r line; echo "[$line]"; cat; echo done') == "[]\ndone"
    # Functions named like the commands of the typed line are not what it runs.
    await shell.run("printf() { echo fake; }; eval() { echo nope; }")
    assert await shell.run("echo ok; false") == "ok\n[exit code: 1]"
    await shell.run("unset -f printf eval")
    # No history to read the typed line back from, and echo re-enabled cannot match either.
    assert await shell.run("history | wc -l") == "0"
    await shell.run("stty echo")
    assert (await shell.run("echo visible")).endswith("visible")


async def test_clipping(workspace: Path, tmp_path: Path, terminals: TerminalManager) -> None:
    shell = Shell(workspace, tmp_path, terminals, max_output_chars=50)
    full = "\n".join(str(i) for i in range(1, 101))
    assert await shell.run("seq 1 100") == full[:50] + CLIP
    # Counted in UTF-16 units: an astral character counts twice.
    assert await shell.run("printf '\\U0001F600%.0s' $(seq 30)") == "\U0001f600" * 25 + CLIP


async def test_scrollback_loss_is_noted(workspace: Path, tmp_path: Path) -> None:
    async with TerminalManager(scrollback_chars=1000, work_dir=tmp_path / "t") as terminals:
        shell = Shell(workspace, tmp_path, terminals, max_output_chars=40)
        text = await shell.run("seq 1 3000")
        assert text.startswith(LOST) and text.endswith(CLIP)
        kept = text[len(LOST) : -len(CLIP)]
        assert len(kept) == 40 and kept.split("\n")[0].isdigit() and not kept.startswith("1\n")


async def test_timeout_resets_the_shell(
    workspace: Path, tmp_path: Path, terminals: TerminalManager
) -> None:
    shell = Shell(workspace, tmp_path, terminals, timeout_ms=1500)
    await shell.run("cd /tmp; export KEEP=1")
    seen: list[int] = []

    async def spot() -> None:
        seen.extend(await wait_for_pids("sleep 3011", 1))

    async with anyio.create_task_group() as group:
        group.start_soon(spot)
        text = await shell.run("echo partial; sleep 3011")
    assert text == (
        "Your command timed out after 2 seconds or experienced an OOM error. "
        f"Below is partial output:\npartial\n{RESET}"
    )
    assert len(seen) == 1 and await all_gone(seen)
    assert await shell.run('pwd; echo "[$KEEP]"') == f"{os.path.realpath(workspace)}\n[]"


async def test_shell_exit_texts(shell: Shell) -> None:
    assert await shell.run("echo bye; exit 3") == f"bye\nexit\n[shell exited: code 3]\n{RESET}"
    assert await shell.run("echo fresh") == "fresh"
    assert await shell.run("kill -9 $$") == f"[shell killed by signal: SIGKILL]\n{RESET}"
    assert await shell.run("echo again") == "again"


async def test_errors(shell: Shell) -> None:
    for blank in ("", "  \n"):
        result = await shell.call(blank)
        assert error_of(result) == ("command must be a non-empty string", "TERMINAL_INVALID_ARGS")
    result = await shell.call("echo hi", agent=None)
    assert error_of(result) == ("bash requires an owning agent session", "TERMINAL_NO_AGENT")


async def test_one_shell_per_owner_serialized(shell: Shell) -> None:
    other = shell.rt.scope("other", session=MemorySessionLog())
    await shell.run("export WHO=first")
    await shell.run("export WHO=second", agent=other)
    outputs: dict[str, str] = {}

    async def run(key: str, command: str, agent: Scope) -> None:
        outputs[key] = await shell.run(command, agent=agent)

    async with anyio.create_task_group() as group:
        group.start_soon(run, "a", "X=a; sleep 0.3; echo $WHO $X", shell.agent)
        group.start_soon(run, "b", "X=b; echo $WHO $X", shell.agent)
        group.start_soon(run, "c", "echo $WHO", other)
    assert outputs["a"] == "first a"
    assert outputs["b"] == "first b"
    assert outputs["c"] == "second"


async def test_abort_resets(shell: Shell) -> None:
    await shell.run("export KEEP=1")
    controller = AbortController()
    seen: list[int] = []
    async with anyio.create_task_group() as group:

        async def abort_soon() -> None:
            seen.extend(await wait_for_pids("sleep 3012", 1))
            controller.abort()

        group.start_soon(abort_soon)
        result = await shell.call("sleep 3012", signal=controller.signal)
    assert error_of(result) == ("tool call aborted", "ABORTED")
    assert len(seen) == 1 and await all_gone(seen)
    assert await shell.run('echo "[$KEEP]"') == "[]"


async def test_teardown_kills_the_shells(workspace: Path, tmp_path: Path) -> None:
    async with TerminalManager(work_dir=tmp_path / "t") as terminals:
        shell = Shell(workspace, tmp_path, terminals)
        await shell.run("sleep 3013 & disown; setsid sleep 3014 &")
        shell_pid = int(await shell.run("echo $$"))
        pids = [*await wait_for_pids("sleep 301", 2), shell_pid]
        assert len(pids) == 3
    assert await all_gone(pids)


async def test_result_card(shell: Shell) -> None:
    assert shell.tool.present_result is not None
    failed = await shell.call("echo x; false")
    card = shell.tool.present_result({"command": "echo x; false"}, failed)
    assert card == {"card": "terminal", "output": "x", "exitCode": 1}
    fine = await shell.call("echo y")
    assert shell.tool.present_result({"command": "echo y"}, fine) == {
        "card": "terminal",
        "output": "y",
        "exitCode": 0,
    }


async def test_one_result_shape_with_the_one_shot_bash(
    workspace: Path, tmp_path: Path, terminals: TerminalManager
) -> None:
    """The value is the one-shot bash's foreground value (plus ``reset``), whatever ends the
    call; the model still reads the catalog's text (``run`` checks both)."""
    shell = Shell(workspace, tmp_path, terminals, timeout_ms=1500, max_output_chars=20)
    ok = (await shell.call("echo hi")).value
    assert ok == {
        "kind": "foreground",
        "exitCode": 0,
        "signal": None,
        "timedOut": False,
        "aborted": False,
        "timeoutMs": 1500,
        "stdout": {"text": "hi", "truncated": False},
        "stderr": {"text": "", "truncated": False},
        "reset": False,
    }
    failed = (await shell.call("echo out; echo err >&2; false")).value
    assert (failed["exitCode"], failed["stdout"]["text"]) == (1, "out\nerr")
    clipped = (await shell.call("seq 1 100")).value
    assert clipped["stdout"]["truncated"] is True and clipped["stdout"]["text"].endswith(CLIP)
    timed = (await shell.call("echo partial; sleep 3021")).value
    assert (timed["timedOut"], timed["reset"], timed["exitCode"]) == (True, True, None)
    assert timed["stdout"]["text"] == "partial"
    exited = (await shell.call("exit 4")).value
    assert (exited["exitCode"], exited["signal"], exited["reset"]) == (4, None, True)
    killed = (await shell.call("kill -9 $$")).value
    assert (killed["exitCode"], killed["signal"], killed["reset"]) == (None, "SIGKILL", True)
    for value in (ok, failed, clipped, timed, exited, killed):
        assert set(value) == FOREGROUND_KEYS | {"reset"}


async def test_the_one_shot_arguments_are_accepted(
    workspace: Path, tmp_path: Path, terminals: TerminalManager
) -> None:
    """``description``, ``timeoutMs``, ``workdir``: accepted as the one-shot bash takes
    them, though the catalog's schema of this variant (byte-exact) lists only ``command``."""
    shell = Shell(workspace, tmp_path, terminals)
    (workspace / "sub").mkdir()
    described = await shell.call("echo hi", description="Say hi")
    assert not described.is_error and text_of(described) == "hi"
    assert shell.tool.present_call is not None
    assert shell.tool.present_call({"command": "ls", "description": "List files"}) == {
        "card": "terminal",
        "title": "ls",
        "description": "List files",
    }
    # workdir: where the command starts, like a cd typed first (the shell stays there).
    assert await shell.run("pwd", workdir="sub") == os.path.realpath(workspace / "sub")
    assert await shell.run("pwd") == os.path.realpath(workspace / "sub")
    outside = await shell.call("pwd", workdir="/")
    assert outside.is_error and error_of(outside)[1] is not None
    assert error_of(await shell.call("pwd", workdir="missing"))[1] == "BASH_INVALID_WORKDIR"
    # timeoutMs: this call's deadline.
    short = (await shell.call("sleep 3022", timeoutMs=300)).value
    assert (short["timedOut"], short["timeoutMs"]) == (True, 300)
    for bad in (-1, "10", True):
        result = await shell.call("true", timeoutMs=bad)
        assert error_of(result)[1] == "BASH_INVALID_TIMEOUT", bad
    result = await shell.call("true", description="  ")
    assert error_of(result) == (
        "invalid description: expected a non-empty string",
        "BASH_INVALID_DESCRIPTION",
    )


async def test_run_in_background_runs_a_one_shot_job(
    workspace: Path, tmp_path: Path, terminals: TerminalManager
) -> None:
    async with JobManager(output_dir=tmp_path / "jobs") as jobs:
        rt = ToolRuntime()
        for tool in default_tools(
            workspace,
            output_dir=tmp_path / "out",
            jobs=jobs,
            terminals=terminals,
            bash="persistent",
        ):
            rt.register(tool)
        agent = rt.scope("agent", session=MemorySessionLog())

        async def call(name: str, arguments: dict[str, Any]) -> ToolExecutionResult:
            return await rt.execute(
                ToolExecutionInput(
                    call_id=f"call-{next(_ids)}",
                    name=name,
                    arguments=arguments,
                    signal=AbortController().signal,
                    agent=agent,
                )
            )

        started = await call(
            "bash", {"command": "echo from-job", "run_in_background": True, "description": "d"}
        )
        assert started.value == {"kind": "background", "jobId": "bash-1"}
        assert text_of(started) == "started background job bash-1"
        out = await call("job_output", {"job_id": "bash-1", "wait": True})
        assert text_of(out).splitlines()[0] == "from-job"
