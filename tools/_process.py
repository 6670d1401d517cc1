"""A ``bash -c`` child in its own process group, and how it is stopped.

Every call gets a fresh process whose process group is the unit of termination: on timeout,
abort or cancellation the group gets SIGTERM, then SIGKILL after a grace period; after a
normal exit any member left behind is killed so nothing outlives the call and the output
pipes close.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal as signal_mod
import subprocess
from collections.abc import Callable, Mapping

import anyio
import anyio.abc
import anyio.to_thread

from ._cgroup import PidsCgroup

__all__ = ["DEFAULT_MAX_PIDS", "MAX_FILE_BYTES", "BashProcess", "signal_name"]

_TERM_GRACE_S = 2.0
# Processes one bash call may have at once (its pids cgroup's ``pids.max``).
DEFAULT_MAX_PIDS = 1024
# Largest file any process of a bash call may write (RLIMIT_FSIZE): a runaway ``yes >
# file`` fails with "File size limit exceeded" instead of filling the disk.
MAX_FILE_BYTES = 4 * 2**30
_DRAIN_GRACE_S = 1.0


def signal_name(returncode: int | None) -> str | None:
    """``SIGTERM`` etc. for a negative return code, else ``None``."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal_mod.Signals(-returncode).name
    except ValueError:
        return f"SIG{-returncode}"


class BashProcess:
    """Spawn ``bash -c command`` and pump its output into two callbacks."""

    def __init__(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        max_pids: int | None = DEFAULT_MAX_PIDS,
    ) -> None:
        self.command = command
        self.cwd = cwd
        self.env = dict(env)
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.max_pids = max_pids
        self.process: anyio.abc.Process | None = None
        self.cgroup: PidsCgroup | None = None

    async def start(self) -> None:
        """Spawn the child (raises ``OSError`` when that fails).

        Shielded: a cancellation landing mid-spawn would leave a child that ``run`` never
        sees (asyncio would kill only the direct child, not the group it may have grown).
        Callers enter ``run`` right after, whose cleanup then owns the whole group.
        """
        with anyio.CancelScope(shield=True):
            self.process = await self._spawn()

    async def _spawn(self) -> anyio.abc.Process:
        # A small prologue runs first, then ``exec``s the command in a fresh bash (same
        # pid, ``$0`` = "bash"): it caps file size and core dumps for everything the call
        # starts, and joins the call's pids cgroup before anything can be forked.
        prologue = f"ulimit -c 0 -f {MAX_FILE_BYTES // 1024} || exit 126; "
        if self.max_pids is not None:
            self.cgroup = PidsCgroup.create(self.max_pids)
        if self.cgroup is not None:
            prologue += f"echo $$ > {shlex.quote(self.cgroup.procs_file)} || exit 126; "
        argv = ["bash", "-c", prologue + 'exec bash -c "$1"', "bash", self.command]
        try:
            return await anyio.open_process(
                argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except BaseException:
            if self.cgroup is not None:
                self.cgroup.remove()
            raise

    def _killpg(self, sig: signal_mod.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    async def run(self, deadline_s: float | None) -> bool:
        """Pump output until the child exits; ``True`` if ``deadline_s`` expired first.

        On expiry or cancellation the group is terminated before this returns or re-raises.
        """
        process = self.process
        assert process is not None and process.stdout is not None and process.stderr is not None
        timed_out = False
        try:
            async with anyio.create_task_group() as group:
                drained = anyio.Event()

                stdout, stderr = process.stdout, process.stderr

                async def pump_both() -> None:
                    async with anyio.create_task_group() as pumps:
                        pumps.start_soon(self._pump, stdout, self.on_stdout)
                        pumps.start_soon(self._pump, stderr, self.on_stderr)
                    drained.set()

                group.start_soon(pump_both)
                with anyio.move_on_after(deadline_s if deadline_s is not None else float("inf")):
                    await process.wait()
                if process.returncode is None:
                    timed_out = True
                    await self.terminate()
                # Stragglers left in the group would hold the pipes open: stop them, then
                # drain what is buffered (a process that escaped the group gets a grace).
                self._killpg(signal_mod.SIGKILL)
                with anyio.move_on_after(_DRAIN_GRACE_S):
                    await drained.wait()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await self.terminate()
                self._killpg(signal_mod.SIGKILL)
                if self.cgroup is not None:
                    # Also reaches members that left the process group (setsid, daemons).
                    await anyio.to_thread.run_sync(self.cgroup.remove)
                await process.aclose()
        return timed_out

    async def terminate(self) -> None:
        """SIGTERM the group, then SIGKILL it if the child is still alive after the grace."""
        process = self.process
        assert process is not None
        self._killpg(signal_mod.SIGTERM)
        with anyio.move_on_after(_TERM_GRACE_S):
            await process.wait()
        if process.returncode is None:
            self._killpg(signal_mod.SIGKILL)
            await process.wait()

    @staticmethod
    async def _pump(stream: anyio.abc.ByteReceiveStream, sink: Callable[[bytes], None]) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stream:
                sink(chunk)
