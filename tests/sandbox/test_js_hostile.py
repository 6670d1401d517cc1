"""Hostile JavaScript through the real ``TypeScriptRuntime``: every program is contained
with a clear error (or runs harmlessly), and the runtime stays healthy for the next run.

Covers prototype pollution through arguments and results, getter and proxy bombs,
microtask storms, ``Atomics.wait``, huge buffers, deep recursion, output and call
floods, infinite loops in ``catch``/``finally``, tampering with the prelude's globals,
and reaching for host internals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from sandbox_helpers import DEFAULT_TOOLS, Run, err, make_runner, ok

from codemode.sandbox import Limits, TypeScriptRuntime

pytestmark = pytest.mark.anyio

LIMITS = Limits(
    max_compute_ms=1_000,
    max_wall_ms=3_000,
    max_memory_bytes=192 * 2**20,
    max_output_bytes=10_000,
    max_sub_calls=50,
)
COMPUTE = "compute budget exhausted (1000ms busy)"
MEMORY = "memory limit exceeded (201326592 bytes)"
OUTPUT = "outer output exceeded 10000 bytes"

received: list[Any] = []


async def record(args: Any) -> Any:
    received.append(args)
    return args


@pytest.fixture(scope="module")
async def ts() -> AsyncIterator[TypeScriptRuntime]:
    async with TypeScriptRuntime(LIMITS) as runtime:
        yield runtime


@pytest.fixture
async def run(ts: TypeScriptRuntime) -> AsyncIterator[Run]:
    """A runner whose test ends by proving the runtime still serves a clean run."""
    runner = make_runner(ts)
    received.clear()

    async def run(program: str, **kwargs: Any) -> Any:
        tools = {**DEFAULT_TOOLS, "record": record}
        return await runner(program, tools=kwargs.pop("tools", tools), **kwargs)

    yield run
    clean = "return [({} as any).polluted ?? null, typeof Object.prototype.toJSON, 'healthy']"
    assert ok(await runner(clean)) == [None, "undefined", "healthy"]
    assert ts.processes().worker_pids == ()


# -- prototype pollution through arguments and results ------------------------------------


async def test_proto_keys_cross_as_plain_data_both_ways(run: Run) -> None:
    program = """
    const evil = JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"p": 1}}}')
    const r = await tools.record(evil)
    return [Object.keys(r), ({} as any).polluted ?? null, ({} as any).p ?? null,
            Object.getPrototypeOf(r) === Object.prototype, r.__proto__]
    """
    value = ok(await run(program))
    assert value == [["__proto__", "constructor"], None, None, True, {"polluted": True}]
    assert received == [{"__proto__": {"polluted": True}, "constructor": {"prototype": {"p": 1}}}]


async def test_polluted_prototypes_do_not_leak_into_arguments_or_values(run: Run) -> None:
    program = """
    Object.prototype.injected = 'x'
    Array.prototype.extra = 1
    Object.defineProperty(Object.prototype, 'trap', {
      set(v) { throw new Error('setter ran') }, get() { return 'inherited' }, enumerable: true,
    })
    ;(Object.prototype as any).toJSON = () => 'hijacked'
    const r = await tools.record({a: [1, {b: 2}]})
    return {r, n: [1, 2]}
    """
    assert ok(await run(program)) == {"r": {"a": [1, {"b": 2}]}, "n": [1, 2]}
    assert received == [{"a": [1, {"b": 2}]}]


# -- getter and proxy bombs --------------------------------------------------------------


async def test_spinning_getter_in_arguments_is_a_compute_timeout(run: Run) -> None:
    result = await run("await tools.record({get x() { while (true) {} }})")
    assert err(result, "timeout") == COMPUTE
    assert received == []


async def test_throwing_getter_in_arguments_fails_only_the_call(run: Run) -> None:
    program = "try { await tools.record({get x() { throw new Error('g') }}) } catch (e) { return String(e) }"
    assert ok(await run(program)) == "Error: g"
    assert received == []


async def test_throwing_getter_in_the_completion_is_invalid_output(run: Run) -> None:
    result = await run("return {get x() { throw new Error('g') }}")
    assert err(result, "invalid-output") == "program completion must be lossless JSON"


async def test_getter_allocating_a_huge_string_is_memory(run: Run) -> None:
    result = await run("await tools.record({get x() { return 'x'.repeat(2 ** 27) }})")
    assert err(result, "memory") == MEMORY


async def test_proxy_traps_cannot_hang_the_host(run: Run) -> None:
    result = await run("await tools.record(new Proxy({}, {ownKeys() { for (;;) {} }}))")
    assert err(result, "timeout") == COMPUTE


# -- microtask storms, timers, Atomics ---------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "function f() { Promise.resolve().then(f) } f(); await new Promise(() => {})",
        "for (;;) await null",
        "const p = tools.slow({}); for (;;) await Promise.all([null, null])",
    ],
    ids=["then-chain", "await-null", "with-pending-call"],
)
async def test_microtask_storm_is_a_compute_timeout(run: Run, program: str) -> None:
    assert err(await run(program), "timeout") == COMPUTE


async def test_atomics_wait_cannot_block(run: Run) -> None:
    program = "const i = new Int32Array(new SharedArrayBuffer(4))\nreturn Atomics.wait(i, 0, 0)"
    assert err(await run(program)) == "TypeError: cannot block in this thread\n    at <program>:2"


async def test_interval_storm_ends_at_the_wall_clock(run: Run) -> None:
    result = await run("setInterval(() => {}, 0); await new Promise(() => {})")
    assert err(result, "timeout") == "wall-clock ceiling reached (3000ms)"


# -- huge buffers and memory -------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "return new Uint8Array(150 * 2 ** 20).length",
        "try { new Uint8Array(150 * 2 ** 20) } catch { return 'survived' }",
        "try { 'x'.repeat(2 ** 27) } catch (e) { return String(e) } finally { return 'finally' }",
        "const a = []; try { for (;;) a.push(new ArrayBuffer(2 ** 20)) } catch (e) { a.length = 0 }",
        "new Promise((_, reject) => reject(null)).catch(() => 'swallowed'); await null",
    ],
    ids=["typed-array", "caught", "finally", "arraybuffers-caught", "rejected-null"],
)
async def test_huge_allocations_are_terminal_memory_failures(run: Run, program: str) -> None:
    assert err(await run(program), "memory") == MEMORY


async def test_buffer_past_the_engine_length_limit_is_a_plain_exception(run: Run) -> None:
    result = await run("const b = new ArrayBuffer(2 ** 31)")
    assert err(result) == "RangeError: invalid array buffer length\n    at <program>:1"


# -- deep recursion and deep data --------------------------------------------------------


_RECURSION = "RangeError: Maximum call stack size exceeded (recursion too deep)"


async def test_deep_recursion_is_terminal(run: Run) -> None:
    program = "function f(n: number): number { return f(n + 1) + 1 }\nreturn f(0)"
    assert err(await run(program), "recursion") == _RECURSION


async def test_recursion_retried_in_catch_ends_at_once(run: Run) -> None:
    program = "function f(): number { return f() }\nfor (;;) { try { f() } catch {} }"
    with anyio.fail_after(5):  # not at the 10 s compute budget
        assert err(await run(program), "recursion") == _RECURSION


async def test_deep_data_crosses_without_recursion(run: Run) -> None:
    program = """
    let v: unknown = 'leaf'
    for (let i = 0; i < 20000; i++) v = [v]
    try { await tools.record({v}) } catch (e) { return String(e) }
    """
    # The host reads any depth without recursion and refuses past Limits.max_nesting_depth
    # (10,000) before a binding sees it.
    assert ok(await run(program)) == "ToolCallError: arguments nest deeper than 10,000 levels"
    assert received == []


async def test_deep_completion_past_the_ledger(run: Run) -> None:
    # 30,000 levels: three times the nesting cap and 60 KB of JSON against a 10 KB ledger,
    # built and measured in ~0.2 s (100,000 took 0.5-0.7 s of the 1 s compute budget).
    program = "let v: unknown = 0\nfor (let i = 0; i < 30000; i++) v = [v]\nreturn v"
    assert err(await run(program), "output-limit") == OUTPUT


# -- floods ------------------------------------------------------------------------------


async def test_log_flood(run: Run) -> None:
    result = await run("for (;;) console.log('x'.repeat(1000))")
    assert err(result, "output-limit") == OUTPUT
    assert result.logs[:9] == ["x" * 1000] * 9 and len(result.logs) == 10


async def test_log_flood_swallowing_its_errors_is_still_an_output_limit(run: Run) -> None:
    result = await run("for (;;) { try { console.log('flood') } catch {} }")
    assert err(result, "output-limit") == OUTPUT


async def test_one_huge_entry(run: Run) -> None:
    result = await run("console.log('x'.repeat(5e7))")
    assert err(result, "output-limit") == OUTPUT
    assert result.logs == ["x" * 9996]


async def test_call_flood_hits_the_sub_call_limit(run: Run) -> None:
    result = await run("for (let i = 0; i < 10000; i++) tools.record({i}); await tools.slow({})")
    assert err(result, "sub-call-limit") == "sub-call limit reached (50 calls per run)"


# -- infinite loops in catch and finally -------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "for (;;) { try { throw new Error('x') } catch {} }",
        "try { for (;;) {} } catch { for (;;) {} } finally { for (;;) {} }",
        "for (;;) { try { null.x } catch (e) { continue } finally { continue } }",
        "async function f() { for (;;) {} }\nf().catch(() => { for (;;) {} }); await null",
    ],
    ids=["throw-catch", "nested", "continue-in-finally", "rejection-handler"],
)
async def test_loops_in_handlers_end_at_the_budget(run: Run, program: str) -> None:
    assert err(await run(program), "timeout") == COMPUTE


# -- tampering with the prelude's globals, reaching for the host ----------------------------


async def test_tampered_builtins_break_only_the_program(run: Run) -> None:
    program = """
    JSON.parse = JSON.stringify = () => 'hacked'
    Reflect.ownKeys = () => []; Object.keys = () => []
    Object.getPrototypeOf = () => null; Array.isArray = () => false
    ;(Array.prototype as any).push = (Array.prototype as any).join = null
    ;(globalThis as any).String = null; (globalThis as any).Map = null
    const r = await tools.record({a: [1, 'two']})
    console.log('got', r)
    return {r}
    """
    result = await run(program)
    assert ok(result) == {"r": {"a": [1, "two"]}}
    assert result.logs == ["got { a: [ 1, 'two' ] }"]
    assert received == [{"a": [1, "two"]}]


async def test_stack_hooks_are_locked(run: Run) -> None:
    program = "Error.prepareStackTrace = () => 'forged'\nError.stackTraceLimit = 0\nthrow new Error('still')"
    assert err(await run(program)) == "Error: still\n    at <program>:3"


async def test_replacing_console_affects_only_the_program(run: Run) -> None:
    program = """
    ;(globalThis as any).console = null
    try { await tools.fail({message: 'real', code: 'E'}) } catch (e) { return e.code }
    """
    assert ok(await run(program)) == "E"


@pytest.mark.parametrize(
    ("statement", "denied"),
    [
        ("(tools as any).record = async () => 'fake'", "set tools.record"),
        ("(tools as any).brand_new = 1", "set tools.brand_new"),
        ("delete (tools as any).echo", "delete tools.echo"),
        ("Object.defineProperty(tools, 'echo', {value: 1})", "define tools.echo"),
        ("Object.setPrototypeOf(tools, {})", "set the prototype of tools"),
    ],
)
async def test_writing_tools_is_forbidden_even_when_caught(
    run: Run, statement: str, denied: str
) -> None:
    # A program that could replace a tool could fake what the tool said.
    program = f"console.log('before')\ntry {{ {statement} }} catch {{}}\nreturn 'carried on'"
    result = await run(program)
    assert err(result, "forbidden") == f"tools is read-only: cannot {denied}"
    assert result.logs == ["before"]
    assert received == []


async def test_an_unknown_tool_names_the_available_ones(run: Run) -> None:
    result = await run("await tools.fetch_url({url: 'x'})")
    assert err(result) == (
        "TypeError: unknown tool tools.fetch_url; available: "
        "buggy, delayed, echo, fail, my-tool, record, slow\n    at <program>:1"
    )


async def test_tools_stays_usable_and_non_extensible(run: Run) -> None:
    program = """
    return [await tools["my-tool"]({n: 1}), Object.isExtensible(tools), Object.isFrozen(tools),
            typeof (tools as any).then, 'echo' in tools, 'nope' in tools, Object.keys(tools).length]
    """
    assert ok(await run(program)) == [{"n": 1}, False, True, "undefined", True, False, 7]


async def test_host_internals_are_out_of_reach(run: Run) -> None:
    program = """
    return [typeof host, typeof setup, typeof require, typeof process, typeof std,
            typeof os, new Function('return typeof this.console')()]
    """
    assert ok(await run(program)) == ["undefined"] * 7


async def test_module_loading_is_refused(run: Run) -> None:
    assert err(await run("await import('std')")) == "ReferenceError: could not load module 'std'"
