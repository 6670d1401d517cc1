"""Benchmark the first-party search and read tools against plain ripgrep.

Generates a 20,000-file tree, then times (median of several runs, wall clock):

- ``glob`` through the full tool pipeline vs ``rg`` run directly with the same argv;
- ``grep`` through the pipeline vs ``rg --json`` with the same argv (and plain ``rg``);
- ``read`` of a 10 MB file (first window, and a window at the end).

Run: ``python benchmarks/bench_tools.py [--files N] [--repeat N]``. The printed ratios are
tool time / direct ``rg`` time in the same run (target: within 1.3x).
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from codemode.engine import AbortController, ToolExecutionInput, ToolRuntime
from codemode.tools import default_tools
from codemode.tools.search._rg import rg_executable

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()


def make_tree(root: Path, files: int, seed: int = 7) -> None:
    """``files`` small source files across nested directories (1 in 10 mention "needle")."""
    rng = random.Random(seed)
    for index in range(files):
        top = f"pkg{index % 20:02d}"
        sub = f"mod{(index // 20) % 25:02d}"
        ext = (".py", ".ts", ".md", ".txt")[index % 4]
        path = root / top / sub / f"file{index:05d}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [" ".join(rng.choices(WORDS, k=8)) for _ in range(20)]
        if index % 10 == 0:
            lines[rng.randrange(20)] += " needle"
        path.write_text("\n".join(lines) + "\n")


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def median_time_async(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def direct_rg(argv: list[str], cwd: Path) -> None:
    subprocess.run(
        [rg_executable(), *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )


async def main(files: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-") as tmp:
        root = Path(tmp) / "tree"
        started = time.perf_counter()
        make_tree(root, files)
        print(f"generated {files} files in {time.perf_counter() - started:.1f}s")
        big = root / "big.log"
        line = "0123456789 abcdefghij ABCDEFGHIJ the quick brown fox jumps over\n"
        big_bytes = big.write_text(line * (10 * 1024 * 1024 // len(line)))

        rt = ToolRuntime()
        for tool in default_tools(root, output_dir=Path(tmp) / "runtime"):
            rt.register(tool)

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            result = await rt.execute(
                ToolExecutionInput(
                    call_id="bench",
                    name=name,
                    arguments=arguments,
                    signal=AbortController().signal,
                )
            )
            assert not result.is_error, result.to_json()
            return result

        glob_argv = ["--no-config", "--files", "--glob=*.py", "--sort=modified"]
        glob_argv += ["--no-ignore", "--hidden"]
        for vcs in (".git", ".svn", ".hg", ".bzr", ".jj", ".sl"):
            glob_argv += [f"--glob=!**/{vcs}", f"--glob=!**/{vcs}/**"]
        grep_argv = ["--no-config", "--json", "--regexp=needle"]

        glob_result = await call("glob", {"pattern": "*.py"})
        grep_result = await call("grep", {"pattern": "needle"})
        rows = [
            ("glob *.py", len(glob_result.value["paths"]), "paths"),
            ("grep needle", len(grep_result.value["matches"]), "matches"),
        ]
        t_glob = await median_time_async(lambda: call("glob", {"pattern": "*.py"}), repeat)
        t_glob_rg = median_time(lambda: direct_rg(glob_argv, root), repeat)
        t_grep = await median_time_async(lambda: call("grep", {"pattern": "needle"}), repeat)
        t_grep_rg = median_time(lambda: direct_rg(grep_argv, root), repeat)
        t_grep_plain = median_time(lambda: direct_rg(["--no-config", "needle"], root), repeat)
        t_read_head = await median_time_async(
            lambda: call("read", {"file_path": "big.log"}), repeat
        )
        total = (await call("read", {"file_path": "big.log"})).value["totalLines"]
        t_read_tail = await median_time_async(
            lambda: call("read", {"file_path": "big.log", "offset": total - 10}), repeat
        )

        print(f"{rows[0][0]}: {rows[0][1]} {rows[0][2]}; {rows[1][0]}: {rows[1][1]} {rows[1][2]}")
        print(
            f"glob  tool {t_glob * 1000:7.1f} ms | rg direct {t_glob_rg * 1000:7.1f} ms "
            f"| ratio {t_glob / t_glob_rg:.2f}x"
        )
        print(
            f"grep  tool {t_grep * 1000:7.1f} ms | rg --json {t_grep_rg * 1000:7.1f} ms "
            f"| ratio {t_grep / t_grep_rg:.2f}x (plain rg {t_grep_plain * 1000:.1f} ms, "
            f"ratio {t_grep / t_grep_plain:.2f}x)"
        )
        size_mb = big_bytes / 1e6
        print(
            f"read  {size_mb:.1f} MB file ({total} lines): first window "
            f"{t_read_head * 1000:.1f} ms, last window {t_read_tail * 1000:.1f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    anyio.run(main, options.files, options.repeat)
