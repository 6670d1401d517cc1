"""Running the ``rg`` binary from ripgrep's PyPI wheel as a cancellable, confined subprocess.

The binary is located through the installed ``ripgrep`` distribution's file list (or the
interpreter's scripts directory, where the wheel puts it) — never a host ``rg`` on ``PATH``.

ripgrep walks directories by path, so a directory swapped for a symlink between its
``readdir`` and the ``open`` of a file below it would be followed by the kernel. Where the
kernel has Landlock (Linux >= 5.13), each ``rg`` therefore runs under a ruleset that lets it
read only beneath the one root being searched (plus its own binary, loader and libraries,
and write nothing): a raced path that leads out fails with ``EACCES`` inside ``rg`` instead
of returning outside content. ``landlock_abi()`` says whether that holds on this host.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import os
import re
import signal as signal_mod
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import anyio

from codemode.engine import AbortSignal
from codemode.engine.policies import utf8_tail_bytes

from .._errors import SearchError

__all__ = ["RgOutput", "landlock_abi", "rg_executable", "run_rg"]

_T = TypeVar("_T")


@cache
def rg_executable() -> str:
    """Absolute path of the wheel's ``rg`` binary (raises ``FileNotFoundError`` if absent)."""
    # Imported here, on the first search: importlib.metadata costs ~10 ms at start-up.
    import importlib.metadata
    import sysconfig

    try:
        files = importlib.metadata.files("ripgrep") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name in ("rg", "rg.exe") and entry.parent.name in ("bin", "Scripts"):
            located = os.path.abspath(str(entry.locate()))
            if os.access(located, os.X_OK):
                return located
    scripts = sysconfig.get_path("scripts")
    for name in ("rg", "rg.exe"):
        candidate = os.path.join(scripts, name)
        if os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("the ripgrep wheel's rg binary is not installed")


# -- Landlock --------------------------------------------------------------------------

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
_EXECUTE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 2, 1 << 3
# Every filesystem right of ABI v1 (bits 0-12), then REFER (v2), TRUNCATE (v3), IOCTL_DEV (v5).
_HANDLED_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _load_libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.prctl.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - no C library to call through
        return None
    return libc


_libc = _load_libc()


@cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    if _libc is None:
        return 0
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(version))


def _handled() -> int:
    abi = landlock_abi()
    return next(
        mask for version, mask in sorted(_HANDLED_BY_ABI.items(), reverse=True) if abi >= version
    )


@cache
def _runtime_files() -> tuple[str, ...]:
    """``rg``'s binary, dynamic loader, libraries and the loader cache: what it must read
    to start at all. The loader itself lists them (``LD_TRACE_LOADED_OBJECTS``)."""
    exe = rg_executable()
    files = {os.path.realpath(exe), "/etc/ld.so.cache", "/etc/ld.so.preload"}
    try:
        traced = subprocess.run(
            [exe],
            env={"LD_TRACE_LOADED_OBJECTS": "1"},
            capture_output=True,
            timeout=10,
            check=False,
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        traced = ""
    for match in re.finditer(r"(/\S+) \(0x", traced):
        files.add(os.path.realpath(match.group(1)))
    return tuple(sorted(f for f in files if os.path.exists(f)))


def _add_rule(ruleset: int, path: str, access: int) -> None:
    assert _libc is not None
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        attr = _PathBeneath(access, fd)
        if _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(attr), 0) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _ruleset_for(root: str) -> int:
    """A Landlock ruleset fd allowing reads beneath ``root`` and ``rg``'s own start-up."""
    assert _libc is not None
    handled = ctypes.c_uint64(_handled())
    ruleset = int(_libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(handled), ctypes.c_size_t(8), 0))
    if ruleset < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        _add_rule(ruleset, root, _READ_FILE | _READ_DIR)
        for path in _runtime_files():
            _add_rule(ruleset, path, _READ_FILE | _EXECUTE)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _restrict_this_thread(root: str) -> None:
    """Put the calling thread (only it: both attributes are per task) under no_new_privs
    and a ruleset confined to ``root``; every process it spawns inherits both."""
    assert _libc is not None
    ruleset = _ruleset_for(root)
    try:
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        if _libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)


def _submit_confined(root: str, fn: Callable[..., _T], *args: Any) -> Future[_T]:
    """Run ``fn(*args)`` on a fresh thread restricted to ``root``, which then ends.

    Restricting a thread rather than each child lets ``subprocess`` keep its ``vfork``
    fast path: a ``preexec_fn`` would force a full ``fork`` of the host (measured at +2 ms
    per search for a small host, growing with its size). A Landlock domain cannot be left,
    so the thread is used for one spawn only and exits: no restricted thread outlives the
    search that needed it (a host that counts its threads sees none left behind).
    """
    future: Future[_T] = Future()

    def spawn() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            _restrict_this_thread(root)
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to the awaiting task, never lost
            future.set_exception(exc)

    threading.Thread(target=spawn, name="codemode-rg-spawner", daemon=True).start()
    return future


def _popen(argv: list[str], cwd: str, stdin: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


async def _spawn(argv: list[str], cwd: str, confine: str | None) -> subprocess.Popen[bytes]:
    # /dev/null is opened here: the confined spawner thread could not open it itself.
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if confine is None or landlock_abi() == 0:
            return _popen(argv, cwd, stdin)
        future = _submit_confined(confine, _popen, argv, cwd, stdin)
        # Shielded: a process that was started must be handed back to be reaped.
        with anyio.CancelScope(shield=True):
            process = await asyncio.wrap_future(future)
        return process
    finally:
        os.close(stdin)


_CHUNK = 1 << 16
# A paced pipe is grown to this (the default pipe-max-size, allowed unprivileged) so rg
# can write ahead while its reader rests; a pipe that cannot grow is read unpaced.
_PIPE_BYTES = 1 << 20
_PACE_S = 0.002


def _grown(fd: int) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:  # over the user's pipe-buffer allowance
        return False
    return True


async def _collect(
    sinks: dict[int, Callable[[bytes], None]], pace: int | None, pidfd: int | None
) -> None:
    """Read each pipe fd into its sink until all are at EOF.

    Loop readers, not a task per pipe awaiting readiness: ``rg`` writes a search's output
    in dozens of small bursts (one per file with matches), and each wait of a task
    re-registered the fd with the selector and woke the task (~50 us of CPU a burst, taken
    from ``rg`` on a small host). The ``pace`` fd (stdout) is also read paced while the
    process runs: once drained, its reader rests ``_PACE_S`` while rg writes ahead into
    the grown pipe, so a search is read in a few large reads rather than one per burst.
    The exit, seen on ``pidfd``, ends the pacing at once: the last output is not waited
    for. Without a pidfd (kernels before 5.3) nothing is paced.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    open_fds = dict(sinks)
    paced = pace is not None and pidfd is not None and _grown(pace)
    resting: list[asyncio.TimerHandle] = []

    def finish(error: BaseException | None) -> None:
        if not done.done():  # a cancelled wait leaves it done: nothing to hand on
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    def drain(fd: int) -> bool | None:
        """Read what ``fd`` holds, at most a grown pipe's worth (the loop's other work
        must not wait on a fast writer): True at EOF, False once emptied, None if more
        may be waiting."""
        sink = open_fds[fd]
        for _ in range(_PIPE_BYTES // _CHUNK):
            try:
                chunk = os.read(fd, _CHUNK)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            sink(chunk)
            if len(chunk) < _CHUNK:
                return False  # emptied (another read would only say EAGAIN)
        return None

    def readable(fd: int) -> None:
        try:
            state = drain(fd)
        except Exception as exc:  # the loop would only log it: hand it to the awaiting task
            finish(exc)
            return
        if state is True:
            loop.remove_reader(fd)
            del open_fds[fd]
            if not open_fds:
                finish(None)
        elif state is False and paced and fd == pace:
            # Emptied: rest while rg writes ahead (still full: stay armed, read on).
            loop.remove_reader(fd)
            resting.append(loop.call_later(_PACE_S, resume))

    def resume() -> None:
        resting.clear()
        assert pace is not None
        loop.add_reader(pace, readable, pace)

    def exited() -> None:
        nonlocal paced
        assert pidfd is not None
        loop.remove_reader(pidfd)
        paced = False
        if resting:
            resting[0].cancel()
            resume()

    for fd in sinks:
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable, fd)
    if paced:
        assert pidfd is not None
        loop.add_reader(pidfd, exited)
    try:
        await done
    finally:
        # Cancelled (abort) or failed: no callback may run after this returns.
        for handle in resting:
            handle.cancel()
        for fd in open_fds:
            loop.remove_reader(fd)
        if pidfd is not None:
            loop.remove_reader(pidfd)


def _pidfd(process: subprocess.Popen[bytes]) -> int | None:
    try:
        return os.pidfd_open(process.pid)
    except OSError:  # kernels before 5.3
        return None


async def _wait(process: subprocess.Popen[bytes], pidfd: int | None) -> int:
    code = process.poll()
    if code is not None:
        return code
    if pidfd is None:  # wait in a worker thread instead
        return await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
    await anyio.wait_readable(pidfd)
    return process.wait()


@dataclass(frozen=True, slots=True)
class RgOutput:
    """What a finished ``rg`` run produced."""

    exit_code: int
    stdout: bytes
    stderr: str


def _stderr_text(data: bytes, cap: int) -> str:
    text = utf8_tail_bytes(data, cap).decode("utf-8", "replace").strip()
    return text + " [stderr truncated]" if len(data) > cap else text


async def run_rg(
    args: list[str],
    *,
    cwd: str,
    signal: AbortSignal,
    tool: str,
    raw_cap: int,
    stderr_cap: int,
    confine: str | None = None,
) -> RgOutput:
    """Run ``rg args`` in ``cwd``; kill it on abort. Errors are coded ``SearchError``s.

    ``confine``: a directory ``rg`` may read beneath and nothing else (Landlock, where the
    kernel has it; see the module docstring).
    """
    try:
        process = await _spawn([rg_executable(), *args], cwd, confine)
    except (OSError, subprocess.SubprocessError):
        raise SearchError(
            f"{tool} could not start its search command (ripgrep launch failed)", "SEARCH_FAILED"
        ) from None
    out = bytearray()
    err = bytearray()
    total = 0
    aborted = False

    def keep_out(chunk: bytes) -> None:
        nonlocal total
        total += len(chunk)
        # Past the cap keep counting (for the message) but stop retaining.
        if total <= raw_cap:
            out.extend(chunk)

    def keep_err(chunk: bytes) -> None:
        err.extend(chunk)
        if len(err) > 2 * stderr_cap:
            del err[: len(err) - stderr_cap - 1]

    assert process.stdout is not None and process.stderr is not None
    pidfd = _pidfd(process)
    try:
        with anyio.CancelScope() as scope:

            def on_abort(_signal: AbortSignal) -> None:
                nonlocal aborted
                aborted = True
                scope.cancel()

            # A listener, not a task awaiting the signal: called at once if already aborted.
            dispose = signal.add_listener(on_abort)
            try:
                stdout = process.stdout.fileno()
                await _collect({stdout: keep_out, process.stderr.fileno(): keep_err}, stdout, pidfd)
                await _wait(process, pidfd)
            finally:
                dispose()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await _wait(process, pidfd)
            if pidfd is not None:
                os.close(pidfd)
            process.stdout.close()
            process.stderr.close()
    if aborted:
        raise SearchError(
            f"{tool} was aborted before completion (tool timeout or caller cancellation)",
            "SEARCH_ABORTED",
        )
    code = process.returncode
    assert code is not None
    stderr = _stderr_text(bytes(err), stderr_cap)
    if code < 0:
        name = signal_mod.Signals(-code).name
        raise SearchError(f"{tool} search command was killed by signal {name}", "SEARCH_FAILED")
    if total > raw_cap:
        raise SearchError(
            f"{tool} produced {total} bytes of raw output, over the {raw_cap}-byte cap; "
            "narrow pattern, path, or include and retry",
            "SEARCH_RAW_OUTPUT_OVERFLOW",
        )
    if code not in (0, 1):
        lowered = stderr.lower()
        if "regex parse error" in lowered or "error parsing glob" in lowered:
            raise SearchError(
                f"{tool} pattern rejected by ripgrep: {stderr}", "SEARCH_INVALID_PATTERN"
            )
        detail = f": {stderr}" if stderr else ""
        raise SearchError(f"{tool} search failed (exit {code}){detail}", "SEARCH_FAILED")
    return RgOutput(code, bytes(out), stderr)
