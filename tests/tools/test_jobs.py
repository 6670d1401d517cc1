"""Background bash jobs and the ``job_*`` tools; jobs never outlive their ``JobManager``."""

# Tests set up and inspect real files directly; blocking there is intended.
# ruff: noqa: ASYNC240

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from codemode.engine import AbortController, MemorySessionLog
from codemode.tools import JobError, JobManager
from tests.tools.conftest import Harness, alive, all_gone, error_of, text_of

pytestmark = pytest.mark.anyio


def bg(command: str) -> dict[str, Any]:
    return {"command": command, "description": "Background job", "run_in_background": True}


async def wait_for(path: Path) -> str:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await anyio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


async def test_run_and_collect(job_harness: Harness) -> None:
    started = await job_harness.ok("bash", bg("echo one; echo two >&2; exit 3"))
    assert started.value == {"kind": "background", "jobId": "bash-1"}
    assert text_of(started) == "started background job bash-1"
    result = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    job = result.value["job"]
    assert result.value["text"] == "one\n[stderr]\ntwo\n"
    assert job["status"] == "completed" and job["detail"] == "exit code: 3"
    assert job["kind"] == "bash" and job["label"] == "echo one; echo two >&2; exit 3"
    assert isinstance(job["startedAt"], int) and job["finishedAt"] >= job["startedAt"]
    assert text_of(result) == "one\n[stderr]\ntwo\n[status: completed, exit code: 3]"
    again = await job_harness.ok("job_output", {"job_id": "bash-1"})
    assert again.value["text"] == ""
    assert text_of(again) == "(no new output)\n[status: completed, exit code: 3]"


async def test_incremental_reads(job_harness: Harness, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    command = f"printf first; while [ ! -e {gate} ]; do sleep 0.02; done; echo second"
    await job_harness.ok("bash", bg(command))
    for _ in range(200):
        early = await job_harness.ok("job_output", {"job_id": "bash-1"})
        if early.value["text"]:
            break
        await anyio.sleep(0.01)
    assert early.value["text"] == "first"
    assert early.value["job"]["status"] == "running"
    assert text_of(early) == "first\n[status: running]"
    gate.write_text("")
    late = await job_harness.ok(
        "job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 5000}
    )
    assert late.value["text"] == "second\n"
    listed = await job_harness.ok("job_list", {})
    assert [j["id"] for j in listed.value] == ["bash-1"]
    assert text_of(listed) == f"bash-1 [bash] completed — {command}"


async def test_wait_timeout_is_not_an_error(job_harness: Harness) -> None:
    await job_harness.ok("bash", bg("sleep 30"))
    started = time.monotonic()
    result = await job_harness.ok(
        "job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 200}
    )
    assert 0.15 < time.monotonic() - started < 5
    assert result.value["job"]["status"] == "running"
    assert text_of(result) == "(no new output)\n[status: running]"
    await job_harness.ok("job_kill", {"job_id": "bash-1"})


async def test_kill_returns_at_once_and_settles_killed(
    job_harness: Harness, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    await job_harness.ok("bash", bg(f"sleep 30 & echo $! > {pidfile}; wait"))
    child = int(await wait_for(pidfile))
    killed = await job_harness.ok("job_kill", {"job_id": "bash-1", "reason": "not needed"})
    assert killed.value["outcome"] == "cancellation-requested"
    assert killed.value["job"]["status"] == "stopping"
    assert text_of(killed) == "requested cancellation of job bash-1"
    settled = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    assert settled.value["job"]["status"] == "killed"
    assert settled.value["job"]["detail"] == "signal: SIGTERM"
    assert text_of(settled) == "(no new output)\n[status: killed, signal: SIGTERM]"
    assert await all_gone([child])
    again = await job_harness.ok("job_kill", {"job_id": "bash-1"})
    assert again.value["outcome"] == "already-finished"
    assert text_of(again) == "job bash-1 had already finished [status: killed, signal: SIGTERM]"


async def test_lookup_errors(job_harness: Harness) -> None:
    await job_harness.ok("bash", bg("true"))
    assert error_of(await job_harness.fail("job_output", {"job_id": ""})) == (
        'invalid job_id: expected a non-empty string, got ""',
        "JOB_INVALID_ID",
    )
    assert error_of(await job_harness.fail("job_kill", {"job_id": "bash-9"})) == (
        "unknown job bash-9",
        "JOB_NOT_FOUND",
    )
    other = job_harness.rt.scope("other", session=MemorySessionLog())
    assert (await job_harness.ok("job_list", {}, agent=other)).value == []
    assert text_of(await job_harness.ok("job_list", {}, agent=other)) == "(no background jobs)"
    for timeout in (0, -5):
        failed = await job_harness.fail(
            "job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": timeout}
        )
        assert error_of(failed) == (
            f"invalid wait timeout: expected a positive number of milliseconds, got {timeout}",
            "JOB_INVALID_WAIT_TIMEOUT",
        )
    # Without wait the timeout is ignored.
    await job_harness.ok("job_output", {"job_id": "bash-1", "timeout_ms": 0})
    for args, problem in [
        ({}, 'missing required property "job_id"'),
        ({"job_id": 1}, '"job_id" must be a string'),
        ({"job_id": "bash-1", "wait": 1}, '"wait" must be a boolean'),
        ({"job_id": "bash-1", "timeout_ms": "1"}, '"timeout_ms" must be a number'),
    ]:
        assert error_of(await job_harness.fail("job_output", args)) == (
            f"invalid arguments: {problem}",
            "INVALID_ARGS",
        )
    assert error_of(await job_harness.fail("job_kill", {"job_id": "x", "reason": 2})) == (
        'invalid arguments: "reason" must be a string',
        "INVALID_ARGS",
    )


async def test_wait_aborts(job_harness: Harness) -> None:
    await job_harness.ok("bash", bg("sleep 30"))
    controller = AbortController()

    async def abort_soon() -> None:
        await anyio.sleep(0.1)
        controller.abort()

    async with anyio.create_task_group() as group:
        group.start_soon(abort_soon)
        failed = await job_harness.call(
            "job_output", {"job_id": "bash-1", "wait": True}, signal=controller.signal
        )
    assert error_of(failed) == ("wait aborted", "ABORTED")
    await job_harness.ok("job_kill", {"job_id": "bash-1"})


async def test_manager_exit_kills_everything(
    workspace: Path, output_dir: Path, tmp_path: Path
) -> None:
    pids: list[int] = []
    async with JobManager(output_dir=tmp_path / "jobs") as jobs:
        h = Harness(workspace, output_dir, jobs=jobs)
        for index in range(3):
            pidfile = tmp_path / f"p{index}"
            await h.ok("bash", bg(f"sleep 30 & echo $! > {pidfile}; echo $$ >> {pidfile}; wait"))
            pids += [int(p) for p in (await wait_for(pidfile)).split()]
        assert all(alive(pid) for pid in pids)
        started = time.monotonic()
    assert time.monotonic() - started < 10
    assert await all_gone(pids)
    assert all(job.terminal for job in jobs.visible(None))
    with pytest.raises(JobError, match="not running") as info:
        jobs.start(kind="bash", label="x", agent=None, run=lambda job: anyio.lowlevel.checkpoint())
    assert info.value.code == "JOB_MANAGER_CLOSED"


async def test_per_agent_limit(workspace: Path, output_dir: Path, tmp_path: Path) -> None:
    async with JobManager(output_dir=tmp_path / "jobs", max_jobs_per_agent=2) as jobs:
        h = Harness(workspace, output_dir, jobs=jobs)
        await h.ok("bash", bg("sleep 30"))
        await h.ok("bash", bg("sleep 30"))
        failed = await h.fail("bash", bg("sleep 30"))
        assert error_of(failed) == (
            "background job limit reached for this owner (limit: 2); use job_kill to stop an "
            "unneeded job, wait for it to finish, then retry",
            "JOB_LIMIT_REACHED",
        )
        other = h.rt.scope("other", session=MemorySessionLog())
        await h.ok("bash", bg("true"), agent=other)


async def test_settle_notice_and_spawn_failure(tmp_path: Path) -> None:
    notices: list[str] = []

    async def explode(job: Any) -> None:
        raise OSError("no such interpreter")

    async with JobManager(
        output_dir=tmp_path / "jobs", on_settle=lambda job, notice: notices.append(notice)
    ) as jobs:
        job = jobs.start(kind="custom", label="boom", agent=None, run=explode)
        await job.settled.wait()
        assert job.status == "failed"
        assert job.take_text() == "[stderr]\nspawn failed: no such interpreter"
    assert notices == [
        "background job custom-1 (custom: boom) finished [status: failed, no such interpreter]. "
        "Read its output with job_output."
    ]


async def test_dropped_output_notice(workspace: Path, output_dir: Path, tmp_path: Path) -> None:
    async with JobManager(output_dir=tmp_path / "jobs", memory_chars=100) as jobs:
        h = Harness(workspace, output_dir, jobs=jobs)
        await h.ok("bash", bg("seq 1 1000"))
        result = await h.ok("job_output", {"job_id": "bash-1", "wait": True})
        [agent_dir] = (tmp_path / "jobs").iterdir()
        out_path = agent_dir / "bash-1.stdout"
        err_path = agent_dir / "bash-1.stderr"
        text = result.value["text"]
        assert text.endswith(
            f"1000\n[some output was dropped from memory; full output: {out_path}, {err_path}]"
        )
        assert out_path.read_text() == "".join(f"{i}\n" for i in range(1, 1001))


async def test_cards(job_harness: Harness) -> None:
    cards = {
        name: tool.present_call
        for name in ("job_list", "job_output", "job_kill")
        if (tool := job_harness.rt.get(name)) is not None
    }
    assert cards["job_list"]({}) == {
        "card": "generic",
        "title": "List background jobs",
        "kind": "read",
    }
    assert cards["job_output"]({"job_id": "bash-1"}) == {
        "card": "generic",
        "title": "Read output from background job bash-1",
        "kind": "read",
        "rawInput": "bash-1",
    }
    assert cards["job_kill"]({"job_id": "bash-1"}) == {
        "card": "generic",
        "title": "Kill background job bash-1",
        "kind": "execute",
    }


async def test_job_list_arguments(job_harness: Harness) -> None:
    assert error_of(await job_harness.fail("job_list", ["x"])) == (
        'invalid arguments: "arguments" must be an object',
        "INVALID_ARGS",
    )
    # The catalog schema leaves the root open, so unknown keys are tolerated.
    await job_harness.ok("job_list", {"verbose": True})


async def test_without_a_manager(harness: Harness) -> None:
    assert (await harness.ok("job_list", {})).value == []
    assert error_of(await harness.fail("job_output", {"job_id": "bash-1"})) == (
        "unknown job bash-1",
        "JOB_NOT_FOUND",
    )


async def test_job_environment(job_harness: Harness) -> None:
    await job_harness.ok("bash", bg('echo "$DSH_JOB_ID"'))
    result = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    assert result.value["text"] == "bash-1\n"


async def test_job_output_result_is_a_terminal_card(job_harness: Harness) -> None:
    from codemode.engine._presentation import validate_card

    await job_harness.ok("bash", bg("echo hi"))
    result = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    tool = job_harness.rt.get("job_output")
    assert tool is not None and tool.present_result is not None
    card = tool.present_result({"job_id": "bash-1"}, result)
    assert card == {
        "card": "terminal",
        "title": "background job bash-1",
        "output": "hi\n[status: completed, exit code: 0]",
    }
    assert validate_card(card, phase="result") == card
    failed = await job_harness.fail("job_output", {"job_id": "bash-9"})
    assert tool.present_result({"job_id": "bash-9"}, failed) is None
