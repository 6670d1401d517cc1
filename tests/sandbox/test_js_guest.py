"""The QuickJS guest through its step API: values, logs, calls, errors, timers, stalls."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from codemode.sandbox.typescript._guest import (
    GuestDone,
    GuestFailed,
    GuestRunning,
    GuestState,
    JsBinding,
    JsCall,
    JsGuest,
    JsLimits,
)
from codemode.sandbox.typescript._strip import strip_types

TOOLS = JsBinding("tools", ("echo", "fail", "my-tool", "__proto__", "constructor"))


def echo_host(call: JsCall) -> tuple[bool, str, str | None]:
    """Resolve ``echo``-like tools with their arguments; reject ``fail`` with a code."""
    if call.name == "fail":
        return False, f"{call.name} failed", "E_FAIL"
    return True, json.dumps({"tool": call.name, "args": json.loads(call.args_json)}), None


@dataclass
class Outcome:
    state: GuestState
    logs: list[str]
    calls: list[JsCall] = field(default_factory=list)
    guest: JsGuest | None = None

    @property
    def value(self) -> Any:
        assert isinstance(self.state, GuestDone), self.state
        return None if self.state.value_json is None else json.loads(self.state.value_json)

    @property
    def error(self) -> tuple[str, str]:
        assert isinstance(self.state, GuestFailed), self.state
        return self.state.kind, self.state.message


def state_of(guest: JsGuest) -> GuestState:
    """Read the state afresh (an earlier assert must not narrow it for the type checker)."""
    return guest.state


def drive(
    program: str,
    host: Callable[[JsCall], tuple[bool, str, str | None]] = echo_host,
    *,
    bindings: Sequence[JsBinding] = (TOOLS,),
    limits: JsLimits | None = None,
    max_steps: int = 10_000,
) -> Outcome:
    """The worker loop of the module docstring, answering calls in issue order."""
    guest = JsGuest(limits)
    guest.start(program, bindings)
    outcome = Outcome(guest.state, [], guest=guest)
    for _ in range(max_steps):
        outcome.logs += guest.drain_logs()
        calls = guest.pending_calls()
        outcome.calls += calls
        if not isinstance(guest.state, GuestRunning):
            break
        if not calls:
            delay = guest.timer_delay()
            assert delay is not None, "a running guest with no calls must have a timer"
            time.sleep(delay)
            guest.run_timers()
        for call in calls:
            ok, payload, code = host(call)
            if ok:
                guest.resolve(call.id, payload)
            else:
                guest.reject(call.id, payload, code)
    outcome.state = guest.state
    return outcome


# -- completion values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "value_json"),
    [
        ("return 1", "1"),
        ("return null", "null"),
        ('return "text"', '"text"'),
        ("return ''", '""'),
        ("return {b: [1, 2.5, true, null], a: 'x'}", '{"b":[1,2.5,true,null],"a":"x"}'),
        ("return 1e21", "1e+21"),
        ("const o = {x: 1}; return [o, o]", '[{"x":1},{"x":1}]'),
        ("return Object.assign(Object.create(null), {n: 1})", '{"n":1}'),
        ("return JSON.parse('{\"__proto__\": 1}')", '{"__proto__":1}'),
        ("return '\\u0000\\ud800'", '"\\u0000\\ud800"'),
    ],
)
def test_lossless_completion_values_pass_exactly(program: str, value_json: str) -> None:
    assert drive(program).state == GuestDone(value_json)


@pytest.mark.parametrize("program", ["", "return", "return undefined", "await null; 1 + 1"])
def test_undefined_completion_has_no_value(program: str) -> None:
    assert drive(program).state == GuestDone(None)


_PREFIX = "program completion must be lossless JSON: "
_RESULT = "the program's result"


# Each refusal names where the value sits, what it is and what to do instead.
@pytest.mark.parametrize(
    ("program", "detail"),
    [
        ("return () => 1", f"{_RESULT} is a function — return its result instead"),
        (
            "return new Map()",
            f"{_RESULT} is a Map — return an object or array (Object.fromEntries(map))",
        ),
        ("return NaN", f"{_RESULT} is NaN — JSON has no NaN or Infinity; use null or a string"),
        ("return -0", f"{_RESULT} is -0 — JSON has no -0; use 0"),
        (
            "return Infinity",
            f"{_RESULT} is Infinity — JSON has no NaN or Infinity; use null or a string",
        ),
        ("return {a: undefined}", f"{_RESULT} at $.a is undefined — omit the key or pass null"),
        ("return [undefined]", f"{_RESULT} at $[0] is undefined — use null"),
        (
            "return [1, , 3]",
            f"{_RESULT} is an array with holes or extra properties — use a plain array",
        ),
        (
            "return Object.assign([1], {extra: 2})",
            f"{_RESULT} is an array with holes or extra properties — use a plain array",
        ),
        (
            "return {p: [new (class Point { constructor() { this.x = 1 } })()]}",
            f"{_RESULT} at $.p[0] is a Point instance — return a plain object or array",
        ),
        (
            "return {'a b': new Date(0)}",
            f'{_RESULT} at $["a b"] is a Date — return date.toISOString()',
        ),
        ("return 10n", f"{_RESULT} is a bigint — return a number or a string"),
        ("return Symbol('s')", f"{_RESULT} is a symbol — return a string"),
        ("return {[Symbol('k')]: 1}", f"{_RESULT} has a symbol key — use string keys"),
        (
            "return Object.defineProperty({}, 'hidden', {value: 1})",
            f"{_RESULT} has a non-enumerable property — use a plain object",
        ),
        (
            "const a = []; a.push(a); return a",
            f"{_RESULT} at $[0] is a circular reference — JSON cannot hold cycles",
        ),
        (
            "const o = {}; o.self = {o}; return o",
            f"{_RESULT} at $.self.o is a circular reference — JSON cannot hold cycles",
        ),
        (
            "return {tags: new Set(['a'])}",
            f"{_RESULT} at $.tags is a Set — return an array ([...set])",
        ),
        (
            "return {job: tools.echo({})}",
            f"{_RESULT} at $.job is a Promise — did you forget await?",
        ),
    ],
)
def test_lossy_completion_is_invalid_output(program: str, detail: str) -> None:
    assert drive(program).error == ("invalid-output", _PREFIX + detail)


def test_deep_nesting_is_iterative() -> None:
    program = "let v = 0; for (let i = 0; i < 5000; i++) v = [v]; return v"
    value_json = drive(program).state
    assert value_json == GuestDone("[" * 5000 + "0" + "]" * 5000)


# -- logs -------------------------------------------------------------------------------


def test_console_methods_each_log_one_entry_joined_by_spaces() -> None:
    program = """
    console.log('point', {x: 1, y: 2});
    console.info('info'); console.warn('warn', 1); console.error('error', [1]);
    console.debug(); console.log('multi\\nline', 'raw');
    const {log} = console; log('detached');
    return typeof console.table
    """
    outcome = drive(program)
    assert outcome.logs == [
        "point { x: 1, y: 2 }",
        "info",
        "warn 1",
        "error [ 1 ]",
        "",
        "multi\nline raw",
        "detached",
    ]
    assert outcome.value == "undefined"


def test_logs_after_completion_are_not_output() -> None:
    program = (
        "Promise.resolve().then(() => Promise.resolve()).then(() => console.log('late')); return 1"
    )
    outcome = drive(program)
    assert outcome.value == 1


def test_lone_surrogates_in_logs_become_replacement_characters() -> None:
    assert drive("console.log('a\\ud800b')").logs == ["a\ufffdb"]


# -- binding calls ----------------------------------------------------------------------


def test_calls_go_through_the_outbox_and_resolve_in_order() -> None:
    program = """
    const [a, b] = await Promise.all([tools.echo({n: 1}), tools["my-tool"]({n: 2})]);
    const c = await tools.__proto__({});
    const d = await tools.constructor({deep: {list: [1, 'two']}});
    return [a, b, c.tool, d.args]
    """
    outcome = drive(program)
    assert [(c.id, c.global_name, c.name, c.args_json) for c in outcome.calls] == [
        (1, "tools", "echo", '{"n":1}'),
        (2, "tools", "my-tool", '{"n":2}'),
        (3, "tools", "__proto__", "{}"),
        (4, "tools", "constructor", '{"deep":{"list":[1,"two"]}}'),
    ]
    assert outcome.value == [
        {"tool": "echo", "args": {"n": 1}},
        {"tool": "my-tool", "args": {"n": 2}},
        "__proto__",
        {"deep": {"list": [1, "two"]}},
    ]


def test_tools_is_a_null_prototype_object_of_async_functions() -> None:
    program = """
    return [Object.getPrototypeOf(tools) === null, Object.keys(tools), typeof tools.echo,
            tools.echo.name, Object.prototype.toString.call(tools.echo), 'toString' in tools]
    """
    assert drive(program).value == [
        True,
        ["echo", "fail", "my-tool", "__proto__", "constructor"],
        "function",
        "echo",
        "[object AsyncFunction]",
        False,
    ]


class _CountingContext:
    """A QuickJS context that counts the microtask jobs it runs."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.jobs = 0

    def execute_pending_job(self) -> Any:
        ran = self._ctx.execute_pending_job()
        self.jobs += bool(ran)
        return ran

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def test_a_binding_behaves_as_an_async_function() -> None:
    # A plain function returning the call's promise, dressed as an async function: not
    # constructible, no `prototype`, and what an async function would throw (arguments
    # that are not lossless JSON) is a rejected promise, not a synchronous throw.
    program = """
    const p = tools.echo({ big: 1n });
    const rejected = await p.then(() => "resolved", (e) => `${e.name}: ${e.message}`);
    let constructed;
    try { new tools.echo({}); constructed = "yes"; } catch (e) { constructed = e.name; }
    return [p instanceof Promise, rejected.startsWith("TypeError: binding arguments must be"),
            constructed, "prototype" in tools.echo, tools.echo.length,
            Object.getPrototypeOf(tools.echo) === Object.getPrototypeOf(async () => {})]
    """
    assert drive(program).value == [True, True, "TypeError", False, 1, True]


def test_an_awaited_sequential_call_costs_one_microtask_job() -> None:
    # The binding returns its promise (no async function of its own, which awaiting it
    # cost one more job, and returning it from one two more: a thenable job through the
    # guarded `then`): the program's `await` resumes in the job that settles the call.
    guest = JsGuest(JsLimits())
    counting = _CountingContext(guest._ctx)
    guest._ctx = counting
    program = "let t = 0; for (let i = 0; i < 100; i++) t += (await tools.echo({i})).i; return t"
    guest.start(program, [JsBinding("tools", ("echo",))])
    first = counting.jobs
    while isinstance(guest.state, GuestRunning):
        for pending in guest.pending_calls():
            guest.resolve(pending.id, pending.args_json)
    assert guest.state == GuestDone("4950")
    assert counting.jobs - first <= 100 + 1


def test_rejection_is_a_tool_call_error_with_fields() -> None:
    program = """
    try {
      await tools.fail({});
    } catch (e) {
      return [e instanceof ToolCallError, e instanceof Error, e.name, e.toolName, e.message,
              e.code, Object.keys(e), String(e)];
    }
    """
    assert drive(program).value == [
        True,
        True,
        "ToolCallError",
        "fail",
        "fail failed",
        "E_FAIL",
        ["toolName", "code"],
        "ToolCallError: fail failed",
    ]


def test_uncaught_tool_call_error_shows_the_calling_line() -> None:
    program = "const x = 1;\n\nawait tools.fail({x});"
    assert drive(program).error == ("exception", "ToolCallError: fail failed\n    at <program>:3")


def test_rejection_without_error_class_is_a_plain_error() -> None:
    binding = JsBinding("api", ("fail",), error_class=None)
    program = "try { await api.fail({}) } catch (e) { return [e.name, e.message, 'toolName' in e] }"
    assert drive(program, bindings=[binding]).value == ["Error", "fail failed", False]


def test_several_bindings_and_a_custom_member_property() -> None:
    bindings = [
        JsBinding("tools", ("echo",)),
        JsBinding("db", ("fail",), error_class="DbError", member_name_property="operation"),
    ]
    program = """
    try { await db.fail({}) } catch (e) {
      return [e instanceof DbError, e.name, e.operation, (await tools.echo({})).tool]
    }
    """
    outcome = drive(program, bindings=bindings)
    assert outcome.value == [True, "DbError", "fail", "echo"]
    assert outcome.calls[0].global_name == "db"


def test_program_can_construct_the_error_class() -> None:
    program = "const e = new ToolCallError('m', 'x', 'C'); return [e.message, e.toolName, e.code]"
    assert drive(program).value == ["m", "x", "C"]


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        ("{a: undefined}", "arguments.a is undefined — omit the key or pass null"),
        (
            "{limit: NaN}",
            "arguments.limit is NaN — JSON has no NaN or Infinity; use null or a string",
        ),
        ("{n: -0}", "arguments.n is -0 — JSON has no -0; use 0"),
        ("new Map()", "arguments is a Map — pass an object or array (Object.fromEntries(map))"),
        ("{when: new Date()}", "arguments.when is a Date — pass date.toISOString()"),
        (
            "{xs: [1, , 2]}",
            "arguments.xs is an array with holes or extra properties — use a plain array",
        ),
        ("{f() {}}", "arguments.f is a function — pass its result instead"),
        ("{b: [1n]}", "arguments.b[0] is a bigint — pass a number or a string"),
        (
            "(() => { const o = {}; o.o = o; return o })()",
            "arguments.o is a circular reference — JSON cannot hold cycles",
        ),
        ("new (class A {})()", "arguments is a A instance — pass a plain object or array"),
        ("{[Symbol('s')]: 1}", "arguments has a symbol key — use string keys"),
        (
            "{'my key': [{p: new Set()}]}",
            'arguments["my key"][0].p is a Set — pass an array ([...set])',
        ),
    ],
)
def test_lossy_arguments_reject_in_the_guest(args: str, detail: str) -> None:
    outcome = drive(f"return await tools.echo({args})")
    assert outcome.calls == []
    assert outcome.error == (
        "exception",
        f"TypeError: binding arguments must be lossless JSON: {detail}\n    at <program>:1",
    )


def test_calls_of_one_slice_keep_their_arguments_apart() -> None:
    # One poll reply carries every call of the slice, each call's arguments after a
    # U+0001: a big one, an empty one and one whose text holds escapes all come out whole.
    program = """
    const big = 'x'.repeat(1 << 20)
    const out = await Promise.all([
      tools.echo({a: big}), tools.echo({}), tools.echo({s: '\\u0001\\\\', t: '\\ud800'.length}),
    ])
    return out.length
    """
    outcome = drive(program)
    assert [json.loads(call.args_json) for call in outcome.calls] == [
        {"a": "x" * (1 << 20)},
        {},
        {"s": "\x01\\", "t": 1},
    ]
    assert outcome.state == GuestDone("3")


@pytest.mark.parametrize("args", ["", "undefined"])
def test_no_arguments_mean_an_empty_object(args: str) -> None:
    outcome = drive(f"return await tools.echo({args})")
    assert [call.args_json for call in outcome.calls] == ["{}"]


def test_argument_getters_run_once_and_a_throwing_getter_rejects() -> None:
    program = """
    let reads = 0;
    const args = { get n() { reads += 1; return reads } };
    const r = await tools.echo(args);
    try { await tools.echo({ get bad() { throw new RangeError('no') } }) }
    catch (e) { return [reads, r.args, e.name, e.message] }
    """
    assert drive(program).value == [1, {"n": 1}, "RangeError", "no"]


def test_replies_for_unknown_or_settled_ids_are_dropped() -> None:
    guest = JsGuest()
    guest.start("return await tools.echo({})", [TOOLS])
    (call,) = guest.pending_calls()
    guest.resolve(99, "1")
    guest.reject(99, "nope")
    assert guest.state == GuestRunning()
    guest.resolve(call.id, '"first"')
    guest.resolve(call.id, '"second"')
    assert state_of(guest) == GuestDone('"first"')


def test_invalid_resolution_json_rejects_the_call() -> None:
    guest = JsGuest()
    guest.start("try { await tools.echo({}) } catch (e) { return e.message }", [TOOLS])
    (call,) = guest.pending_calls()
    guest.resolve(call.id, "{not json")
    assert guest.state == GuestDone('"binding resolution must be lossless JSON"')


def test_fire_and_forget_calls_stay_visible_after_completion() -> None:
    guest = JsGuest()
    guest.start("tools.echo({late: true}); return 'done'", [TOOLS])
    assert guest.state == GuestDone('"done"')
    assert [c.args_json for c in guest.pending_calls()] == ['{"late":true}']
    assert guest.outstanding == 1


# -- thrown values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("throw new Error('x')", "Error: x\n    at <program>:1"),
        (
            "\nconst f = () => { throw new TypeError('inner') }\nfunction g() { f() }\ng()",
            "TypeError: inner\n    at f (<program>:2)\n    at g (<program>:3)\n    at <program>:4",
        ),
        (
            "class Custom extends Error {\n  constructor(m) { super(m); this.name = 'Custom' }\n}\n"
            "throw new Custom('mine')",
            "Custom: mine\n    at new Custom (<program>:2)\n    at <program>:4",
        ),
        (
            "await null;\n[1].map(() => { null.x })",
            "TypeError: cannot read property 'x' of null\n"
            "    at <anonymous> (<program>:2)\n    at <program>:2",
        ),
        ("const e = new Error('e'); e.stack = 'custom stack'; throw e", "custom stack"),
        ("throw 42", "42"),
        ("throw 'plain string'", "plain string"),
        ("throw undefined", "undefined"),
        ("throw {toString() { return 'custom' }}", "custom"),
        ("throw Object.create(null)", "program threw an unrenderable value"),
        ("throw {toString() { throw new Error('no') }}", "program threw an unrenderable value"),
        ("eval('throw new Error(\"from eval\")')", "Error: from eval\n    at <program>:1"),
    ],
)
def test_thrown_values_render_with_program_lines(program: str, message: str) -> None:
    assert drive(program).error == ("exception", message)


@pytest.mark.parametrize(
    ("program", "kind", "message"),
    [
        (
            "function r() { return r() + 1 }\nr()",
            "recursion",
            "RangeError: Maximum call stack size exceeded (recursion too deep)",
        ),
        # Caught, or seen by a rejection handler: still terminal, as running out of memory is.
        (
            "function r() { return r() + 1 }\ntry { r() } catch (e) {}\nreturn 'carried on'",
            "recursion",
            "RangeError: Maximum call stack size exceeded (recursion too deep)",
        ),
        (
            "function r() { return r() + 1 }\n"
            "return await Promise.resolve().then(r).catch(() => 'carried on')",
            "recursion",
            "RangeError: Maximum call stack size exceeded (recursion too deep)",
        ),
        # What QuickJS alone refuses to parse is a syntax failure too.
        (
            "\n\nlet x = ;",
            "syntax",
            "SyntaxError: unexpected token in expression: ';'\n    at <program>:3",
        ),
    ],
)
def test_failure_kinds(program: str, kind: str, message: str) -> None:
    assert drive(program).error == (kind, message)


def test_a_programs_own_range_error_is_an_ordinary_exception() -> None:
    program = (
        "try { throw new RangeError('Maximum call stack size exceeded') } catch { return 'ok' }"
    )
    assert drive(program).value == "ok"


def test_stack_reads_inside_the_program_use_program_lines() -> None:
    program = "function f() {\n  return new Error('here')\n}\nreturn f().stack"
    assert drive(program).value == "Error: here\n    at f (<program>:2)\n    at <program>:4"


def test_program_cannot_replace_the_stack_hook() -> None:
    program = """
    Error.prepareStackTrace = () => 'hijacked';
    Error.stackTraceLimit = 0;
    return [new Error('x').stack, typeof Error.prepareStackTrace]
    """
    assert drive(program).value == ["Error: x\n    at <program>:4", "undefined"]


# -- timers and stalls ------------------------------------------------------------------


def test_timers_fire_in_due_order_with_microtasks_between() -> None:
    program = """
    const order = [];
    setTimeout(() => { order.push('b'); Promise.resolve().then(() => order.push('b-micro')) }, 20);
    setTimeout((x) => order.push(x), 5, 'a');
    const cancelled = setTimeout(() => order.push('never'), 1); clearTimeout(cancelled);
    let ticks = 0;
    const interval = setInterval(() => { if (++ticks === 3) clearInterval(interval) }, 1);
    await new Promise((resolve) => setTimeout(resolve, 40));
    return [order, ticks]
    """
    assert drive(program).value == [["a", "b", "b-micro"], 3]


def test_timer_delay_reports_the_next_due_timer() -> None:
    guest = JsGuest()
    guest.start("await new Promise((r) => setTimeout(r, 50)); return 'woke'", [TOOLS])
    delay = guest.timer_delay()
    assert delay is not None and 0.0 < delay <= 0.05
    guest.run_timers()  # not due yet: nothing happens
    assert guest.state == GuestRunning()
    time.sleep(delay)
    guest.run_timers()
    assert state_of(guest) == GuestDone('"woke"')
    assert guest.timer_delay() is None


def test_error_in_a_timer_fails_the_run() -> None:
    program = "setTimeout(() => { throw new Error('in timer') }, 1); await new Promise(() => {})"
    assert drive(program).error == (
        "exception",
        "Error: in timer\n    at <anonymous> (<program>:1)",
    )


def test_awaiting_what_nothing_can_settle_ends_the_run() -> None:
    assert drive("await new Promise(() => {})").error == (
        "worker-exit",
        "worker exited with code 0 before completing",
    )


def test_start_runs_one_program() -> None:
    guest = JsGuest()
    guest.start("return 1", [TOOLS])
    with pytest.raises(RuntimeError, match="one program"):
        guest.start("return 2", [TOOLS])


def test_close_releases_a_running_guest() -> None:
    guest = JsGuest()
    guest.start("await tools.echo({})", [TOOLS])
    guest.close()
    assert guest.state == GuestFailed("abort", "guest closed")


# -- end to end: stripped TypeScript in the guest ---------------------------------------

CORPUS = sorted((pathlib.Path(__file__).parent / "ts_corpus").glob("*.ts"))


def corpus_host(call: JsCall) -> tuple[bool, str, str | None]:
    """The same fake tools as the Node harness in test_ts_strip.py."""
    args = json.loads(call.args_json)
    if call.name == "read_file":
        return True, json.dumps({"text": f"contents of {args['path']}\nline 2"}), None
    return True, json.dumps({"tool": call.name, "args": args}), None


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_stripped_corpus_prints_what_node_printed(path: pathlib.Path) -> None:
    bindings = [JsBinding("tools", ("read_file", "echo"))]
    outcome = drive(strip_types(path.read_text()), corpus_host, bindings=bindings)
    lines = list(outcome.logs)
    if isinstance(outcome.state, GuestDone) and outcome.state.value_json is not None:
        lines.append(f"return: {outcome.state.value_json}")
    assert isinstance(outcome.state, GuestDone), outcome.state
    assert "\n".join(lines) + "\n" == path.with_suffix(".out").read_text()


def test_a_refused_value_deep_or_under_a_long_key_gets_a_short_path() -> None:
    deep = drive("let v = {x: undefined}; for (let i = 0; i < 5000; i++) v = [v]; return v")
    assert deep.error == (
        "invalid-output",
        f"{_PREFIX}{_RESULT} at ${'[0]' * 16}…{'[0]' * 15}.x is undefined — omit the key or pass null",
    )
    long_key = drive("return {['k'.repeat(10000)]: undefined}")
    assert long_key.error == (
        "invalid-output",
        f'{_PREFIX}{_RESULT} at $["{"k" * 64}…"] is undefined — omit the key or pass null',
    )


def test_an_unknown_tool_with_no_tools_says_none_are_available() -> None:
    outcome = drive("return await tools.read({})", bindings=[JsBinding("tools", ())])
    assert outcome.error == (
        "exception",
        "TypeError: unknown tool tools.read; available: (none)\n    at <program>:1",
    )


def test_a_call_passed_without_await_is_named_as_a_promise() -> None:
    outcome = drive("return await tools.echo({text: tools.echo({})})")
    assert [call.args_json for call in outcome.calls] == ["{}"]  # only the inner call left
    assert outcome.error == (
        "exception",
        "TypeError: binding arguments must be lossless JSON: arguments.text is a Promise — "
        "did you forget await?\n    at <program>:1",
    )
