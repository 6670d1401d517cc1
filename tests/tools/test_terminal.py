"""The terminal tools on real PTYs: a real bash, ``python3 -i`` inside it and as its own
backend type, a password prompt, job control signals, scrollback pages, caps, ownership and
the cleanup of every session's process tree."""

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
from conftest import alive, all_gone, error_of, text_of

from codemode.engine import (
    AbortController,
    AbortSignal,
    MemorySessionLog,
    Scope,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.engine.policies import LocalSpillStore
from codemode.tools import JobManager, kill_all_processes
from codemode.tools._catalog import catalog_entry
from codemode.tools._config import ToolsConfig
from codemode.tools.fs._paths import Workspace
from codemode.tools.shell._job_tools import build_job_kill, build_job_list, build_job_output
from codemode.tools.terminal import TerminalManager, build_terminal_tools
from codemode.tools.terminal._tools import bound_text

pytestmark = pytest.mark.anyio

_ids = itertools.count(1)
NAMES = [
    "terminal_open",
    "terminal_send",
    "terminal_read",
    "terminal_signal",
    "terminal_list",
    "terminal_close",
]


def make_cfg(workspace: Path, tmp_path: Path, jobs: JobManager | None = None) -> ToolsConfig:
    return ToolsConfig(
        workspace=Workspace(workspace),
        spill_store=LocalSpillStore(tmp_path / "spill"),
        output_dir=str(tmp_path / "out"),
        jobs=jobs,
    )


class Term:
    """A runtime with the terminal tools (and the job tools) registered, called like a host."""

    def __init__(self, cfg: ToolsConfig, terminals: TerminalManager, **options: Any) -> None:
        self.terminals = terminals
        self.rt = ToolRuntime()
        self.tools = build_terminal_tools(cfg, terminals, **options)
        for tool in [*self.tools, build_job_list(cfg), build_job_output(cfg), build_job_kill(cfg)]:
            self.rt.register(tool)
        self.agent: Scope = self.rt.scope("agent", session=MemorySessionLog())

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        agent: Scope | str | None = "default",
        signal: AbortSignal | None = None,
    ) -> ToolExecutionResult:
        scope = self.agent if agent == "default" else agent
        assert not isinstance(scope, str)
        return await self.rt.execute(
            ToolExecutionInput(
                call_id=f"call-{next(_ids)}",
                name=name,
                arguments=arguments,
                signal=signal or AbortController().signal,
                agent=scope,
            )
        )

    async def ok(self, name: str, arguments: Any, **kw: Any) -> Any:
        result = await self.call(name, arguments, **kw)
        assert not result.is_error, result.to_json()
        return result

    async def fail(self, name: str, arguments: Any, **kw: Any) -> tuple[str, str | None]:
        result = await self.call(name, arguments, **kw)
        assert result.is_error, result.to_json()
        return error_of(result)

    async def open(self, **args: Any) -> str:
        result = await self.ok("terminal_open", {"type": "shell", **args})
        return str(result.value["sessionId"])

    async def send(self, sid: str, text: str, **args: Any) -> Any:
        return (await self.ok("terminal_send", {"sessionId": sid, "text": text, **args})).value


@pytest.fixture
async def jobs(tmp_path: Path) -> AsyncIterator[JobManager]:
    async with JobManager(output_dir=tmp_path / "jobs") as manager:
        yield manager


@pytest.fixture
async def term(workspace: Path, tmp_path: Path, jobs: JobManager) -> AsyncIterator[Term]:
    # A long idle threshold: the waits below must end on stdin_read (or exit), never on
    # silence, even on a loaded machine.
    async with TerminalManager(idle_ms=20_000, work_dir=tmp_path / "terms") as terminals:
        yield Term(make_cfg(workspace, tmp_path, jobs), terminals)


def _descends_from_us(pid: int) -> bool:
    # Every terminal process stays below its launcher (a subreaper), a child of this test
    # process: so a concurrent run of these tests never sees the other's processes.
    me = os.getpid()
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == me:
            return True
        if pid <= 1:
            return False
    return False


def pids_running(token: str) -> list[int]:
    """Live processes started by this test process whose command line contains ``token``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if token in cmdline and alive(int(name)) and _descends_from_us(int(name)):
            found.append(int(name))
    return found


def cgroup_of(pid: int) -> str:
    """``/proc/<pid>/cgroup`` as the host sees it."""
    with open(f"/proc/{pid}/cgroup", encoding="ascii") as f:
        return f.read()


async def wait_for_pids(token: str, count: int) -> list[int]:
    """The processes with ``token``, once ``count`` of them run (background starts race)."""
    for _ in range(500):
        found = pids_running(token)
        if len(found) >= count:
            return found
        await anyio.sleep(0.02)
    return pids_running(token)


# -- catalog and flags ---------------------------------------------------------------


async def test_catalog_schemas_and_exclusive(term: Term) -> None:
    assert [t.name for t in term.tools] == NAMES
    for tool in term.tools:
        entry = catalog_entry(tool.name, "@deepseek-ai/dsh-tool-terminal")
        assert tool.description == entry["description"]
        assert json.dumps(tool.parameters) == json.dumps(entry["parameters"])
        assert tool.is_concurrency_safe is None
        assert tool.output.schema is not None


async def test_max_result_bytes_lower_bound(workspace: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 64"):
        build_terminal_tools(make_cfg(workspace, tmp_path), TerminalManager(), max_result_bytes=63)


# -- a real bash, a REPL inside it, a password prompt ---------------------------------------


async def test_shell_prompt_and_echo(term: Term) -> None:
    opened = await term.ok("terminal_open", {"type": "shell", "name": "main"})
    value = opened.value
    assert value["sessionId"] == "terminal-1"
    assert value["name"] == "main" and value["type"] == "shell"
    assert value["status"] == {"kind": "running"}
    assert value["motd"] == "$ "
    assert text_of(opened) == "started terminal session terminal-1 (main) [type: shell]\n$ "
    result = await term.ok("terminal_send", {"sessionId": "terminal-1", "text": "echo hi"})
    assert result.value == {
        "kind": "foreground",
        "viewport": "echo hi\nhi\n$ ",
        "waitReason": "stdin_read",
        "sessionStatus": {"kind": "running"},
        "truncated": False,
    }
    assert text_of(result) == "echo hi\nhi\n$ \n[wait: stdin_read]\n[session: running]"


async def test_python_repl_inside_the_shell(term: Term) -> None:
    sid = await term.open()
    started = await term.send(sid, "python3 -i -q")
    assert started["waitReason"] == "stdin_read"
    assert started["viewport"].endswith(">>> ")
    answer = await term.send(sid, "21 * 2")
    assert answer["viewport"] == "21 * 2\n42\n>>> "
    assert answer["waitReason"] == "stdin_read"
    # An incomplete statement: the REPL waits for more (its continuation prompt).
    block = await term.send(sid, "for i in range(2):")
    assert block["viewport"].endswith("... ") and block["waitReason"] == "stdin_read"
    done = await term.send(sid, "    print('row', i)\r")
    assert "row 0\nrow 1\n>>> " in done["viewport"]
    back = await term.send(sid, "exit()")
    assert back["viewport"].endswith("$ ") and back["waitReason"] == "stdin_read"


async def test_password_prompt_is_a_stdin_read(term: Term) -> None:
    sid = await term.open()
    program = 'python3 -c \'import getpass; print("got", len(getpass.getpass("pw: ")))\''
    prompt = await term.send(sid, program)
    assert prompt["viewport"].endswith("pw: ")
    assert prompt["waitReason"] == "stdin_read"
    # Not submitted: the line is incomplete, so the program still waits for it.
    partial = await term.send(sid, "sec", submit=False)
    assert partial["waitReason"] == "stdin_read"
    assert "sec" not in partial["viewport"]  # no echo at a password prompt
    done = await term.send(sid, "ret")
    assert done["viewport"] == "\ngot 6\n$ "
    assert done["waitReason"] == "stdin_read"


async def test_python_backend_type(term: Term, workspace: Path) -> None:
    opened = await term.ok("terminal_open", {"type": "python"})
    assert opened.value["type"] == "python"
    assert opened.value["motd"] == ">>> "
    sid = opened.value["sessionId"]
    value = await term.send(sid, "import os; print(os.getcwd())")
    assert (
        value["viewport"] == f"import os; print(os.getcwd())\n{os.path.realpath(workspace)}\n>>> "
    )
    bye = await term.send(sid, "raise SystemExit(5)")
    assert bye["waitReason"] == "session_exit"
    assert bye["sessionStatus"] == {"kind": "exited", "exitCode": 5, "signal": None}


async def test_escape_sequences_are_removed(term: Term) -> None:
    sid = await term.open()
    value = await term.send(sid, r"printf '\033[31mred\033[0m\rR\n'")
    assert value["viewport"].splitlines()[1] == "Red"


# -- wait reasons and signals -----------------------------------------------------------


async def test_idle_signal_and_shell_kill_refused(
    workspace: Path, tmp_path: Path, jobs: JobManager
) -> None:
    async with TerminalManager(idle_ms=300, work_dir=tmp_path / "t") as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals)
        sid = await term.open()
        refused = await term.fail("terminal_signal", {"sessionId": sid, "signal": "SIGKILL"})
        assert refused == (
            "SIGKILL would kill the terminal's shell; use terminal_close to end the session",
            "TERMINAL_SIGNAL_REJECTED",
        )
        quiet = await term.send(sid, "sleep 3003")
        assert quiet["waitReason"] == "inferred_idle"
        [sleeper] = await wait_for_pids("sleep 3003", 1)
        group = os.getpgid(sleeper)
        [snapshot] = (await term.ok("terminal_list", {})).value
        assert group != snapshot["pid"]  # the sleep's own job, not the shell
        result = await term.ok("terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        assert result.value == {"delivered": True, "targetPgid": group}
        assert text_of(result) == f"delivered SIGINT to foreground process group {group}"
        assert await all_gone([sleeper])
        after = await term.send(sid, "echo $((40 + 2))")
        assert after["viewport"].endswith("42\n$ ") and after["waitReason"] == "stdin_read"
        # Control characters go through the line discipline: ^C interrupts, ^Z stops.
        await term.send(sid, "sleep 3019")
        [second] = await wait_for_pids("sleep 3019", 1)
        interrupted = await term.send(sid, "\x03", submit=False)
        assert interrupted["waitReason"] == "stdin_read" and interrupted["viewport"].endswith("$ ")
        assert await all_gone([second])
        await term.send(sid, "sleep 3020")
        [third] = await wait_for_pids("sleep 3020", 1)
        stopped = await term.send(sid, "\x1a", submit=False)
        assert "Stopped" in stopped["viewport"] and stopped["waitReason"] == "stdin_read"
        killed = await term.send(sid, "kill %1")
        assert killed["waitReason"] == "stdin_read"
        assert await all_gone([third])


async def test_timeout_and_session_exit(workspace: Path, tmp_path: Path, jobs: JobManager) -> None:
    async with TerminalManager(
        idle_ms=5000, send_timeout_ms=700, work_dir=tmp_path / "t"
    ) as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals)
        sid = await term.open()
        ticker = (
            "python3 -c 'import time\nwhile True: print(\"tick\", flush=True); time.sleep(0.05)'"
        )
        busy = await term.send(sid, ticker)
        assert busy["waitReason"] == "timeout"
        assert "\ntick\n" in busy["viewport"]
        [pid] = await wait_for_pids("while True", 1)
        await term.ok("terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        assert await all_gone([pid])
        gone = await term.send(sid, "exit 3")
        assert gone["waitReason"] == "session_exit"
        assert gone["sessionStatus"] == {"kind": "exited", "exitCode": 3, "signal": None}
        result = await term.call("terminal_send", {"sessionId": sid, "text": "x"})
        assert error_of(result) == (f"terminal session {sid} has exited", "TERMINAL_SESSION_EXITED")
        listed = await term.ok("terminal_list", {})
        pid = listed.value[0]["pid"]
        assert text_of(listed) == f"{sid} [shell] exited code=3 signal=null pid={pid}"


async def test_send_abort(term: Term) -> None:
    sid = await term.open()
    controller = AbortController()
    async with anyio.create_task_group() as group:

        async def abort_soon() -> None:
            # Abort once the sleep is the terminal's foreground job.
            for _ in range(500):
                if pids_running("sleep 3004"):
                    break
                await anyio.sleep(0.02)
            controller.abort()

        group.start_soon(abort_soon)
        result = await term.call(
            "terminal_send", {"sessionId": sid, "text": "sleep 3004"}, signal=controller.signal
        )
    assert error_of(result)[0] == "terminal send aborted"
    # The abort ends the wait, not the program: it still runs until the session closes.
    [sleeper] = pids_running("sleep 3004")
    await term.ok("terminal_close", {"sessionId": sid})
    assert await all_gone([sleeper])


# -- scrollback pages and caps ---------------------------------------------------------------


async def test_read_ranges(term: Term) -> None:
    sid = await term.open()
    await term.send(sid, "seq 1 30")
    # Lines: "$ seq 1 30", 1 … 30, "$ " → 32.
    page = await term.ok("terminal_read", {"sessionId": sid, "count": 5})
    assert page.value == {
        "text": "27\n28\n29\n30\n$ ",
        "totalLines": 32,
        "lineBegin": 28,
        "lineEnd": 32,
        "truncated": False,
    }
    assert text_of(page) == "27\n28\n29\n30\n$ \n[lines: 28-32 of 32]"
    older = await term.ok("terminal_read", {"sessionId": sid, "offset": 3, "count": 2})
    assert text_of(older) == "27\n28\n[lines: 28-29 of 32]"
    everything = await term.ok("terminal_read", {"sessionId": sid})
    assert everything.value["lineBegin"] == 1 and everything.value["text"].startswith(
        "$ seq 1 30\n1\n"
    )
    past = await term.ok("terminal_read", {"sessionId": sid, "offset": 1000})
    assert text_of(past) == "(no retained output)\n[lines: 0-0 of 32]"
    assert await term.fail("terminal_read", {"sessionId": sid, "offset": -1}) == (
        "offset must be a non-negative integer",
        "TERMINAL_INVALID_ARGS",
    )
    assert await term.fail("terminal_read", {"sessionId": sid, "count": 0}) == (
        "count must be a positive integer",
        "TERMINAL_INVALID_ARGS",
    )


async def test_scrollback_drops_oldest_lines(
    workspace: Path, tmp_path: Path, jobs: JobManager
) -> None:
    async with TerminalManager(
        idle_ms=20_000, scrollback_chars=2000, work_dir=tmp_path / "t"
    ) as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals)
        sid = await term.open()
        value = await term.send(sid, "seq 1 2000")
        assert value["truncated"] is True  # the start of this send's output was dropped
        assert value["viewport"].endswith("1999\n2000\n$ ")
        page = (await term.ok("terminal_read", {"sessionId": sid, "count": 2})).value
        assert page["text"] == "2000\n$ " and page["totalLines"] == 2002
        assert page["lineBegin"] == 2001
        oldest = (await term.ok("terminal_read", {"sessionId": sid, "offset": 5000})).value
        assert oldest["text"] == "" and oldest["totalLines"] == 2002


async def test_every_rendering_is_bounded(
    workspace: Path, tmp_path: Path, jobs: JobManager
) -> None:
    async with TerminalManager(idle_ms=20_000, work_dir=tmp_path / "t") as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals, max_result_bytes=100)
        sid = (await term.ok("terminal_open", {"type": "shell", "name": "ü" * 80})).value[
            "sessionId"
        ]
        sent = await term.ok("terminal_send", {"sessionId": sid, "text": "seq 1 500"})
        body = text_of(sent)
        assert len(body.encode()) <= 100
        assert body.endswith("500\n$ \n[wait: stdin_read]\n[session: running]\n[output truncated]")
        assert sent.value["truncated"] is True
        page = await term.ok("terminal_read", {"sessionId": sid, "count": 400})
        assert len(text_of(page).encode()) <= 100
        assert text_of(page).endswith(" of 502]\n[output truncated]")
        assert page.value["lineEnd"] == 502 and page.value["truncated"] is True
        listed = text_of(await term.ok("terminal_list", {}))
        assert len(listed.encode()) <= 100 and listed.endswith("\n[output truncated]")
        assert listed.endswith("[shell] running pid=" + listed.split("pid=")[1])
        assert "ü) [shell] running pid=" in listed  # tail-cut: the status stays


def test_bound_text_rules() -> None:
    assert bound_text("abc", ["[x]"], False, 64) == "abc\n[x]"
    assert bound_text("abc", ["[x]"], True, 64) == "abc\n[x]\n[output truncated]"
    cut = bound_text("0123456789" * 10, ["[meta]"], False, 64)
    assert cut.endswith("789\n[meta]\n[output truncated]")
    assert len(cut.encode()) <= 64
    # Multi-byte text is never split inside a code point.
    tail = bound_text("é" * 100, [], False, 64)
    assert len(tail.encode()) <= 64 and tail.startswith("é") and "\ufffd" not in tail
    # Metadata alone over the cap: the final pass head-cuts the whole text.
    huge = bound_text("body", ["[" + "m" * 200 + "]"], False, 64)
    assert len(huge.encode()) <= 64 and huge.endswith("\n[output truncated]")


# -- ownership, arguments, confinement ---------------------------------------------------------


async def test_sessions_belong_to_their_scope(term: Term) -> None:
    sid = await term.open()
    other = term.rt.scope("other", session=MemorySessionLog())
    for name, args in [
        ("terminal_send", {"sessionId": sid, "text": "id"}),
        ("terminal_read", {"sessionId": sid}),
        ("terminal_signal", {"sessionId": sid, "signal": "SIGINT"}),
        ("terminal_close", {"sessionId": sid}),
    ]:
        assert await term.fail(name, args, agent=other) == (
            f"unknown terminal session {sid}",
            "TERMINAL_UNKNOWN_SESSION",
        )
    assert text_of(await term.ok("terminal_list", {}, agent=other)) == "(no terminal sessions)"
    # The other scope numbers its own sessions from 1: ids say nothing about others.
    assert (await term.ok("terminal_open", {"type": "shell"}, agent=other)).value[
        "sessionId"
    ] == "terminal-1"
    for name in NAMES:
        args = {"type": "shell"} if name == "terminal_open" else {"sessionId": sid}
        if name == "terminal_send":
            args["text"] = "x"
        if name == "terminal_signal":
            args["signal"] = "SIGINT"
        assert await term.fail(name, args, agent=None) == (
            "terminal tools require an initiating agent",
            "TERMINAL_NO_AGENT",
        )
    assert await term.fail("terminal_read", {"sessionId": " "}) == (
        "sessionId must be a non-empty string",
        "TERMINAL_INVALID_ARGS",
    )
    assert await term.fail("terminal_open", {"type": "gdb"}) == (
        'unknown terminal type "gdb"; registered types: python, shell',
        "TERMINAL_UNKNOWN_TYPE",
    )


async def test_cwd_is_confined_to_the_workspace(term: Term, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "escape").symlink_to("/etc")
    (workspace / "file").write_text("x")
    sid = await term.open(cwd="sub")
    value = await term.send(sid, "pwd")
    assert value["viewport"] == f"pwd\n{os.path.realpath(workspace / 'sub')}\n$ "
    for cwd in ("/etc", "escape", "../"):
        assert (await term.fail("terminal_open", {"type": "shell", "cwd": cwd}))[1] == (
            "FS_OUTSIDE_WORKSPACE"
        )
    message, code = await term.fail("terminal_open", {"type": "shell", "cwd": "file"})
    assert code == "TERMINAL_INVALID_CWD" and "is not a directory" in message
    message, code = await term.fail("terminal_open", {"type": "shell", "cwd": "nope"})
    assert code == "TERMINAL_INVALID_CWD" and "does not exist" in message


# -- process trees: close, teardown, kill_all_processes --------------------------------------


async def test_close_kills_the_whole_tree(term: Term) -> None:
    sid = await term.open()
    # Background, disowned and re-sessioned processes: all below the session's launcher.
    await term.send(sid, "sleep 3005 & disown; setsid sleep 3006 & (sleep 3007 &)")
    pids = await wait_for_pids("sleep 300", 3)
    assert len(pids) == 3
    closed = await term.ok("terminal_close", {"sessionId": sid})
    assert closed.value == {"sessionId": sid, "outcome": "closed"}
    assert text_of(closed) == f"closed terminal session {sid}"
    assert await all_gone(pids)
    assert await term.fail("terminal_close", {"sessionId": sid}) == (
        f"unknown terminal session {sid}",
        "TERMINAL_UNKNOWN_SESSION",
    )


async def test_teardown_kills_every_session(
    workspace: Path, tmp_path: Path, jobs: JobManager
) -> None:
    async with TerminalManager(idle_ms=20_000, work_dir=tmp_path / "t") as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals)
        for token in ("3008", "3009"):
            sid = await term.open()
            await term.send(sid, f"sleep {token} &")
        pids = await wait_for_pids("sleep 300", 2)
        assert len(pids) == 2
    assert await all_gone(pids)
    assert not os.path.exists(tmp_path / "t") or os.listdir(tmp_path / "t") == []


async def test_kill_all_processes_reaches_terminals(term: Term) -> None:
    sid = await term.open()
    await term.send(sid, "sleep 3010 &")
    pids = await wait_for_pids("sleep 3010", 1)
    assert pids
    kill_all_processes()
    assert await all_gone(pids)
    session = term.terminals.lookup(term.agent, sid)
    with anyio.fail_after(10):
        await session.pty.finished.wait()
    assert (await term.ok("terminal_list", {})).value[0]["status"]["kind"] == "exited"


# -- background sends ---------------------------------------------------------------------------


async def test_background_send_is_a_job(term: Term) -> None:
    sid = await term.open()
    started = await term.ok(
        "terminal_send",
        {"sessionId": sid, "text": "sleep 0.2; echo from-bg", "run_in_background": True},
    )
    assert started.value == {"kind": "background", "jobId": "pty-send-1"}
    assert text_of(started) == "started background job pty-send-1"
    out = await term.ok("job_output", {"job_id": "pty-send-1", "wait": True, "timeout_ms": 20000})
    assert "from-bg\n" in out.value["text"]
    assert out.value["job"]["status"] == "completed"
    assert out.value["job"]["detail"] == "wait: stdin_read"
    assert out.value["job"]["label"] == f"{sid}: sleep 0.2; echo from-bg"
    assert text_of(out).endswith("[status: completed, wait: stdin_read]")
    empty = await term.ok(
        "terminal_send", {"sessionId": sid, "text": "", "run_in_background": True}
    )
    listing = text_of(await term.ok("job_list", {}))
    assert f"{empty.value['jobId']} [pty-send]" in listing and f"{sid}: (input)" in listing


# -- presentation ---------------------------------------------------------------------------------


async def test_cards(term: Term) -> None:
    tools = {t.name: t for t in term.tools}
    send = tools["terminal_send"]
    assert send.present_call is not None and send.present_result is not None
    assert send.present_call({"sessionId": "terminal-1", "text": "ls"}) == {
        "card": "terminal",
        "title": "ls",
        "description": "terminal terminal-1",
    }
    sid = await term.open()
    result = await term.ok("terminal_send", {"sessionId": sid, "text": "echo card"})
    card = send.present_result({"sessionId": sid, "text": "echo card"}, result)
    assert card == {"card": "terminal", "output": text_of(result)}
    open_tool = tools["terminal_open"]
    assert open_tool.present_call is not None
    assert open_tool.present_call({"type": "shell"})["card"] == "generic"


async def test_output_flood_stays_bounded(
    workspace: Path, tmp_path: Path, jobs: JobManager
) -> None:
    async with TerminalManager(
        idle_ms=20_000, scrollback_chars=50_000, work_dir=tmp_path / "t"
    ) as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals, max_result_bytes=4096)
        sid = await term.open()
        sent = await term.ok(
            "terminal_send", {"sessionId": sid, "text": "yes flood | head -n 300000"}
        )
        assert sent.value["waitReason"] == "stdin_read" and sent.value["truncated"] is True
        assert len(text_of(sent).encode()) <= 4096
        assert text_of(sent).endswith(
            "flood\nflood\n$ \n[wait: stdin_read]\n[session: running]\n[output truncated]"
        )
        session = terminals.lookup(term.agent, sid)
        assert len(session.pty.raw) <= 50_000
        page = (await term.ok("terminal_read", {"sessionId": sid, "count": 1})).value
        assert page["text"] == "$ " and page["totalLines"] == 300_002


async def test_job_kill_stops_a_background_send(term: Term) -> None:
    sid = await term.open()
    await term.ok(
        "terminal_send", {"sessionId": sid, "text": "sleep 3015", "run_in_background": True}
    )
    [sleeper] = await wait_for_pids("sleep 3015", 1)
    killed = await term.ok("job_kill", {"job_id": "pty-send-1"})
    assert killed.value["outcome"] == "cancellation-requested"
    out = await term.ok("job_output", {"job_id": "pty-send-1", "wait": True, "timeout_ms": 10000})
    assert out.value["job"]["status"] == "killed"
    # The send stopped waiting; the program goes on in the terminal until signalled.
    assert alive(sleeper)
    await term.ok("terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
    assert await all_gone([sleeper])


async def test_a_terminal_is_contained_like_a_bash_call(term: Term) -> None:
    opened = (await term.ok("terminal_open", {"type": "shell"})).value
    sid, shell_pid = opened["sessionId"], opened["pid"]
    # The shell runs in a cgroup of its own (seen from the host) ...
    assert "codemode-bash-" in cgroup_of(shell_pid)
    # ... which it cannot leave: the hierarchy is read-only inside (root hosts; the nets
    # above cover the rest).
    escape = await term.send(sid, "echo $$ > /sys/fs/cgroup/cgroup.procs; echo status=$?")
    assert "status=1" in escape["viewport"]
    assert "codemode-bash-" in cgroup_of(shell_pid)


async def test_input_to_a_program_that_never_reads_times_out(
    workspace: Path, tmp_path: Path, jobs: JobManager
) -> None:
    async with TerminalManager(
        idle_ms=300, send_timeout_ms=1000, work_dir=tmp_path / "t"
    ) as terminals:
        term = Term(make_cfg(workspace, tmp_path, jobs), terminals)
        sid = await term.open()
        assert (await term.send(sid, "stty raw -echo; sleep 3016"))["waitReason"] == "inferred_idle"
        # The terminal's input queue fills up; the deadline still holds.
        flood = await term.send(sid, "x" * 200_000, submit=False)
        assert flood["waitReason"] == "timeout"
        assert flood["sessionStatus"] == {"kind": "running"}


async def test_one_send_at_a_time(term: Term) -> None:
    sid = await term.open()
    started = await term.ok(
        "terminal_send", {"sessionId": sid, "text": "sleep 3017", "run_in_background": True}
    )
    job_id = started.value["jobId"]
    busy = await term.fail("terminal_send", {"sessionId": sid, "text": "echo later"})
    assert busy == (
        f"terminal session {sid} is busy with another send; wait for {job_id} with "
        f"job_output or stop it with job_kill, or interrupt it with terminal_signal",
        "TERMINAL_BUSY",
    )
    [sleeper] = await wait_for_pids("sleep 3017", 1)
    await term.ok("terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
    assert await all_gone([sleeper])
    done = await term.ok("job_output", {"job_id": job_id, "wait": True, "timeout_ms": 10000})
    assert done.value["job"]["detail"] == "wait: stdin_read"
    assert (await term.send(sid, "echo later"))["viewport"].endswith("later\n$ ")


async def test_stop_signals_do_not_stop_the_launcher(term: Term) -> None:
    opened = (await term.ok("terminal_open", {"type": "python"})).value
    sid = opened["sessionId"]
    pty = term.terminals.lookup(term.agent, sid).pty
    assert pty.launcher_pid is not None
    # The REPL shares the launcher's group (no job control above it): the group is the
    # session's own, so SIGKILL is refused.
    assert (await term.fail("terminal_signal", {"sessionId": sid, "signal": "SIGKILL"}))[1] == (
        "TERMINAL_SIGNAL_REJECTED"
    )
    await term.ok("terminal_signal", {"sessionId": sid, "signal": "SIGTSTP"})
    # Nothing is stopped (the group has no job-control parent: the kernel drops the stop),
    # and the REPL answers as before.
    assert process_state(pty.launcher_pid) != "T"
    assert (await term.send(sid, "6 * 7"))["viewport"] == "6 * 7\n42\n>>> "
    await term.ok("terminal_close", {"sessionId": sid})
    assert await all_gone([opened["pid"], pty.launcher_pid])


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
