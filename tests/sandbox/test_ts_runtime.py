"""What is specific to ``TypeScriptRuntime``: host-side type stripping, the prepared
context, JSON edge cases of the QuickJS bridge, frame caps, disposal and clean shutdown.
The behaviours shared with Python are in ``test_parity.py``."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator

import anyio
import pytest
from sandbox_helpers import Run, bindings, err, make_runner, ok, threads_started_since

from codemode.engine import AbortController, Binding, BindingCallError, CodeRunRequest, ErrorClass
from codemode.sandbox import Limits, TypeScriptRuntime

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def ts() -> AsyncIterator[TypeScriptRuntime]:
    async with TypeScriptRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as runtime:
        yield runtime


@pytest.fixture
def run(ts: TypeScriptRuntime) -> Run:
    return make_runner(ts)


# -- type stripping happens in the host ---------------------------------------------------


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (
            "namespace N { export const x = 1 }\nreturn N.x",
            "namespace is not supported (line 1): TypeScript namespaces with values are not "
            "erasable — use a plain object",
        ),
        ("const x = ;", 'SyntaxError: unexpected "=" (line 1, column 9)'),
    ],
)
async def test_strip_errors_use_no_worker(
    ts: TypeScriptRuntime, program: str, message: str
) -> None:
    runs, checkouts = ts.stats.runs, ts.stats.pool.warm_checkouts + ts.stats.pool.cold_checkouts
    result = await make_runner(ts)(program)
    assert err(result, "syntax") == message
    assert result.logs == []
    assert ts.stats.runs == runs
    assert ts.stats.pool.warm_checkouts + ts.stats.pool.cold_checkouts == checkouts


async def test_types_are_erased_and_lines_kept(run: Run) -> None:
    program = (
        "interface Point {\n  x: number\n  y: number\n}\n"
        "type Pair = [Point, Point]\n"
        "function mid(p: Pair): Point {\n"
        "  return { x: (p[0].x + p[1].x) / 2, y: (p[0].y + p[1].y) / 2 }\n"
        "}\n"
        "const m = mid([{ x: 0, y: 0 }, { x: 2, y: 4 }] as Pair)!\n"
        "console.log(m satisfies Point)\n"
        "if (m.x > 0) throw new RangeError(`x=${m.x}`)\n"
    )
    result = await run(program)
    assert err(result) == "RangeError: x=1\n    at <program>:11"
    assert result.logs == ["{ x: 1, y: 2 }"]


async def test_recurring_programs_are_stripped_once_and_errors_every_time(
    ts: TypeScriptRuntime,
) -> None:
    from codemode.sandbox import _ts_runtime

    program = "const n: number = 41\nreturn n + 1"
    for _ in range(3):
        assert ok(await make_runner(ts)(program)) == 42
    assert ts._stripped[program] == "const n         = 41\nreturn n + 1"
    for _ in range(2):  # an error is not kept: it is raised again, with its message
        assert err(await make_runner(ts)("const x = ;"), "syntax").startswith("SyntaxError")
    assert "const x = ;" not in ts._stripped
    for i in range(_ts_runtime._STRIPPED_ENTRIES + 5):
        ts._strip(f"return {i} as number")
    assert len(ts._stripped) == _ts_runtime._STRIPPED_ENTRIES
    assert program not in ts._stripped  # least recently used first out
    big = "let s: string = '" + "a" * _ts_runtime._STRIPPED_MAX_CHARS + "'\nreturn s.length"
    ts._strip(big)
    assert big not in ts._stripped


async def test_language_and_isolation(ts: TypeScriptRuntime) -> None:
    assert (ts.language, ts.isolation) == ("typescript", "process")


# -- JSON at the bridge ------------------------------------------------------------------


async def test_lone_surrogates(run: Run) -> None:
    program = "try { await tools.echo({s: '\\ud800'}) } catch (e) { return [e.name, e.message] }"
    assert ok(await run(program)) == ["ToolCallError", "binding arguments must be lossless JSON"]
    result = await run("console.log('a\\ud800b'); return 'c\\udc00'")
    assert err(result, "invalid-output") == "program completion must be lossless JSON"
    assert result.logs == ["a\ufffdb"]
    # A pair is one character, not a lone surrogate; an escaped backslash is text.
    program = "return [(await tools.echo({s: '\\ud83d\\ude00'})).s, '\\\\ud800']"
    assert ok(await run(program)) == ["\U0001f600", "\\ud800"]


async def test_control_characters_cross_the_poll_reply_intact(run: Run) -> None:
    # The poll reply carries each call's arguments after a U+0001 separator; JSON text
    # never holds a raw control character, so none in a value can split it.
    seen: list[object] = []

    async def record(args: object) -> object:
        seen.append(args)
        return args

    program = """
    const s = Array.from({length: 32}, (_, i) => String.fromCharCode(i)).join('') + 'end'
    const [a, b] = await Promise.all([tools.record({s}), tools.record({k: [s, '\\u0001']})])
    return [a.s === s, b.k[0] === s, b.k[1]]
    """
    assert ok(await run(program, tools={"record": record})) == [True, True, "\x01"]
    text = "".join(chr(i) for i in range(32)) + "end"
    assert seen == [{"s": text}, {"k": [text, "\x01"]}]


async def test_no_arguments_mean_an_empty_object_and_no_error_code(run: Run) -> None:
    program = """
    const out = []
    out.push(await (tools as any).echo())
    try { await tools.fail({message: 'x'}) } catch (e) { out.push(e.code, Object.keys(e)) }
    return out
    """
    assert ok(await run(program)) == [
        {},
        None,
        ["toolName", "code"],
    ]


async def test_a_program_waiting_on_nothing_ends_like_a_drained_worker(run: Run) -> None:
    result = await run("console.log('waiting'); await new Promise(() => {})")
    assert err(result, "worker-exit") == "worker exited with code 0 before completing"
    assert result.logs == ["waiting"]


async def test_custom_binding_and_error_class(ts: TypeScriptRuntime) -> None:
    async def get(args: object) -> object:
        return {"got": args}

    async def fail(args: object) -> object:
        raise BindingCallError("no row", "E_ROW")

    error_class = ErrorClass(name="DbError", member_name_property="operation")
    request = CodeRunRequest(
        "const r = await db.get({k: 1})\n"
        "try { await db.fail({}) } catch (e) {\n"
        "  return [r, e instanceof DbError, e.name, e.operation, e.message, e.code]\n"
        "}",
        [
            Binding("db", {"get": get, "fail": fail}, error_class),
            Binding("tools", {}, ErrorClass()),
        ],
        AbortController().signal,
    )
    assert ok(await ts.run(request)) == [
        {"got": {"k": 1}},
        True,
        "DbError",
        "fail",
        "no row",
        "E_ROW",
    ]


async def test_binding_names_are_validated(ts: TypeScriptRuntime) -> None:
    with pytest.raises(ValueError, match='binding global "_tools" is not a usable identifier'):
        await ts.run(CodeRunRequest("return 1", [Binding("_tools", {})], AbortController().signal))


# -- caps and the ledger at their boundaries ----------------------------------------------


async def test_exact_ledger() -> None:
    limits = Limits(max_output_bytes=11, pool_size=1)
    async with TypeScriptRuntime(limits) as runtime:
        run = make_runner(runtime)
        result = await run("console.log('abc'); return 'xy'")
        assert result.logs == ["abc"] and ok(result) == "xy"
        result = await run("console.log('abc'); return 'xyz'")
        assert err(result, "output-limit") == "outer output exceeded 11 bytes"
        assert result.logs == ["abc"]
        assert ok(await run("return '€'")) == "€"  # 2 quotes + 3 UTF-8 bytes + 2 for []
        result = await run("return '€€€'")  # 2 + 9 + 2 bytes
        assert err(result, "output-limit") == "outer output exceeded 11 bytes"


async def test_frame_cap_fails_the_call() -> None:
    limits = Limits(max_frame_bytes=65_536, pool_size=1)
    async with TypeScriptRuntime(limits) as runtime:
        run = make_runner(runtime)
        program = "try { await tools.echo({s: 'x'.repeat(70_000)}) } catch (e) { return [e.name, e.message] }"
        assert ok(await run(program)) == [
            "ToolCallError",
            "binding arguments exceed the bridge frame limit (65536 bytes)",
        ]
        result = await run("console.log('y'.repeat(100_000)); return 1")
        assert ok(result) == 1
        assert result.logs == ["y" * (65_536 - 256 - 2)]


# -- lifecycle ---------------------------------------------------------------------------


async def test_disposal_aborts_in_flight_runs() -> None:
    runtime = TypeScriptRuntime(Limits(pool_size=1))
    results = []
    run = make_runner(runtime)

    async def in_flight() -> None:
        results.append(await run("console.log('started'); await tools.slow({})"))

    async with anyio.create_task_group() as tg:
        async with runtime:
            tg.start_soon(in_flight)
            for _ in range(500):
                if runtime.processes().worker_pids:
                    break
                await anyio.sleep(0.01)
            await anyio.sleep(0.1)
    assert err(results[0], "abort") == "runtime disposed"
    assert results[0].logs == ["started"]
    with pytest.raises(RuntimeError, match=r"TypeScriptRuntime.run\(\) after disposal"):
        await runtime.run(CodeRunRequest("return 1", bindings(), AbortController().signal))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(p) for p in handle.read().split()]


async def test_clean_shutdown_leaks_nothing() -> None:
    fds = set(os.listdir("/proc/self/fd"))
    threads = set(threading.enumerate())
    async with TypeScriptRuntime(Limits(pool_size=2, max_compute_ms=300)) as runtime:
        run = make_runner(runtime)
        server = runtime.processes().server_pid
        assert ok(await run("return 1")) == 1
        assert err(await run("while (true) {}"), "timeout")
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(run, "await tools.echo({})")
        await anyio.sleep(0.2)  # let the refill finish: idle workers exist at exit
        workers = children_of(server)
        assert len(workers) >= 2
    assert not alive(server)
    assert not [pid for pid in workers if alive(pid)]
    assert set(os.listdir("/proc/self/fd")) == fds
    assert await threads_started_since(threads) == []


# -- TypeScript as models write it: transformed constructs run as tsc would emit them ------


async def test_parameter_properties_and_enums_run(run: Run) -> None:
    program = """
class Repo {
  constructor(private readonly root: string, public depth: number = 2) {}
  describe(): string { return `${this.root}:${this.depth}` }
}
class Sub extends Repo {
  constructor(root: string, protected tag: string) {
    super(root)
  }
  label() { return `${this.describe()}#${this.tag}` }
}
enum Level { Low = 1, Mid, High = Mid * 2 }
const enum Mode { Read = "r", Write = "w" }
return [new Repo("src").describe(), new Sub("lib", "x").label(), Level.Mid, Level.High,
        Level[2], Mode.Write, Object.keys(Level), Object.keys(new Sub("a", "b"))]
"""
    assert ok(await run(program)) == [
        "src:2",
        "lib:2#x",
        2,
        4,
        "Mid",
        "w",
        ["1", "2", "4", "Low", "Mid", "High"],
        ["root", "depth", "tag"],
    ]


async def test_errors_after_transformed_code_keep_their_line(run: Run) -> None:
    program = (
        "enum E {\n  A,\n  B,\n}\n"
        "class P { constructor(private x: number) {} }\n"
        "new P(1)\n"
        "throw new Error(`at line 7: ${E.B}`)"
    )
    assert err(await run(program)) == "Error: at line 7: 1\n    at <program>:7"
