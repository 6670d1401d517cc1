"""Fixtures for the first-party tool tests: a workspace, a runtime with the tools, a caller."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.engine import (
    AbortController,
    AbortSignal,
    MemorySessionLog,
    Scope,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.tools import FsObservationPolicy, JobManager, default_tools

_ids = itertools.count(1)


class Harness:
    """A runtime with ``default_tools`` registered, called the way a host would."""

    def __init__(self, workspace: Path, output_dir: Path, **options: Any) -> None:
        self.workspace = workspace
        self.output_dir = output_dir
        self.rt = ToolRuntime()
        self.tools = default_tools(workspace, output_dir=output_dir, **options)
        for tool in self.tools:
            self.rt.register(tool)
        self.session = MemorySessionLog()
        self.agent: Scope = self.rt.scope("agent", session=self.session)

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        agent: Scope | str | None = "default",
        signal: AbortSignal | None = None,
        parent: object | None = None,
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
                parent=parent,
            )
        )

    async def ok(self, name: str, arguments: Any, **kw: Any) -> Any:
        """Call and assert success; returns the result."""
        result = await self.call(name, arguments, **kw)
        assert not result.is_error, result.to_json()
        return result

    async def fail(self, name: str, arguments: Any, **kw: Any) -> Any:
        """Call and assert failure; returns the result."""
        result = await self.call(name, arguments, **kw)
        assert result.is_error, result.to_json()
        return result


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        # Gone before the open, or between the open and the read (ESRCH).
        return False


async def all_gone(pids: list[int]) -> bool:
    """Whether every pid has exited within ~3 s (a signalled process may take a moment)."""
    for _ in range(150):
        if not any(alive(pid) for pid in pids):
            return True
        await anyio.sleep(0.02)
    return False


def text_of(result: Any) -> str:
    """The single text block of a result."""
    [block] = [b for b in result.content if b["type"] == "text"]
    return str(block["text"])


def error_of(result: Any) -> tuple[str, str | None]:
    """``(message, code)`` of a failed result."""
    info = result.error.info
    return result.error.message, (info.code if info is not None else None)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def output_dir(tmp_path: Path) -> Path:
    return tmp_path / "runtime"


@pytest.fixture
def harness(workspace: Path, output_dir: Path) -> Harness:
    return Harness(workspace, output_dir)


@pytest.fixture
def policy_harness(workspace: Path, output_dir: Path) -> Iterator[Harness]:
    policy = FsObservationPolicy()
    h = Harness(workspace, output_dir, fs_policy=policy)
    dispose = policy.install(h.rt)
    yield h
    dispose()


@pytest.fixture
async def jobs(tmp_path: Path) -> AsyncIterator[JobManager]:
    async with JobManager(output_dir=tmp_path / "jobs") as manager:
        yield manager


@pytest.fixture
def job_harness(workspace: Path, output_dir: Path, jobs: JobManager) -> Harness:
    return Harness(workspace, output_dir, jobs=jobs)
