"""Prepared programs: the host keeps what a worker compiled from a recurring program.

The cache itself (bounds, the second-sighting rule), the Python guest end to end (the
third run of a program uses the second run's code object, with every guard still in
it), and what a hostile worker can do about it: nothing — a prepared frame is kept
only when asked for and only as a run's first frame, and a corrupt entry is compiled
over.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.sandbox.host._prepared import MAX_ENTRY_BYTES, MAX_PROGRAM_CHARS, PreparedCache

# -- the cache ------------------------------------------------------------------------


def test_a_program_is_asked_for_on_its_second_sighting_and_served_on_its_third() -> None:
    cache = PreparedCache()
    assert cache.lookup("return 1") == (b"", False)  # first sight: remembered only
    assert cache.lookup("return 1") == (b"", True)  # seen before: ask the worker
    assert cache.store("return 1", b"code")
    assert cache.lookup("return 1") == (b"code", False)
    assert cache.hits == 1 and len(cache) == 1


def test_the_cache_is_bounded_by_entries_and_bytes() -> None:
    cache = PreparedCache(max_entries=3, max_bytes=10_000)
    for i in range(10):
        program = f"return {i}"
        cache.lookup(program)
        cache.store(program, b"x" * 100)
    assert len(cache) == 3
    assert [cache.lookup(f"return {i}")[0] != b"" for i in (7, 8, 9)] == [True] * 3
    assert cache.lookup("return 0") == (b"", False)  # evicted, and forgotten
    big = PreparedCache(max_entries=100, max_bytes=1_000)
    for i in range(5):
        big.store(f"p{i}", b"y" * 400)
    assert big.nbytes <= 1_000 and len(big) == 2


def test_oversized_programs_and_forms_are_not_kept() -> None:
    cache = PreparedCache()
    huge = "x = 1\n" * (MAX_PROGRAM_CHARS // 6 + 1)
    assert cache.lookup(huge) == (b"", False)
    assert cache.lookup(huge) == (b"", False)  # never asked for
    assert not cache.store(huge, b"code")
    assert not cache.store("return 1", b"z" * (MAX_ENTRY_BYTES + 1))
    assert not cache.store("return 1", b"")
    assert len(cache) == 0 and cache.nbytes == 0


def test_remembered_programs_count_against_the_byte_bound() -> None:
    cache = PreparedCache(max_entries=1_000, max_bytes=1_000)
    for i in range(100):
        cache.lookup(f"{i:03d}" + "#" * 97)
    assert cache.nbytes <= 1_000


# -- the Python guest ---------------------------------------------------------------

anyio_tests = pytest.mark.anyio


def _request(program: str, functions: dict[str, Any] | None = None) -> CodeRunRequest:
    return CodeRunRequest(program, bindings(functions or {}), AbortController().signal)


@anyio_tests
async def test_the_third_run_of_a_program_uses_the_prepared_code_and_keeps_its_guards() -> None:
    program = (
        "class P:\n    def __init__(self):\n        self.n = 0\n"
        "p = P()\nfor i in range(5):\n    p.n += i\n"
        "v = await tools.echo({'n': p.n})\n"
        "return v['n']\n"
    )
    forbidden = "x = ().__class__\nreturn 1\n"

    async def echo(args: Any) -> Any:
        return args

    async with PythonRuntime() as runtime:
        cache = runtime._prepared
        for _ in range(4):
            assert ok(await runtime.run(_request(program, {"echo": echo}))) == 10
        assert cache.stored == 1 and cache.hits == 2
        for _ in range(3):
            result = await runtime.run(_request(forbidden))
            assert result.error is not None and result.error.kind == "forbidden"
        # A program the policy refuses is never prepared: there is nothing to run.
        assert cache.stored == 1
        # The guards a prepared program calls at run time are the same: denied again.
        guarded = "name = '_' * 2 + 'class__'\nreturn getattr((), name)\n"
        for _ in range(3):
            result = await runtime.run(_request(guarded))
            assert result.error is not None and result.error.kind == "forbidden", result
        assert cache.stored == 2 and cache.hits == 3
        assert runtime.stats.dropped_frames == 0


@anyio_tests
async def test_a_corrupt_entry_is_compiled_over() -> None:
    async with PythonRuntime() as runtime:
        for garbage in (b"\x00not marshal", b"\xe9\x01\x00\x00\x00"):  # junk, then the int 1
            runtime._prepared.clear()
            runtime._prepared.lookup("return 41 + 1")
            runtime._prepared.store("return 41 + 1", garbage)
            assert ok(await runtime.run(_request("return 41 + 1"))) == 42
        assert runtime._prepared.hits == 2


@anyio_tests
async def test_typescript_runs_are_not_prepared() -> None:
    async with TypeScriptRuntime() as runtime:
        for _ in range(3):
            assert ok(await runtime.run(_request("return 1"))) == 1
        assert runtime._prepared.stored == 0 and runtime.stats.dropped_frames == 0


# -- a hostile worker ---------------------------------------------------------------

_GUESTS = {
    "python": "codemode.sandbox.python._guest",
    "raw": "codemode.sandbox.worker._raw_guest",
}

# Sends a log line, then a prepared frame: too late, whatever the host asked for.
_LATE = """
from codemode.sandbox.worker._frames import LogFrame, PreparedFrame
bridge.send(LogFrame(text="hello"))
bridge.send(PreparedFrame(data=b"planted"))
result = 1
"""

# Sends a prepared frame first, though nobody asked for one (first sight).
_UNASKED_PREFIX = """
from codemode.sandbox.worker._frames import PreparedFrame
bridge.send(PreparedFrame(data=b"planted"))
result = 1
"""


async def _raw(runtime: PythonRuntime, program: str) -> Any:
    with anyio.fail_after(30):
        return await runtime._run_guest(_request(program), "raw")


@anyio_tests
async def test_a_prepared_frame_after_another_frame_is_dropped() -> None:
    async with PythonRuntime(Limits(pool_size=1), _guests=_GUESTS) as runtime:
        cache = runtime._prepared
        for _ in range(3):  # asked for from the second run on
            assert ok(await _raw(runtime, _LATE)) == 1
        assert len(cache) == 0 and cache.stored == 0
        assert runtime.stats.dropped_frames == 3


@anyio_tests
async def test_an_unasked_prepared_frame_is_dropped() -> None:
    async with PythonRuntime(Limits(pool_size=1), _guests=_GUESTS) as runtime:
        assert ok(await _raw(runtime, _UNASKED_PREFIX)) == 1
        assert len(runtime._prepared) == 0
        assert runtime.stats.dropped_frames == 1


@anyio_tests
async def test_a_prepared_form_too_big_for_the_bridge_is_left_out() -> None:
    # The program (a 40 KB literal) fits the 64 KiB frame cap; with its prepared form
    # (the literal again, base64 in the frame) it would not: the worker compiles instead.
    program = "s = '" + "a" * 40_000 + "'\nreturn len(s)\n"
    async with PythonRuntime(Limits(max_frame_bytes=65_536)) as runtime:
        for _ in range(4):
            assert ok(await runtime.run(_request(program))) == 40_000
        assert runtime._prepared.stored == 1 and runtime._prepared.hits == 2
