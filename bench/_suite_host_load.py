"""``host-load``: what hostile program data costs the *host* process. Each case runs one
program through ``run_code`` (default ``Limits()``, a memory session) in a fresh child
process and reports the largest delay of a 10 ms heartbeat on the host's event loop
(target <= 50 ms), the peak RSS above the baseline taken after a warm-up run and the RSS
kept after the run. The RSS target is per case: the output cap + 16 MiB for an output
flood, twice the argument's bytes for one huge argument, 1.5 GiB otherwise (issue 25).

``codemode bench --hog N`` runs every case beside N busy processes (one per core
saturates the machine): the lag target must hold while the cores are taken."""

from __future__ import annotations

import time
from typing import Any

import anyio

from ._common import BenchContext, CodeMode, cpu_hog, run_child, tool
from ._model import FLOOR, MONTY, SMOLAGENTS, Row, SuiteResult, Target

DESCRIPTION = "host loop lag and RSS under hostile program data (fresh process per case)"
LAG_TARGET_MS = 50.0
RSS_TARGET_MIB = 1.5 * 1024
MiB = 2**20

MB = 10**6
OUTPUT_CAP = 64 * MiB  # Limits().max_output_bytes
BIG_ARG = 50 * MB
BUSY_S = 1.5  # how long the hostile conversion hook spins

PY_DEEP = "def deep(n):\n    v = 'leaf'\n    for _ in range(n):\n        v = [v]\n    return v\n"
TS_DEEP = "function deep(n) { let v = 'leaf'; for (let i = 0; i < n; i++) v = [v]; return v }\n"

#: name -> (python program, typescript program, Limits overrides)
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "depth cap (10,000) echoed": (
        PY_DEEP + "r = await tools.echo({'v': deep(9999)})\nreturn len(r['v'])",
        TS_DEEP + "const r = await tools.echo({v: deep(9999)})\nreturn r.v.length",
        {},
    ),
    "past the cap (200,000)": (
        PY_DEEP + "try:\n    await tools.sink({'v': deep(200000)})\n"
        "except ToolCallError as e:\n    return e.code",
        TS_DEEP + "try { await tools.sink({v: deep(200000)}) } catch (e) { return e.code }",
        {},
    ),
    "10 MB wide object": (
        "return await tools.sink({f'k{i}': 'x' * 8 for i in range(500000)})",
        "const o = {}\nfor (let i = 0; i < 500000; i++) o['k' + i] = 'x'.repeat(8)\n"
        "return await tools.sink(o)",
        {},
    ),
    "9,000 tiny calls": (
        "for i in range(9000):\n    await tools.sink({'i': i})\nreturn 9000",
        "for (let i = 0; i < 9000; i++) await tools.sink({i})\nreturn 9000",
        {},
    ),
    "call storm to the limit": (
        "import asyncio\nawait asyncio.gather(*[tools.sink({'i': i}) for i in range(20000)])",
        "await Promise.all(Array.from({length: 20000}, (_, i) => tools.sink({i})))",
        {},
    ),
    "100,000 unawaited calls": (
        "pending = [tools.sink({'i': i}) for i in range(100000)]\nreturn len(pending)",
        "const pending = []\nfor (let i = 0; i < 100000; i++) pending.push(tools.sink({i}))\n"
        "return pending.length",
        {},
    ),
    "2,000 calls x 1 MB args": (
        "for i in range(2000):\n    await tools.sink({'blob': str(i).rjust(1000000, 'x')})\n"
        "return 2000",
        "for (let i = 0; i < 2000; i++)\n"
        "  await tools.sink({blob: String(i).padStart(1000000, 'x')})\n"
        "return 2000",
        {"max_call_bytes": 4 * 2**30},
    ),
}
CASES.update(
    {
        "output flood to the cap": (
            "while True:\n    print('A' * 10000)",
            "while (true) console.log('A'.repeat(10000))",
            {},
        ),
        "one 50 MB argument": (
            f"return await tools.sink({{'blob': 'x' * {BIG_ARG}}})",
            f"return await tools.sink({{blob: 'x'.repeat({BIG_ARG})}})",
            {},
        ),
        "busy conversion hook": (
            # items() of a dict subclass runs in the guest while it encodes the call.
            "import time\nclass D(dict):\n    def items(self):\n"
            f"        end = time.monotonic() + {BUSY_S}\n"
            "        while time.monotonic() < end:\n            pass\n"
            "        return super().items()\n"
            "return await tools.sink(D(a=1))",
            # A getter runs while the call is encoded (a toJSON method is refused uncalled).
            f"const arg = {{get a() {{ const end = Date.now() + {BUSY_S * 1000:.0f}\n"
            "  while (Date.now() < end) {}\n  return 1 }}\n"
            "return await tools.sink(arg)",
            {},
        ),
    }
)
#: case -> its peak-RSS target in MiB (the rest: ``RSS_TARGET_MIB``).
RSS_TARGETS_MIB: dict[str, float] = {
    "output flood to the cap": OUTPUT_CAP / MiB + 16,
    "one 50 MB argument": 2 * BIG_ARG / MiB,
}
QUICK_CASES = (
    "depth cap (10,000) echoed",
    "10 MB wide object",
    "call storm to the limit",
    "output flood to the cap",
    "one 50 MB argument",
    "busy conversion hook",
)


async def _echo(args: Any) -> Any:
    return args


async def _sink(args: Any) -> Any:
    return len(args)


def _status(field: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as handle:
            handle.write("5")  # resets VmHWM to the current RSS
    except OSError:
        return False
    return True


async def child(name: str, lang: str) -> dict[str, Any]:
    """One case in this (fresh) process: lag, peak and kept RSS."""
    from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

    py_program, ts_program, overrides = CASES[name]
    program = py_program if lang == "python" else ts_program
    cls = PythonRuntime if lang == "python" else TypeScriptRuntime
    async with cls(Limits(pool_size=1, **overrides)) as sandbox:
        mode = CodeMode(sandbox, [tool("echo", _echo), tool("sink", _sink)], cap=10)
        await mode.run("return 1")  # warm-up: imports, worker, caches
        baseline = _status("VmRSS")
        exact_peak = _reset_peak()
        lag = 0.0
        done = anyio.Event()

        async def heartbeat() -> None:
            nonlocal lag
            while not done.is_set():
                start = time.perf_counter()
                await anyio.sleep(0.010)
                lag = max(lag, time.perf_counter() - start - 0.010)

        started = time.perf_counter()
        outcome = ""
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            try:
                value = await mode.run(program)
                outcome = repr(value)[:60]
            except RuntimeError as exc:  # a refused program is an outcome, not a crash
                outcome = str(exc)[:60]
            done.set()
        elapsed = time.perf_counter() - started
        peak = _status("VmHWM")
        kept = _status("VmRSS")
    return {
        "lag_ms": lag * 1e3,
        "peak_mib": (peak - baseline) / MiB,
        "kept_mib": (kept - baseline) / MiB,
        "exact_peak": exact_peak,
        "seconds": elapsed,
        "outcome": outcome,
    }


async def run(ctx: BenchContext) -> SuiteResult:
    """Measure the suite."""
    names = list(QUICK_CASES) if ctx.quick else list(CASES)
    langs = ["python", "typescript"]
    result = SuiteResult(
        description=DESCRIPTION,
        params={
            "cases": names,
            "languages": langs,
            "lag_target_ms": LAG_TARGET_MS,
            "rss_target_mib": RSS_TARGET_MIB,
            "rss_targets_mib": RSS_TARGETS_MIB,
            "hog_processes": ctx.hog,
        },
    )
    ctx.plan(len(names) * len(langs))
    extra: list[Target] = []
    with cpu_hog(ctx.hog):
        await _measure(ctx, names, langs, result, extra)
    result.targets.extend(extra)
    result.peers = {p: "n/a: measures the codemode host only" for p in (MONTY, SMOLAGENTS, FLOOR)}
    return result


async def _measure(
    ctx: BenchContext, names: list[str], langs: list[str], result: SuiteResult, extra: list[Target]
) -> None:
    for name in names:
        for lang in langs:
            m = await anyio.to_thread.run_sync(run_child, "host-load", name, lang)
            subject = f"codemode-{lang}"
            note = f"peak {m['peak_mib']:.0f} MiB{'' if m['exact_peak'] else ' (since start-up)'}, kept {m['kept_mib']:.0f} MiB, run {m['seconds']:.2f} s: {m['outcome']}"
            lag = round(m["lag_ms"], 3)
            peak = round(m["peak_mib"], 1)
            result.rows.append(
                Row(
                    case=f"{name}: max loop lag",
                    subject=subject,
                    n=1,
                    median=lag,
                    p95=lag,
                    p99=lag,
                    note=note,
                )
            )
            result.rows.append(
                Row(
                    case=f"{name}: peak RSS",
                    subject=subject,
                    n=1,
                    median=peak,
                    p95=peak,
                    p99=peak,
                    unit="MiB",
                )
            )
            extra.append(
                Target(
                    name=f"{name}: max loop lag",
                    subject=subject,
                    target=LAG_TARGET_MS,
                    unit="ms",
                    measured=lag,
                    met=lag <= LAG_TARGET_MS,
                )
            )
            rss_target = RSS_TARGETS_MIB.get(name, RSS_TARGET_MIB)
            extra.append(
                Target(
                    name=f"{name}: peak RSS above baseline",
                    subject=subject,
                    target=round(rss_target, 1),
                    unit="MiB",
                    measured=round(m["peak_mib"], 1),
                    met=m["peak_mib"] <= rss_target,
                )
            )
            ctx.step(f"{name} {lang}")
