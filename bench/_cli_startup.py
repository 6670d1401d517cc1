"""Start-up of the package and the CLI, each a fresh process (the ``startup`` suite's
``import codemode`` and ``agent one-shot`` rows; issue 24, target 8).

``codemode agent TASK`` runs one-shot against ``ScriptedModel``, a loopback
OpenAI-compatible server in this process that answers every request at once with one
streamed text reply (no tool call): what is timed is the command's own start-up, to
the first model request and to the exit. The children run with bytecode caches, as an
installed package has them (``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment; the warm-up run writes the caches of a source checkout), and with their
session files in a temporary state directory.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ScriptedModel", "agent_one_shot", "cli_environment", "python_c", "spawn_ms"]

_CHUNKS = (
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "done"}}]},
    {
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    },
)
_BODY = (
    b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in _CHUNKS)
    + b"data: [DONE]\n\n"
)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        self.server.arrived.append(time.perf_counter())
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(_BODY)))
        self.end_headers()
        self.wfile.write(_BODY)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: a bench prints its own lines


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrived: list[float] = []


class ScriptedModel:
    """The loopback model server (``with ScriptedModel() as model``): ``base_url`` is
    its ``/v1`` root, ``arrived`` the ``perf_counter`` of each request's arrival."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="bench model server", daemon=True
        )
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}/v1"

    @property
    def arrived(self) -> list[float]:
        """When each request arrived (``time.perf_counter``)."""
        return self._server.arrived

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@contextmanager
def cli_environment() -> Iterator[tuple[dict[str, str], str]]:
    """The children's environment and an empty workspace, in a temporary directory
    that also holds their state (session files), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="codemode-bench-startup-") as tmp:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CODEMODE_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(
            BENCH_STARTUP_KEY="sk-bench",
            NO_COLOR="1",
            XDG_STATE_HOME=os.path.join(tmp, "state"),
            CODEMODE_STATE_DIR=os.path.join(tmp, "codemode-state"),
        )
        workspace = os.path.join(tmp, "ws")
        os.mkdir(workspace)
        yield env, workspace


def spawn_ms(argv: list[str], env: dict[str, str]) -> float:
    """Milliseconds from spawning ``argv`` to its exit (which must be 0)."""
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True, timeout=120
    )
    return (time.perf_counter() - start) * 1000


def python_c(code: str, env: dict[str, str]) -> float:
    """Milliseconds from spawning ``python -c code`` to its exit."""
    return spawn_ms([sys.executable, "-c", code], env)


def agent_one_shot(env: dict[str, str], workspace: str) -> tuple[float, float]:
    """(ms to the first model request, ms to exit) of one ``codemode agent`` one-shot."""
    with ScriptedModel() as model:
        argv = [
            sys.executable,
            "-m",
            "codemode.cli",
            "agent",
            "say done",
            "-w",
            workspace,
            "--base-url",
            model.base_url,
            "--model",
            "scripted",
            "--api-key-env",
            "BENCH_STARTUP_KEY",
        ]
        start = time.perf_counter()
        done = subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120
        )
        end = time.perf_counter()
        arrived = list(model.arrived)
    if done.returncode != 0 or not arrived:
        raise RuntimeError(f"codemode agent failed ({done.returncode}): {done.stderr[-2000:]!r}")
    return (arrived[0] - start) * 1000, (end - start) * 1000
