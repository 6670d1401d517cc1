"""``bash``: a fresh ``bash -c`` per call — values, renders, limits, process groups."""

# Tests set up and inspect real files directly; blocking there is intended.
# ruff: noqa: ASYNC240

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.engine import AbortController
from codemode.tools.shell._bash import render_bash
from tests.tools.conftest import Harness, all_gone, error_of, text_of

pytestmark = pytest.mark.anyio


def sh(command: str, **extra: Any) -> dict[str, Any]:
    return {"command": command, "description": "Run a test command", **extra}


async def test_stdout_and_exit_code(harness: Harness, workspace: Path) -> None:
    result = await harness.ok("bash", sh("echo hi; pwd"))
    assert result.value == {
        "kind": "foreground",
        "exitCode": 0,
        "signal": None,
        "timedOut": False,
        "aborted": False,
        "timeoutMs": 120000,
        "stdout": {"text": f"hi\n{workspace}\n", "truncated": False},
        "stderr": {"text": "", "truncated": False},
    }
    assert text_of(result) == f"hi\n{workspace}\n"


async def test_stderr_and_nonzero_exit(harness: Harness) -> None:
    result = await harness.ok("bash", sh("printf out; echo err >&2; exit 3"))
    assert result.value["exitCode"] == 3
    assert text_of(result) == "out\n[stderr]\nerr\n[exit code: 3]"
    quiet = await harness.ok("bash", sh("exit 1"))
    assert text_of(quiet) == "(no output)\n[exit code: 1]"
    silent = await harness.ok("bash", sh("true"))
    assert text_of(silent) == "(no output)"


async def test_fresh_shell_and_workdir(harness: Harness, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    await harness.ok("bash", sh("export LEAK=1; cd /"))
    result = await harness.ok("bash", sh('echo "${LEAK:-none}"; pwd', workdir="sub"))
    assert result.value["stdout"]["text"] == f"none\n{workspace / 'sub'}\n"
    result = await harness.ok("bash", sh("pwd", workdir=str(workspace / "sub")))
    assert result.value["stdout"]["text"] == f"{workspace / 'sub'}\n"


async def test_managed_environment(harness: Harness, workspace: Path) -> None:
    os.environ["DSH_STALE"] = "1"
    try:
        result = await harness.ok("bash", sh("env | grep '^DSH_' | sort", workdir="."))
    finally:
        del os.environ["DSH_STALE"]
    env = dict(line.split("=", 1) for line in result.value["stdout"]["text"].splitlines())
    assert env["DSH_WORKSPACE"] == str(workspace)
    assert env["DSH_WORKDIR"] == str(workspace)
    assert env["DSH_AGENT"] == "agent"
    assert env["DSH_CALL_ID"].startswith("call-")
    assert "DSH_STALE" not in env
    custom = Harness(workspace, harness.output_dir, env_prefix="HOST_", env={"EXTRA": "yes"})
    out = (await custom.ok("bash", sh('echo "$HOST_WORKSPACE $EXTRA"'))).value["stdout"]["text"]
    assert out == f"{workspace} yes\n"


async def test_timeout_kills_the_process_group(harness: Harness, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = await harness.ok(
        "bash", sh(f"sleep 30 & echo $! > {pidfile}; echo waiting; wait", timeoutMs=500)
    )
    assert time.monotonic() - started < 10
    value = result.value
    assert value["timedOut"] is True
    assert value["timeoutMs"] == 500
    assert value["exitCode"] is None
    assert value["signal"] == "SIGTERM"
    assert text_of(result) == "waiting\n[timed out after 500ms]\n[killed by signal: SIGTERM]"
    assert await all_gone([int(pidfile.read_text())])


async def test_timeout_is_capped_by_the_maximum(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir, bash_timeout_ms=1000, bash_max_timeout_ms=2000)
    assert (await h.ok("bash", sh("true"))).value["timeoutMs"] == 1000
    assert (await h.ok("bash", sh("true", timeoutMs=99999))).value["timeoutMs"] == 2000
    assert (await h.ok("bash", sh("true", timeoutMs=1500.0))).value["timeoutMs"] == 1500


async def test_leftover_background_processes_do_not_hang_the_call(
    harness: Harness, tmp_path: Path
) -> None:
    pidfile = tmp_path / "bg.pid"
    started = time.monotonic()
    result = await harness.ok("bash", sh(f"sleep 30 & echo $! > {pidfile}; echo done"))
    assert time.monotonic() - started < 5
    assert result.value["stdout"]["text"] == "done\n"
    assert await all_gone([int(pidfile.read_text())])


async def test_abort_kills_and_fails(harness: Harness, tmp_path: Path) -> None:
    pidfile = tmp_path / "p.pid"
    controller = AbortController()

    async def abort_soon() -> None:
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await anyio.sleep(0.02)
        controller.abort()

    async with anyio.create_task_group() as group:
        group.start_soon(abort_soon)
        result = await harness.call(
            "bash", sh(f"echo $$ > {pidfile}; sleep 30"), signal=controller.signal
        )
    assert error_of(result) == ("tool call aborted", "ABORTED")
    assert await all_gone([int(pidfile.read_text())])


async def test_tail_truncation_and_spill(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir)
    command = "for i in $(seq 1 20000); do echo line-$i; done; echo oops >&2"
    result = await h.ok("bash", sh(command))
    out = result.value["stdout"]
    assert out["truncated"] is True
    assert len(out["text"].encode()) <= 64000
    assert out["text"].endswith("line-20000\n")
    spill = Path(out["spillPath"])
    assert spill.parent == output_dir
    assert spill.read_text() == "".join(f"line-{i}\n" for i in range(1, 20001))
    assert result.value["stderr"] == {"text": "oops\n", "truncated": False}
    text = text_of(result)
    assert text.endswith(
        f"line-20000\n\n[output truncated; full output: {spill}]\n[stderr]\noops\n"
    )
    # The reported path is readable through the tools.
    assert (await h.ok("read", {"file_path": str(spill), "offset": 20000})).value["lines"] == [
        {"number": 20000, "text": "line-20000"}
    ]


async def test_utf8_tail_cut_drops_continuation_bytes(workspace: Path, output_dir: Path) -> None:
    h = Harness(workspace, output_dir)
    command = "python3 -c \"import sys; sys.stdout.write('x' + 'é' * 40000)\""
    text = (await h.ok("bash", sh(command))).value["stdout"]["text"]
    assert set(text) == {"é"}
    assert len(text.encode()) == 64000


def test_render_markers() -> None:
    base: dict[str, Any] = {
        "kind": "foreground",
        "exitCode": 0,
        "signal": None,
        "timedOut": False,
        "aborted": False,
        "timeoutMs": 1000,
        "stdout": {"text": "", "truncated": False},
        "stderr": {"text": "", "truncated": False},
    }
    assert render_bash({**base, "stderr": {"text": "e", "truncated": False}}) == "[stderr]\ne"
    assert render_bash({**base, "stdout": {"text": "o\n", "truncated": False}, "exitCode": 2}) == (
        "o\n[exit code: 2]"
    )
    truncated = {"text": "tail", "truncated": True}
    assert render_bash({**base, "stdout": truncated}) == (
        "tail\n[output truncated; full output: (unavailable)]"
    )
    assert render_bash({"kind": "background", "jobId": "bash-3"}) == "started background job bash-3"


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (sh(" "), "invalid command: expected a non-empty string", "BASH_INVALID_COMMAND"),
        (
            {"command": "true", "description": ""},
            "invalid description: expected a non-empty string",
            "BASH_INVALID_DESCRIPTION",
        ),
        (
            sh("true", timeoutMs=0),
            "invalid timeoutMs: expected a positive number, got 0",
            "BASH_INVALID_TIMEOUT",
        ),
        (
            sh("true", timeoutMs=-2.5),
            "invalid timeoutMs: expected a positive number, got -2.5",
            "BASH_INVALID_TIMEOUT",
        ),
        (
            sh("true", workdir=""),
            "invalid workdir: expected a non-empty string",
            "BASH_INVALID_WORKDIR",
        ),
        (
            sh("true", workdir="a\x00b"),
            'invalid workdir: invalid path "a\\u0000b": contains a NUL character',
            "BASH_INVALID_WORKDIR",
        ),
        (
            sh("true", run_in_background=True),
            "background jobs unavailable: no JobManager is configured "
            "(pass jobs=JobManager() to tools.default_tools)",
            "BASH_JOBS_UNAVAILABLE",
        ),
    ],
)
async def test_value_errors(
    harness: Harness, args: dict[str, Any], message: str, code: str
) -> None:
    # Every failure carries a stable code, so hosts and programs need not parse messages.
    assert error_of(await harness.fail("bash", args)) == (message, code)


async def test_workdir_errors(harness: Harness, workspace: Path) -> None:
    (workspace / "file").write_text("")
    assert error_of(await harness.fail("bash", sh("true", workdir="nope"))) == (
        f'invalid workdir: "{workspace / "nope"}" does not exist',
        "BASH_INVALID_WORKDIR",
    )
    assert error_of(await harness.fail("bash", sh("true", workdir="file"))) == (
        f'invalid workdir: "{workspace / "file"}" is not a directory',
        "BASH_INVALID_WORKDIR",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"description": "d"}, 'missing required property "command"'),
        ({"command": "true"}, 'missing required property "description"'),
        (sh("true", timeoutMs="5"), '"timeoutMs" must be a number'),
        (sh("true", workdir=1), '"workdir" must be a string'),
        (sh("true", run_in_background="yes"), '"run_in_background" must be a boolean'),
    ],
)
async def test_schema_errors(harness: Harness, args: dict[str, Any], message: str) -> None:
    assert error_of(await harness.fail("bash", args)) == (
        f"invalid arguments: {message}",
        "INVALID_ARGS",
    )


async def test_cards(harness: Harness) -> None:
    tool = harness.rt.get("bash")
    assert tool is not None and tool.present_call is not None and tool.present_result is not None
    assert tool.present_call(sh("ls", workdir="src")) == {
        "card": "terminal",
        "title": "ls",
        "description": "Run a test command",
        "cwd": "src",
    }
    assert tool.present_call(sh("make", run_in_background=True)) == {
        "card": "generic",
        "title": "make",
        "kind": "execute",
        "rawInput": "make",
        "content": [{"type": "text", "text": "Run a test command"}],
    }
    failing = await harness.ok("bash", sh("echo x; exit 4"))
    assert tool.present_result(sh("echo x; exit 4"), failing) == {
        "card": "terminal",
        "output": "x",
        "exitCode": 4,
    }
    fine = await harness.ok("bash", sh("echo y"))
    assert tool.present_result(sh("echo y"), fine) == {
        "card": "terminal",
        "output": "y\n",
        "exitCode": 0,
    }
    error = await harness.fail("bash", sh(" "))
    assert tool.present_result(sh(" "), error) == {
        "card": "generic",
        "title": " ",
        "content": [
            {
                "type": "text",
                "text": "```console\nError: invalid command: expected a non-empty string\n```",
            }
        ],
    }


async def test_signal_from_the_command(harness: Harness) -> None:
    result = await harness.ok("bash", sh("kill -KILL $$"))
    assert result.value["signal"] == "SIGKILL" and result.value["exitCode"] is None
    assert text_of(result) == "(no output)\n[killed by signal: SIGKILL]"
    tool = harness.rt.get("bash")
    assert tool is not None and tool.present_result is not None
    assert tool.present_result(sh("kill"), result) == {
        "card": "terminal",
        "output": "(no output)",
        "signal": "SIGKILL",
    }


async def test_bash_is_exclusive(harness: Harness) -> None:
    from codemode.engine import ToolExecutionInput

    call = ToolExecutionInput(
        call_id="c", name="bash", arguments=sh("true"), signal=AbortController().signal
    )
    assert harness.rt.execution_mode(call) == "exclusive"
