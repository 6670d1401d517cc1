"""Each containment net on its own: the cgroup kill reaches descendant cgroups, the launcher's
process-tree kill works without any cgroup (what a host without cgroups gets), the session
sweep catches orphans of a killed launcher, and the launcher takes its tree along when the
host process dies. Real processes, real cgroups."""

# Tests set up and inspect real files and processes directly; blocking there is intended.
# ruff: noqa: ASYNC220, ASYNC240

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from codemode.tools.shell import _process
from codemode.tools.shell._cgroup import CallCgroup, describe_unenforced
from codemode.tools.shell._process import BashProcess
from tests.tools.conftest import alive

pytestmark = pytest.mark.anyio
needs_v2 = pytest.mark.skipif(
    any("cgroup v2" in m for m in describe_unenforced()), reason="no writable cgroup v2"
)


async def gone_within_1s(pids: list[int]) -> bool:
    for _ in range(50):
        if not any(alive(pid) for pid in pids):
            return True
        await anyio.sleep(0.02)
    return False


async def run(command: str, *, cgroup: bool) -> BashProcess:
    proc = BashProcess(
        command,
        cwd="/tmp",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        on_stdout=lambda _b: None,
        on_stderr=lambda _b: None,
        max_pids=None,
        cgroup=cgroup,
    )
    await proc.start()
    await proc.run(20)
    return proc


def pids_in(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@needs_v2
async def test_the_cgroup_kill_reaches_descendant_cgroups() -> None:
    group = CallCgroup.create(None)
    assert group is not None and group.kill_path is not None
    child = Path(group.kill_path, "inner", "deeper")
    child.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (child / "cgroup.procs").write_text(str(sleeper.pid))
        assert sleeper.pid in group.pids()
        group.kill()
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
        group.remove()
        assert not Path(group.kill_path).exists()
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_the_tree_kill_works_without_a_cgroup(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    await run(
        f"setsid sleep 60 & echo $! >> {pidfile};"
        f"( ( setsid nohup sleep 61 >/dev/null 2>&1 & echo $! >> {pidfile} ) & );"
        "sleep 0.3",
        cgroup=False,
    )
    pids = pids_in(pidfile)
    assert len(pids) == 2
    assert await gone_within_1s(pids)


async def test_the_tree_kill_stops_a_process_that_keeps_forking(tmp_path: Path) -> None:
    # A spawner that keeps starting setsid'd sleepers while the call ends: the launcher
    # stops it first (a stopped process cannot fork), so the kill converges.
    pidfile = tmp_path / "pids"
    await run(
        f"(while :; do setsid sleep 60 & echo $! >> {pidfile}; sleep 0.005; done) &"
        f" echo $! >> {pidfile}; sleep 0.4",
        cgroup=False,
    )
    pids = pids_in(pidfile)
    assert len(pids) > 5
    assert await gone_within_1s(pids)
    # Nothing forked after the first look survives either.
    assert await gone_within_1s(pids_in(pidfile))


async def test_the_session_sweep_catches_orphans_of_a_killed_launcher(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    proc = await run(f"sleep 60 & echo $! >> {pidfile}; kill -9 $PPID; sleep 60", cgroup=False)
    assert proc.process is not None and proc.process.returncode == -signal.SIGKILL
    pids = pids_in(pidfile)
    assert len(pids) == 1
    assert await gone_within_1s(pids)


_HOST = textwrap.dedent(
    """
    import os, sys, anyio
    from codemode.tools.shell._process import BashProcess

    async def main():
        proc = BashProcess(
            sys.argv[1], cwd="/tmp", env=dict(os.environ),
            on_stdout=lambda b: None, on_stderr=lambda b: None, cgroup=sys.argv[2] == "1",
        )
        await proc.start()
        await proc.run(None)

    anyio.run(main)
    """
)


@pytest.mark.parametrize("cgroup", [True, False])
async def test_the_call_dies_with_its_host(tmp_path: Path, cgroup: bool) -> None:
    """A host killed with SIGKILL cleans nothing up; the launcher still takes its tree."""
    pidfile = tmp_path / "pids"
    command = f"setsid sleep 60 & echo $! >> {pidfile}; sleep 60 & echo $! >> {pidfile}; wait"
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, command, "1" if cgroup else "0"],
        cwd=Path(__file__).parents[2],
    )
    try:
        for _ in range(500):
            if len(pids_in(pidfile)) == 2:
                break
            await anyio.sleep(0.01)
        pids = pids_in(pidfile)
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        host.kill()
        host.wait()
        assert await gone_within_1s(pids)
    finally:
        host.kill()
        host.wait()


async def test_a_host_without_root_warns_once_and_keeps_the_tree_net(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Without root there are no namespaces or read-only mounts: the first call says so."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(_process, "_warned", set())
    caplog.set_level(logging.WARNING, logger="tools.bash")
    pidfile = tmp_path / "pids"
    for _ in range(2):
        await run(f"setsid sleep 60 & echo $! >> {pidfile}; sleep 0.2", cgroup=False)
    warnings = [r.getMessage() for r in caplog.records if "not root" in r.getMessage()]
    assert warnings == [
        "bash containment degraded: not root: a command that kills its launcher and calls "
        "setsid can outlive the call, and the cgroup hierarchy above it is not read-only"
    ]
    pids = pids_in(pidfile)
    assert len(pids) == 2
    assert await gone_within_1s(pids)
