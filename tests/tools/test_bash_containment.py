# ruff: noqa: ASYNC240, ASYNC251
"""bash calls run in a per-call pids cgroup: fork bombs stop at the limit and nothing the
call started outlives it. Real processes and a real cgroup (skipped only where the host
has no writable pids hierarchy, which the test reports)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import anyio
import pytest

from codemode.tools.shell._cgroup import CallCgroup, describe_unenforced
from codemode.tools.shell._process import MAX_FILE_BYTES, BashProcess

pytestmark = pytest.mark.skipif(
    any("pids" in m for m in describe_unenforced()),
    reason="no writable pids cgroup hierarchy on this host",
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def _run(command: str, *, max_pids: int, deadline_s: float = 10.0) -> tuple[str, BashProcess]:
    out: list[bytes] = []
    proc = BashProcess(
        command,
        cwd="/tmp",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        on_stdout=out.append,
        on_stderr=lambda _b: None,
        max_pids=max_pids,
    )
    await proc.start()
    await proc.run(deadline_s)
    return b"".join(out).decode(), proc


@pytest.mark.anyio
async def test_a_fork_bomb_stops_at_the_limit_and_is_cleaned_up() -> None:
    probe = CallCgroup.create(4)
    assert probe is not None and probe.pids_path is not None  # never bomb without a limit
    probe.remove()
    proc = BashProcess(
        "while :; do sleep 10 & done",
        cwd="/tmp",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        on_stdout=lambda _b: None,
        on_stderr=lambda _b: None,
        max_pids=32,
    )
    await proc.start()
    assert proc.cgroup is not None and proc.cgroup.pids_path is not None
    current = Path(proc.cgroup.pids_path, "pids.current")
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            with contextlib.suppress(OSError, ValueError):
                peak = max(peak, int(current.read_text()))
            await anyio.sleep(0.005)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        await proc.run(1.5)
        tg.cancel_scope.cancel()
    assert 1 < peak <= 32
    assert not os.path.exists(proc.cgroup.pids_path)


@pytest.mark.anyio
async def test_processes_that_left_the_group_are_killed_when_the_call_ends(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    text, _proc = await _run(f"setsid sleep 60 & echo $! > {pidfile}; echo started", max_pids=64)
    assert text.strip() == "started"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(pid)


@pytest.mark.anyio
async def test_ordinary_commands_run_unchanged_inside_the_cgroup() -> None:
    text, proc = await _run('echo "$0" "$#"; echo ok', max_pids=64)
    assert text == "bash 0\nok\n"
    assert proc.cgroup is not None
    assert not any(os.path.exists(f) for f in proc.cgroup.procs_files)


def test_cgroup_create_and_remove() -> None:
    group = CallCgroup.create(8)
    assert group is not None and group.pids_path is not None
    assert Path(group.pids_path, "pids.max").read_text().strip() == "8"
    assert group.pids() == []
    group.remove()
    assert not any(os.path.exists(f) for f in group.procs_files)
    os.kill(os.getpid(), 0)  # the host process itself was never moved or signalled
    assert signal.getsignal(signal.SIGTERM) is not None


@pytest.mark.anyio
async def test_file_size_and_core_limits_apply_to_the_command() -> None:
    text, _proc = await _run("ulimit -f; ulimit -c", max_pids=64)
    assert text.split() == [str(MAX_FILE_BYTES // 1024), "0"]
