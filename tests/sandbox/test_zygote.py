"""The fork server as its workers' template (zygote): it locks itself down once, before
it forks, and every worker adds only what cannot be inherited.

Observed from outside, through ``/proc`` of the real processes: the server's
credentials, root and limits; each worker's seccomp filter, limits and parent-death
set-up; and that nothing one run writes reaches the next, although every worker is a
copy of the same prepared state.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest
from sandbox_helpers import make_runner, ok

from codemode.sandbox import Limits, ProcessRuntime, PythonRuntime, TypeScriptRuntime

pytestmark = pytest.mark.anyio

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="credentials are dropped on root hosts")


def status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as handle:
        return dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)


def limits(pid: int) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    with open(f"/proc/{pid}/limits") as handle:
        next(handle)
        for line in handle:
            name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
            out[name] = (soft, hard)
    return out


def epoll_watched_inodes(pid: int, fd: int) -> set[int]:
    """The inodes of the descriptors an epoll instance of ``pid`` watches (its fdinfo)."""
    with open(f"/proc/{pid}/fdinfo/{fd}") as handle:
        return {
            int(field.split(":", 1)[1], 16)
            for line in handle
            if line.startswith("tfd:")
            for field in line.split()
            if field.startswith("ino:")
        }


def stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()


async def idle_worker(rt: ProcessRuntime) -> int:
    pool = rt._pool
    assert pool is not None
    await rt.wait_ready()
    return pool._idle[0].pid


@root_only
@pytest.mark.parametrize("runtime", [PythonRuntime, TypeScriptRuntime])
async def test_the_server_is_locked_down_before_it_forks(runtime: type[ProcessRuntime]) -> None:
    async with runtime(Limits(pool_size=1, max_compute_ms=3000)) as rt:
        server = rt.processes().server_pid
        info = status(server)
        assert info["Uid"].split() == ["65534"] * 4
        assert info["Gid"].split() == ["65534"] * 4
        assert info["Groups"].strip() == ""
        assert info["CapEff"] == "0000000000000000"
        # Its root is the empty private root, not the host's.
        assert os.readlink(f"/proc/{server}/root") != "/"
        assert os.listdir(f"/proc/{server}/root") == []
        # Its own seccomp filter (it must go on forking), no CPU or process limit.
        assert info["Seccomp"] == "2" and info["Seccomp_filters"] == "1"
        server_limits = limits(server)
        assert server_limits["Max cpu time"] == ("unlimited", "unlimited")
        assert server_limits["Max processes"] != ("0", "0")
        # The memory cap is each worker's own (one below what the server maps must fail
        # a worker, not the server); the file-size cap is inherited.
        assert server_limits["Max address space"] == ("unlimited", "unlimited")
        assert server_limits["Max file size"] == ("0", "0")


@pytest.mark.parametrize("runtime", [PythonRuntime, TypeScriptRuntime])
async def test_each_worker_adds_its_own_half(runtime: type[ProcessRuntime]) -> None:
    async with runtime(Limits(pool_size=1, max_compute_ms=3000)) as rt:
        worker = await idle_worker(rt)
        info = status(worker)
        assert info["NoNewPrivs"] == "1"
        assert info["Seccomp"] == "2"
        assert info["Seccomp_filters"] == "2"  # the server's, and its own on top
        worker_limits = limits(worker)
        assert worker_limits["Max cpu time"] == ("5", "5")  # 3 s + the 2 s backstop
        assert worker_limits["Max open files"] == ("64", "64")
        assert worker_limits["Max address space"] == (str(512 << 20),) * 2
        if os.geteuid() == 0:
            assert worker_limits["Max processes"] == ("0", "0")
            assert info["Uid"].split() == ["65534"] * 4
        # Nothing of the server's is open: stdio on /dev/null, the loop's own epoll and
        # self-pipe (made in the worker), and the bridge.
        fds = sorted(int(fd) for fd in os.listdir(f"/proc/{worker}/fd"))
        targets = [os.readlink(f"/proc/{worker}/fd/{fd}") for fd in fds]
        assert targets[:3] == ["/dev/null"] * 3
        assert targets[3] == "anon_inode:[eventpoll]"
        assert len(fds) == 7 and all(t.startswith("socket:") for t in targets[4:])
        server = rt.processes().server_pid
        server_fds = {
            os.readlink(f"/proc/{server}/fd/{fd}") for fd in os.listdir(f"/proc/{server}/fd")
        }
        # Every epoll instance has the same name: those are compared by what they watch.
        assert not (server_fds - {"/dev/null", "anon_inode:[eventpoll]"}) & set(targets)
        # The worker's epoll watches its own sockets only (its self-pipe; the bridge once
        # a run attaches), never one of the server's (the template loop it renewed).
        watched = epoll_watched_inodes(worker, fds[3])
        own = {os.stat(f"/proc/{worker}/fd/{fd}").st_ino for fd in fds[4:]}
        assert watched and watched <= own
        # A session of its own, so the supervisor can kill its whole process group.
        fields = stat_fields(worker)
        assert int(fields[2]) == worker and int(fields[3]) == worker  # pgrp, session


async def test_every_worker_draws_its_own_random_numbers() -> None:
    # Workers are forked without the interpreter's at-fork handlers (``_raw_fork``); the
    # one a program can observe is ``random``'s re-seed. Without it every worker would
    # start from the server's generator state and draw the same numbers.
    program = "import random\nreturn [random.getrandbits(64), random.random()]"
    async with PythonRuntime(Limits(pool_size=2)) as rt:
        run = make_runner(rt)
        draws = []
        for _ in range(6):
            draws.append(tuple(ok(await run(program))))
        assert len(set(draws)) == 6, draws


@pytest.mark.parametrize(
    ("runtime", "write", "read"),
    [
        (
            PythonRuntime,
            "leak = 1\nreturn 1",
            "try:\n    leak\nexcept NameError:\n    return 'clean'\nreturn 'leaked'",
        ),
        (
            TypeScriptRuntime,
            "globalThis.leak = 1; Object.prototype.polluted = 1; return 1",
            "return typeof leak === 'undefined' && ({}).polluted === undefined"
            " ? 'clean' : 'leaked'",
        ),
    ],
)
async def test_runs_share_nothing_though_workers_copy_one_template(
    runtime: type[ProcessRuntime], write: str, read: str
) -> None:
    async with runtime(Limits(pool_size=2)) as rt:
        run = make_runner(rt)
        for _ in range(3):
            assert ok(await run(write)) == 1
            await anyio.sleep(0.02)
            assert ok(await run(read)) == "clean"


async def test_the_typescript_pre_fault_leaves_the_run_s_context_untouched() -> None:
    # A spare pre-faults by running a program of its own in a throwaway context, never
    # in the one its run gets: nothing of it (its names, its log line) reaches a run.
    async with TypeScriptRuntime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        for _ in range(3):
            await anyio.sleep(0.05)  # the spare is ready and pre-faulted
            result = await run("return [typeof d, globalThis.d === undefined]")
            assert ok(result) == ["undefined", True]
            assert result.logs == []


# -- the split seccomp program ----------------------------------------------------------


def run_bpf(program: list[tuple[int, int, int, int]], data: bytes) -> int:
    """Evaluate a classic-BPF seccomp program (the opcodes ``_seccomp`` uses)."""
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == 0x20:  # LD W ABS
            acc = int.from_bytes(data[k : k + 4], "little")
        elif code == 0x06:  # RET K
            return k
        elif code in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


def seccomp_data(nr: int, arch: int, args: tuple[int, ...]) -> bytes:
    padded = (args + (0,) * 6)[:6]
    return (
        nr.to_bytes(4, "little")
        + arch.to_bytes(4, "little")
        + (0).to_bytes(8, "little")
        + b"".join(a.to_bytes(8, "little") for a in padded)
    )


def strictest(*actions: int) -> int:
    # Seccomp takes the action of lowest precedence value: KILL_PROCESS (0x80000000,
    # negative as s32) < ERRNO (0x0005xxxx) < ALLOW (0x7fff0000).
    return min(actions, key=lambda a: a - (1 << 32) if a & 0x80000000 else a)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_server_and_worker_filters_together_refuse_what_the_whole_one_does(machine: str) -> None:
    from codemode.sandbox.worker._seccomp import _ARCHES, build_filter, worker_filter

    pid = 4242
    whole = build_filter(pid, machine)
    server = build_filter(0, machine, server=True)
    worker = worker_filter(pid, machine)
    arch = _ARCHES[machine][0]
    arg_sets = [
        (),
        (0x00010000 | 0x00000100,),  # clone: a thread
        (0x01200011,),  # clone: glibc's fork flags
        (0x00010000 | 0x20000000,),  # clone: a thread in a new PID namespace
        (pid,),  # kill: itself
        (1, 9),  # kill: another process
        (0, 0, 0),  # prlimit64: read
        (0, 7, 0x1000),  # prlimit64: set
        (0, 0x40, 0x41),  # open/openat with O_CREAT in either position
        (0, 0, 0),  # read-only open
    ]
    for nr in range(0, 460):
        for args in arg_sets:
            data = seccomp_data(nr, arch, args)
            expected = run_bpf(whole, data)
            combined = strictest(run_bpf(server, data), run_bpf(worker, data))
            assert combined == expected, (nr, args)
    # A foreign architecture is killed by both.
    foreign = seccomp_data(0, 0x40000003, ())
    assert run_bpf(server, foreign) == run_bpf(worker, foreign) == 0x80000000
    # And the server alone can fork, which the whole program refuses.
    fork = seccomp_data(_ARCHES[machine][2]["clone"] or 0, arch, (0x01200011,))
    assert run_bpf(server, fork) == 0x7FFF0000 != run_bpf(whole, fork)


@pytest.mark.parametrize("runtime_cls", [PythonRuntime, TypeScriptRuntime])
async def test_a_memory_cap_below_the_template_refuses_every_run(runtime_cls: Any) -> None:
    # The cap is each worker's own; below what the template maps, no run could honour it
    # (or allocate anything), so each run is refused, deterministically, and the runtime
    # stays usable for the next.
    async with runtime_cls(Limits(max_memory_bytes=16 * 2**20, pool_size=1)) as rt:
        run = make_runner(rt)
        for _ in range(2):
            with anyio.fail_after(30):
                result = await run("return 1")
            assert result.error is not None and result.error.kind == "worker-exit"
            assert result.error.message.startswith(
                f"the memory cap ({16 * 2**20} bytes) is below what a worker maps at start ("
            ), result.error.message


@pytest.mark.parametrize("runtime", [PythonRuntime, TypeScriptRuntime])
async def test_workers_run_below_the_host_s_priority(runtime: type[ProcessRuntime]) -> None:
    # A worker spinning on a machine whose cores are all busy must lose to the host's
    # loop, not share with it; the server (which forks replacements) keeps the host's.
    from codemode.sandbox.worker._boundary import WORKER_NICE

    async with runtime(Limits(pool_size=1, max_compute_ms=3000)) as rt:
        worker = await idle_worker(rt)
        server = rt.processes().server_pid
        host_nice = os.getpriority(os.PRIO_PROCESS, 0)
        assert int(stat_fields(server)[16]) == host_nice
        assert int(stat_fields(worker)[16]) == min(19, host_nice + WORKER_NICE)
        # The run itself executes in such a worker (the pool hands over the idle one).
        assert ok(await make_runner(rt)("return 1")) == 1
