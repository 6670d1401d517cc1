"""Nothing a bash call starts outlives it: not daemons, not processes that try to leave the
call's cgroup (into a child cgroup, the root cgroup, the host's namespaces), not
background jobs at ``job_kill`` or at teardown.

Each escape writes the pids it wants to keep alive to a file; once the call (or job) has
ended, none of them may be alive 1 s later. Real bash, real cgroups: on this root host
the cgroup and namespace nets are all in place, so nothing is skipped here unless the host
lacks them (the reason is then reported)."""

# Tests set up and inspect real files (and undo mounts) directly; blocking there is intended.
# ruff: noqa: ASYNC221, ASYNC240

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.tools import JobManager, kill_all_processes
from codemode.tools.shell._cgroup import describe_unenforced
from tests.tools.conftest import Harness, alive, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        bool(describe_unenforced()), reason=f"containment degraded: {describe_unenforced()}"
    ),
]

# A child of the shell's own v1 pids cgroup and of its v2 cgroup, found the way an attacker
# would (from /proc/self/cgroup), then joined by a setsid'd sleeper.
_CHILD_CGROUP = r"""
for line in $(cat /proc/self/cgroup); do
  hier=${line#*:}; ctrl=${hier%%:*}; path=${hier#*:}
  case $ctrl in pids) base=/sys/fs/cgroup/pids ;; "") base=/sys/fs/cgroup/unified ;; *) continue ;; esac
  [ -d "$base" ] || base=/sys/fs/cgroup
  mkdir -p "$base$path/escape" 2>/dev/null
  (echo $BASHPID > "$base$path/escape/cgroup.procs"; exec setsid sleep 71) 2>/dev/null &
  echo $! >> {pidfile}
done
"""

# Into the root cgroup of every hierarchy that offers a cgroup.procs.
_ROOT_CGROUP = r"""
( for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do
    echo $BASHPID > "$f"
  done 2>/dev/null
  exec setsid sleep 72 ) &
echo $! >> {pidfile}
"""

ESCAPES: dict[str, str] = {
    "nohup": "nohup sleep 73 >/dev/null 2>&1 & echo $! >> {pidfile}",
    "setsid": "setsid sleep 74 & echo $! >> {pidfile}",
    "double-fork": "( ( exec sleep 75 ) & echo $! >> {pidfile} ) &\nwait",
    "disown": "sleep 76 & echo $! >> {pidfile}; disown -a",
    "child-cgroup": _CHILD_CGROUP,
    "root-cgroup": _ROOT_CGROUP,
    # The host's mounts through /proc/<host pid>/root, and the host's namespaces.
    "host-root": (
        "( echo $BASHPID > /proc/{host}/root/sys/fs/cgroup/pids/cgroup.procs;"
        " echo $BASHPID > /proc/{host}/root/sys/fs/cgroup/unified/cgroup.procs;"
        " exec setsid sleep 77 ) 2>/dev/null & echo $! >> {pidfile}"
    ),
    "nsenter": (
        "nsenter -t {host} -m -C -- sh -c 'echo $$ > /sys/fs/cgroup/pids/cgroup.procs;"
        " exec setsid sleep 78' 2>/dev/null & echo $! >> {pidfile}"
    ),
    "remount": (
        "( mount -o remount,rw /sys/fs/cgroup/pids; mkdir {pidfile}.d; mount -t cgroup2 none {pidfile}.d;"
        " echo $BASHPID > /sys/fs/cgroup/pids/cgroup.procs; exec setsid sleep 79 )"
        " >/dev/null 2>&1 & echo $! >> {pidfile}"
    ),
    # A user namespace regains every capability, but a fresh cgroupfs mount there shows only
    # the call's own subtree (its cgroup namespace), and a child cgroup dies with the call.
    "userns": (
        "mkdir {pidfile}.d; unshare -U -r -m -C sh -c 'mount -t cgroup2 none {pidfile}.d"
        " && mkdir -p {pidfile}.d/esc && echo $$ > {pidfile}.d/esc/cgroup.procs;"
        " echo $$ > {pidfile}.d/cgroup.procs; exec setsid sleep 82' 2>/dev/null &"
        " echo $! >> {pidfile}"
    ),
    # Orphan everything to init by killing the launcher the shell runs under.
    "kill-parent": "setsid sleep 80 & echo $! >> {pidfile}; sleep 81 & echo $! >> {pidfile}; kill -9 $PPID",
}


def sh(command: str, **extra: Any) -> dict[str, Any]:
    return {"command": command, "description": "Try to outlive the call", **extra}


def escape(name: str, pidfile: Path) -> str:
    return ESCAPES[name].replace("{pidfile}", str(pidfile)).replace("{host}", str(os.getpid()))


async def started(pidfile: Path, count: int = 1) -> list[int]:
    """The pids the escape recorded (waits until ``count`` are there)."""
    for _ in range(500):
        if pidfile.exists():
            pids = [int(p) for p in pidfile.read_text().split()]
            if len(pids) >= count:
                return pids
        await anyio.sleep(0.01)
    raise AssertionError(f"{pidfile} never listed {count} pid(s)")


def undo_mounts(pidfile: Path) -> None:
    """A regression that let an escape mount something must not leave it on the host."""
    mounted = Path(f"{pidfile}.d")
    if os.path.ismount(mounted):
        subprocess.run(["umount", str(mounted)], check=False)


async def none_alive_within_1s(pids: list[int]) -> list[int]:
    """The pids still alive 1 s from now (polled; empty as soon as all are gone)."""
    for _ in range(50):
        if not any(alive(pid) for pid in pids):
            return []
        await anyio.sleep(0.02)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_foreground_call_leaves_nothing_behind(
    harness: Harness, tmp_path: Path, name: str
) -> None:
    pidfile = tmp_path / "pids"
    # ``sleep 0.3`` keeps the shell up until the escapes have forked and recorded themselves.
    try:
        await harness.ok("bash", sh(escape(name, pidfile) + "\nsleep 0.3"))
        pids = await started(pidfile)
        assert await none_alive_within_1s(pids) == []
    finally:
        undo_mounts(pidfile)


async def test_escapes_fail_before_the_kill(harness: Harness, tmp_path: Path) -> None:
    """The hierarchy above the call is out of reach, not merely cleaned up afterwards.

    Each probe would leave the host unchanged if it succeeded (same core_pattern, a cgroup
    and a mount that are removed below), so a regression cannot damage the machine.
    """
    host = os.getpid()
    probe_cgroup = Path(f"/sys/fs/cgroup/unified/codemode-escape-probe-{host}")
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    try:
        result = await harness.ok(
            "bash",
            sh(
                "cat /proc/self/cgroup | sort | head -n 2;"
                "echo $$ > /sys/fs/cgroup/pids/cgroup.procs;"
                f"mkdir {probe_cgroup};"
                f"echo $$ > /proc/{host}/root/sys/fs/cgroup/pids/cgroup.procs;"
                'echo "$(cat /proc/sys/kernel/core_pattern)" > /proc/sys/kernel/core_pattern;'
                f"mount -t tmpfs none {mount_point}"
            ),
        )
    finally:
        if probe_cgroup.exists():
            probe_cgroup.rmdir()
        if os.path.ismount(mount_point):
            subprocess.run(["umount", str(mount_point)], check=False)
    out = text_of(result)
    # The cgroup namespace hides where the call sits.
    assert out.startswith("0::/\n1:cpu:/\n")
    assert out.count("Read-only file system") == 3
    assert f"/proc/{host}/root/sys/fs/cgroup/pids/cgroup.procs: Permission denied" in out
    assert "must be superuser" in out or "permission denied" in out.lower()


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_job_kill_leaves_nothing_behind(
    job_harness: Harness, tmp_path: Path, name: str
) -> None:
    pidfile = tmp_path / "pids"
    try:
        await _job_escape(job_harness, pidfile, name)
    finally:
        undo_mounts(pidfile)


async def _job_escape(job_harness: Harness, pidfile: Path, name: str) -> None:
    await job_harness.ok("bash", sh(escape(name, pidfile) + "\nsleep 60", run_in_background=True))
    pids = await started(pidfile)
    if name == "kill-parent":
        pids = await started(pidfile, 2)
        # The launcher is gone, so the job has already ended; nothing may remain.
    else:
        killed = await job_harness.ok("job_kill", {"job_id": "bash-1"})
        assert killed.value["outcome"] == "cancellation-requested"
    assert await none_alive_within_1s(pids) == []
    done = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    assert done.value["job"]["status"] in ("killed", "completed")


async def test_manager_close_leaves_nothing_behind(
    workspace: Path, output_dir: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    jobs = JobManager(output_dir=tmp_path / "jobs")
    await jobs.__aenter__()
    h = Harness(workspace, output_dir, jobs=jobs)
    for name in ("setsid", "child-cgroup", "root-cgroup"):
        await h.ok("bash", sh(escape(name, pidfile) + "\nsleep 60", run_in_background=True))
    pids = await started(pidfile, 3)
    await jobs.aclose()
    assert await none_alive_within_1s(pids) == []
    await jobs.aclose()  # idempotent


async def test_kill_all_processes_leaves_nothing_behind(harness: Harness, tmp_path: Path) -> None:
    """The synchronous teardown entry point ends live foreground calls too."""
    pidfile = tmp_path / "pids"
    result: list[Any] = []

    async def call() -> None:
        result.append(await harness.ok("bash", sh(escape("setsid", pidfile) + "\nsleep 60")))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        pids = await started(pidfile)
        kill_all_processes()
        assert await none_alive_within_1s(pids) == []
    assert result[0].value["signal"] == "SIGKILL"


async def test_a_timeout_kills_a_shell_that_ignores_sigterm(
    harness: Harness, tmp_path: Path
) -> None:
    """The host's own freeze-and-kill of the launcher's tree, after the SIGTERM grace."""
    pidfile = tmp_path / "pids"
    result = await harness.ok(
        "bash",
        sh(
            f"trap '' TERM; {escape('setsid', pidfile)}; sleep 61 & echo $! >> {pidfile}; sleep 60",
            timeoutMs=300,
        ),
    )
    assert result.value["timedOut"] is True and result.value["signal"] == "SIGKILL"
    pids = await started(pidfile, 2)
    assert await none_alive_within_1s(pids) == []


@pytest.mark.parametrize(
    "setup",
    [
        "trap '' TERM HUP INT",  # the shell and its children shrug off SIGTERM
        "kill -STOP $PPID",  # the launcher is stopped, so it cannot clean up by itself
        # ... and kept stopped by a process outside the shell's group.
        'launcher=$PPID; setsid sh -c "while :; do kill -STOP $launcher; sleep 0.01; done" &'
        " echo $! >> {pidfile}",
    ],
)
async def test_nothing_is_alive_1s_after_job_kill_however_stubborn(
    job_harness: Harness, tmp_path: Path, setup: str
) -> None:
    pidfile = tmp_path / "pids"
    command = (
        setup.replace("{pidfile}", str(pidfile))
        + f"\n{escape('setsid', pidfile)}; sleep 83 & echo $! >> {pidfile}; sleep 84"
    )
    await job_harness.ok("bash", sh(command, run_in_background=True))
    pids = await started(pidfile, 3 if "setsid sh" in setup else 2)
    await job_harness.ok("job_kill", {"job_id": "bash-1"})
    assert await none_alive_within_1s(pids) == []
