"""Host load benchmark: what hostile program data costs the *host* process.

Each case runs one program through the engine's ``run_code`` (``PythonRuntime`` or
``TypeScriptRuntime``, default ``Limits()``, a ``MemorySessionLog``) in a fresh child
process, and reports:

- **max loop lag**: the largest delay of a 10 ms heartbeat task on the host's event loop
  while the program ran (target <= 100 ms);
- **peak RSS**: the host's peak resident set above its baseline, taken after start-up and
  a warm-up run (``/proc/self/clear_refs`` resets the peak there; target <= 1.5 GiB);
- **kept RSS**: resident set above the baseline after the run, with the result dropped
  (what the session and the runtime retain).

Cases: a value at the nesting cap (10,000 levels) sent to a tool and echoed back; one
past the cap (refused while decoded); a 10 MB wide object; 9,000 tiny sequential calls;
a call storm until the sub-call limit; 100,000 unawaited calls; 2,000 calls x 1 MB of
arguments (argument budget raised to let them all through).

Usage: ``python benchmarks/bench_host_load.py [--lang python|typescript|both] [--case NAME]
[--check]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import anyio

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime

LAG_TARGET_MS = 100.0
RSS_TARGET = 1.5 * 2**30
MiB = 2**20

PY_DEEP = "def deep(n):\n    v = 'leaf'\n    for _ in range(n):\n        v = [v]\n    return v\n"
TS_DEEP = "function deep(n) { let v = 'leaf'; for (let i = 0; i < n; i++) v = [v]; return v }\n"

# name -> (python program, typescript program, Limits overrides)
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


def _tools() -> list[Any]:
    async def echo(args: Any, ctx: Any) -> Any:
        return args

    async def sink(args: Any, ctx: Any) -> Any:
        return len(args)

    common: dict[str, Any] = {"is_concurrency_safe": lambda args: True}
    return [
        define_tool(
            name="echo",
            description="Return the arguments.",
            parameters={},
            output=ToolOutput(
                schema={"type": "object", "additionalProperties": True},
                render=lambda a, v: [text("echoed")],
            ),
            execute=echo,
            **common,
        ),
        define_tool(
            name="sink",
            description="Count the arguments' keys.",
            parameters={},
            output=ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text(str(v))]),
            execute=sink,
            **common,
        ),
    ]


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets VmHWM to the current RSS
    except OSError:
        return False
    return True


async def _child(name: str, lang: str) -> dict[str, Any]:
    py_program, ts_program, overrides = CASES[name]
    program = py_program if lang == "python" else ts_program
    cls = PythonRuntime if lang == "python" else TypeScriptRuntime
    async with cls(Limits(pool_size=1, **overrides)) as sandbox:
        rt = ToolRuntime(mode="code", code_runtime=sandbox)
        for tool in _tools():
            rt.register(tool)
        agent = rt.scope("bench", session=MemorySessionLog())

        async def run(code: str) -> Any:
            return await rt.execute(
                ToolExecutionInput(
                    call_id=f"call-{time.monotonic_ns()}",
                    name="run_code",
                    arguments={"code": code, "description": "bench"},
                    signal=AbortController().signal,
                    agent=agent,
                )
            )

        await run("return 1")  # warm-up: imports, worker, caches
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
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            result = await run(program)
            done.set()
        elapsed = time.perf_counter() - started
        outcome = result.content[0]["text"].splitlines()[0][:70] if result.content else ""
        del result
        peak = _status("VmHWM")
        kept = _status("VmRSS")
    return {
        "lag_ms": lag * 1e3,
        "peak": peak - baseline,
        "kept": kept - baseline,
        "exact_peak": exact_peak,
        "seconds": elapsed,
        "outcome": outcome,
    }


def _measure(name: str, lang: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, "--lang", lang],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"case {name!r} ({lang}) failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(langs: list[str], names: list[str]) -> bool:
    print(f"Host load benchmark ({os.cpu_count()} CPUs): default Limits(), one child per case")
    header = (
        f"{'case':<28} {'lang':<10} {'max lag':>9} {'peak RSS':>10} {'kept RSS':>10} {'time':>8}"
    )
    print(header + "  outcome")
    print("-" * (len(header) + 30))
    all_ok = True
    for name in names:
        for lang in langs:
            m = _measure(name, lang)
            ok = m["lag_ms"] <= LAG_TARGET_MS and m["peak"] <= RSS_TARGET
            all_ok &= ok
            peak = f"{m['peak'] / MiB:.0f} MiB" + ("" if m["exact_peak"] else "*")
            print(
                f"{name:<28} {lang:<10} {m['lag_ms']:>6.1f} ms {peak:>10} "
                f"{m['kept'] / MiB:>6.0f} MiB {m['seconds']:>6.2f} s  "
                f"{'met' if ok else 'MISSED'}: {m['outcome']}"
            )
    print(
        f"targets: max lag <= {LAG_TARGET_MS:.0f} ms, peak RSS <= {RSS_TARGET / 2**30:.1f} GiB "
        "above baseline (* = peak since start-up: clear_refs unavailable)"
    )
    return all_ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=["python", "typescript", "both"], default="python")
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(anyio.run(_child, args.child, args.lang)))
        sys.exit(0)
    langs = ["python", "typescript"] if args.lang == "both" else [args.lang]
    passed = main(langs, args.case or list(CASES))
    sys.exit(0 if passed or not args.check else 1)
