"""Fixtures for the sandbox tests: real runtimes, real worker processes, no mocks.

One ``PythonRuntime`` is shared per test module (starting a fork server costs ~0.2 s);
tests that need other limits start their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sandbox_helpers import Run, make_runner

from codemode.sandbox import Limits, PythonRuntime


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def runtime() -> AsyncIterator[PythonRuntime]:
    async with PythonRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as rt:
        yield rt


@pytest.fixture
def run(runtime: PythonRuntime) -> Run:
    return make_runner(runtime)
