"""Spare launchers: a one-shot call takes a launcher started (and contained) ahead of it.

Each spare serves one call and is replaced after it; nothing of one call reaches the next
(environment, working directory, cgroup); a command cannot reach a waiting spare (not
through ptrace, /proc/<pid>/fd or environ); spares die with their host and with
``kill_all_processes``; a spare killed from outside costs the call nothing. Real
processes, real cgroups."""

# Tests set up and inspect real files and processes directly; blocking there is intended.
# ruff: noqa: ASYNC220, ASYNC240

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from codemode.tools.shell import _process
from codemode.tools.shell._process import BashProcess, kill_all_processes, spare_launcher_pids
from tests.tools.conftest import alive, all_gone

pytestmark = pytest.mark.anyio


async def spares_ready(count: int = 1) -> list[int]:
    """The spares' pids once ``count`` are started (a guard against a hang, not a timing)."""
    for _ in range(500):
        pids = [pid for pid in spare_launcher_pids() if alive(pid)]
        if len(pids) >= count:
            return pids
        await anyio.sleep(0.01)
    pytest.fail(f"fewer than {count} spare launchers were started")


_calls: list[BashProcess] = []


async def bash(
    command: str, *, cwd: str = "/tmp", max_pids: int = _process.DEFAULT_MAX_PIDS, **env: str
) -> tuple[int | None, str, str]:
    """One call; with a ``max_pids`` of its own it starts its launcher (takes no spare)."""
    out: list[bytes] = []
    err: list[bytes] = []
    proc = BashProcess(
        command,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        on_stdout=out.append,
        on_stderr=err.append,
        max_pids=max_pids,
    )
    await proc.start()
    _calls.append(proc)
    await proc.run(20)
    assert proc.process is not None
    return proc.process.returncode, b"".join(out).decode(), b"".join(err).decode()


async def test_a_spare_serves_one_call_and_is_replaced() -> None:
    await bash("true")
    [spare] = await spares_ready()
    code, out, _ = await bash("echo $PPID")
    assert code == 0 and int(out) == spare  # the call ran behind the spare
    assert not alive(spare)  # which exited with its call
    [fresh] = await spares_ready()
    assert fresh != spare


async def test_nothing_of_one_call_reaches_the_next(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    await spares_ready()
    code, out, _ = await bash(
        "export LEFT=over; cd /; echo $MARK $(pwd)", cwd=str(first), MARK="one"
    )
    assert (code, out.split()) == (0, ["one", "/"])
    one = _calls[-1].cgroup
    await spares_ready()
    code, out, _ = await bash("echo ${MARK-unset} ${LEFT-unset} $(pwd)", cwd=str(second))
    assert (code, out.split()) == (0, ["unset", "unset", str(second)])
    two = _calls[-1].cgroup
    # A fresh cgroup per call, spare or not, and removed with its call.
    assert one is not None and two is not None
    assert one.procs_files and set(one.procs_files).isdisjoint(two.procs_files)
    assert not any(Path(path).exists() for path in one.procs_files + two.procs_files)


async def test_the_launcher_keeps_none_of_the_hosts_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launcher starts with an empty environment; bash gets exactly the call's."""
    monkeypatch.setenv("HOST_ONLY_SECRET", "sk-host-only")
    await bash("true")
    [spare] = await spares_ready()
    environ = Path(f"/proc/{spare}/environ").read_bytes()
    assert b"sk-host-only" not in environ
    code, out, _ = await bash("echo ${HOST_ONLY_SECRET-unset}")
    assert (code, out.strip()) == (0, "unset")


async def test_a_command_cannot_reach_a_waiting_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not dumpable: no /proc/<pid>/fd (the spare's call pipe), mem or ptrace (its environ
    is empty: ``test_the_launcher_keeps_none_of_the_hosts_environment``)."""
    monkeypatch.setattr(_process, "SPARE_LAUNCHERS", 2)
    await bash("true")
    spares = await spares_ready(2)
    code, out, err = await bash("echo $PPID")
    other = next(pid for pid in spares if pid != int(out))
    assert alive(other)
    for probe in (
        # Its call pipe among them: a forged call would run outside the prober's cgroup.
        f"for f in /proc/{other}/fd/*; do echo forged > $f && echo wrote $f; done; false",
        f"ls -l /proc/{other}/fd",
        f"head -c1 /proc/{other}/mem",
        "ls -l /proc/$PPID/fd",  # nor its own launcher's
    ):
        code, out, err = await bash(probe, max_pids=512)  # leaves the spare waiting
        assert code != 0 and "wrote" not in out and "Permission denied" in err, (probe, out, err)
    # PTRACE_ATTACH (16) from the command: refused with EPERM (1).
    attach = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        f"print(libc.ptrace(16, {other}, 0, 0), ctypes.get_errno())"
    )
    code, out, _ = await bash(f"{sys.executable} -I -c '{attach}'", max_pids=512)
    assert (code, out.split()) == (0, ["-1", "1"])
    # The probed spare was untouched: it serves a call as usual.
    assert other in spare_launcher_pids()
    while (pid := int((await bash("echo $PPID"))[1])) != other:
        assert pid in spares


async def test_kill_all_processes_kills_the_spares_and_calls_carry_on() -> None:
    await bash("true")
    spares = await spares_ready()
    kill_all_processes()
    assert await all_gone(spares)
    code, out, _ = await bash("echo still")
    assert (code, out) == (0, "still\n")


async def test_a_spare_killed_from_outside_costs_the_call_nothing() -> None:
    await bash("true")
    [spare] = await spares_ready()
    os.kill(spare, signal.SIGKILL)
    code, out, _ = await bash("echo $PPID")
    assert code == 0 and int(out) != spare


async def test_a_stopped_spare_does_not_hang_the_call() -> None:
    """Any command of the host's uid can SIGSTOP a waiting spare: the call that takes it is
    handed to a launcher of its own once the spare does not answer, and the spare dies."""
    await bash("true")
    [spare] = await spares_ready()
    os.kill(spare, signal.SIGSTOP)
    with anyio.fail_after(30):  # a guard against a hang, not a timing
        code, out, _ = await bash("echo $PPID")
    assert code == 0 and int(out) != spare
    assert await all_gone([spare])


_HOST = textwrap.dedent(
    """
    import os, sys, time, anyio
    from codemode.tools.shell._process import BashProcess, spare_launcher_pids

    async def main():
        proc = BashProcess(
            "true", cwd="/tmp", env={"PATH": os.environ["PATH"]},
            on_stdout=lambda b: None, on_stderr=lambda b: None,
        )
        await proc.start()
        await proc.run(None)
        for _ in range(500):
            if spare_launcher_pids():
                break
            await anyio.sleep(0.01)
        print(*spare_launcher_pids(), flush=True)
        await anyio.sleep(60)

    anyio.run(main)
    """
)


async def test_spares_die_with_their_host() -> None:
    """A host killed with SIGKILL cleans nothing up; its spares end by themselves."""
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stdout is not None
        spares = [int(pid) for pid in host.stdout.readline().split()]
        assert spares and all(alive(pid) for pid in spares)
        host.kill()
        host.wait()
        assert await all_gone(spares)
    finally:
        host.kill()
        host.wait()
        if host.stdout is not None:
            host.stdout.close()
