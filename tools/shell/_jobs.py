"""Background jobs: the ``JobManager`` that owns them and the stream buffers they fill.

Jobs run in a task group owned by ``async with JobManager() as jobs:`` (or closed with
``await jobs.aclose()``) and never outlive it: closing cancels every live job, and each
producer kills its processes on cancellation (shielded) before the close returns. Stream
output is kept in memory as an unread delta (bounded; the oldest text is dropped first) and,
in full, in a per-stream file under the manager's runtime-owned output directory.

Jobs are private to their agent: another scope's job id is answered exactly like an id that
never existed, and each agent's output files live in its own unguessable subdirectory (mode
0700) of a directory that ``default_tools`` keeps out of every file tool's reach.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, Self

import anyio
import anyio.abc

from codemode.engine import AbortError, AbortSignal

from .._config import ensure_private_dir, runtime_dir
from .._errors import JobError

__all__ = ["Job", "JobManager", "status_line", "unknown_job"]

JobStatus = Literal["running", "stopping", "completed", "killed", "failed"]
_TERMINAL = ("completed", "killed", "failed")


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Stream:
    """One output stream of a job: the unread delta in memory, everything in a file."""

    def __init__(self, path: str, memory_chars: int, spill_max_bytes: int) -> None:
        self.path = path
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending: list[str] = []
        self._pending_chars = 0
        self._memory_chars = memory_chars
        self._spill_max = spill_max_bytes
        self._written = 0
        self._file: Any = None
        self.spill_ok = True
        self.dropped = False

    def feed(self, data: bytes) -> None:
        if self.spill_ok:
            try:
                if self._file is None:
                    self._file = open(self.path, "wb")  # closed in close()
                if self._written + len(data) > self._spill_max:
                    self.spill_ok = False
                    self._file.close()
                    self._file = None
                    os.unlink(self.path)
                else:
                    self._file.write(data)
                    self._file.flush()
                    self._written += len(data)
            except OSError:
                self.spill_ok = False
        self._push(self._decoder.decode(data))

    def _push(self, text: str) -> None:
        if not text:
            return
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars > self._memory_chars:
            joined = "".join(self._pending)[-self._memory_chars :]
            self._pending = [joined]
            self._pending_chars = len(joined)
            self.dropped = True

    def close(self) -> None:
        self._push(self._decoder.decode(b"", final=True))
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def take(self) -> str:
        text = "".join(self._pending)
        self._pending = []
        self._pending_chars = 0
        return text


class Job:
    """One background job (see ``JobManager.start``); ``snapshot()`` is its public value."""

    def __init__(
        self,
        manager: JobManager,
        job_id: str,
        kind: str,
        label: str,
        agent: object | None,
        directory: str,
    ) -> None:
        self.id = job_id
        self.kind = kind
        self.label = label
        self.agent = agent
        self.status: JobStatus = "running"
        self.detail: str | None = None
        self.started_at = _now_ms()
        self.finished_at: int | None = None
        self.reported = False
        self.kill_reason: str | None = None
        self.settled = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._kill_requested = False
        base = os.path.join(directory, job_id)
        self.stdout = _Stream(base + ".stdout", manager.memory_chars, manager.spill_max_bytes)
        self.stderr = _Stream(base + ".stderr", manager.memory_chars, manager.spill_max_bytes)
        self._manager = manager

    @property
    def terminal(self) -> bool:
        """True once the job has settled."""
        return self.status in _TERMINAL

    def snapshot(self) -> dict[str, Any]:
        """The public ``Job`` value (agent and bookkeeping removed)."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "label": self.label,
            "status": self.status,
        }
        if self.detail is not None:
            out["detail"] = self.detail
        out["startedAt"] = self.started_at
        if self.finished_at is not None:
            out["finishedAt"] = self.finished_at
        return out

    def settle(self, status: JobStatus, detail: str | None) -> None:
        """Move to a terminal status (once); later calls are ignored."""
        if self.terminal:
            return
        self.stdout.close()
        self.stderr.close()
        self.status = status
        self.detail = detail
        self.finished_at = _now_ms()
        self.settled.set()
        self._manager._settled(self)

    def take_text(self) -> str:
        """The unread stream delta laid out as stdout, then ``[stderr]`` and its text, then notices."""
        out = self.stdout.take()
        err = self.stderr.take()
        text = out
        if err:
            if out and not out.endswith("\n"):
                text += "\n"
            text += f"[stderr]\n{err}"
        if self.stdout.dropped or self.stderr.dropped:
            self.stdout.dropped = self.stderr.dropped = False
            if self.stdout.spill_ok and self.stderr.spill_ok:
                where = f"{self.stdout.path}, {self.stderr.path}"
            else:
                where = "(unavailable)"
            notice = f"[some output was dropped from memory; full output: {where}]"
            text = f"{text}\n{notice}" if text and not text.endswith("\n") else text + notice
        return text

    def request_kill(self, reason: str | None) -> None:
        """Ask the producer to stop; the job shows ``stopping`` until it settles."""
        if self.terminal:
            return
        self.kill_reason = reason
        self.status = "stopping"
        self._kill_requested = True
        if self._scope is not None:
            self._scope.cancel()


def unknown_job(job_id: str) -> JobError:
    """The one error for a job id the caller cannot see, whether or not it exists."""
    return JobError(f"unknown job {job_id}", "JOB_NOT_FOUND")


def _agent_key(agent: object | None) -> object | None:
    # Jobs are shared within a session (``JobManager._owns``), so are their files.
    session = getattr(agent, "session", None)
    return session if session is not None else agent


def status_line(job: dict[str, Any]) -> str:
    """``[status: s]`` or ``[status: s, detail]`` for a job snapshot."""
    detail = job.get("detail")
    return f"[status: {job['status']}, {detail}]" if detail else f"[status: {job['status']}]"


Producer = Callable[[Job], Awaitable[None]]


class JobManager:
    """Owns background jobs for the lifetime of an ``async with`` block.

    ``max_jobs_per_agent`` bounds live jobs per calling scope; ``wait_timeout_ms`` and
    ``max_wait_timeout_ms`` are ``job_output``'s default and cap; ``on_settle(job, notice)``
    (optional) hears every settlement with the completion-notice text a model sees, so a host
    can wake the owning agent.
    """

    def __init__(
        self,
        *,
        output_dir: str | os.PathLike[str] | None = None,
        max_jobs_per_agent: int = 10,
        wait_timeout_ms: int = 30_000,
        max_wait_timeout_ms: int = 600_000,
        memory_chars: int = 1_000_000,
        spill_max_bytes: int = 64 * 1024 * 1024,
        on_settle: Callable[[dict[str, Any], str], None] | None = None,
    ) -> None:
        self._own_dir = output_dir is None
        self.output_dir = os.path.abspath(os.fspath(output_dir or runtime_dir("jobs")))
        self.max_jobs_per_agent = max_jobs_per_agent
        self.wait_timeout_ms = wait_timeout_ms
        self.max_wait_timeout_ms = max_wait_timeout_ms
        self.memory_chars = memory_chars
        self.spill_max_bytes = spill_max_bytes
        self._on_settle = on_settle
        # Keyed by (id(agent key), job id): every agent numbers its jobs from 1, so its ids
        # say nothing about how many jobs other agents started.
        self._jobs: dict[tuple[int, str], Job] = {}
        self._counters: dict[tuple[int, str], int] = {}
        # id(agent key) -> (the key, kept alive so its id stays unique; its directory)
        self._agent_dirs: dict[int, tuple[object, str]] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._closed = False

    async def __aenter__(self) -> Self:
        ensure_private_dir(self.output_dir)
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._close(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Kill every live job, wait until each has settled and remove an owned output dir.

        The same as leaving ``async with`` (so, like it, call it from the task that entered
        the manager); idempotent.
        """
        await self._close(None, None, None)

    async def _close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._closed = True
        for job in self._jobs.values():
            job.request_kill("job manager closed")
        group, self._group = self._group, None
        try:
            if group is not None:
                return await group.__aexit__(exc_type, exc, tb)
            return None
        finally:
            if self._own_dir:
                shutil.rmtree(self.output_dir, ignore_errors=True)

    # -- producers ---------------------------------------------------------------------

    def start(self, *, kind: str, label: str, agent: object | None, run: Producer) -> Job:
        """Start ``run(job)`` as job ``{kind}-{n}`` started by ``agent``; returns the job.

        ``n`` counts per agent (session, else scope) from 1.
        """
        group = self._group
        if group is None or self._closed:
            raise JobError(
                "background jobs unavailable: the job manager is not running",
                "JOB_MANAGER_CLOSED",
            )
        live = sum(1 for j in self._jobs.values() if not j.terminal and j.agent is agent)
        if live >= self.max_jobs_per_agent:
            raise JobError(
                f"background job limit reached for this owner (limit: {self.max_jobs_per_agent}); "
                "use job_kill to stop an unneeded job, wait for it to finish, then retry",
                "JOB_LIMIT_REACHED",
            )
        directory = self._agent_dir(agent)  # also keeps the agent key (and its id) alive
        key = id(_agent_key(agent))
        number = self._next_number(kind, key)
        job = Job(self, f"{kind}-{number}", kind, label, agent, directory)
        self._jobs[(key, job.id)] = job
        group.start_soon(self._supervise, job, run, name=f"job {job.id}")
        return job

    async def _supervise(self, job: Job, run: Producer) -> None:
        with anyio.CancelScope() as scope:
            job._scope = scope
            if job._kill_requested:
                scope.cancel()
            try:
                await run(job)
            except Exception as exc:  # a producer bug or spawn failure settles as failed
                job.stderr.feed(f"spawn failed: {exc}".encode())
                job.settle("failed", str(exc) or type(exc).__name__)
        job.settle("killed", "killed before exit")

    def _settled(self, job: Job) -> None:
        if self._on_settle is not None:
            snapshot = job.snapshot()
            notice = (
                f"background job {job.id} ({job.kind}: {job.label}) finished "
                f"{status_line(snapshot)}. Read its output with job_output."
            )
            with contextlib.suppress(Exception):
                self._on_settle(snapshot, notice)

    def _next_number(self, kind: str, key: int) -> int:
        # Jobs started without an agent are visible to every agent, so their ids must not
        # collide with any agent's: they take the next number above all, and agents
        # continue above theirs.
        no_agent = id(None)
        if key == no_agent:
            counts = [n for (_k, k_kind), n in self._counters.items() if k_kind == kind]
            number = max(counts, default=0) + 1
        else:
            mine = self._counters.get((key, kind), 0)
            number = max(mine, self._counters.get((no_agent, kind), 0)) + 1
        self._counters[(key, kind)] = number
        return number

    def _agent_dir(self, agent: object | None) -> str:
        """The agent's private output directory (one per session, else per scope)."""
        key = _agent_key(agent)
        entry = self._agent_dirs.get(id(key))
        if entry is None:
            # Unguessable, so a path seen by one agent says nothing about another's.
            directory = os.path.join(self.output_dir, secrets.token_hex(16))
            entry = (key, ensure_private_dir(directory))
            self._agent_dirs[id(key)] = entry
        return entry[1]

    # -- tools -------------------------------------------------------------------------

    @staticmethod
    def _owns(job: Job, caller: object | None) -> bool:
        if job.agent is None or job.agent is caller:
            return True
        session = getattr(job.agent, "session", None)
        return session is not None and session is getattr(caller, "session", None)

    def visible(self, caller: object | None) -> list[Job]:
        """The caller's jobs and jobs started without an agent, in start order."""
        return [job for job in self._jobs.values() if self._owns(job, caller)]

    def lookup(self, job_id: str, caller: object | None) -> Job:
        """The job ``job_id`` if the caller may see it, else ``JobError`` ``JOB_NOT_FOUND``.

        Another agent's job fails exactly like an id that never existed, so the answer does
        not reveal which ids are in use elsewhere.
        """
        job = self._jobs.get((id(_agent_key(caller)), job_id)) or self._jobs.get((id(None), job_id))
        if job is None or not self._owns(job, caller):
            raise unknown_job(job_id)
        return job

    async def wait(self, job: Job, timeout_ms: float, signal: AbortSignal) -> None:
        """Wait until ``job`` settles or ``timeout_ms`` passes; ``AbortError`` on abort."""
        aborted = False
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal aborted
                await signal.wait()
                aborted = True
                group.cancel_scope.cancel()

            group.start_soon(watch)
            with anyio.move_on_after(timeout_ms / 1000):
                await job.settled.wait()
            group.cancel_scope.cancel()
        if aborted:
            raise AbortError("wait aborted")
