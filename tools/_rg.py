"""Running the ``rg`` binary from ripgrep's PyPI wheel as a cancellable subprocess.

The binary is located through the installed ``ripgrep`` distribution's file list (or the
interpreter's scripts directory, where the wheel puts it) — never a host ``rg`` on ``PATH``.
"""

from __future__ import annotations

import importlib.metadata
import os
import signal as signal_mod
import subprocess
import sysconfig
from dataclasses import dataclass
from functools import cache

import anyio
import anyio.abc

from engine import AbortSignal

from ._errors import SearchError
from ._text import utf8_tail

__all__ = ["RgOutput", "rg_executable", "run_rg"]


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
) -> RgOutput:
    """Run ``rg args`` in ``cwd``; kill it on abort. Errors are the reference's ``SearchError``s."""
    try:
        argv = [rg_executable(), *args]
        process = await anyio.open_process(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError:
        raise SearchError(
            f"{tool} could not start its search command (ripgrep launch failed)", "SEARCH_FAILED"
        ) from None
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

            async def pump_out(stream: anyio.abc.ByteReceiveStream) -> None:
                nonlocal total
                async for chunk in stream:
                    total += len(chunk)
                    # Past the cap keep counting (for the message) but stop retaining.
                    if total <= raw_cap:
                        out.extend(chunk)

            async def pump_err(stream: anyio.abc.ByteReceiveStream) -> None:
                async for chunk in stream:
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
                process.kill()
            await process.wait()
            await process.aclose()
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
