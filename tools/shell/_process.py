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
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import anyio
import anyio.to_thread

from .._errors import BashError
from . import _launcher
from ._cgroup import CallCgroup
from ._launcher import encode_request, kill_session, kill_tree, process_start_time

__all__ = [
    "DEFAULT_MAX_PIDS",
    "MAX_FILE_BYTES",
    "BashProcess",
    "SPARE_LAUNCHERS",
    "kill_all_processes",
    "signal_name",
    "spare_launcher_pids",
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
# Launchers kept started ahead of calls. Each serves one call and is replaced in the
# background, so a call does not wait for an interpreter to start (~10 ms of ~13 ms).
SPARE_LAUNCHERS = 1
# How long a spare may take to confirm it has the call before it is killed and the call
# handed to a launcher of its own (a healthy spare answers within a millisecond or so).
_SPARE_ANSWER_S = 2.0
# Reads of a call's output pipes (what the kernel has, up to this much, per wake-up).
_READ_BYTES = 256 * 1024
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
    persistent shell) of this host process, and the spare launchers.

    Synchronous and idempotent, for teardown paths that cannot await (``atexit``, signal
    handlers, a CLI's final ``finally``). The calls themselves then finish as killed.
    """
    for proc in list(_live):
        proc.kill_now()
    _spares.kill_idle()


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        _log.warning("bash containment degraded: %s", reason)


class _Launcher:
    """A started launcher: its process and the host's ends of its pipes.

    The launcher waits for its call on ``ctl`` (``send``); ``status`` carries its status
    lines; ``stdout``/``stderr`` are bash's output (``None`` on a terminal). Its exit is
    awaited on a pidfd, without a thread or a child watcher.
    """

    def __init__(self, *, tty: int | None, isolate: bool, cgroup: CallCgroup | None) -> None:
        self.isolate = isolate
        self.cgroup = cgroup
        ctl_read, self.ctl = os.pipe()
        self.status, status_write = os.pipe()
        stdio: dict[str, Any]
        if tty is None:
            stdio = {
                "stdin": subprocess.DEVNULL,
                "stdout": subprocess.PIPE,
                "stderr": subprocess.PIPE,
            }
        else:
            stdio = {"stdin": tty, "stdout": tty, "stderr": tty}
        procs = cgroup.procs_files if cgroup is not None else []
        try:
            argv = [sys.executable, "-I", "-S", "-c", _BOOT, os.path.dirname(_LAUNCHER)]
            argv += [str(ctl_read), str(status_write), str(os.getpid()), "1" if isolate else "0"]
            self.popen = subprocess.Popen(
                [*argv, str(MAX_FILE_BYTES), *procs],
                **stdio,
                bufsize=0,
                # Nothing of the host's environment: the call brings bash's, and the
                # launcher's own is readable in /proc by the command it runs.
                env={},
                cwd="/",
                start_new_session=True,
                pass_fds=(ctl_read, status_write),
            )
        except BaseException:
            os.close(self.ctl)
            os.close(self.status)
            raise
        finally:
            os.close(ctl_read)
            os.close(status_write)
        self.pid = self.popen.pid
        # With the pid, its identity (a reused pid is never killed); read now, which for a
        # spare is before its call.
        self.start_time = process_start_time(self.pid)
        self.stdout = self.popen.stdout
        self.stderr = self.popen.stderr
        for f in (self.stdout, self.stderr):
            if f is not None:
                os.set_blocking(f.fileno(), False)
        os.set_blocking(self.status, False)
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # Linux < 5.3: ``wait`` polls
            self._pidfd = None
        self._wait_lock: anyio.Lock | None = None
        self.closed = False

    @property
    def returncode(self) -> int | None:
        """The exit code (negative: the signal), ``None`` while it runs."""
        return self.popen.poll()

    async def send(self, request: bytes) -> None:
        """Hand the launcher its call (``BrokenPipeError`` if it is gone)."""
        view = memoryview(request)
        try:
            while view:
                try:
                    view = view[os.write(self.ctl, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.ctl)
        finally:
            os.close(self.ctl)
            self.ctl = -1

    async def wait(self) -> int:
        """Wait until the launcher exits; its return code."""
        while (code := self.popen.poll()) is None:
            if self._pidfd is None:
                await anyio.sleep(0.005)
                continue
            if self._wait_lock is None:
                self._wait_lock = anyio.Lock()
            async with self._wait_lock:  # one waiter on the fd at a time
                if self.popen.poll() is None:
                    await anyio.wait_readable(self._pidfd)
        return code

    def close(self) -> None:
        """Close the host's ends (the process must be reaped or killed first)."""
        if self.closed:
            return
        self.closed = True
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        for fd in (self.ctl, self._pidfd):
            if fd is not None and fd >= 0:
                os.close(fd)
        self.ctl, self._pidfd = -1, None
        # ``status`` belongs to the BashProcess that took this launcher (its last read).

    def discard(self) -> None:
        """Kill an unused launcher and reap it (it holds nothing yet)."""
        with contextlib.suppress(OSError):
            self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)
        self.close()
        os.close(self.status)
        if self.cgroup is not None:
            self.cgroup.remove()


class _SparePool:
    """``SPARE_LAUNCHERS`` launchers started ahead of calls, refilled by a daemon thread.

    A spare is a launcher that contained itself ahead of its call: a fresh cgroup of its
    own (the default process cap), limits, isolation, subreaper; then it waits. The
    call's working directory, environment and command come with the call. Each spare
    serves exactly one call, then exits with everything of it, so one call cannot leave
    state for the next; a call cannot reach a waiting spare (not dumpable, see
    ``_launcher``). The thread that spawns them lives as long as the host process, whose
    death ends them (their parent-death signal).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted = threading.Condition(self._lock)
        self._ready: list[_Launcher] = []
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._closed = False

    def take(self, isolate: bool) -> _Launcher | None:
        """A live spare, or ``None``: then the caller spawns (``refill`` after the call).

        ``isolate`` is what the call needs (root or not): a spare made otherwise is dropped.
        """
        with self._lock:
            if self._pid != os.getpid():  # a forked host: those spares are the parent's
                self._ready, self._thread, self._pid = [], None, os.getpid()
            if self._closed:
                return None
            taken = None
            while self._ready and taken is None:
                spare = self._ready.pop(0)
                if spare.returncode is None and spare.isolate == isolate:
                    taken = spare
                else:
                    spare.discard()
            return taken

    def refill(self) -> None:
        """Have the spares replaced in the background.

        Called once a call is over, not when it takes its spare: spawning meanwhile would
        compete with the call for the interpreter lock and the CPU.
        """
        with self._lock:
            if self._closed or (self._thread is not None and len(self._ready) >= SPARE_LAUNCHERS):
                return
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._refill, name="codemode-bash-spares", daemon=True
                )
                self._thread.start()
            self._wanted.notify()

    def _refill(self) -> None:
        while True:
            with self._lock:
                while not self._closed and len(self._ready) >= SPARE_LAUNCHERS:
                    self._wanted.wait()
                if self._closed or self._pid != os.getpid():
                    return
            try:
                spare = _spawn(tty=None, isolate=os.geteuid() == 0, max_pids=DEFAULT_MAX_PIDS)
            except Exception as exc:
                # This thread must not end: it is the parent of the spares, and of the
                # launchers of calls that took one, whose parent-death signal is sent when
                # the thread that spawned them exits (not the process).
                _log.warning("could not start a spare bash launcher: %s", exc)
                with self._lock:
                    self._wanted.wait(1.0)  # calls still spawn their own meanwhile
                continue
            with self._lock:
                if not self._closed:
                    self._ready.append(spare)
                    continue
            spare.discard()
            return

    def pids(self) -> list[int]:
        """The spares' pids (tests and diagnostics)."""
        with self._lock:
            return [spare.pid for spare in self._ready]

    def kill_idle(self) -> None:
        """Kill the spares now (new ones are started for the next call)."""
        with self._lock:
            ready, self._ready = self._ready, []
        for spare in ready:
            spare.discard()

    def close(self) -> None:
        """Kill the spares and start no more (interpreter exit)."""
        with self._lock:
            self._closed = True
            self._wanted.notify_all()
        self.kill_idle()


_spares = _SparePool()


def _spawn(
    *, tty: int | None, isolate: bool, max_pids: int | None, cgroup: bool = True
) -> _Launcher:
    group = CallCgroup.create(max_pids) if cgroup else None
    try:
        return _Launcher(tty=tty, isolate=isolate, cgroup=group)
    except BaseException:
        if group is not None:
            group.remove()
        raise


def spare_launcher_pids() -> list[int]:
    """The pids of the launchers started ahead of calls (none before the first call)."""
    return _spares.pids()


def _at_exit() -> None:
    _spares.close()
    kill_all_processes()


atexit.register(_at_exit)


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
        self.process: _Launcher | None = None
        self.cgroup: CallCgroup | None = None
        self._start_time: int | None = None
        self._swept = False
        self._status_fd: int | None = None
        self._status_rest = ""

    def _request(self) -> bytes:
        if self.exec_argv is not None:
            mode, argv = b"--exec", [os.fsencode(a) for a in self.exec_argv]
        else:
            mode, argv = b"--", [os.fsencode(self.command)]
        fields = [os.fsencode(self.cwd), mode, b"%d" % len(argv), *argv]
        for name, value in self.env.items():
            key = os.fsencode(name)
            if not key or b"=" in key:
                raise ValueError(f"invalid environment variable name {name!r}")
            fields.append(key + b"=" + os.fsencode(value))
        # The fields are NUL-separated; no exec argument or variable can hold a NUL anyway.
        if any(b"\0" in field for field in fields):
            raise ValueError("embedded null byte")
        return encode_request(fields)

    async def start(self) -> None:
        """Start bash behind a launcher and wait until it runs (``BashError`` when that fails).

        A one-shot call with the default limits takes a spare launcher when one is ready
        (``_spares``); a terminal or a call that finds none starts its own. Shielded: a
        cancellation landing mid-spawn would leave a child that ``run`` never sees. Callers
        enter ``run`` right after, whose cleanup then owns the whole call.
        """
        with anyio.CancelScope(shield=True):
            try:
                request = self._request()
            except ValueError as exc:
                raise BashError(f"bash could not be started: {exc}", "BASH_SPAWN_FAILED") from None
            isolate = os.geteuid() == 0
            if not isolate:
                _warn_once(
                    "not root: a command that kills its launcher and calls setsid can outlive "
                    "the call, and the cgroup hierarchy above it is not read-only"
                )
            spare = None
            if self.tty is None and self.use_cgroup and self.max_pids == DEFAULT_MAX_PIDS:
                spare = _spares.take(isolate)
            try:
                await self._hand_over(spare, request, isolate)
                assert self.process is not None
                first = ""
                if spare is not None and self.process is spare:
                    first = await self._spare_took_it()
                    if not first:
                        # The spare ended (or was stopped, and is now killed) without a word:
                        # it started nothing ("ok" comes before bash), so a launcher of the
                        # call's own runs it.
                        await self._reap()
                        self.process = self.cgroup = None
                        await self._hand_over(None, request, isolate)
                        assert self.process is not None
                line = first + await _read_line(self.process.status)
            except OSError as exc:
                if self.process is not None:
                    await self._reap()
                raise BashError(f"bash could not be started: {exc}", "BASH_SPAWN_FAILED") from exc
            status, _, self._status_rest = line.partition("\n")
            if not status.startswith("ok"):
                await self._reap()
                reason = status.removeprefix("error: ").strip() or "the launcher exited"
                raise BashError(f"bash could not be started: {reason}", "BASH_SPAWN_FAILED")
            if status.startswith("ok degraded: "):
                _warn_once(status.removeprefix("ok degraded: ").strip())

    async def _spare_took_it(self) -> str:
        """The spare's first status byte, "" if it never will write one.

        A spare stopped from outside (any command of the host's uid can send it SIGSTOP)
        would hold the call forever: one that does not answer in time is killed, and
        whatever it wrote before that is what it did.
        """
        process = self.process
        assert process is not None
        with anyio.move_on_after(_SPARE_ANSWER_S):
            return await _read_some(process.status)
        kill_tree(process.pid, self._start_time, include_root=True)  # the cgroup goes in _reap
        await process.wait()
        try:
            return os.read(process.status, 1).decode("ascii", "replace")
        except (BlockingIOError, OSError):
            return ""

    async def _hand_over(self, spare: _Launcher | None, request: bytes, isolate: bool) -> None:
        if spare is not None:
            self._adopt(spare)
            try:
                await spare.send(request)
                return
            except BrokenPipeError:
                # The spare died since it was checked (killed from outside, or it could not
                # contain itself): it held nothing of this call; start one of our own.
                await self._reap()
                self.process = self.cgroup = None
        launcher = _spawn(
            tty=self.tty, isolate=isolate, max_pids=self.max_pids, cgroup=self.use_cgroup
        )
        self._adopt(launcher)
        await launcher.send(request)

    def _adopt(self, launcher: _Launcher) -> None:
        self.process = launcher
        self.cgroup = launcher.cgroup
        self._status_fd = launcher.status
        self._start_time = launcher.start_time
        self._swept = False
        _live.add(self)

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
        # The launcher has exited, so this read cannot wait.
        return "done" in (self._status_rest + _read_all(fd)).split()

    def _cleanup_sync(self) -> None:
        if self.process is not None and not self._swept:
            self._sweep()
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None
        if self.cgroup is not None:
            self.cgroup.remove()

    async def _reap(self) -> None:
        process = self.process
        assert process is not None
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                self.kill_now()
            await process.wait()
            if self.process is not None and not self._swept:
                self._sweep()
            # An empty cgroup goes at once; one still draining is retried off the loop.
            if self.cgroup is not None and not self.cgroup.try_remove():
                await anyio.to_thread.run_sync(self._cleanup_sync)
            elif self._status_fd is not None:
                os.close(self._status_fd)
                self._status_fd = None
            process.close()
            _live.discard(self)
            if self.tty is None:
                _spares.refill()

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
                        pumps.start_soon(_pump, stdout, self.on_stdout)
                        pumps.start_soon(_pump, stderr, self.on_stderr)
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


async def _pump(stream: IO[bytes], sink: Callable[[bytes], None]) -> None:
    """Feed ``sink`` from a non-blocking pipe until its end."""
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, _READ_BYTES)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        except OSError:
            return
        if not chunk:
            return
        sink(chunk)


async def _read_some(fd: int) -> str:
    """One byte of a non-blocking pipe, "" at its end."""
    while True:
        try:
            return os.read(fd, 1).decode("ascii", "replace")
        except BlockingIOError:
            await anyio.wait_readable(fd)


async def _read_line(fd: int) -> str:
    """The launcher's first status line, and whatever came with it ("" if none)."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = os.read(fd, 256)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _read_all(fd: int) -> str:
    """What is left on a status pipe whose writer exited; closes it."""
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")
