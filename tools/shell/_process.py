"""A ``bash -c`` child behind the containment launcher, and how it is stopped.

The host spawns the launcher (``_launcher.launch`` in a fresh ``python -I -S``) as the leader of a new
session; it joins the call's cgroups, isolates itself (root hosts), becomes a child
subreaper and runs ``bash -c command``. The call is over when the launcher exits, which
it does once bash has exited and everything bash left behind is dead.

On timeout, abort or cancellation the process group gets SIGTERM; after a grace period
the host freezes and kills the launcher's whole tree from outside. Whatever happens, the
host then kills the call's cgroup (descendant cgroups included) and sweeps its session,
so nothing a call starts outlives it. ``kill_all_processes`` does the same at once for
every live call of this host process (registered with ``atexit``).

The terminals (``tools/terminal``) run their shells and REPLs through the same launcher
(``BashProcess(tty=..., exec_argv=...)``: the program runs on a PTY that the launcher holds
as the session's controlling terminal), so every net above, and ``kill_all_processes``,
covers them too.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal as signal_mod
import subprocess
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence

import anyio
import anyio.abc
import anyio.to_thread

from .._errors import BashError
from . import _launcher
from ._cgroup import CallCgroup
from ._launcher import kill_session, kill_tree, process_start_time

__all__ = [
    "DEFAULT_MAX_PIDS",
    "MAX_FILE_BYTES",
    "BashProcess",
    "kill_all_processes",
    "signal_name",
]

_log = logging.getLogger("tools.bash")
# How long a stopped call's processes may handle SIGTERM before the tree is killed: short,
# so that nothing outlives a timeout, an abort or ``job_kill`` by more than about a second.
_TERM_GRACE_S = 0.5
# Processes one bash call may have at once (its pids cgroup's ``pids.max``).
DEFAULT_MAX_PIDS = 1024
# Largest file any process of a bash call may write (RLIMIT_FSIZE): a runaway ``yes >
# file`` fails with "File size limit exceeded" instead of filling the disk.
MAX_FILE_BYTES = 4 * 2**30
_DRAIN_GRACE_S = 1.0
_LAUNCHER = os.path.abspath(_launcher.__file__)
# Imports the launcher as a top-level module (appended to the path, so the standard library
# wins any name clash): its cached bytecode is used, where running the file as a script
# would compile it on every call, and importlib.util would add start-up time.
_BOOT = "import sys; sys.path.append(sys.argv[1]); import _launcher; _launcher.launch(sys.argv[2:])"
_live: weakref.WeakSet[BashProcess] = weakref.WeakSet()
_warned: set[str] = set()


def signal_name(returncode: int | None) -> str | None:
    """``SIGTERM`` etc. for a negative return code, else ``None``."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal_mod.Signals(-returncode).name
    except ValueError:
        return f"SIG{-returncode}"


def kill_all_processes() -> None:
    """Kill every process of every live bash call, background job and terminal (session or
    persistent shell) of this host process.

    Synchronous and idempotent, for teardown paths that cannot await (``atexit``, signal
    handlers, a CLI's final ``finally``). The calls themselves then finish as killed.
    """
    for proc in list(_live):
        proc.kill_now()


atexit.register(kill_all_processes)


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        _log.warning("bash containment degraded: %s", reason)


class BashProcess:
    """Spawn ``bash -c command`` behind the launcher and pump its output into callbacks."""

    def __init__(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        max_pids: int | None = DEFAULT_MAX_PIDS,
        cgroup: bool = True,
        exec_argv: Sequence[str] | None = None,
        tty: int | None = None,
    ) -> None:
        """``max_pids`` caps the call's processes; ``cgroup=False`` runs the call without its
        cgroup (what a host without cgroups gets), leaving the tree and session nets.

        ``tty`` (a terminal's slave fd) with ``exec_argv`` runs ``exec_argv`` instead of
        ``bash -c command``, on that terminal as its controlling terminal (``command`` and the
        output callbacks are then unused: the host reads the terminal's master side). Such a
        process is driven with ``wait`` and ``close`` instead of ``run``."""
        if (tty is None) != (exec_argv is None):
            raise ValueError("tty and exec_argv go together")
        self.command = command
        self.exec_argv = list(exec_argv) if exec_argv is not None else None
        self.tty = tty
        self.cwd = cwd
        self.env = dict(env)
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.max_pids = max_pids
        self.use_cgroup = cgroup
        self.process: anyio.abc.Process | None = None
        self.cgroup: CallCgroup | None = None
        self._start_time: int | None = None
        self._swept = False
        self._status_fd: int | None = None
        self._status_rest = ""

    async def start(self) -> None:
        """Spawn the launcher and wait until bash runs (``BashError`` when that fails).

        Shielded: a cancellation landing mid-spawn would leave a child that ``run`` never
        sees. Callers enter ``run`` right after, whose cleanup then owns the whole call.
        """
        with anyio.CancelScope(shield=True):
            self.cgroup = CallCgroup.create(self.max_pids) if self.use_cgroup else None
            if os.geteuid() != 0:
                _warn_once(
                    "not root: a command that kills its launcher and calls setsid can outlive "
                    "the call, and the cgroup hierarchy above it is not read-only"
                )
            read_end, write_end = os.pipe()
            try:
                self.process = await self._spawn(write_end)
            except OSError as exc:
                os.close(read_end)
                self._cleanup_sync()
                raise BashError(f"bash could not be started: {exc}", "BASH_SPAWN_FAILED") from exc
            finally:
                os.close(write_end)
            self._start_time = process_start_time(self.process.pid)
            _live.add(self)
            self._status_fd = read_end
            status, _, self._status_rest = (
                await anyio.to_thread.run_sync(_read_line, read_end)
            ).partition("\n")
            if not status.startswith("ok"):
                await self._reap()
                reason = status.removeprefix("error: ").strip() or "the launcher exited"
                raise BashError(f"bash could not be started: {reason}", "BASH_SPAWN_FAILED")
            if status.startswith("ok degraded: "):
                _warn_once(status.removeprefix("ok degraded: ").strip())

    async def _spawn(self, status_fd: int) -> anyio.abc.Process:
        procs = self.cgroup.procs_files if self.cgroup is not None else []
        argv = [
            sys.executable,
            "-I",
            "-S",
            "-c",
            _BOOT,
            os.path.dirname(_LAUNCHER),
            str(status_fd),
            str(os.getpid()),
            "1" if os.geteuid() == 0 else "0",
            str(MAX_FILE_BYTES),
            *procs,
        ]
        if self.tty is not None and self.exec_argv is not None:
            return await anyio.open_process(
                [*argv, "--exec", *self.exec_argv],
                cwd=self.cwd,
                env=self.env,
                stdin=self.tty,
                stdout=self.tty,
                stderr=self.tty,
                start_new_session=True,
                pass_fds=(status_fd,),
            )
        return await anyio.open_process(
            [*argv, "--", self.command],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=(status_fd,),
        )

    def _killpg(self, sig: signal_mod.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def kill_now(self) -> None:
        """Kill the launcher's whole tree, the call's cgroup and its session, at once."""
        process = self.process
        if process is None:
            return
        if process.returncode is None:
            kill_tree(process.pid, self._start_time, include_root=True)
        self._sweep()

    def _sweep(self) -> None:
        # Nets for what the launcher could not reach: cgroup members (descendant cgroups
        # included) and processes orphaned to init when the launcher itself was killed
        # (it reports "done" once its own cleanup ran; then the /proc scan is skipped).
        if self.cgroup is not None:
            self.cgroup.kill()
        cleaned = self._launcher_finished()
        if self.process is not None and self._start_time is not None and not cleaned:
            kill_session(self.process.pid, self._start_time)
        self._swept = True

    def _launcher_finished(self) -> bool:
        fd, self._status_fd = self._status_fd, None
        if fd is None:
            return False
        process = self.process
        if process is None or process.returncode is None:
            os.close(fd)
            return False
        # The launcher has exited, so this read cannot block.
        return "done" in (self._status_rest + _read_all(fd)).split()

    def _cleanup_sync(self) -> None:
        if self.process is not None and not self._swept:
            self._sweep()
        if self.cgroup is not None:
            self.cgroup.remove()

    async def _reap(self) -> None:
        process = self.process
        assert process is not None
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                self.kill_now()
            await process.wait()
            await anyio.to_thread.run_sync(self._cleanup_sync)
            await process.aclose()
            _live.discard(self)

    async def wait(self) -> int:
        """Wait until the launcher exits; its return code (negative: the signal)."""
        assert self.process is not None
        return await self.process.wait()

    async def close(self) -> None:
        """Kill whatever is left of the call, reap it and remove its cgroup (shielded)."""
        if self.process is not None:
            await self._reap()

    async def run(self, deadline_s: float | None) -> bool:
        """Pump output until the call ends; ``True`` if ``deadline_s`` expired first.

        On expiry or cancellation the call is terminated before this returns or re-raises.
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
                # The launcher killed what bash left; the nets catch anything it missed,
                # after which the pipes close and what is buffered drains.
                self._sweep()
                with anyio.move_on_after(_DRAIN_GRACE_S):
                    await drained.wait()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await self.terminate()
                await self._reap()
        return timed_out

    async def terminate(self) -> None:
        """SIGTERM the group; after the grace, freeze and kill the whole tree."""
        process = self.process
        assert process is not None
        self._killpg(signal_mod.SIGTERM)
        # A stopped process acts on SIGTERM only once continued; that includes a launcher
        # the command stopped (it then cleans up after bash at once).
        self._killpg(signal_mod.SIGCONT)
        with anyio.move_on_after(_TERM_GRACE_S):
            await process.wait()
        if process.returncode is None:
            self.kill_now()
            await process.wait()

    @staticmethod
    async def _pump(stream: anyio.abc.ByteReceiveStream, sink: Callable[[bytes], None]) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stream:
                sink(chunk)


def _read_line(fd: int) -> str:
    """The launcher's first status line, and whatever came with it ("" if none)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _read_all(fd: int) -> str:
    with os.fdopen(fd, "rb") as f:
        return f.read().decode("utf-8", "replace")
