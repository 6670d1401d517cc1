"""The Python guest through the public API: values, logs, bindings, errors, diagnostics."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from sandbox_helpers import Run, err, ok

from codemode.engine import AbortController, Binding, CodeRunRequest, ErrorClass
from codemode.sandbox import PythonRuntime

pytestmark = pytest.mark.anyio


async def test_runtime_shape(runtime: PythonRuntime) -> None:
    assert runtime.language == "python"
    assert runtime.isolation == "process"


# -- values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "value"),
    [
        ("return 1", 1),
        ("return 'x'", "x"),
        ("return None", None),
        ("return [1, 2.5, True, None, {'a': 'b'}]", [1, 2.5, True, None, {"a": "b"}]),
        ("return 2 ** 100", 2**100),
        ("return '€ ünïcode 🎉'", "€ ünïcode 🎉"),
        ("x = 1\nif x:\n    return 'early'\nreturn 'late'", "early"),
        ("for i in range(3):\n    if i == 1:\n        return i", 1),
    ],
)
async def test_completion_values(run: Run, program: str, value: object) -> None:
    assert ok(await run(program)) == value


async def test_no_return_means_no_value(run: Run) -> None:
    result = await run("x = 1")
    assert result.error is None and not result.has_value
    bare = await run("return")
    assert bare.error is None and not bare.has_value
    explicit = await run("return None")
    assert explicit.has_value and explicit.value is None


@pytest.mark.parametrize(
    ("program", "detail"),
    [
        ("return {1, 2}", "the program returned a set — return a list (e.g. sorted(...))"),
        ("return {'tags': {'a'}}", "the program's result at $.tags is a set — return a list"),
        ("return [1, {'a b': [float('nan')]}]", 'the program\'s result at $[1]["a b"][0] is nan'),
        ("return float('inf')", "the program returned inf (not a finite number)"),
        ("return -0.0", "the program returned -0.0 (negative zero) — return 0.0"),
        ("return {1: 'a'}", "the program's result has a key of type int (1) — use str keys"),
        ("return {'k': {2: 'a'}}", "result at $.k has a key of type int (2)"),
        ("return print", "the program returned a function or class"),
        ("x = []\nx.append(x)\nreturn x", "at $[0] refers back to itself (a cycle)"),
        ("return tools.echo({})", "the program returned a coroutine — did you forget await?"),
        ("async def f():\n    pass\nreturn f()", "the program returned a coroutine — did you"),
        ("return {'c': tools.echo({})}", "result at $.c is a coroutine — did you forget await?"),
        ("return b'x'", "the program returned bytes — decode it to a str first"),
        ("import datetime\nreturn datetime.date(2024, 1, 2)", "returned a date — use .isoformat()"),
        ("class P:\n    pass\nreturn [P()]", "result at $[0] is a P object — return dicts, lists"),
    ],
)
async def test_lossy_completion_names_the_path_the_type_and_the_fix(
    run: Run, program: str, detail: str
) -> None:
    message = err(await run(program), "invalid-output")
    assert message.startswith("program completion must be lossless JSON: "), message
    assert detail in message, message


async def test_tuples_and_container_subclasses_become_json(run: Run) -> None:
    # Python differs from JS here: like ``json.dumps``, tuples become arrays and
    # Counter/defaultdict become objects, so ``return c.most_common(2)`` just works.
    program = (
        "from collections import Counter, defaultdict, namedtuple\n"
        "d = defaultdict(list)\nd['k'].append((1, 2))\nP = namedtuple('P', 'x y')\n"
        "return [Counter('aab').most_common(1), d, P(1, 2), divmod(7, 2)]"
    )
    assert ok(await run(program)) == [[["a", 2]], {"k": [[1, 2]]}, [1, 2], [3, 1]]


# -- logs -----------------------------------------------------------------------------


async def test_print_is_coalesced_per_line(run: Run) -> None:
    program = (
        "print('a', end='')\nprint('b')\nprint('c\\nd')\nprint()\n"
        "print(1, 2, sep='-')\nprint({'k': [1]})\nprint('tail', end='')"
    )
    result = await run(program)
    assert ok(result) is None
    assert result.logs == ["ab", "c", "d", "", "1-2", "{'k': [1]}", "tail"]


async def test_logs_and_value(run: Run) -> None:
    result = await run("print('printed')\nreturn 'returned'")
    assert result.logs == ["printed"] and result.value == "returned"


async def test_print_to_a_file_is_refused(run: Run) -> None:
    message = err(await run("print('x', file=None)\nprint('y', file=[])"))
    assert "print(file=...) is not available" in message


async def test_logs_survive_a_failure(run: Run) -> None:
    result = await run("print('before')\nraise ValueError('boom')")
    assert result.logs == ["before"]
    assert err(result).endswith("ValueError: boom")


# -- top-level await, bindings ----------------------------------------------------------


async def test_top_level_await_and_binding_values(run: Run) -> None:
    program = (
        "x = await tools.echo({'a': [1, 2]})\ny = await tools['my-tool']({'b': 1})\nreturn [x, y]"
    )
    assert ok(await run(program)) == [{"a": [1, 2]}, {"b": 1}]


async def test_keyword_arguments_become_the_args_object(run: Run) -> None:
    assert ok(await run("return await tools.echo(path='a', n=1)")) == {"path": "a", "n": 1}


class Barrier:
    """A host tool that returns only once ``parties`` calls are in flight together.

    A run whose calls were relayed one at a time never completes (the first call waits
    for the others until the timeout), so a result proves the overlap, whatever the
    machine's speed.
    """

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._all_here = anyio.Event()

    async def __call__(self, args: Any) -> Any:
        self.arrived += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.arrived == self.parties:
                self._all_here.set()
            with anyio.fail_after(20):
                await self._all_here.wait()
            # After the barrier, finish in an order unrelated to the arguments'.
            await anyio.sleep(float(args.get("after", 0)))
            return args["value"]
        finally:
            self.in_flight -= 1


async def test_gather_preserves_argument_order(run: Run) -> None:
    program = """
import asyncio
res = await asyncio.gather(
    tools.meet({'after': 0.2, 'value': 'first'}),
    tools.meet({'after': 0.0, 'value': 'second'}),
    tools.meet({'after': 0.1, 'value': 'third'}),
)
return res
"""
    barrier = Barrier(3)
    assert ok(await run(program, tools={"meet": barrier})) == ["first", "second", "third"]
    assert barrier.max_in_flight == 3  # the calls overlapped


async def test_calls_are_relayed_concurrently(run: Run) -> None:
    program = """
import asyncio
async def fetch(i):
    return await tools.meet({'value': i})
return await asyncio.gather(*[fetch(i) for i in range(20)])
"""
    barrier = Barrier(20)
    assert ok(await run(program, tools={"meet": barrier})) == list(range(20))
    assert (barrier.arrived, barrier.max_in_flight) == (20, 20)


async def test_calls_start_only_when_awaited(run: Run) -> None:
    # CPython coroutine semantics: creating a call does nothing; awaiting starts it.
    seen: list[object] = []

    async def record(args: Any) -> Any:
        seen.append(args["n"])
        return args["n"]

    program = """
a = tools.record({'n': 1})
b = tools.record({'n': 2})
tools.record({'n': 3})
second = await b
first = await a
return [first, second]
"""
    result = await run(program, tools={"record": record})
    assert ok(result) == [1, 2]
    assert seen == [2, 1]  # in await order; the third call never reached the host
    assert result.logs == ["1 tool call was never awaited: tools.record ×1"]


async def test_a_hundred_thousand_unawaited_calls_make_no_tool_call(run: Run) -> None:
    seen: list[object] = []

    async def record(args: Any) -> Any:
        seen.append(args)
        return None

    program = """
pending = [tools.record({'i': i}) for i in range(100000)]
more = [tools.echo({}) for _ in range(3)] + [tools['my-tool']({})]
print('built', len(pending))
"""
    result = await run(program, tools={"record": record, "echo": record, "my-tool": record})
    assert ok(result) is None and seen == []
    assert result.logs == [
        "built 100000",
        "100004 tool calls were never awaited: tools.record ×100000, tools.echo ×3, "
        'tools["my-tool"] ×1',
    ]


async def test_arguments_are_read_when_the_call_starts(run: Run) -> None:
    program = "d = {'n': 1}\nc = tools.echo(d)\nd['n'] = 2\nreturn await c"
    assert ok(await run(program)) == {"n": 2}


async def test_awaiting_a_call_twice_is_a_runtime_error(run: Run) -> None:
    program = (
        "c = tools.echo({})\nawait c\ntry:\n    await c\nexcept RuntimeError as e:\n"
        "    return [str(e), repr(c)]"
    )
    assert ok(await run(program)) == [
        "cannot reuse already awaited coroutine",
        "<tool call tools.echo>",
    ]


async def test_no_argument_means_an_empty_object(run: Run) -> None:
    assert ok(await run("return await tools.echo()")) == {}


async def test_tool_call_error_carries_tool_name_message_and_code(run: Run) -> None:
    program = """
try:
    await tools.fail({'message': 'not on my watch', 'code': 'DENIED'})
except ToolCallError as e:
    return [e.toolName, str(e), e.message, e.code, isinstance(e, Exception)]
"""
    assert ok(await run(program)) == ["fail", "not on my watch", "not on my watch", "DENIED", True]


async def test_tool_call_error_without_code(run: Run) -> None:
    program = (
        "try:\n    await tools.fail({})\nexcept ToolCallError as e:\n    return [e.code, str(e)]"
    )
    assert ok(await run(program)) == [None, "deliberate failure"]


async def test_uncaught_tool_call_error(run: Run) -> None:
    message = err(await run("await tools.fail({'message': 'nope'})"))
    assert message == (
        "Traceback (most recent call last):\n"
        "  line 1, in <program>\n"
        "    await tools.fail({'message': 'nope'})\n"
        "ToolCallError: nope"
    )


async def test_binding_raising_a_host_bug_is_relayed(run: Run) -> None:
    program = "try:\n    await tools.buggy({})\nexcept ToolCallError as e:\n    return [e.toolName, str(e)]"
    assert ok(await run(program)) == ["buggy", "'host bug'"]


async def test_unknown_tool(run: Run) -> None:
    program = "try:\n    await tools.nope({})\nexcept ToolCallError as e:\n    return [e.toolName, str(e)]"
    assert ok(await run(program)) == [
        "nope",
        "unknown tool tools.nope; available: buggy, delayed, echo, fail, my-tool, slow",
    ]


@pytest.mark.parametrize(
    ("call", "detail"),
    [
        ("tools.echo({1, 2})", "arguments is a set — pass a list"),
        ("tools.echo({'tags': {'a'}})", "arguments.tags is a set — pass a list"),
        ("tools.echo({'x': [float('nan')]})", "arguments.x[0] is nan (not a finite number)"),
        ("tools.echo({1: 2})", "arguments has a key of type int (1) — use str keys"),
        ("tools.echo({'f': print})", "arguments.f is a function or class"),
        ("tools.echo({'c': tools.echo({})})", "arguments.c is a coroutine — did you forget await?"),
        ("tools.echo(x=-0.0)", "arguments.x is -0.0 (negative zero) — pass 0.0"),
    ],
)
async def test_lossy_arguments_name_the_key_path(run: Run, call: str, detail: str) -> None:
    program = f"try:\n    await {call}\nexcept TypeError as e:\n    return str(e)"
    message = ok(await run(program))
    assert message.startswith(f"binding arguments must be lossless JSON: {detail}"), message


async def test_more_than_one_arguments_object_is_a_type_error(run: Run) -> None:
    program = (
        "try:\n    await tools.echo({'a': 1}, {'b': 2})\nexcept TypeError as e:\n    return str(e)"
    )
    assert ok(await run(program)) == (
        "tools.echo() takes one dict of arguments (or keyword arguments), got 2 positional"
    )


async def test_lossy_binding_resolution(run: Run) -> None:
    async def lossy(args: object) -> object:
        return {"x": float("nan")}

    program = "try:\n    await tools.lossy({})\nexcept ToolCallError as e:\n    return str(e)"
    result = await run(program, tools={"lossy": lossy})
    assert ok(result) == "binding resolution must be lossless JSON"


async def test_tools_namespace(run: Run) -> None:
    program = "return ['echo' in tools, 'zzz' in tools, sorted(tools)[:2], repr(tools.echo)]"
    assert ok(await run(program)) == [True, False, ["buggy", "delayed"], "<tool echo>"]


async def test_tools_is_read_only(run: Run) -> None:
    assert err(await run("tools.echo = 1"), "forbidden").endswith(
        "TypeError: '_Namespace' objects cannot be modified by programs"
    )
    assert "cannot be modified" in err(await run("setattr(tools, 'echo', 1)"), "forbidden")


async def test_binding_without_error_class(runtime: PythonRuntime) -> None:
    from sandbox_helpers import fail

    request = CodeRunRequest(
        "try:\n    await api.fail({})\nexcept RuntimeError as e:\n    return str(e)",
        [Binding("api", {"fail": fail}, None)],
        AbortController().signal,
    )
    assert ok(await runtime.run(request)) == "deliberate failure"


async def test_two_bindings(runtime: PythonRuntime) -> None:
    from sandbox_helpers import echo, fail

    request = CodeRunRequest(
        "a = await one.echo({'n': 1})\ntry:\n    await two.fail({})\nexcept TwoError as e:\n"
        "    return [a, e.name_of_tool]",
        [
            Binding("one", {"echo": echo}, ErrorClass("OneError", "toolName")),
            Binding("two", {"fail": fail}, ErrorClass("TwoError", "name_of_tool")),
        ],
        AbortController().signal,
    )
    assert ok(await runtime.run(request)) == [{"n": 1}, "fail"]


async def test_the_default_error_class_made_ahead_serves_every_run(
    runtime: PythonRuntime,
) -> None:
    # The default ToolCallError is made ahead of the run frame, in the template (each
    # worker has its own copy); another binding's class is still made for its run.
    from sandbox_helpers import fail

    program = (
        "seen = []\n"
        "for call in (tools.fail, other.fail):\n"
        "    try:\n"
        "        await call({'code': 'E_X'})\n"
        "    except ToolCallError as e:\n"
        "        seen.append(['default', type(e).__name__, e.toolName, e.code])\n"
        "    except OtherError as e:\n"
        "        seen.append(['other', type(e).__name__, e.op, e.code])\n"
        "return seen"
    )
    request = CodeRunRequest(
        program,
        [
            Binding("tools", {"fail": fail}, ErrorClass()),
            Binding("other", {"fail": fail}, ErrorClass("OtherError", "op")),
        ],
        AbortController().signal,
    )
    for _ in range(3):
        assert ok(await runtime.run(request)) == [
            ["default", "ToolCallError", "fail", "E_X"],
            ["other", "OtherError", "fail", "E_X"],
        ]


# -- asyncio --------------------------------------------------------------------------


async def test_asyncio_gather_of_own_coroutines_and_sleep(run: Run) -> None:
    program = """
import asyncio
from asyncio import sleep
async def work(n):
    await sleep(0.01 * (3 - n))
    return n * 10
return await asyncio.gather(*[work(i) for i in range(3)])
"""
    assert ok(await run(program)) == [0, 10, 20]


async def test_gather_return_exceptions(run: Run) -> None:
    program = """
import asyncio
res = await asyncio.gather(tools.fail({}), tools.echo({'v': 1}), return_exceptions=True)
return [type(res[0]).__name__, res[1]]
"""
    assert ok(await run(program)) == ["ToolCallError", {"v": 1}]


async def test_asyncio_is_limited(run: Run) -> None:
    assert "has no attribute 'get_event_loop'" in err(
        await run("import asyncio\nasyncio.get_event_loop()")
    )
    assert "has no attribute 'subprocess'" in err(await run("import asyncio\nasyncio.subprocess"))


# -- diagnostics ----------------------------------------------------------------------


async def test_traceback_is_trimmed_to_program_frames(run: Run) -> None:
    program = "def helper(x):\n    return 1 / x\n\ntotal = 0\ntotal += helper(0)\n"
    assert err(await run(program)) == (
        "Traceback (most recent call last):\n"
        "  line 5, in <program>\n"
        "    total += helper(0)\n"
        "  line 2, in helper\n"
        "    return 1 / x\n"
        "ZeroDivisionError: division by zero"
    )


async def test_traceback_of_methods_and_library_calls(run: Run) -> None:
    program = "import json\nclass P:\n    def parse(self, s):\n        return json.loads(s)\n\nP().parse('{')"
    message = err(await run(program))
    assert message.startswith(
        "Traceback (most recent call last):\n  line 6, in <program>\n    P().parse('{')\n"
        "  line 4, in P.parse\n    return json.loads(s)\nJSONDecodeError: "
    )
    assert "/" not in message.split("\n")[-1] and ".py" not in message


async def test_chained_exceptions(run: Run) -> None:
    program = "try:\n    {}['k']\nexcept KeyError as e:\n    raise RuntimeError('wrapped') from e"
    assert err(await run(program)) == (
        "Traceback (most recent call last):\n  line 2, in <program>\n    {}['k']\nKeyError: 'k'\n"
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n  line 4, in <program>\n"
        "    raise RuntimeError('wrapped') from e\nRuntimeError: wrapped"
    )


async def test_syntax_error(run: Run) -> None:
    assert err(await run("x = 1\ny = = 2\n"), "syntax") == (
        "  line 2\n    y = = 2\n        ^\nSyntaxError: invalid syntax"
    )


async def test_policy_error(run: Run) -> None:
    assert err(await run("x = 1\nreturn x.__class__\n"), "forbidden") == (
        "  line 2\n    return x.__class__\n"
        'SyntaxError: "__class__" is an invalid attribute name because it starts with "_".'
    )


async def test_top_level_yield_is_refused(run: Run) -> None:
    assert "'yield' is not allowed at the top level" in err(await run("yield 1"), "syntax")


async def test_unrenderable_exception(run: Run) -> None:
    program = (
        "class E(Exception):\n    def __str__(self):\n        raise ValueError('no')\nraise E()"
    )
    assert err(await run(program)).endswith("E: <exception str() failed>")


async def test_abort_before_start_uses_no_worker(runtime: PythonRuntime) -> None:
    controller = AbortController()
    controller.abort("not today")
    pool = runtime.stats.pool
    checkouts = pool.warm_checkouts + pool.cold_checkouts
    result = await runtime.run(CodeRunRequest("return 1", [], controller.signal))
    assert result.error is not None and result.error.kind == "abort"
    assert result.error.message == "not today" and result.logs == []
    assert pool.warm_checkouts + pool.cold_checkouts == checkouts


async def test_a_result_that_raises_while_read_is_invalid_output(run: Run) -> None:
    program = "class D(dict):\n    def items(self):\n        raise KeyError('no')\nreturn D(a=1)"
    message = err(await run(program), "invalid-output")
    assert message.startswith("program completion must be lossless JSON: reading the result")
    assert message.endswith("KeyError: 'no'")


async def test_writes_cpython_refuses_stay_ordinary_errors(run: Run) -> None:
    # A tuple or str changed in place is a bug CPython reports itself (catchable), not a
    # guard denial; a write to a class or module still is one (see the hostile tests).
    program = """
out = []
t = (1, 2)
for attempt in ['t[0] = 5', 'del t[0]', 's[0] = 1', 'n.attr = 1']:
    try:
        if attempt == 't[0] = 5':
            t[0] = 5
        elif attempt == 'del t[0]':
            del t[0]
        elif attempt == 's[0] = 1':
            s = 'abc'
            s[0] = 1
        else:
            n = 5
            n.attr = 1
    except (TypeError, AttributeError) as e:
        out.append(type(e).__name__)
e = ValueError('bad')
e.status = 404
try:
    await tools.fail({})
except ToolCallError as failure:
    failure.retry = True
    out.append(failure.retry)
return out + [e.status]
"""
    assert ok(await run(program)) == [
        "TypeError", "TypeError", "TypeError", "AttributeError", True, 404,
    ]  # fmt: skip


def test_the_guests_default_error_class_is_the_engines() -> None:
    # The worker side cannot import the engine; its copy of the default must not drift.
    from codemode.sandbox.python import _guest

    default = ErrorClass()
    assert _guest._DEFAULT_ERROR == (default.name, default.member_name_property)
