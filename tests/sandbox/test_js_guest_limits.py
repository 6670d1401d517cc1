"""Limits and hostile programs: every one ends the run for good, none escapes the guest."""

from __future__ import annotations

import json
import time

import pytest
from test_js_guest import TOOLS, drive, state_of

from codemode.sandbox.typescript._catch import guard_catches
from codemode.sandbox.typescript._guest import GuestDone, GuestRunning, JsBinding, JsGuest, JsLimits

FAST = JsLimits(max_compute_ms=300)
SMALL = JsLimits(max_compute_ms=5_000, max_heap_bytes=32 * 2**20)
TIMEOUT = ("timeout", "compute budget exhausted (300ms busy)")
MEMORY = ("memory", f"memory limit exceeded ({32 * 2**20} bytes)")


# -- compute ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "while (true) {}",
        "let n = 0; try { while (true) n++ } catch (e) { return 'caught' } finally { return 'finally' }",
        "while (true) { try { throw new Error('x') } catch {} }",
        "while (true) { try { null.x } catch (e) { e.stack } }",
        "const f = () => { queueMicrotask(f) }; f(); await new Promise(() => {})",
        "const spin = async () => { for (;;) await null }; await spin()",
        "await tools.echo({ get bomb() { for (;;) {} } })",
        "setTimeout(function again() { for (let i = 0; i < 1e6; i++); setTimeout(again, 1) }, 1);"
        " await new Promise(() => {})",
    ],
)
def test_compute_budget_is_terminal(program: str) -> None:
    started = time.process_time()
    outcome = drive(program, limits=FAST)
    assert outcome.error == TIMEOUT
    assert outcome.guest is not None and 0.29 <= outcome.guest.busy_seconds < 0.6
    assert time.process_time() - started < 2.0


@pytest.mark.parametrize(
    "program",
    ["while (true) {}", "const spin = async () => { for (;;) await null }; await spin()"],
)
def test_a_budget_above_the_cheap_clock_margin_stops_at_the_budget_not_before(
    program: str,
) -> None:
    # 1.5 s: more than ``_CHEAP_MARGIN_S`` is left when the slice starts, so the limit
    # handed to QuickJS comes from the wall clock first and from the process clock near
    # the end; either way the run stops at its budget, never well before it.
    outcome = drive(program, limits=JsLimits(max_compute_ms=1_500))
    assert outcome.error == ("timeout", "compute budget exhausted (1500ms busy)")
    assert outcome.guest is not None and 1.45 <= outcome.guest.busy_seconds < 2.0


def test_budget_is_cumulative_across_slices() -> None:
    # Each slice burns at most 100 ms of wall time (so at most 100 ms of CPU, however
    # loaded the machine is), a third of the budget: only the sum across slices can
    # exhaust it, after at least two calls.
    program = """
    const burn = (ms) => { const end = Date.now() + ms; while (Date.now() < end); };
    for (;;) { burn(100); await tools.echo({}); }
    """
    outcome = drive(program, limits=FAST)
    assert outcome.error == TIMEOUT
    assert len(outcome.calls) >= 2


def test_waiting_for_the_host_is_not_busy_time() -> None:
    guest = JsGuest(FAST)
    guest.start("return await tools.echo({})", [TOOLS])
    time.sleep(0.4)  # longer than the whole budget
    (call,) = guest.pending_calls()
    guest.resolve(call.id, "1")
    assert guest.state == GuestDone("1")
    assert guest.busy_seconds < 0.1


# -- memory -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "new Array(1e8).fill(0)",
        "try { new Array(1e8).fill(0) } catch {} return 'recovered'",
        "try { 'x'.repeat(2 ** 29) } catch (e) {} return 'recovered'",
        "try { new ArrayBuffer(2 ** 30) } catch {} return 'recovered'",
        "try { new SharedArrayBuffer(2 ** 30) } catch {} return 'recovered'",
        "const keep = []; try { for (;;) keep.push({ i: keep.length }) } catch (e) { keep.length = 0 }"
        " return 'recovered'",
        "function bomb() { const m = new Map(); for (let i = 0;; i++) m.set(i, { i }) }"
        " try { bomb() } catch { } return 'recovered'",
        "const bomb = async () => { const a = []; for (;;) a.push([a.length]) };"
        " await bomb().catch(() => null); return 'recovered'",
        "const bomb = async () => { const a = []; for (;;) a.push({}) };"
        " await Promise.allSettled([bomb()]); return 'recovered'",
        "const parts = []; try { for (;;) parts.push('p' + parts.length) } catch {}"
        " parts.length = 0; return 'recovered'",
        "const f = () => Promise.resolve().then(f); f(); await new Promise(() => {})",
    ],
)
def test_memory_limit_is_terminal_even_when_caught(program: str) -> None:
    outcome = drive(program, limits=SMALL)
    assert outcome.error == MEMORY


def test_a_replaced_array_buffer_runs_no_code_in_the_heap_probe_and_hides_no_oom() -> None:
    # The probe that tells a heap near its limit allocates an ArrayBuffer after every
    # slice. It uses the constructor captured before the program ran: a replaced global
    # one neither runs (program code inside the guest's own polling, outside the program's
    # compute slices) nor keeps the probe from failing.
    counted = (
        "let n = 0; globalThis.ArrayBuffer = function () { n++; return {} };"
        " await tools.echo({}); await tools.echo({}); return n"
    )
    assert drive(counted).value == 0
    hidden = (
        "globalThis.ArrayBuffer = function () { return {} };"
        " const a = []; try { for (;;) a.push('x'.repeat(1000) + a.length) } catch {}"
        " await tools.echo({}); return 'survived'"
    )
    assert drive(hidden, limits=SMALL).error == MEMORY


def test_guest_is_usable_for_reporting_after_running_out() -> None:
    program = "console.log('before'); const a = []; for (;;) a.push('x'.repeat(1000) + a.length)"
    outcome = drive(program, limits=SMALL)
    assert outcome.error == MEMORY
    assert outcome.logs == ["before"]


@pytest.mark.slow
@pytest.mark.timeout(240)  # sixty memory-filling runs: over a minute on a loaded machine
def test_running_out_is_memory_every_time_not_sometimes_an_internal_error() -> None:
    # Now and then QuickJS runs out while building its own error, and the InternalError it
    # throws has no message; that used to read as a plain exception ("InternalError").
    program = "const a = []; for (;;) a.push('x'.repeat(1000) + a.length)"
    errors = {drive(program, limits=SMALL).error for _ in range(60)}
    assert errors == {MEMORY}


def test_deep_recursion_is_terminal_even_when_caught_and_the_process_survives() -> None:
    program = """
    let depth = 0;
    const down = () => { depth++; down() };
    try { down() } catch (e) { return [e.name, depth > 100] }
    """
    assert drive(program).error == (
        "recursion",
        "RangeError: Maximum call stack size exceeded (recursion too deep)",
    )
    assert drive("return 1").value == 1


def test_deep_argument_nesting_is_serialised_without_recursion() -> None:
    program = "let v = {}; for (let i = 0; i < 100000; i++) v = {v}; await tools.echo(v); return 1"
    outcome = drive(program, lambda call: (True, "1", None))
    assert outcome.value == 1
    assert outcome.calls[0].args_json.count("{") == 100_001


# -- output -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "program", "state"),
    [
        (11, 'console.log("abc"); return "xy"', GuestDone('"xy"')),
        (10, 'console.log("abc"); return "xy"', None),
        (7, 'return "€"', GuestDone('"€"')),
        (6, 'return "€"', None),
    ],
)
def test_output_ledger_matches_the_reference_examples(
    budget: int, program: str, state: GuestDone | None
) -> None:
    outcome = drive(program, limits=JsLimits(max_output_bytes=budget))
    if state is None:
        assert outcome.error == ("output-limit", f"outer output exceeded {budget} bytes")
    else:
        assert outcome.state == state


def test_a_log_flood_keeps_the_fitting_prefix_and_truncates_the_last_entry() -> None:
    limits = JsLimits(max_output_bytes=100)
    outcome = drive("for (let i = 0; ; i++) console.log('entry-' + i)", limits=limits)
    assert outcome.error == ("output-limit", "outer output exceeded 100 bytes")
    metered = len(json.dumps(outcome.logs, separators=(",", ":")).encode())
    assert metered == 100
    assert outcome.logs[:3] == ["entry-0", "entry-1", "entry-2"]
    assert outcome.logs[-1] in {f"entry-{len(outcome.logs) - 1}"[:n] for n in range(1, 9)}


@pytest.mark.parametrize(
    "program",
    [
        "for (;;) { try { console.log('x'.repeat(100)) } catch {} }",
        "const f = () => { try { console.log('x'.repeat(100)) } catch {} queueMicrotask(f) }; f();"
        " await new Promise(() => {})",
        "console.log('y'.repeat(50000))",
    ],
)
def test_output_floods_end_the_run_even_when_swallowed(program: str) -> None:
    outcome = drive(program, limits=JsLimits(max_compute_ms=500, max_output_bytes=10_000))
    assert outcome.error == ("output-limit", "outer output exceeded 10000 bytes")
    assert len(json.dumps(outcome.logs, separators=(",", ":")).encode()) <= 10_000


def test_a_completion_value_over_budget_is_an_output_limit() -> None:
    outcome = drive("return 'v'.repeat(200)", limits=JsLimits(max_output_bytes=100))
    assert outcome.error == ("output-limit", "outer output exceeded 100 bytes")


# -- hostile programs -------------------------------------------------------------------


def test_prototype_pollution_does_not_reach_arguments_sent_to_the_host() -> None:
    program = """
    Object.prototype.injected = 'evil';
    Object.defineProperty(Object.prototype, 'enumerableGetter', { get() { return 1 }, enumerable: true });
    Array.prototype.toJSON = () => 'hijacked array';
    Object.prototype.toJSON = () => 'hijacked object';
    String.prototype.toJSON = () => 'hijacked string';
    Object.defineProperty(Array.prototype, '0', { set(v) { throw new Error('setter') }, configurable: true });
    Object.defineProperty(Object.prototype, 'next', { set(v) { throw new Error('setter') } });
    await tools.echo({ list: [1, { s: 'text' }], flag: true });
    return 'ok'
    """
    outcome = drive(program, lambda call: (True, "null", None))
    assert [c.args_json for c in outcome.calls] == ['{"list":[1,{"s":"text"}],"flag":true}']
    assert outcome.value == "ok"


def test_replacing_globals_breaks_only_the_program() -> None:
    program = """
    const keep = { log: console.log, echo: tools.echo, map: new Map([[1, 2]]) };
    JSON.stringify = JSON.parse = () => { throw new Error('json') };
    Array.prototype.push = Array.prototype.join = Array.prototype[Symbol.iterator] = null;
    Function.prototype.call = Function.prototype.apply = Function.prototype.bind = null;
    Reflect.apply = Object.keys = Object.defineProperty = String.prototype.slice = null;
    Map.prototype.set = Set.prototype.add = Set.prototype.has = null;
    RegExp.prototype.exec = () => { throw new Error('regexp') };
    Error.captureStackTrace = null;
    globalThis.JSON = globalThis.Promise = globalThis.console = globalThis.Error = null;
    tools = null; console = null; ToolCallError = null;
    keep.log({ still: ['works', 1] }, keep.map);
    const r = await keep.echo({ a: 1 });
    try { await keep.echo({f: undefined}) } catch (e) { keep.log(e.message) }
    return r
    """
    outcome = drive(program)
    assert outcome.logs == [
        "{ still: [ 'works', 1 ] } Map(1) { 1 => 2 }",
        "binding arguments must be lossless JSON: arguments.f is undefined — omit the key "
        "or pass null",
    ]
    assert outcome.value == {"tool": "echo", "args": {"a": 1}}


def test_atomics_wait_cannot_block_the_worker() -> None:
    program = """
    const ia = new Int32Array(new SharedArrayBuffer(16));
    try { Atomics.wait(ia, 0, 0, 60000) } catch (e) { return e.message }
    """
    started = time.monotonic()
    assert drive(program).value == "cannot block in this thread"
    assert time.monotonic() - started < 1.0


def test_no_host_modules_or_module_loading() -> None:
    program = """
    let imported;
    try { await import('os') } catch (e) { imported = e.name }
    return [typeof std, typeof os, typeof require, typeof process, imported, typeof setTimeout]
    """
    assert drive(program).value == [
        "undefined",
        "undefined",
        "undefined",
        "undefined",
        "ReferenceError",
        "function",
    ]


def test_closing_the_wrapper_early_does_not_escape_the_guest() -> None:
    program = "}); globalThis.escaped = 1; (async function () {"
    outcome = drive(program)
    assert outcome.state == GuestDone(None)  # ran, contained, nothing reached the host


def test_many_calls_in_one_slice() -> None:
    program = "const rs = await Promise.all(Array.from({length: 2000}, (_, i) => tools.echo({i}))); return rs.length"
    outcome = drive(program, lambda call: (True, "0", None))
    assert outcome.value == 2000
    assert [c.id for c in outcome.calls] == list(range(1, 2001))


# -- configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_stack_bytes": 2 * 2**20}, "JsLimits.max_stack_bytes must be at most 1048576"),
        ({"max_compute_ms": 0}, "JsLimits.max_compute_ms must be positive"),
        ({"max_heap_bytes": -1}, "JsLimits.max_heap_bytes must be positive"),
        ({"max_heap_bytes": 2**20}, "JsLimits.max_heap_bytes must be at least 8388608"),
        ({"max_output_bytes": 0}, "JsLimits.max_output_bytes must be positive"),
    ],
)
def test_limits_are_validated(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JsLimits(**kwargs)


def test_a_guest_can_be_made_before_its_program_arrives() -> None:
    guest = JsGuest(JsLimits(max_compute_ms=1_000))
    assert guest.state == GuestRunning()
    guest.start(
        "return [typeof tools.x, typeof extra.y]",
        [JsBinding("tools", ("x",)), JsBinding("extra", ("y",), None)],
    )
    assert state_of(guest) == GuestDone('["function","function"]')


# -- catch clauses are guarded without moving lines ---------------------------------------


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("try { f() } catch (e) { g(e) }", "try { f() } catch (e) {G(e); g(e) }"),
        ("try { f() } catch { g() }", "try { f() } catch (E) {G(E); g() }"),
        (
            "try { f() } catch ({ message }) { g(message) }",
            "try { f() } catch (E) {let { message } = G(E); g(message) }",
        ),
        (
            "try { f() } catch ({\n  message\n}) { g() }",
            "try { f() } catch ({\n  message\n}) { g() }",
        ),
        ("const catchy = 'catch (e) {}'", "const catchy = 'catch (e) {}'"),
        ("try { f( } catch (e) {}", "try { f( } catch (e) {}"),
    ],
)
def test_catch_clauses_call_the_guard_first(program: str, expected: str) -> None:
    assert guard_catches(program, "G", "E") == expected


def test_guarded_catches_keep_line_numbers_and_destructuring() -> None:
    program = (
        "try { null.x } catch ({ message }) {\n"
        "  try { throw new Error(message) } catch {\n"
        "    throw new RangeError('third line') }\n"
        "}"
    )
    assert drive(program).error == ("exception", "RangeError: third line\n    at <program>:3")


def test_a_program_throwing_null_is_reported_as_running_out_of_memory() -> None:
    # QuickJS throws null when it cannot allocate its own memory error; the guest cannot
    # tell a program's `throw null` apart, and errs on the side of a terminal failure.
    outcome = drive("try { throw null } catch (e) {} return 'caught'")
    assert outcome.error == ("memory", f"memory limit exceeded ({512 * 2**20} bytes)")
