"""The fork server and its workers load the worker side only.

The fork server boots with ``-I -S`` (no site module: its ``sys.path`` and the two
``codemode`` package locations are passed by the host) and a plain
``from codemode.sandbox.worker._forkserver import main``; ``codemode`` and
``codemode.sandbox`` load their public names lazily, so nothing host-side
(anyio, the engine, ``codemode.sandbox.host``) may end up in a worker. A worker is a fork
of the server, so its ``sys.modules`` on entry is the server's, plus what the guest loaded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from sandbox_helpers import bindings, ok

from codemode.engine import AbortController, CodeRunRequest
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

pytestmark = pytest.mark.anyio

#: What a worker must never hold: the host side of the sandbox and everything it needs.
HOST_SIDE = ("anyio", "codemode.engine", "codemode.sandbox.host", "codemode.tools", "codemode.cli")

PROBE = (
    "import sys\n"
    f"prefixes = {HOST_SIDE!r}\n"
    "result = sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in prefixes))\n"
)

RAW = "codemode.sandbox.worker._raw_guest"


@pytest.fixture(
    scope="module",
    params=[
        (PythonRuntime, {"python": "codemode.sandbox.python._guest", "raw": RAW}),
        (
            TypeScriptRuntime,
            {"typescript": TypeScriptRuntime.guest_modules["typescript"], "raw": RAW},
        ),
    ],
    ids=["python-guest", "typescript-guest"],
)
async def runtime_with_raw(request: pytest.FixtureRequest) -> AsyncIterator[PythonRuntime]:
    cls, guests = request.param
    async with cls(Limits(max_wall_ms=20_000), _guests=guests) as rt:
        yield rt


async def test_worker_holds_no_host_side_module(runtime_with_raw: PythonRuntime) -> None:
    request = CodeRunRequest(PROBE, bindings(), AbortController().signal)
    with anyio.fail_after(30):
        result = await runtime_with_raw._run_guest(request, "raw")
    assert ok(result) == []


async def test_worker_holds_the_worker_side(runtime_with_raw: PythonRuntime) -> None:
    # The probe above is only meaningful if it sees the worker's modules at all.
    program = "import sys\nresult = 'codemode.sandbox.worker._forkserver' in sys.modules\n"
    request = CodeRunRequest(program, bindings(), AbortController().signal)
    with anyio.fail_after(30):
        assert ok(await runtime_with_raw._run_guest(request, "raw")) is True


async def test_server_boots_without_site_and_without_ssl(runtime_with_raw: PythonRuntime) -> None:
    # ``site`` (``.pth`` files, an editable install's finder) and ``ssl`` (which asyncio
    # imports when it can) were a fifth of every cold start; neither is a worker's need.
    program = (
        "import sys\n"
        "result = [sys.flags.no_site, 'site' in sys.modules, sys.modules.get('ssl', 0),"
        " '_ssl' in sys.modules, 'msgspec' in sys.modules]\n"
    )
    request = CodeRunRequest(program, bindings(), AbortController().signal)
    with anyio.fail_after(30):
        assert ok(await runtime_with_raw._run_guest(request, "raw")) == [
            1,
            False,
            None,
            False,
            True,
        ]
