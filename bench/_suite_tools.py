"""``tools``: the first-party search and read tools through the full pipeline, against
ripgrep run directly with the same argv on the same generated tree (the floor for
these tools: what the tool adds is confinement, parsing and presentation); and a one-shot
``bash`` call (``true``) against ``bash -c true`` spawned directly from the same process
(what the tool adds is containment: a cgroup, a launcher, isolation, the kills)."""

from __future__ import annotations

import importlib.metadata
import os
import random
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import anyio

from codemode.engine import AbortController, ToolExecutionInput, ToolRuntime
from codemode.tools import default_tools

from ._common import BenchContext, timed
from ._model import FLOOR, MONTY, SMOLAGENTS, SuiteResult, cross_ratios, summarize

DESCRIPTION = (
    "glob / grep through the pipeline vs direct rg (same argv, same tree); read; "
    "one-shot bash vs bash -c spawned directly"
)
RG = "ripgrep (direct)"
BASH = "bash -c (direct)"
BASH_CASE = "bash true, one-shot"
# Between bash samples: a call's spare launcher is replaced in the background after it,
# and a one-shot call (the case measured) finds it started.
_BASH_PAUSE_S = 0.05
TOOL = "codemode-tools"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()


def rg_path() -> str | None:
    """The ripgrep wheel's ``rg`` (what the tools run), or ``None``."""
    try:
        files = importlib.metadata.files("ripgrep") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name == "rg" and entry.parent.name == "bin":
            located = os.path.abspath(str(entry.locate()))
            if os.access(located, os.X_OK):
                return located
    candidate = os.path.join(sysconfig.get_path("scripts"), "rg")
    return candidate if os.access(candidate, os.X_OK) else None


def make_tree(root: Path, files: int, seed: int) -> None:
    """``files`` small source files in nested directories; 1 in 10 mentions "needle"."""
    rng = random.Random(seed)
    for index in range(files):
        path = root / f"pkg{index % 20:02d}" / f"mod{(index // 20) % 25:02d}"
        path = path / f"file{index:05d}{('.py', '.ts', '.md', '.txt')[index % 4]}"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [" ".join(rng.choices(WORDS, k=8)) for _ in range(20)]
        if index % 10 == 0:
            lines[rng.randrange(20)] += " needle"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    files = 2000 if ctx.quick else 20_000
    big_mb = 2 if ctx.quick else 10
    runs = max(3, ctx.runs)
    result = SuiteResult(
        description=DESCRIPTION,
        params={"files": files, "read_file_mb": big_mb, "runs": runs, "seed": ctx.seed},
    )
    ctx.plan(6)
    rg = rg_path()
    with tempfile.TemporaryDirectory(prefix="codemode-bench-tools-") as tmp:
        root = Path(tmp) / "tree"
        await anyio.to_thread.run_sync(make_tree, root, files, ctx.seed)
        line = "0123456789 abcdefghij ABCDEFGHIJ the quick brown fox jumps over\n"
        (root / "big.log").write_text(line * (big_mb * 1024 * 1024 // len(line)), encoding="utf-8")
        ctx.step("tree")
        rt = ToolRuntime()
        for definition in default_tools(root, output_dir=Path(tmp) / "runtime"):
            rt.register(definition)

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            outcome = await rt.execute(
                ToolExecutionInput(
                    call_id="bench", name=name, arguments=arguments, signal=AbortController().signal
                )
            )
            if outcome.is_error:
                raise RuntimeError(f"{name} failed: {outcome.content}")
            return outcome.value

        def direct(argv: list[str]) -> None:
            assert rg is not None
            subprocess.run(
                [rg, *argv], cwd=root, stdin=subprocess.DEVNULL, capture_output=True, check=False
            )

        glob_argv = [
            "--no-config",
            "--files",
            "--glob=*.py",
            "--sort=modified",
            "--no-ignore",
            "--hidden",
        ]
        for vcs in (".git", ".svn", ".hg", ".bzr", ".jj", ".sl"):
            glob_argv += [f"--glob=!**/{vcs}", f"--glob=!**/{vcs}/**"]
        cases = [
            ("glob *.py", {"pattern": "*.py"}, "glob", glob_argv),
            (
                "grep needle",
                {"pattern": "needle"},
                "grep",
                ["--no-config", "--json", "--regexp=needle"],
            ),
        ]
        for label, arguments, name, argv in cases:
            await call(name, arguments)  # warm-up (and the page cache)
            rg_row = None
            if rg is not None:
                samples = []
                for _ in range(runs):
                    clock = timed()
                    await anyio.to_thread.run_sync(direct, argv)
                    samples.append(clock())
                rg_row = summarize(label, RG, samples, note="same argv as the tool")
                result.rows.append(rg_row)
            samples = []
            for _ in range(runs):
                clock = timed()
                await call(name, arguments)
                samples.append(clock())
            result.rows.append(
                summarize(
                    label,
                    TOOL,
                    samples,
                    ideal=rg_row.median if rg_row else None,
                    note="ideal = direct rg" if rg_row else "rg not found: no comparison",
                )
            )
            ctx.step(label)
        total = (await call("read", {"file_path": "big.log"}))["totalLines"]
        for label, arguments in (
            (f"read {big_mb} MB file, first window", {"file_path": "big.log"}),
            (f"read {big_mb} MB file, last window", {"file_path": "big.log", "offset": total - 10}),
        ):
            samples = []
            for _ in range(runs):
                clock = timed()
                await call("read", arguments)
                samples.append(clock())
            result.rows.append(summarize(label, TOOL, samples))
        ctx.step("read")
        await _bash_rows(result, call, root, max(10, 3 * runs))
        ctx.step("bash")
    result.peers = {p: "n/a: no file tools" for p in (MONTY, SMOLAGENTS)}
    result.peers[FLOOR] = "n/a: direct rg is the reference here"
    result.peers[RG] = "ok" if rg is not None else "missing: the ripgrep wheel's rg was not found"
    result.peers[BASH] = "ok"
    ctx.step("done")
    cross_ratios(result.rows)
    return result


async def _bash_rows(result: SuiteResult, call: Any, root: Path, runs: int) -> None:
    """``bash true`` through the tool against ``bash -c true`` spawned by this process."""
    arguments = {"command": "true", "description": "bench"}
    await call("bash", arguments)  # warm-up: the first call starts the spare launchers
    await anyio.sleep(_BASH_PAUSE_S * 4)
    env = dict(os.environ)
    direct = []
    for _ in range(runs):
        clock = timed()
        await anyio.run_process(["bash", "-c", "true"], cwd=root, env=env, check=False)
        direct.append(clock())
        await anyio.sleep(_BASH_PAUSE_S)
    floor = summarize(BASH_CASE, BASH, direct, note="anyio.run_process, the host's own spawn")
    result.rows.append(floor)
    samples = []
    for _ in range(runs):
        clock = timed()
        await call("bash", arguments)
        samples.append(clock())
        await anyio.sleep(_BASH_PAUSE_S)
    result.rows.append(
        summarize(BASH_CASE, TOOL, samples, ideal=floor.median, note="ideal = bash -c direct")
    )
