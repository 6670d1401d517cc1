"""Measurements that need a fresh process: ``python -m codemode.bench._child KIND ARGS``.

Prints one JSON line on stdout. Kinds: ``cold SUBJECT`` (runtime open -> first result
of ``return 1``, imports done before the clock starts), ``rss SUBJECT WARM RUNS`` (host
RSS growth over ``RUNS`` runs of ``return 1`` after ``WARM`` of them), ``fork-floor SAMPLES
PAUSE`` (a plain fork per run: warm and back-to-back), ``payload-floor SIZE SAMPLES``
(one call of SIZE bytes each way through a fresh process) and ``host-load CASE LANG``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio


async def _cold(subject: str) -> dict[str, Any]:
    from ._model import MONTY, OURS_PY, OURS_TS, SMOLAGENTS

    if subject in (OURS_PY, OURS_TS):
        from ._common import GUESTS, run_direct

        cls = GUESTS[subject]
        start = time.perf_counter()
        async with cls() as runtime:
            value = await run_direct(runtime, "return 1")
            elapsed = time.perf_counter() - start
    elif subject == MONTY:
        import pydantic_monty

        start = time.perf_counter()
        async with pydantic_monty.AsyncMonty(min_processes=1) as monty:
            async with monty.checkout() as session:
                value = await session.feed_run("1")
            elapsed = time.perf_counter() - start
    elif subject == SMOLAGENTS:
        from smolagents.local_python_executor import LocalPythonExecutor

        start = time.perf_counter()
        executor = LocalPythonExecutor([], timeout_seconds=None)
        executor.send_tools({})
        value = executor("1").output
        elapsed = time.perf_counter() - start
    else:
        raise SystemExit(f"unknown subject {subject!r}")
    if value != 1:
        raise SystemExit(f"{subject}: `return 1` gave {value!r}")
    return {"ms": elapsed * 1e3}


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _rss(subject: str, warm: int, runs: int) -> dict[str, Any]:
    """Host RSS growth per 1,000 runs of ``return 1`` (runtime alone: no session log)."""

    from ._model import MONTY, OURS_PY, OURS_TS

    if subject in (OURS_PY, OURS_TS):
        from ._common import GUESTS, run_direct

        async with GUESTS[subject]() as runtime:

            async def once() -> Any:
                return await run_direct(runtime, "return 1")

            return await _grow(once, warm, runs)
    if subject == MONTY:
        import pydantic_monty

        async with pydantic_monty.AsyncMonty(min_processes=1) as monty:

            async def once() -> Any:
                async with monty.checkout() as session:
                    return await session.feed_run("1")

            return await _grow(once, warm, runs)
    raise SystemExit(f"unknown subject {subject!r}")


async def _grow(once: Any, warm: int, runs: int) -> dict[str, Any]:
    import gc

    for _ in range(warm):
        await once()
    gc.collect()
    before = _rss_bytes()
    for _ in range(runs):
        if await once() != 1:
            raise SystemExit("`return 1` gave something else")
    gc.collect()
    grown = _rss_bytes() - before
    return {"kb_per_1000": grown / 1024 * 1000 / runs, "grown_kb": grown / 1024}


# What both floor programs start with: a process started as the fork server is (``-I
# -S``, its ``sys.path``, no ``ssl``) holds what the server holds when it forks (the
# worker side's imports, the Python guest warmed and its run template built, the GC
# frozen), and forks children as the server forks workers: each makes the event loop a
# worker needs and reports ready; ``child_side(sock)`` runs once the host says go.
_FLOOR_PRELUDE = """\
import asyncio, gc, json, os, signal, socket, sys, time
import msgspec
from codemode.sandbox.worker import _forkserver
from codemode.sandbox.python import _guest

def forked(child_side, buffers=0):
    host, child = socket.socketpair()
    for end in (host, child) if buffers else ():
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffers)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffers)
    pid = os.fork()
    if pid == 0:
        try:
            host.close()
            asyncio.new_event_loop()
            child.send(b"r")
            child.recv(1)
            child_side(child)
            child.recv(1)
        finally:
            os._exit(0)
    child.close()
    host.recv(1)
    return pid, host

def end(pid, host):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    host.close()

_guest.warm()
loop = asyncio.new_event_loop()
_guest.prepare_template(loop)
loop.close()
gc.freeze()
"""

# The floor of a fresh process per run: a plain fork whose child answers one round trip
# (no lock-down, no guest run), warm (forked and ready ahead, as a pooled worker is) and
# back to back (the fork timed too). ``sys.argv[1]``: "SAMPLES PAUSE".
_FORK_FLOOR = (
    _FLOOR_PRELUDE
    + """\
def once(pause):
    start = time.perf_counter()
    pid, host = forked(lambda child: child.send(b"d"))
    try:
        if pause:  # warm: forked and ready ahead, as a pooled worker is
            time.sleep(pause)
            start = time.perf_counter()
        host.send(b"x")
        host.recv(1)
        return (time.perf_counter() - start) * 1e3
    finally:
        end(pid, host)

samples, pause = sys.argv[1].split()
warm = [once(float(pause)) for _ in range(int(samples))]
b2b = [once(0.0) for _ in range(int(samples))]
print(json.dumps({"warm": warm, "b2b": b2b}))
"""
)

# The floor of one call carrying SIZE bytes each way through a fresh process per run:
# the child builds the program's value ('x' * SIZE in a dict), encodes it and sends it;
# the host (a long-lived process, its receive buffer reused) decodes it, encodes it back
# and sends it; the child receives it into a buffer of its size and decodes it. No
# lock-down, no guard, no engine, no extra copy: what every design that keeps a fresh
# process per run pays at least, fresh memory in the child first. Each sample is timed
# from the host's go to the child's done, and the same exchange of an empty value is
# timed too (the suite subtracts its median, as it subtracts a ``return 1`` run from its
# own samples). ``sys.argv[1]``: "SIZE SAMPLES".
_PAYLOAD_FLOOR = (
    _FLOOR_PRELUDE
    + """\
def fill(sock, view):
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError("the other end hung up")
        got += n

def receive(sock, buffer=None):
    head = bytearray(4)
    fill(sock, memoryview(head))
    size = int.from_bytes(head, "big")
    view = memoryview(bytearray(size) if buffer is None else buffer)[:size]
    fill(sock, view)
    return view

def send(sock, data):
    sock.sendmsg([len(data).to_bytes(4, "big"), data])

def once(size, inbox):
    def child_side(child):
        send(child, msgspec.json.encode({"blob": "x" * size}))
        if len(msgspec.json.decode(receive(child))["blob"]) == size:
            child.send(b"d")

    pid, host = forked(child_side, buffers=4 << 20)
    try:
        time.sleep(0.01)  # forked and ready ahead, as a pooled worker is
        start = time.perf_counter()
        host.send(b"x")
        send(host, msgspec.json.encode(msgspec.json.decode(receive(host, inbox))))
        if host.recv(1) != b"d":
            raise RuntimeError("the child did not get its value back")
        return (time.perf_counter() - start) * 1e3
    finally:
        end(pid, host)

size, samples = map(int, sys.argv[1].split())
inbox = bytearray(size + 64)
for _ in range(3):  # the host's side warm, as a long-lived host is
    once(size, inbox)
full, empty = [], []
for _ in range(samples):  # interleaved: the machine's drift hits both alike
    full.append(once(size, inbox))
    empty.append(once(0, inbox))
print(json.dumps({"full": full, "empty": empty}))
"""
)


def _payload_floor(size: int, samples: int) -> dict[str, Any]:
    """``payload-floor``: one call of ``size`` bytes each way through a fresh process
    (see ``_PAYLOAD_FLOOR``)."""
    return _floor_program(_PAYLOAD_FLOOR, f"{size} {samples}")


def _floor_program(program: str, argument: str) -> dict[str, Any]:
    """Run a floor ``program`` as the fork server is started; its JSON line."""
    import subprocess

    from ..sandbox.host._forkserver_client import worker_interpreter

    done = subprocess.run(
        worker_interpreter(program, argument),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"floor failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _fork_floor(samples: int, pause: float) -> dict[str, Any]:
    """``fork-floor``: warm and back-to-back of a plain fork per run (see ``_FORK_FLOOR``)."""
    return _floor_program(_FORK_FLOOR, f"{samples} {pause}")


def main(argv: list[str]) -> None:
    """Entry point: run one measurement, print its JSON line, exit without teardown."""
    if len(argv) == 2 and argv[0] == "cold":
        out = anyio.run(_cold, argv[1])
    elif len(argv) == 3 and argv[0] == "fork-floor":
        out = _fork_floor(int(argv[1]), float(argv[2]))
    elif len(argv) == 3 and argv[0] == "payload-floor":
        out = _payload_floor(int(argv[1]), int(argv[2]))
    elif len(argv) == 4 and argv[0] == "rss":
        out = anyio.run(_rss, argv[1], int(argv[2]), int(argv[3]))
    elif len(argv) == 3 and argv[0] == "host-load":
        from ._suite_host_load import child

        out = anyio.run(child, argv[1], argv[2])
    else:
        raise SystemExit(
            f"usage: python -m codemode.bench._child cold SUBJECT | rss SUBJECT WARM RUNS | "
            f"fork-floor SAMPLES PAUSE | payload-floor SIZE SAMPLES | "
            f"host-load CASE LANG (got {argv})"
        )
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    # pydantic-monty's runtime can abort while the interpreter shuts down; the number is out.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
