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
import importlib.metadata
import os
import re
import signal as signal_mod
import subprocess
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import anyio

from engine import AbortSignal

from ._errors import SearchError
from ._text import utf8_tail

__all__ = ["RgOutput", "landlock_abi", "rg_executable", "run_rg"]


@cache
def rg_executable() -> str:
    """Absolute path of the wheel's ``rg`` binary (raises ``FileNotFoundError`` if absent)."""
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
    files = {os.path.realpath(exe), "/etc/ld.so.cache"}
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


def _confiner(ruleset: int) -> Callable[[], None]:
    """The ``preexec_fn`` that enters ``ruleset`` in the forked child, before ``exec``."""
    libc = _libc
    assert libc is not None
    syscall, prctl = libc.syscall, libc.prctl

    def enter() -> None:
        if (
            prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            or syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0
        ):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    return enter


@dataclass(frozen=True, slots=True)
class RgOutput:
    """What a finished ``rg`` run produced."""

    exit_code: int
    stdout: bytes
    stderr: str


def _stderr_text(data: bytes, cap: int) -> str:
    text = utf8_tail(data, cap).decode("utf-8", "replace").strip()
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
    """Run ``rg args`` in ``cwd``; kill it on abort. Errors are the reference's ``SearchError``s.

    ``confine``: a directory ``rg`` may read beneath and nothing else (Landlock, where the
    kernel has it; see the module docstring).
    """
    ruleset = -1
    try:
        argv = [rg_executable(), *args]
        if confine is not None and landlock_abi() > 0:
            ruleset = _ruleset_for(confine)
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_confiner(ruleset) if ruleset >= 0 else None,
        )
    except (OSError, subprocess.SubprocessError):
        raise SearchError(
            f"{tool} could not start its search command (ripgrep launch failed)", "SEARCH_FAILED"
        ) from None
    finally:
        if ruleset >= 0:
            os.close(ruleset)
    out = bytearray()
    err = bytearray()
    total = 0
    aborted = False
    try:
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal aborted
                await signal.wait()
                aborted = True
                group.cancel_scope.cancel()

            async def pump_out(stream: asyncio.StreamReader) -> None:
                nonlocal total
                while chunk := await stream.read(1 << 16):
                    total += len(chunk)
                    # Past the cap keep counting (for the message) but stop retaining.
                    if total <= raw_cap:
                        out.extend(chunk)

            async def pump_err(stream: asyncio.StreamReader) -> None:
                while chunk := await stream.read(1 << 16):
                    err.extend(chunk)
                    if len(err) > 2 * stderr_cap:
                        del err[: len(err) - stderr_cap - 1]

            group.start_soon(watch)
            assert process.stdout is not None and process.stderr is not None
            async with anyio.create_task_group() as pumps:
                pumps.start_soon(pump_out, process.stdout)
                pumps.start_soon(pump_err, process.stderr)
            await process.wait()
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await process.wait()
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
