"""``codemode serve-mcp --http`` as a subprocess on loopback, and clients for it.

``http_serve(...)`` starts the real CLI, waits for its "listening on" line and yields a
``Served`` (its URL, its stderr so far, the process); leaving stops it with SIGTERM and
checks that it exited cleanly. ``client(url, token)`` is the official MCP client over
streamable HTTP with a bearer token (``httpx2``, the SDK's HTTP client).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import UPSTREAM_SCRIPT

NOTES = f"{sys.executable} {UPSTREAM_SCRIPT} notes"
TOKEN = "correct-horse-battery-staple-42"

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class Served:
    """A running ``serve-mcp --http``."""

    def __init__(self, url: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.log_path = log
        self.proc = proc

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.log())
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in the server log:\n{self.log()}")

    async def await_log(self, pattern: str) -> re.Match[str]:
        """``wait_for_log`` that lets the event loop run meanwhile (up to 30 s)."""
        with anyio.fail_after(30):
            while True:
                found = re.search(pattern, self.log())
                if found:
                    return found
                await anyio.sleep(0.05)


def serve_mcp(*args: str) -> list[str]:
    return [sys.executable, "-m", "codemode.cli", "serve-mcp", *args]


@contextlib.contextmanager
def http_serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, stop: int = signal.SIGTERM
) -> Iterator[Served]:
    """Start ``serve-mcp --http 127.0.0.1:0 ARGS``; yield once it listens."""
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            serve_mcp("--http", "127.0.0.1:0", *args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
    try:
        url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"listening on (https?://127\.0\.0\.1:\d+/mcp)", log.read_text())
            if found:
                url = found.group(1)
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        assert url is not None, log.read_text()
        yield Served(url, log, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(stop)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"serve-mcp did not stop:\n{log.read_text()}") from None
        assert proc.stdout is not None
        assert proc.stdout.read() == b""
        proc.stdout.close()


@contextlib.asynccontextmanager
async def client(
    url: str, token: str | None = TOKEN, *, verify: Any = True, mode: str = "legacy"
) -> AsyncIterator[Any]:
    """The official MCP client, sending ``Authorization: Bearer token``; ``mode="legacy"``
    (the initialize handshake: one MCP session per client), or ``"auto"`` (the stateless
    2026-07-28 protocol when the server speaks it: every request its own connection)."""
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(
        headers=headers, verify=verify, timeout=httpx2.Timeout(60, read=60)
    ) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=60, mode=mode) as connected:
            yield connected


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


async def run(c: Any, code: str) -> Any:
    return await c.call_tool("run_code", {"code": code})
