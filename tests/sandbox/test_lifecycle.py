"""Pool and supervisor lifecycle: warm workers, refill, recovery, clean shutdown."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import anyio
import pytest
from sandbox_helpers import err, make_runner, ok, threads_started_since

from codemode.sandbox import Limits, PythonRuntime
from codemode.sandbox.host._forkserver_client import ForkServerError

pytestmark = pytest.mark.anyio


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def child_pids() -> set[int]:
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as handle:
            pids.update(int(p) for p in handle.read().split())
    return pids


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(p) for p in handle.read().split()]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def exists(path: str) -> bool:
    return os.path.lexists(path)


async def test_clean_shutdown_leaks_nothing() -> None:
    fds, children, threads = open_fds(), child_pids(), set(threading.enumerate())
    workers: list[int] = []
    async with PythonRuntime(Limits(pool_size=2, max_compute_ms=300)) as rt:
        run = make_runner(rt)
        server = rt.processes().server_pid
        assert ok(await run("return 1")) == 1
        assert err(await run("while True:\n    pass"), "timeout")
        assert err(await run("raise ValueError('x')")).endswith("ValueError: x")
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(run, "await tools.echo({})")
        await anyio.sleep(0.2)  # let the refill finish: idle workers exist at exit
        workers = children_of(server)
        assert len(workers) >= 2
    assert not alive(server)
    assert not [pid for pid in workers if alive(pid)]
    assert child_pids() == children
    assert open_fds() == fds
    assert await threads_started_since(threads) == []


async def test_pool_serves_warm_workers_and_refills() -> None:
    async with PythonRuntime(Limits(pool_size=2)) as rt:
        run = make_runner(rt)
        for i in range(6):
            # The refill after each run brings the pool back to full (not a fixed sleep:
            # how long a fork takes depends on what else the machine does).
            with anyio.fail_after(10):
                await rt.wait_ready()
            assert ok(await run(f"return {i}")) == i
        stats = rt.stats.pool
        assert stats.warm_checkouts == 6 and stats.cold_checkouts == 0
        # Two to start with and one refill per run before the next: the last run's
        # refill starts only once that run has ended, so it may not be counted yet.
        assert stats.workers_started >= 7


async def test_each_worker_serves_one_run() -> None:
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        first = ok(await run("import random\nreturn random.random()"))
        second = ok(await run("import random\nreturn random.random()"))
        assert first != second  # a fresh interpreter state (and a fresh RNG) per run
        program = "import json\ntry:\n    json.x = 1\nexcept TypeError:\n    pass\nreturn 'ok'"
        assert err(await run(program), "forbidden")  # a caught denial still ends the run
        assert ok(await run("import json\nreturn hasattr(json, 'x')")) is False


async def test_concurrent_runs() -> None:
    async with PythonRuntime(Limits(pool_size=2)) as rt:
        run = make_runner(rt)
        results: dict[int, object] = {}

        async def one(i: int) -> None:
            results[i] = ok(
                await run(f"x = await tools.delayed({{'delay': 0.2, 'value': {i}}})\nreturn x * 2")
            )

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        assert results == {i: i * 2 for i in range(8)}


async def test_recovers_from_a_dead_fork_server() -> None:
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        run = make_runner(rt)
        assert ok(await run("return 1")) == 1
        server = rt.processes().server_pid
        os.kill(server, signal.SIGKILL)
        for _ in range(200):
            if rt.processes().server_pid != server:  # type: ignore[union-attr]
                break
            await anyio.sleep(0.01)
        assert ok(await run("return 2")) == 2
        assert rt.stats.pool.server_starts == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="the PID namespace's init does it (root here)")
async def test_a_killed_fork_server_leaves_no_work_directory_behind() -> None:
    # A SIGKILLed server cannot clean up; the init of its workers' PID namespace, which
    # outlives it by construction, removes the directory instead.
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        pool = rt._pool
        assert pool is not None
        worker = await pool._spawn()
        workdir = os.readlink(f"/proc/{worker.pid}/cwd")
        worker.kill()
        worker.close()
        assert exists(workdir)
        server = pool.server_pid
        os.kill(server, signal.SIGKILL)
        for _ in range(500):
            if not exists(workdir) and pool.server_pid not in (0, server):
                break
            await anyio.sleep(0.01)
        assert not exists(workdir)
        # (Waiting for the replacement server too: closing the pool while one is still
        # starting is a separate race.)
        assert ok(await make_runner(rt)("return 1")) == 1


async def test_run_requires_the_context_manager() -> None:
    from codemode.engine import AbortController, CodeRunRequest

    with pytest.raises(RuntimeError, match="not started"):
        await PythonRuntime().run(CodeRunRequest("return 1", [], AbortController().signal))


async def test_wait_ready_fills_the_pool_so_the_next_runs_skip_the_fork() -> None:
    from codemode.engine import AbortController, CodeRunRequest

    async with PythonRuntime(Limits(pool_size=2)) as runtime:
        for _ in range(3):  # drain the pool
            assert (
                ok(await runtime.run(CodeRunRequest("return 1", [], AbortController().signal))) == 1
            )
        with anyio.fail_after(30):
            await runtime.wait_ready()
        cold = runtime.stats.pool.cold_checkouts
        for _ in range(2):
            assert (
                ok(await runtime.run(CodeRunRequest("return 1", [], AbortController().signal))) == 1
            )
        assert runtime.stats.pool.cold_checkouts == cold


async def test_wait_ready_needs_a_started_runtime() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        await PythonRuntime().wait_ready()


async def test_the_first_run_takes_a_worker_already_on_its_way() -> None:
    # Opening the runtime starts the pool's first workers; a run right away waits for
    # one of them rather than forking another beside them (a cold checkout).
    async with PythonRuntime(Limits(pool_size=2)) as rt:
        run = make_runner(rt)
        with anyio.fail_after(30):
            assert ok(await run("return 7")) == 7
        stats = rt.stats.pool
        assert (stats.warm_checkouts, stats.cold_checkouts) == (1, 0)


async def test_processes_lists_the_ready_spares() -> None:
    async with PythonRuntime(Limits(pool_size=2)) as rt:
        with anyio.fail_after(30):
            await rt.wait_ready()
        procs = rt.processes()
        assert len(procs.idle_pids) == 2 and procs.worker_pids == ()
        assert procs.server_pid not in procs.idle_pids
        for pid in procs.idle_pids:
            os.kill(pid, 0)  # alive
        run = make_runner(rt)
        assert ok(await run("return 1")) == 1
        # The spare that ran is gone from the list (each run takes a fresh worker).
        assert procs.idle_pids[0] not in rt.processes().idle_pids


async def _gone(pid: int) -> None:
    """Wait (bounded) until ``pid`` no longer exists: killed and reaped."""
    with anyio.fail_after(10):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            await anyio.sleep(0.005)


async def test_a_completed_runs_worker_is_killed_once_the_caller_has_its_result() -> None:
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        with anyio.fail_after(30):
            await rt.wait_ready()
        (pid,) = rt.processes().idle_pids
        run = make_runner(rt)
        assert ok(await run("return 1")) == 1
        # Released as the run ends: then gone (killed and reaped).
        await _gone(pid)


@pytest.mark.parametrize("after_s", [0.0, 0.002, 0.02])
async def test_a_server_start_cancelled_at_any_step_leaves_no_descriptor_or_process(
    after_s: float,
) -> None:
    # A refill that starts a fork server as its pool closes is cancelled mid-start:
    # before the spawn, during it, or while the server boots. Each time the control
    # socket is closed at once (it was once left to the garbage collector, surfacing as
    # an unclosed-socket ResourceWarning in whatever test ran when it was collected).
    from codemode.sandbox.host._forkserver_client import ForkServerClient
    from codemode.sandbox.worker._boundary import BoundarySpec

    before_fds, before_children = open_fds(), child_pids()
    before_dirs = _work_dirs()
    client = ForkServerClient(
        guests={"python": "codemode.sandbox.python._guest"},
        boundary=BoundarySpec(memory_bytes=1 << 30, cpu_seconds=10),
        preload=["codemode.sandbox.python._guest"],
    )
    async with anyio.create_task_group() as tg:
        with anyio.move_on_after(after_s) as scope:
            await client.start(tg)
        if not scope.cancelled_caught:  # pragma: no cover - a server faster than 20 ms
            await client.aclose()
    assert client._sock is None
    assert open_fds() <= before_fds
    assert child_pids() <= before_children
    # Killed mid-start (not waited for: it reads its socket only once it is up), the
    # server could not remove its root directory; the host made it and removed it.
    assert _work_dirs() <= before_dirs


def _work_dirs() -> set[str]:
    import glob

    from codemode.sandbox.host._forkserver_client import WORKDIR_PREFIX, workdir_parent

    parent = workdir_parent()
    assert parent is not None
    return set(glob.glob(os.path.join(parent, WORKDIR_PREFIX + "*")))


async def test_closing_a_runtime_whose_server_is_still_starting_kills_it() -> None:
    # An agent that got its answer before the background start finished closes the
    # runtime then: the starting server is killed, its directory removed.
    before_dirs, before_children = _work_dirs(), child_pids()
    async with PythonRuntime(Limits(pool_size=1), start_in_background=True) as rt:
        await anyio.sleep(0.01)  # the refill has spawned the server, which is booting
        assert rt.processes().server_pid == 0
    assert child_pids() <= before_children
    assert _work_dirs() <= before_dirs


@pytest.mark.parametrize("runtime_class", ["python", "typescript"])
async def test_a_runtime_started_in_the_background_is_entered_before_its_server_is_up(
    runtime_class: str,
) -> None:
    # ``start_in_background``: entering returns at once (the host overlaps the fork
    # server's start with its own work); the first run waits for the first worker
    # instead of forking another beside it, and nothing is started twice.
    from codemode.sandbox import TypeScriptRuntime

    cls = PythonRuntime if runtime_class == "python" else TypeScriptRuntime
    program = "return 7"
    async with cls(Limits(pool_size=1), start_in_background=True) as rt:
        # No await since entering: the server is not up yet.
        assert rt.processes().server_pid == 0
        assert rt.stats.pool.server_starts == 0
        run = make_runner(rt)
        with anyio.fail_after(30):
            assert ok(await run(program)) == 7
        stats = rt.stats.pool
        assert (stats.server_starts, stats.warm_checkouts, stats.cold_checkouts) == (1, 1, 0)
    async with cls(Limits(pool_size=1)) as rt:
        # The default: entering waits for the server.
        assert rt.processes().server_pid != 0


async def test_a_server_that_cannot_start_in_the_background_fails_the_first_run() -> None:
    # The failure a default runtime raises on entering reaches the first run instead: a
    # failed run saying so, not a run waiting forever.
    guests = {"python": "codemode.sandbox.no_such_guest_module"}
    with pytest.raises(ForkServerError, match="failed to start"):
        async with PythonRuntime(Limits(pool_size=1), _guests=guests):
            pass
    async with PythonRuntime(Limits(pool_size=1), start_in_background=True, _guests=guests) as rt:
        with anyio.fail_after(30):
            result = await make_runner(rt)("return 1")
        assert err(result, "worker-exit") == (
            "worker could not be started: sandbox fork server failed to start"
        )


async def test_a_background_start_that_failed_is_not_retried_while_idle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A sandbox that cannot start (here: a guest module that does not exist) is tried
    # when the runtime opens and by each run; nothing retries it in between.
    guests = {"python": "codemode.sandbox.no_such_guest_module"}
    caplog.set_level("WARNING", logger="sandbox")
    async with PythonRuntime(Limits(pool_size=1), start_in_background=True, _guests=guests) as rt:
        with anyio.fail_after(30):
            assert err(await make_runner(rt)("return 1"), "worker-exit")
        await anyio.sleep(0.2)  # the attempt the checkout woke is over
        tried = caplog.text.count("could not start a worker")
        await anyio.sleep(1.2)  # a retry loop would have tried twice more meanwhile
        assert caplog.text.count("could not start a worker") == tried
        assert tried <= 2


async def test_the_servers_root_is_made_in_the_system_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever TMPDIR the host runs with, the directory the workers' root is made from
    # lies where the server made it before the host did: /tmp (sticky).
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(tmp_path)
    before = _work_dirs()
    async with PythonRuntime(Limits(pool_size=1)) as rt:
        assert ok(await make_runner(rt)("return 1")) == 1
        assert len(_work_dirs() - before) == 1
        assert not any(name.startswith("codemode-worker-") for name in os.listdir(tmp_path))
