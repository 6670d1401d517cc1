"""One behaviour, two languages: every code-mode case runs on ``PythonRuntime`` and on
``TypeScriptRuntime``, with each case's program written side by side.

Kinds, messages, values, logs and rendered content are asserted identical wherever the
spec requires parity; where a language's own format is the contract (the text of an
uncaught exception, ``print``'s one entry per line) each language's exact form is
asserted instead.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from sandbox_helpers import Run, add_tool, err, make_runner, ok

from codemode.engine import (
    AbortController,
    CodeRuntime,
    Deny,
    MemorySessionLog,
    ToolExecutionInput,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text,
)
from codemode.sandbox import Limits, ProcessRuntime, PythonRuntime, TypeScriptRuntime

pytestmark = pytest.mark.anyio

LANGS = ["python", "typescript"]
RUNTIMES: dict[str, type[ProcessRuntime]] = {
    "python": PythonRuntime,
    "typescript": TypeScriptRuntime,
}
NORMAL = Limits(max_compute_ms=10_000, max_wall_ms=30_000)
TIGHT = Limits(
    max_compute_ms=400,
    max_wall_ms=2_000,
    max_memory_bytes=192 * 2**20,
    max_output_bytes=1_000,
    max_sub_calls=50,
)
MEMORY = "memory limit exceeded (201326592 bytes)"


@pytest.fixture(scope="module")
async def runtimes() -> AsyncIterator[dict[str, ProcessRuntime]]:
    async with PythonRuntime(NORMAL) as py, TypeScriptRuntime(NORMAL) as ts:
        yield {"python": py, "typescript": ts}


@pytest.fixture(scope="module")
async def tight_runtimes() -> AsyncIterator[dict[str, ProcessRuntime]]:
    async with PythonRuntime(TIGHT) as py, TypeScriptRuntime(TIGHT) as ts:
        yield {"python": py, "typescript": ts}


@pytest.fixture(params=LANGS)
def lang(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def runtime(runtimes: dict[str, ProcessRuntime], lang: str) -> ProcessRuntime:
    return runtimes[lang]


@pytest.fixture
def run(runtime: ProcessRuntime) -> Run:
    return make_runner(runtime)


@pytest.fixture
def trun(tight_runtimes: dict[str, ProcessRuntime], lang: str) -> Run:
    return make_runner(tight_runtimes[lang])


def json_tool(name: str, body: Any, *, parallel: bool = True) -> Any:
    """A tool taking any JSON object and returning ``body(args)``'s JSON value."""

    async def execute(args: Any, ctx: Any) -> Any:
        return await body(args)

    return define_tool(
        name=name,
        description=f"Test tool {name}.",
        parameters={"value": {"type": "json"}},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text(str(v))]),
        execute=execute,
        is_concurrency_safe=(lambda args: True) if parallel else None,
    )


async def run_code(
    runtime: ProcessRuntime,
    code: str,
    *,
    tools: Sequence[Any] = (),
    cap: int = 10,
    setup: Any = None,
) -> Any:
    """``run_code`` through the whole pipeline of a code-mode ``ToolRuntime``."""
    rt = ToolRuntime(mode="code", max_parallel_sub_calls=cap, code_runtime=runtime)
    for definition in tools:
        rt.register(definition)
    if setup is not None:
        setup(rt)
    agent = rt.scope("agent", session=MemorySessionLog())
    with anyio.fail_after(50):
        return await rt.execute(
            ToolExecutionInput(
                call_id="call-1",
                name="run_code",
                arguments={"code": code, "description": "Parity case"},
                signal=AbortController().signal,
                agent=agent,
            )
        )


def content_text(result: Any) -> str:
    assert len(result.content) == 1, result.content
    return str(result.content[0]["text"])


# -- both runtimes are the same kind of thing ---------------------------------------------


async def test_both_are_code_runtimes(runtime: ProcessRuntime, lang: str) -> None:
    assert isinstance(runtime, CodeRuntime)
    assert (runtime.language, runtime.isolation) == (lang, "process")


# -- values and rendering through run_code ------------------------------------------------

RENDER_CASES = [
    pytest.param(
        "return {'n': 42, 'ok': True}",
        "return {n: 42, ok: true}",
        {"logs": [], "result": {"n": 42, "ok": True}},
        '{\n  "n": 42,\n  "ok": true\n}',
        id="object",
    ),
    pytest.param("return []", "return []", {"logs": [], "result": []}, "[]", id="empty-array"),
    pytest.param("return {}", "return {}", {"logs": [], "result": {}}, "{}", id="empty-object"),
    pytest.param("return None", "return null", {"logs": [], "result": None}, "null", id="null"),
    pytest.param(
        "print('printed')\nreturn 'returned'",
        "console.log('printed'); return 'returned'",
        {"logs": ["printed"], "result": "returned"},
        "printed\nreturned",
        id="logs-and-raw-string",
    ),
    pytest.param(
        "return ''",
        "return ''",
        {"logs": [], "result": ""},
        "(run_code completed with no output)",
        id="empty-string",
    ),
    pytest.param(
        "x = 1",
        "const x = 1",
        {"logs": []},
        "(run_code completed with no output)",
        id="no-value",
    ),
    pytest.param(
        "return [3.0, 1e21, 1e-7, 0.5, -2, 'é€']",
        "return [3, 1e21, 1e-7, 0.5, -2, 'é€']",
        {"logs": [], "result": [3, 1e21, 1e-7, 0.5, -2, "é€"]},
        '[\n  3,\n  1e+21,\n  1e-7,\n  0.5,\n  -2,\n  "é€"\n]',
        id="js-numbers",
    ),
    pytest.param(
        "return {'a': {'b': {'c': {'d': {'e': {'f': [1, {'g': 2}]}}}}}}",
        "return {a: {b: {c: {d: {e: {f: [1, {g: 2}]}}}}}}",
        {"logs": [], "result": {"a": {"b": {"c": {"d": {"e": {"f": [1, {"g": 2}]}}}}}}},
        '{\n  "a": {\n    "b": {\n      "c": {\n        "d": {\n          "e": {"f":[1,{"g":2}]}\n'
        "        }\n      }\n    }\n  }\n}",
        id="depth-five-compact",
    ),
]


@pytest.mark.parametrize(("py", "ts", "value", "rendered"), RENDER_CASES)
async def test_values_and_rendering(
    runtime: ProcessRuntime, lang: str, py: str, ts: str, value: Any, rendered: str
) -> None:
    result = await run_code(runtime, py if lang == "python" else ts)
    assert not result.is_error, result
    assert result.value == value
    assert content_text(result) == rendered


async def test_multi_line_output_renders_the_same(runtime: ProcessRuntime, lang: str) -> None:
    # print() is one entry per line, console.log one entry per call; joined, they agree.
    program = {
        "python": "print('x\\ny')\nprint('z', 1)",
        "typescript": "console.log('x\\ny'); console.log('z', 1)",
    }[lang]
    result = await run_code(runtime, program)
    expected_logs = {"python": ["x", "y", "z 1"], "typescript": ["x\ny", "z 1"]}[lang]
    assert result.value == {"logs": expected_logs}
    assert content_text(result) == "x\ny\nz 1"


# -- top-level await, return, logs -------------------------------------------------------


async def test_top_level_await_and_return(run: Run, lang: str) -> None:
    program = {
        "python": "x = await tools.echo({'v': 1})\nprint('got', x['v'])\nreturn x['v'] + 1",
        "typescript": "const x = await tools.echo({v: 1}); console.log('got', x.v); return x.v + 1",
    }[lang]
    result = await run(program)
    assert ok(result) == 2
    assert result.logs == ["got 1"]


async def test_exotic_tool_names_by_subscript(run: Run, lang: str) -> None:
    program = {
        "python": "return await tools['my-tool']({'a': [1, None]})",
        "typescript": "return await tools['my-tool']({a: [1, null]})",
    }[lang]
    assert ok(await run(program)) == {"a": [1, None]}


async def test_results_arrive_in_submission_order(run: Run, lang: str) -> None:
    program = {
        "python": (
            "import asyncio\n"
            "return await asyncio.gather(\n"
            "    tools.delayed({'delay': 0.2, 'value': 'slow'}),\n"
            "    tools.delayed({'delay': 0, 'value': 'fast'}),\n"
            "    tools.echo({'n': 3}),\n"
            ")"
        ),
        "typescript": (
            "return await Promise.all([\n"
            "  tools.delayed({delay: 0.2, value: 'slow'}),\n"
            "  tools.delayed({delay: 0, value: 'fast'}),\n"
            "  tools.echo({n: 3}),\n"
            "])"
        ),
    }[lang]
    assert ok(await run(program)) == ["slow", "fast", {"n": 3}]


async def test_sleeping_accrues_no_compute(trun: Run, lang: str) -> None:
    # 0.6 s of timers is past the 400 ms compute budget.
    program = {
        "python": "import asyncio\nawait asyncio.sleep(0.6)\nreturn 'woke'",
        "typescript": "await new Promise((r) => setTimeout(r, 600)); return 'woke'",
    }[lang]
    assert ok(await trun(program)) == "woke"


# -- failed calls: ToolCallError ---------------------------------------------------------


async def test_tool_call_error_fields(run: Run, lang: str) -> None:
    program = {
        "python": (
            "out = []\n"
            "for args in [{'message': 'nope', 'code': 'E_NOPE'}, {'message': 'plain'}]:\n"
            "    try:\n"
            "        await tools.fail(args)\n"
            "    except ToolCallError as e:\n"
            "        out.append([isinstance(e, Exception), e.toolName, e.message, e.code])\n"
            "return out"
        ),
        "typescript": (
            "const out = [];\n"
            "for (const args of [{message: 'nope', code: 'E_NOPE'}, {message: 'plain'}]) {\n"
            "  try {\n"
            "    await tools.fail(args);\n"
            "  } catch (e) {\n"
            "    out.push([e instanceof ToolCallError && e instanceof Error, e.toolName,\n"
            "              e.message, e.code]);\n"
            "  }\n"
            "}\n"
            "return out"
        ),
    }[lang]
    assert ok(await run(program)) == [
        [True, "fail", "nope", "E_NOPE"],
        [True, "fail", "plain", None],
    ]


async def test_uncaught_tool_call_error(run: Run, lang: str) -> None:
    program = {
        "python": "x = 1\nawait tools.fail({'message': 'nope'})",
        "typescript": "const x = 1\nawait tools.fail({message: 'nope'})",
    }[lang]
    expected = {
        "python": (
            "Traceback (most recent call last):\n  line 2, in <program>\n"
            "    await tools.fail({'message': 'nope'})\nToolCallError: nope"
        ),
        "typescript": "ToolCallError: nope\n    at <program>:2",
    }[lang]
    assert err(await run(program)) == expected


async def test_lossy_arguments_are_a_type_error(run: Run, lang: str) -> None:
    program = {
        "python": (
            "try:\n    await tools.echo({'f': {1, 2}})\n"
            "except TypeError as e:\n    return [type(e).__name__, str(e)]"
        ),
        "typescript": (
            "try { await tools.echo({f: () => 1}) } catch (e) { return [e.name, e.message] }"
        ),
    }[lang]
    # Both languages share one sentence; what follows it (the path, the type,
    # the fix) is each guest's own.
    name, message = ok(await run(program))
    assert name == "TypeError"
    assert message.startswith("binding arguments must be lossless JSON")


async def test_deep_arguments_cross_both_ways(run: Run, lang: str) -> None:
    async def depth(args: Any) -> Any:
        cursor, n = args["v"], 0
        while isinstance(cursor, list):
            cursor, n = cursor[0], n + 1
        return {"depth": n, "echo": args["v"]}

    program = {
        "python": (
            "v = 'leaf'\nfor _ in range(5000):\n    v = [v]\n"
            "r = await tools.depth({'v': v})\n"
            "n, c = 0, r['echo']\nwhile isinstance(c, list):\n    c, n = c[0], n + 1\n"
            "return [r['depth'], n, c]"
        ),
        "typescript": (
            "let v: unknown = 'leaf'\nfor (let i = 0; i < 5000; i++) v = [v]\n"
            "const r = await tools.depth({v})\n"
            "let n = 0, c = r.echo\nwhile (Array.isArray(c)) { c = c[0]; n++ }\n"
            "return [r.depth, n, c]"
        ),
    }[lang]
    assert ok(await run(program, tools={"depth": depth})) == [5000, 5000, "leaf"]


async def test_deep_completion_value(run: Run, lang: str) -> None:
    program = {
        "python": "v = 0\nfor _ in range(5000):\n    v = [v]\nreturn v",
        "typescript": "let v: unknown = 0\nfor (let i = 0; i < 5000; i++) v = [v]\nreturn v",
    }[lang]
    value = ok(await run(program))
    n = 0
    while isinstance(value, list):
        value, n = value[0], n + 1
    assert (n, value) == (5000, 0)


# -- re-entry through the pipeline -------------------------------------------------------


async def test_sub_calls_reenter_the_pipeline_and_policies(
    runtime: ProcessRuntime, lang: str
) -> None:
    async def deny(exec_: Any, next_: Any) -> Any:
        return (
            Deny("not on my watch")
            if exec_.name == "add" and exec_.arguments["a"] == 13
            else (await next_())
        )

    program = {
        "python": (
            "out = [await tools.add({'a': 1, 'b': 2})]\n"
            "for args in [{'a': 13, 'b': 0}, {'a': 'one', 'b': 0}]:\n"
            "    try:\n"
            "        await tools.add(args)\n"
            "    except ToolCallError as e:\n"
            "        out.append([e.toolName, e.message, e.code])\n"
            "return out"
        ),
        "typescript": (
            "const out: unknown[] = [await tools.add({a: 1, b: 2})]\n"
            "for (const args of [{a: 13, b: 0}, {a: 'one', b: 0}]) {\n"
            "  try {\n"
            "    await tools.add(args)\n"
            "  } catch (e) {\n"
            "    out.push([e.toolName, e.message, e.code])\n"
            "  }\n"
            "}\n"
            "return out"
        ),
    }[lang]
    result = await run_code(
        runtime,
        program,
        tools=[add_tool()],
        setup=lambda rt: rt.on("tools/pre-execute", deny),
    )
    assert not result.is_error, result
    assert result.value["result"] == [
        3,
        ["add", "not on my watch", None],
        ["add", 'invalid arguments: "a" must be an integer', "INVALID_ARGS"],
    ]


async def test_concurrency_peaks_at_the_cap(runtime: ProcessRuntime, lang: str) -> None:
    active = peak = 0

    async def probe(args: Any) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.02)
        active -= 1
        return args["value"]

    program = {
        "python": (
            "import asyncio\n"
            "return await asyncio.gather(*[tools.probe({'value': i}) for i in range(12)])"
        ),
        "typescript": (
            "return await Promise.all(Array.from({length: 12}, (_, i) => tools.probe({value: i})))"
        ),
    }[lang]
    result = await run_code(runtime, program, tools=[json_tool("probe", probe)], cap=3)
    assert not result.is_error, result
    assert result.value["result"] == list(range(12))
    assert peak == 3


# -- uncaught exceptions: each language's own format, the program's own lines -------------


async def test_uncaught_exception_format(run: Run, lang: str) -> None:
    program = {
        "python": (
            "def helper(x):\n    raise ValueError('boom ' + str(x))\n"
            "print('before')\nr = helper(1)\nreturn r"
        ),
        "typescript": (
            "function helper(x: number): number {\n  throw new Error('boom ' + x)\n}\n"
            "console.log('before')\nconst r = helper(1)\nreturn r"
        ),
    }[lang]
    expected = {
        "python": (
            "Traceback (most recent call last):\n  line 4, in <program>\n    r = helper(1)\n"
            "  line 2, in helper\n    raise ValueError('boom ' + str(x))\nValueError: boom 1"
        ),
        "typescript": "Error: boom 1\n    at helper (<program>:2)\n    at <program>:5",
    }[lang]
    result = await run(program)
    assert err(result) == expected
    assert result.logs == ["before"]


async def test_program_failure_through_run_code(runtime: ProcessRuntime, lang: str) -> None:
    program = {
        "python": "print('working')\nraise ValueError('boom')",
        "typescript": "console.log('working')\nthrow new TypeError('boom')",
    }[lang]
    result = await run_code(runtime, program)
    assert result.is_error and result.error.info.code == "CODE_RUN_FAILED"
    expected = {
        "python": (
            "Traceback (most recent call last):\n  line 2, in <program>\n"
            "    raise ValueError('boom')\nValueError: boom"
        ),
        "typescript": "TypeError: boom\n    at <program>:2",
    }[lang]
    assert result.error.message == (
        f"code run failed (exception): {expected}\nCaptured output:\nworking"
    )


# -- invalid output ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("py", "ts"),
    [
        ("return {1, 2}", "return new Set([1, 2])"),
        ("return float('nan')", "return NaN"),
        ("return -0.0", "return -0"),
        ("return {1: 'a'}", "return new Map([[1, 'a']])"),
        ("a = []\na.append(a)\nreturn a", "const a: unknown[] = []; a.push(a); return a"),
        ("return print", "return console.log"),
    ],
)
async def test_invalid_output(run: Run, lang: str, py: str, ts: str) -> None:
    result = await run(py if lang == "python" else ts)
    assert err(result, "invalid-output").startswith("program completion must be lossless JSON")


# -- limits: identical kinds and messages --------------------------------------------------


async def test_compute_budget(trun: Run, lang: str) -> None:
    program = {
        "python": "pending = tools.slow({'seconds': 30})\nprint('spinning')\nwhile True:\n    pass",
        "typescript": "const pending = tools.slow({seconds: 30}); console.log('spinning'); while (true) {}",
    }[lang]
    result = await trun(program)
    assert err(result, "timeout") == "compute budget exhausted (400ms busy)"
    assert result.logs == ["spinning"]


async def test_compute_budget_cannot_be_caught(trun: Run, lang: str) -> None:
    program = {
        "python": (
            "while True:\n    try:\n        while True:\n            pass\n"
            "    except BaseException:\n        print('caught')"
        ),
        "typescript": (
            "while (true) { try { while (true) {} } catch (e) { console.log('caught') } "
            "finally { console.log('finally') } }"
        ),
    }[lang]
    result = await trun(program)
    assert err(result, "timeout") == "compute budget exhausted (400ms busy)"
    assert result.logs == []


async def test_wall_clock(trun: Run, lang: str) -> None:
    program = {
        "python": "import asyncio\nprint('waiting')\nawait asyncio.sleep(60)",
        "typescript": "console.log('waiting'); await new Promise((r) => setTimeout(r, 60_000))",
    }[lang]
    with anyio.fail_after(10):
        result = await trun(program)
    assert err(result, "timeout") == "wall-clock ceiling reached (2000ms)"
    assert result.logs == ["waiting"]


async def test_memory(trun: Run, lang: str) -> None:
    # bytes(n) is calloc'ed: the address-space cap is reached without touching pages,
    # whose first-touch faults made a touching loop exceed the compute budget on a
    # loaded VM (a memory test, not a page-fault benchmark).
    program = {
        "python": "print('start')\nx = []\nwhile True:\n    x.append(bytes(16 * 2**20))",
        "typescript": (
            "console.log('start'); const x = []; while (true) x.push(new Uint8Array(16 * 2**20))"
        ),
    }[lang]
    result = await trun(program)
    assert err(result, "memory") == MEMORY
    assert result.logs == ["start"]


async def test_memory_cannot_be_caught(trun: Run, lang: str) -> None:
    program = {
        "python": (
            "x = []\ntry:\n    while True:\n        x.append('a' * 1_000_000)\n"
            "except MemoryError:\n    x = None\n    return 'survived'"
        ),
        "typescript": (
            # Typed arrays reach the limit in ~20 ms; building 1 MB strings in QuickJS
            # took ~0.4 s of CPU, too close to the 400 ms compute budget under load.
            "let x: Uint8Array[] | null = []\n"
            "try { while (true) x.push(new Uint8Array(1_000_000)) }\n"
            "catch (e) { x = null; return 'survived' }"
        ),
    }[lang]
    assert err(await trun(program), "memory") == MEMORY


async def test_output_flood(trun: Run, lang: str) -> None:
    program = {
        "python": "while True:\n    print('flood flood flood')",
        "typescript": "while (true) console.log('flood flood flood')",
    }[lang]
    result = await trun(program)
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"
    # 49 whole entries of 19 bytes + 48 commas + "[]" fill 981 bytes; the 50th entry
    # gets the remaining 18 bytes after its comma: 16 characters and the quotes.
    assert result.logs == ["flood flood flood"] * 49 + ["flood flood floo"]


async def test_huge_single_entry(trun: Run, lang: str) -> None:
    program = {
        "python": "print('x' * 10_000_000)",
        "typescript": "console.log('x'.repeat(10_000_000))",
    }[lang]
    result = await trun(program)
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"
    assert result.logs == ["x" * 996]


@pytest.mark.parametrize(
    ("py", "ts", "logs"),
    [
        (
            "print('kept')\nreturn 'v' * 5_000",
            "console.log('kept'); return 'v'.repeat(5000)",
            ["kept"],
        ),
        ("raise ValueError('e' * 2_000)", "throw new Error('e'.repeat(2000))", []),
    ],
    ids=["value", "diagnostic"],
)
async def test_value_or_diagnostic_past_the_ledger(
    trun: Run, lang: str, py: str, ts: str, logs: list[str]
) -> None:
    result = await trun(py if lang == "python" else ts)
    assert err(result, "output-limit") == "outer output exceeded 1000 bytes"
    assert result.logs == logs


async def test_sub_call_limit(trun: Run, lang: str) -> None:
    program = {
        "python": (
            "n = 0\nfor i in range(100):\n    try:\n        await tools.echo({'i': i})\n"
            "        n += 1\n    except Exception:\n        pass\nreturn n"
        ),
        "typescript": (
            "let n = 0\nfor (let i = 0; i < 100; i++) {\n"
            "  try { await tools.echo({i}); n++ } catch {}\n}\nreturn n"
        ),
    }[lang]
    assert err(await trun(program), "sub-call-limit") == "sub-call limit reached (50 calls per run)"


# -- abort and worker death --------------------------------------------------------------


async def test_abort_mid_run(run: Run, lang: str) -> None:
    controller = AbortController()

    async def abort_soon() -> None:
        await anyio.sleep(0.3)
        controller.abort("user pressed stop")

    program = {
        "python": "print('before')\nawait tools.slow({})",
        "typescript": "console.log('before'); await tools.slow({})",
    }[lang]
    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_soon)
        result = await run(program, signal=controller.signal)
    assert err(result, "abort") == "user pressed stop"
    assert result.logs == ["before"]


async def test_pre_aborted_signal(run: Run, lang: str) -> None:
    controller = AbortController()
    controller.abort()
    result = await run("return 1", signal=controller.signal)
    assert err(result, "abort") == "This operation was aborted"
    assert result.logs == []


async def test_worker_killed_externally(runtime: ProcessRuntime, lang: str) -> None:
    run = make_runner(runtime)

    async def kill_worker() -> None:
        for _ in range(500):
            if runtime.processes().worker_pids:
                break
            await anyio.sleep(0.01)
        await anyio.sleep(0.2)
        for pid in runtime.processes().worker_pids:
            os.kill(pid, signal.SIGKILL)

    program = {
        "python": "print('working')\nawait tools.slow({})",
        "typescript": "console.log('working'); await tools.slow({})",
    }[lang]
    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_worker)
        result = await run(program)
    assert err(result, "worker-exit") == "worker exited with code -9 before completing"
    assert result.logs == ["working"]
    assert ok(await run("return 'next run works'")) == "next run works"
