"""Workers see no host process: they are born in a PID namespace of their own.

The fork server stays in the host's PID namespace (the pids it reports, and the host's
``kill``/``pidfd``/``/proc`` on them, are unchanged); its children are born in a private
one whose PID 1 is an idle init (``sandbox/worker/_pidns.py``). These tests run unrestricted
Python in real workers (the test-only ``raw`` guest) and probe host pids with the calls
seccomp still allows on foreign pids; each fails if a host process is visible.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import anyio
import pytest
from sandbox_helpers import bindings, make_runner, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root (or a user namespace)"),
]


@pytest.fixture(scope="module")
async def raw_runtime() -> AsyncIterator[PythonRuntime]:
    guests = {
        "python": "codemode.sandbox.python._guest",
        "raw": "codemode.sandbox.worker._raw_guest",
    }
    async with PythonRuntime(
        Limits(max_compute_ms=5_000, max_wall_ms=20_000), _guests=guests
    ) as rt:
        yield rt


async def probe(runtime: PythonRuntime, program: str) -> object:
    request = CodeRunRequest(program, bindings(), AbortController().signal)
    with anyio.fail_after(30):
        return ok(await runtime._run_guest(request, "raw"))


def ns_pids(pid: int) -> list[int]:
    """``NSpid``: the pid in each namespace from the host's down to the process's own."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    raise AssertionError("no NSpid line")


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(p) for p in handle.read().split()]


def init_of(server: int) -> int:
    (init,) = [child for child in children_of(server) if ns_pids(child)[-1] == 1]
    return init


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize(
    "call",
    ["os.getpgid({pid})", "os.getsid({pid})", "os.sched_getaffinity({pid})",
     "os.getpriority(os.PRIO_PROCESS, {pid})", "os.sched_getscheduler({pid})"],
)  # fmt: skip
async def test_host_processes_do_not_exist_for_a_worker(
    raw_runtime: PythonRuntime, call: str
) -> None:
    server = raw_runtime.processes().server_pid
    for pid in (os.getpid(), server, 1 if os.getpid() != 1 else 2):
        if pid == 1:
            continue  # pid 1 inside the namespace is the workers' own init
        program = (
            "import errno, os\ntry:\n"
            f"    {call.format(pid=pid)}\n    result = 'visible'\n"
            "except OSError as e:\n    result = errno.errorcode[e.errno]\n"
        )
        assert await probe(raw_runtime, program) == "ESRCH", (call, pid)


async def test_a_worker_has_its_own_small_pid_and_no_visible_parent(
    raw_runtime: PythonRuntime,
) -> None:
    # It may still signal itself: its namespace pid is the one seccomp's filter allows.
    program = "import os\nos.kill(os.getpid(), 0)\nresult = [os.getpid(), os.getppid()]"
    inside = await probe(raw_runtime, program)
    assert isinstance(inside, list)
    own, parent = inside
    assert parent == 0  # the fork server is outside the namespace
    assert own != 1  # PID 1 is the init, never a worker
    pool = raw_runtime._pool
    assert pool is not None
    worker = await pool._spawn()
    try:
        host, in_namespace = ns_pids(worker.pid)
    finally:
        worker.kill()
        worker.close()
    assert host == worker.pid and in_namespace not in (worker.pid, 1)


async def test_the_init_dies_with_the_fork_server_and_takes_the_workers() -> None:
    async with PythonRuntime(Limits(pool_size=2)) as rt:
        run = make_runner(rt)
        assert ok(await run("return 1")) == 1
        server = rt.processes().server_pid
        # The used worker is reaped and the pool refills to its size: the init and two
        # idle workers, once the refill is done.
        for _ in range(1000):  # polling /proc: no event to wait for
            if len(children_of(server)) == 3 and rt.stats.pool.workers_started == 3:
                break
            await anyio.sleep(0.01)
        members = children_of(server)
        init = init_of(server)
        assert len(members) == 3 and init in members
        os.kill(server, signal.SIGKILL)
        for _ in range(500):
            if all(gone(pid) for pid in members):
                break
            await anyio.sleep(0.01)
        assert [pid for pid in members if not gone(pid)] == []
        assert gone(init)
        # The pool starts a new server (and closing it mid-start would be another race).
        assert ok(await run("return 2")) == 2


async def test_a_dead_init_ends_its_fork_server_and_the_pool_recovers() -> None:
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        assert ok(await run("return 1")) == 1
        server = rt.processes().server_pid
        os.kill(init_of(server), signal.SIGKILL)
        for _ in range(500):
            if gone(server):
                break
            await anyio.sleep(0.01)
        assert gone(server)
        assert ok(await run("return 2")) == 2
        assert rt.stats.pool.server_starts == 2
