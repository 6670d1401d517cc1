"""Hostile soak of ``codemode serve-mcp --http``: one long-lived server, N authenticated
clients sending a seeded mix of benign programs and attacks, the host sampled throughout.

The server is the real CLI (built-in tools, a workspace per MCP session, a bearer token,
tight limits) on loopback. Each client is the official MCP client over streamable HTTP;
it runs programs back to back and opens a fresh session every few runs (session churn:
workspaces created and removed, managers started and stopped). The attack classes are
the ones the README's guarantees tables name, written here:

- ``guard``: reflective escapes from the Python guest (``__subclasses__``, frames of
  generators and tracebacks, ``format`` attribute walks, ``__import__``, ``eval``, ``open``);
- ``confine``: file tools asked for paths outside the workspace, directly, through ``..``
  and through a symlink bash planted;
- ``flood``: an endless ``print`` loop, a huge return value, a huge tool argument, a
  burst of concurrent sub-calls;
- ``deep``: deeply nested values returned and passed to a tool;
- ``survivor``: bash commands that try to outlive their call (``nohup``, ``setsid``,
  double fork, ``disown``), checked dead by pid afterwards;
- ``fork``: a bash fork bomb, ``os.fork`` from the guest;
- ``sleep``: programs that sleep past the wall-clock limit, in the guest and in bash;
- ``crash``: unbounded recursion, a memory bomb, a recursion-bomb JSON parse;
- ``disconnect``: a client that leaves with a run in flight.

Every run must end with an answer (an ``is_error`` result is the expected answer for most
attacks) and no leak marker in it; the host is sampled every second (RSS, open fds,
threads, descendant processes) and a JSON-RPC ``ping`` every 200 ms measures how long
the host takes to answer while all this runs (an upper bound of its event-loop lag). At
the end: the processes, session directories and fds left, and a clean SIGTERM exit.

Usage: ``python benchmarks/bench_soak.py [--duration S] [--clients N] [--seed S]
[--json FILE] [--plot FILE.png]`` (defaults: 600 s, 8 clients). Needs the ``mcp`` extra
(and matplotlib for ``--plot``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

LEAK = "root:x:0:0"  # a line of /etc/passwd: never in any answer

# --------------------------------------------------------------------------- programs

BENIGN = {
    "compute": "return sum(i * i for i in range(20000))",
    "files": (
        "await tools.write({'file_path': 'notes.txt', 'content': 'alpha\\nbeta\\n' * 50})\n"
        "r = await tools.grep({'pattern': 'beta', 'path': '.'})\n"
        "t = await tools.read({'file_path': 'notes.txt', 'limit': 3})\n"
        "return [str(r)[:80], str(t)[:80]]"
    ),
    "bash": "r = await tools.bash({'command': 'echo hi; ls | wc -l', 'description': 'echo'})\n"
    "return r",
    "gather": (
        "import asyncio\n"
        "rs = await asyncio.gather(*[tools.glob({'pattern': '*'}) for _ in range(20)])\n"
        "return len(rs)"
    ),
    "job": (
        "r = await tools.bash({'command': 'sleep 0.2; echo done', 'description': 'bg', "
        "'run_in_background': True})\n"
        "return await tools.job_output({'job_id': r['jobId'], 'wait': True})"
    ),
}

ATTACKS: dict[str, dict[str, str]] = {
    "guard": {
        "subclasses": "return [c.__name__ for c in ().__class__.__base__.__subclasses__()]",
        "gi_frame": "def g():\n    yield 1\nx = g()\nreturn str(x.gi_frame.f_globals)",
        "tb_frame": (
            "try:\n    1/0\nexcept Exception as e:\n"
            "    return str(e.__traceback__.tb_frame.f_back.f_globals)"
        ),
        "format_walk": "return '{0.__class__.__mro__[1].__subclasses__}'.format(1)",
        "import": "os = __import__('os')\nreturn os.popen('cat /etc/passwd').read()",
        "eval": "return eval(\"__import__('os').system('id')\")",
        "open": "return open('/etc/passwd').read()",
        "getattr_str": "return getattr(getattr, '__self__')",
    },
    "confine": {
        "absolute": "return await tools.read({'file_path': '/etc/passwd'})",
        "dotdot": "return await tools.read({'file_path': '../../../../../../etc/passwd'})",
        "symlink": (
            "await tools.bash({'command': 'ln -sf /etc/passwd pw', 'description': 'link'})\n"
            "return await tools.read({'file_path': 'pw'})"
        ),
        "grep_out": "return await tools.grep({'pattern': 'root', 'path': '/etc'})",
        "write_out": (
            "return await tools.write({'file_path': '/tmp/codemode-soak-escape', 'content': 'x'})"
        ),
    },
    "flood": {
        "print_loop": "while True:\n    print('A' * 10000)",
        "huge_return": "return 'x' * 50_000_000",
        "huge_argument": "return await tools.write({'file_path': 'big', 'content': 'y' * 20_000_000})",
        "call_burst": (
            "import asyncio\n"
            "rs = await asyncio.gather(*[tools.glob({'pattern': '*'}) for _ in range(500)])\n"
            "return len(rs)"
        ),
    },
    "deep": {
        "return_deep": "x = []\nfor _ in range(100000):\n    x = [x]\nreturn x",
        "argument_deep": (
            "x = {}\nfor _ in range(50000):\n    x = {'a': x}\n"
            "return await tools.write({'file_path': 'd', 'content': x})"
        ),
    },
    "survivor": {
        "nohup": "return await tools.bash({'command': 'nohup sleep 600 >/dev/null 2>&1 & "
        "echo $! > survivor.pid', 'description': 'nohup'})",
        "setsid": "return await tools.bash({'command': 'setsid sleep 600 >/dev/null 2>&1 < "
        "/dev/null & echo $! > survivor.pid', 'description': 'setsid'})",
        "double_fork": "return await tools.bash({'command': '( ( sleep 600 & echo $! > "
        "survivor.pid ) & )', 'description': 'double fork'})",
        "disown": "return await tools.bash({'command': 'sleep 600 & echo $! > survivor.pid; "
        "disown', 'description': 'disown'})",
    },
    "fork": {
        "bash_bomb": "return await tools.bash({'command': 'b() { b | b & }; b', "
        "'description': 'bomb', 'timeoutMs': 3000})",
        "os_fork": "import os\nreturn os.fork()",
    },
    "sleep": {
        "guest_sleep": "import time\ntime.sleep(120)",
        "asyncio_sleep": "import asyncio\nawait asyncio.sleep(120)",
        "bash_sleep": "return await tools.bash({'command': 'sleep 120', 'description': 's', "
        "'timeoutMs': 2000})",
    },
    "crash": {
        "recursion": "def f(n):\n    return f(n + 1)\nreturn f(0)",
        "memory": "x = [bytearray(10**6) for _ in range(10**4)]\nreturn len(x)",
        "json_bomb": "import json\nreturn json.loads('[' * 200000 + ']' * 200000)",
    },
}

# How often each class is drawn (benign work dominates, as it would).
WEIGHTS = {
    "benign": 40,
    "guard": 10,
    "confine": 8,
    "flood": 6,
    "deep": 5,
    "survivor": 6,
    "fork": 3,
    "sleep": 3,
    "crash": 5,
    "disconnect": 4,
}


# --------------------------------------------------------------------------- the host


def _status(pid: int) -> dict[str, str]:
    out: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids[ppid].append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def sample(pid: int) -> dict[str, float]:
    status = _status(pid)
    return {
        "rss_mib": int(status["VmRSS"].split()[0]) / 1024,
        "threads": int(status["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "processes": len(descendants(pid)),
    }


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------------------- clients


class Stats:
    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.failures: list[str] = []  # no answer, a leak, a survivor
        self.durations: dict[str, list[float]] = defaultdict(list)
        self.sessions = 0
        self.survivor_pids: list[int] = []


@contextlib.asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(90, read=90)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=90, mode="legacy") as c:
            yield c


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def client_loop(
    index: int,
    url: str,
    token: str,
    deadline: float,
    rng: random.Random,
    stats: Stats,
    workspace_root: Path,
) -> None:
    classes = list(WEIGHTS)
    weights = [WEIGHTS[c] for c in classes]
    while time.monotonic() < deadline:
        try:
            async with connect(url, token) as c:
                stats.sessions += 1
                for _ in range(rng.randint(3, 12)):
                    if time.monotonic() >= deadline:
                        break
                    kind = rng.choices(classes, weights)[0]
                    await one_run(c, kind, rng, stats, workspace_root)
        except Exception as exc:  # a transport failure is a soak failure
            stats.failures.append(f"client {index}: {type(exc).__name__}: {exc}"[:300])
            await asyncio.sleep(0.5)


async def one_run(
    c: Any, kind: str, rng: random.Random, stats: Stats, workspace_root: Path
) -> None:
    if kind == "benign":
        name = rng.choice(list(BENIGN))
        code = BENIGN[name]
    elif kind == "disconnect":
        name = "mid_run"
        code = "import asyncio\nawait asyncio.sleep(30)"
    else:
        name = rng.choice(list(ATTACKS[kind]))
        code = ATTACKS[kind][name]
    label = f"{kind}/{name}"
    # Each survivor run writes its pid to a file of its own (clients run concurrently).
    nonce = secrets.token_hex(6)
    code = code.replace("survivor.pid", f"survivor-{nonce}.pid")
    stats.runs[label] += 1
    started = time.monotonic()
    if kind == "disconnect":
        # Leave with the run in flight: the client cancels its request.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(rng.uniform(0.2, 1.0)):
                await c.call_tool("run_code", {"code": code})
        stats.answered[label] += 1
        return
    result = await c.call_tool("run_code", {"code": code})
    stats.durations[label].append(time.monotonic() - started)
    stats.answered[label] += 1
    text = _text(result)
    if result.is_error:
        stats.errors[label] += 1
    if LEAK in text:
        stats.failures.append(f"{label}: leaked {text[:200]!r}")
    if kind == "survivor":
        # The pid the command wrote: dead once the call returned.
        for pid in _take_pids(workspace_root, nonce):
            stats.survivor_pids.append(pid)
            await asyncio.sleep(0.2)
            if alive(pid):
                stats.failures.append(f"{label}: pid {pid} outlived its call")


def _take_pids(root: Path, nonce: str) -> list[int]:
    pids = []
    for pid_file in root.glob(f"*/survivor-{nonce}.pid"):
        with contextlib.suppress(OSError, ValueError):
            pids.append(int(pid_file.read_text().strip()))
            pid_file.unlink()
    return pids


async def pinger(url: str, token: str, deadline: float, out: list[float]) -> None:
    async with connect(url, token) as c:
        while time.monotonic() < deadline:
            started = time.monotonic()
            await c.send_ping()
            out.append(time.monotonic() - started)
            await asyncio.sleep(0.2)


async def sampler(pid: int, t0: float, deadline: float, out: list[dict[str, float]]) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            out.append({"t": time.monotonic() - t0, **sample(pid)})
        await asyncio.sleep(1.0)


# --------------------------------------------------------------------------- main


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    import math

    ordered = sorted(values)  # nearest rank
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def start_server(workdir: Path, token: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    sessions = workdir / "sessions"
    sessions.mkdir()
    log = workdir / "serve.log"
    env = {**os.environ, "CODEMODE_SOAK_TOKEN": token}
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "codemode.cli",
                "serve-mcp",
                "--builtin-tools",
                "-w",
                str(workdir),
                "--workspace-per-session",
                str(sessions),
                "--http",
                "127.0.0.1:0",
                "--auth-token-env",
                "CODEMODE_SOAK_TOKEN",
                "--compute-ms",
                "3000",
                "--wall-ms",
                "6000",
                "--max-runs-per-session",
                "2",
                "--max-sessions",
                "64",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", log.read_text())
        if found:
            return proc, found.group(1), sessions
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"serve-mcp did not start:\n{log.read_text()}")


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    load_at_start = os.getloadavg()
    rng = random.Random(args.seed)
    token = secrets.token_urlsafe(32)
    workdir = Path(tempfile.mkdtemp(prefix="codemode-soak-"))
    proc, url, sessions = start_server(workdir, token)
    await asyncio.sleep(2)  # the pool warms
    baseline = sample(proc.pid)
    stats = Stats()
    samples: list[dict[str, float]] = []
    pings: list[float] = []
    t0 = time.monotonic()
    deadline = t0 + args.duration
    async with asyncio.TaskGroup() as tg:
        tg.create_task(sampler(proc.pid, t0, deadline + 10, samples))
        tg.create_task(pinger(url, token, deadline, pings))
        for i in range(args.clients):
            tg.create_task(
                client_loop(i, url, token, deadline, random.Random(rng.random()), stats, sessions)
            )
    elapsed = time.monotonic() - t0
    # Every client has left: its sessions close, their workspaces go.
    await asyncio.sleep(8)
    end = sample(proc.pid)
    left_dirs = sorted(p.name for p in sessions.iterdir())
    left_processes = descendants(proc.pid)
    left_survivors = [p for p in stats.survivor_pids if alive(p)]
    proc.send_signal(signal.SIGTERM)
    try:
        exit_code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        exit_code = -9
    await asyncio.sleep(1)
    after_exit = [p for p in left_processes if alive(p)]
    log = _read_log(workdir / "serve.log", args.log)
    # Only the lines a person would read: refusals are expected, tracebacks are not.
    tracebacks = log.count("Traceback")
    excerpts = [chunk[:1500] for chunk in log.split("Traceback")[1:4]]
    escaped = _exists("/tmp/codemode-soak-escape")
    summary = {
        "env": {
            "python": platform.python_version(),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "load_at_start": load_at_start,
            "load_at_end": os.getloadavg(),
            "duration_s": round(elapsed, 1),
            "clients": args.clients,
            "seed": args.seed,
        },
        "runs": sum(stats.runs.values()),
        "answered": sum(stats.answered.values()),
        "sessions_opened": stats.sessions,
        "by_class": {
            label: {
                "runs": stats.runs[label],
                "is_error": stats.errors[label],
                "p50_s": round(percentile(stats.durations[label], 0.5), 3),
                "max_s": round(max(stats.durations[label], default=float("nan")), 3),
            }
            for label in sorted(stats.runs)
        },
        "failures": stats.failures,
        "ping_ms": {
            "count": len(pings),
            "p50": round(percentile(pings, 0.5) * 1000, 1),
            "p99": round(percentile(pings, 0.99) * 1000, 1),
            "max": round(max(pings, default=float("nan")) * 1000, 1),
        },
        "host": {
            "baseline": baseline,
            "peak": {k: max(s[k] for s in samples) for k in baseline} if samples else {},
            "end": end,
        },
        "left_behind": {
            "session_dirs": left_dirs,
            "processes_before_exit": len(left_processes),
            "processes_after_exit": after_exit,
            "survivors": left_survivors,
            "escape_file": escaped,
            "server_tracebacks": tracebacks,
            "traceback_excerpts": excerpts,
        },
        "exit_code": exit_code,
        "samples": samples,
    }
    with contextlib.suppress(OSError):
        import shutil

        shutil.rmtree(workdir)
    return summary


def _read_log(path: Path, keep: str | None) -> str:
    log = path.read_text()
    if keep:
        Path(keep).write_text(log)
    return log


def _exists(path: str) -> bool:
    return os.path.exists(path)


def plot(summary: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = summary["samples"]
    t = [s["t"] for s in samples]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    panels = [
        ("rss_mib", "host RSS (MiB)"),
        ("fds", "open fds"),
        ("threads", "threads"),
        ("processes", "descendant processes"),
    ]
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        ax.plot(t, [s[key] for s in samples], color="tab:blue")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    for ax in axes[1]:
        ax.set_xlabel("seconds")
    env = summary["env"]
    fig.suptitle(
        f"serve-mcp soak: {env['clients']} clients, {env['duration_s']:.0f} s, "
        f"{summary['runs']} runs, ping p99 {summary['ping_ms']['p99']} ms"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the summary (with samples) here")
    parser.add_argument("--plot", help="write the host-over-time plot here (PNG)")
    parser.add_argument("--log", help="keep the server's stderr here")
    args = parser.parse_args()
    summary = asyncio.run(soak(args))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    if args.plot:
        plot(summary, args.plot)
    shown = {k: v for k, v in summary.items() if k not in ("samples", "by_class")}
    print(json.dumps(shown, indent=1))
    for label, row in summary["by_class"].items():
        print(
            f"{label:28} runs {row['runs']:5}  is_error {row['is_error']:5}  "
            f"p50 {row['p50_s']:7.3f} s  max {row['max_s']:7.3f} s"
        )
    left = summary["left_behind"]
    bad = (
        summary["failures"]
        or left["session_dirs"]
        or left["processes_after_exit"]
        or left["survivors"]
        or left["escape_file"]
        or summary["exit_code"] not in (143, 0)
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
