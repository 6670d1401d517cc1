"""TypeScript guest micro-benchmarks: type stripping speed and QuickJS guest latency.

1. **Strip speed**: ``strip_types`` over the realistic corpus (``tests/sandbox/ts_corpus``)
   and over a type-dense synthetic program, best of N, in ms per KB. Target: <= 1 ms/KB.
2. **Guest start**: ``JsGuest()`` (context + prelude, which a worker can do before the
   run arrives) and ``start("return 1")``, separately and together. p50/p95.
3. **Sub-call round trip**: one program making N sequential ``await tools.echo({i})``
   calls, answered in-process (no bridge): the guest's own per-call cost.

Usage: ``python benchmarks/bench_ts_strip.py [--runs N] [--calls N] [--check]``.
``--check`` exits 1 when the strip target is missed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from codemode.sandbox.typescript._guest import GuestDone, GuestRunning, JsBinding, JsGuest
from codemode.sandbox.typescript._strip import strip_types

STRIP_TARGET_MS_PER_KB = 1.0
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "sandbox" / "ts_corpus"
DENSE = """
interface User { id: number; name: string; tags?: string[] }
type Result<T> = { ok: true; value: T } | { ok: false; error: string };
async function load<T extends object>(path: string, opts?: { limit: number }): Promise<Result<T>> {
  const res = (await tools.read({ path, limit: opts?.limit ?? 10 })) as { text: string };
  return { ok: true, value: JSON.parse(res.text)! as T };
}
class Cache<K, V> implements Iterable<[K, V]> {
  private readonly map = new Map<K, V>();
  get(key: K): V | undefined { return this.map.get(key)!; }
  *[Symbol.iterator](): Iterator<[K, V]> { yield* this.map; }
}
const users: User[] = [];
for (const u of users as User[]) console.log(u.name satisfies string);
"""
BINDINGS = [JsBinding("tools", ("echo", "read", "write", "grep", "glob", "bash"))]


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def best_ms_per_kb(source: str, runs: int) -> float:
    strip_types(source)
    best = min(_timed(lambda: strip_types(source)) for _ in range(runs))
    return best * 1000 / (len(source.encode()) / 1024)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_strip(runs: int) -> float:
    corpus = "\n".join(p.read_text() for p in sorted(CORPUS.glob("*.ts")))
    dense = DENSE * 12
    corpus_rate = best_ms_per_kb(corpus, runs)
    print(f"strip_types (best of {runs}):")
    print(f"  corpus   {len(corpus.encode()) / 1024:6.1f} KB  {corpus_rate:.3f} ms/KB")
    print(
        f"  dense    {len(dense.encode()) / 1024:6.1f} KB  {best_ms_per_kb(dense, runs):.3f} ms/KB"
    )
    return corpus_rate


def bench_start(runs: int) -> None:
    make, start, total = [], [], []
    for i in range(runs + 5):
        t0 = time.perf_counter()
        guest = JsGuest()
        t1 = time.perf_counter()
        guest.start("return 1", BINDINGS)
        t2 = time.perf_counter()
        assert guest.state == GuestDone("1"), guest.state
        guest.close()
        if i >= 5:  # warm-up
            make.append(t1 - t0)
            start.append(t2 - t1)
            total.append(t2 - t0)
    print(f"JsGuest start of `return 1` ({runs} runs):")
    for name, samples in (("JsGuest()", make), ("start()", start), ("total", total)):
        print(
            f"  {name:10} p50 {pct(samples, 0.5) * 1000:6.3f} ms  p95 {pct(samples, 0.95) * 1000:6.3f} ms"
        )


def bench_round_trip(calls: int) -> None:
    program = f"for (let i = 0; i < {calls}; i++) await tools.echo({{i}}); return 'ok'"
    guest = JsGuest()
    t0 = time.perf_counter()
    guest.start(program, BINDINGS)
    while isinstance(guest.state, GuestRunning):
        for call in guest.pending_calls():
            guest.resolve(call.id, call.args_json)
    elapsed = time.perf_counter() - t0
    assert guest.state == GuestDone('"ok"'), guest.state
    print(f"sub-call round trip in-process ({calls} sequential calls):")
    print(f"  {elapsed / calls * 1e6:.1f} us per call, busy {guest.busy_seconds * 1000:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    rate = bench_strip(max(5, args.runs // 10))
    bench_start(args.runs)
    bench_round_trip(args.calls)
    if args.check and rate > STRIP_TARGET_MS_PER_KB:
        print(f"strip target missed: {rate:.3f} ms/KB > {STRIP_TARGET_MS_PER_KB} ms/KB")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
