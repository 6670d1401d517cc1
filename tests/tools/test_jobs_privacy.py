"""Jobs are private to their scope: another scope's job id is answered exactly like an id
that never existed, and job output files are beyond every file tool's reach."""

# Tests set up and inspect real files directly; blocking there is intended.
# ruff: noqa: ASYNC240

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.engine import MemorySessionLog
from codemode.tools import JobManager, default_tools
from tests.tools.conftest import Harness, error_of

pytestmark = pytest.mark.anyio


def bg(command: str) -> dict[str, Any]:
    return {"command": command, "description": "Background job", "run_in_background": True}


async def test_a_foreign_job_is_answered_like_an_unknown_one(
    job_harness: Harness, jobs: JobManager
) -> None:
    await job_harness.ok("bash", bg("echo secret; sleep 30"))
    for _ in range(500):  # until the output has arrived, so a foreign read could take it
        if any(p.read_text() for p in Path(jobs.output_dir).glob("*/bash-1.stdout")):
            break
        await anyio.sleep(0.01)
    other = job_harness.rt.scope("other", session=MemorySessionLog())
    for tool, extra in [
        ("job_output", {}),
        ("job_output", {"wait": True, "timeout_ms": 50}),
        ("job_kill", {}),
        ("job_kill", {"reason": "x"}),
    ]:
        foreign = await job_harness.fail(tool, {"job_id": "bash-1", **extra}, agent=other)
        missing = await job_harness.fail(tool, {"job_id": "bash-2", **extra}, agent=other)
        assert error_of(foreign) == ("unknown job bash-1", "JOB_NOT_FOUND")
        assert error_of(missing) == ("unknown job bash-2", "JOB_NOT_FOUND")
        assert foreign.error.info == missing.error.info
    # The agent's job was neither read nor killed by the other scope.
    own = await job_harness.ok("job_output", {"job_id": "bash-1"})
    assert own.value["text"] == "secret\n" and own.value["job"]["status"] == "running"
    await job_harness.ok("job_kill", {"job_id": "bash-1"})


async def test_job_output_files_are_out_of_the_file_tools_reach(
    job_harness: Harness, jobs: JobManager, workspace: Path
) -> None:
    await job_harness.ok("bash", bg("seq 1 5"))
    await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    [agent_dir] = Path(jobs.output_dir).iterdir()
    out = agent_dir / "bash-1.stdout"
    assert out.read_text() == "1\n2\n3\n4\n5\n"
    assert workspace not in out.parents
    assert stat.S_IMODE(agent_dir.stat().st_mode) == 0o700
    other = job_harness.rt.scope("other", session=MemorySessionLog())
    for agent in (other, job_harness.agent):  # not even the job's own agent reads it by path
        for tool, args in [
            ("read", {"file_path": str(out)}),
            ("grep", {"pattern": "3", "path": str(agent_dir)}),
            ("glob", {"pattern": "*", "path": str(agent_dir)}),
        ]:
            result = await job_harness.fail(tool, args, agent=agent)
            assert "outside the workspace" in result.error.message, (tool, result.error)


async def test_agents_get_separate_unguessable_directories(
    job_harness: Harness, jobs: JobManager
) -> None:
    other = job_harness.rt.scope("other", session=MemorySessionLog())
    await job_harness.ok("bash", bg("true"))
    await job_harness.ok("bash", bg("true"), agent=other)
    dirs = [p.name for p in Path(jobs.output_dir).iterdir()]
    assert len(dirs) == 2
    assert all(len(name) == 32 and set(name) <= set("0123456789abcdef") for name in dirs)


async def test_a_job_directory_the_tools_could_read_is_refused(
    workspace: Path, output_dir: Path
) -> None:
    for inside in (workspace / "jobs", output_dir / "jobs"):
        async with JobManager(output_dir=inside) as jobs:
            with pytest.raises(ValueError, match="job output must stay private"):
                default_tools(workspace, output_dir=output_dir, jobs=jobs)


async def test_job_ids_count_per_agent(job_harness: Harness) -> None:
    """A scope's job ids say nothing about how many jobs other scopes started."""
    await job_harness.ok("bash", bg("echo mine-1"))
    await job_harness.ok("bash", bg("echo mine-2"))
    other = job_harness.rt.scope("other", session=MemorySessionLog())
    started = await job_harness.ok("bash", bg("echo theirs"), agent=other)
    assert started.value == {"kind": "background", "jobId": "bash-1"}
    theirs = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True}, agent=other)
    mine = await job_harness.ok("job_output", {"job_id": "bash-1", "wait": True})
    assert (theirs.value["text"], mine.value["text"]) == ("theirs\n", "mine-1\n")
    listed = await job_harness.ok("job_list", {}, agent=other)
    assert [job["id"] for job in listed.value] == ["bash-1"]
    assert [j["id"] for j in (await job_harness.ok("job_list", {})).value] == ["bash-1", "bash-2"]


async def test_agentless_job_ids_never_collide_with_an_agents(jobs: JobManager) -> None:
    async def idle(job: Any) -> None:
        await anyio.sleep(30)

    agent = object()
    first = jobs.start(kind="x", label="a", agent=agent, run=idle)
    shared = jobs.start(kind="x", label="b", agent=None, run=idle)
    second = jobs.start(kind="x", label="c", agent=agent, run=idle)
    assert [first.id, shared.id, second.id] == ["x-1", "x-2", "x-3"]
    assert [j.id for j in jobs.visible(agent)] == ["x-1", "x-2", "x-3"]
    assert jobs.lookup("x-2", agent) is shared
    for job in (first, shared, second):
        job.request_kill(None)
