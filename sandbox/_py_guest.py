"""The Python guest: compile a program restricted, run it on an asyncio loop, report.

``serve(run, bridge, loop)`` is called in a locked-down worker with the ``run`` frame.
The program sees its bindings (``tools``: attribute and subscript access, calls return
opaque awaitables; ``ToolCallError``), restricted builtins and the allow-listed modules.
Binding calls start when made, like a JS promise: their ``call`` frames leave as soon as
the program yields to the loop (all calls of one step in one write) and resolve when the
host's ``result`` frames arrive, in whatever order. ``print`` is coalesced into one log
entry per line and each line is written to the host before ``print`` returns.

Limits are terminal: ``MemoryError`` and ``RecursionError`` end the run wherever they are
caught (``_exc_guard_`` in every handler, a check on ``gather`` results), and the
compute/wall budgets are enforced from outside by killing the process.
"""

from __future__ import annotations

import asyncio
import mmap
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import msgspec
from RestrictedPython.compile import compile_restricted_exec

from . import _py_modules
from ._frames import (
    CallFrame,
    DoneFrame,
    ErrorSpec,
    LogFrame,
    ResultFrame,
    RunFrame,
    encode_payload,
    json_string_length,
    sanitize_text,
    truncate_to_json_length,
)
from ._py_builtins import make_builtins, make_guards
from ._py_objects import (
    _Awaitable,
    _error_class,
    _LineSink,
    _Lossy,
    _Namespace,
    _Printer,
    _Returned,
    to_json,
)
from ._py_policy import MAIN, SandboxPolicy
from ._py_traceback import FILENAME, format_exception, format_policy_errors, format_syntax_error
from ._worker_bridge import WorkerBridge

__all__ = ["compile_program", "serve", "warm", "warm_worker"]

_RECURSION_LIMIT = 1000
_ARGS_LOSSY = "binding arguments must be lossless JSON"
_VALUE_LOSSY = "program completion must be lossless JSON"
_encode = encode_payload  # deep values are written iteratively (see _frames)


def compile_program(source: str) -> Any:
    """The code object of ``source`` (wrapped, restricted), or a formatted compile error."""
    import ast

    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename=FILENAME, mode="exec")
        result = compile_restricted_exec(tree, filename=FILENAME, policy=SandboxPolicy)
    except SyntaxError as exc:
        return format_syntax_error(exc, lines)
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"SyntaxError: {exc}"
    if result.errors:
        return format_policy_errors(list(result.errors), lines)
    return result.code


class _Run:
    """One program execution inside the worker."""

    def __init__(self, run: RunFrame, bridge: WorkerBridge, loop: asyncio.AbstractEventLoop):
        self.run = run
        self.bridge = bridge
        self.loop = loop
        self.lines = run.program.splitlines()
        self.pending: dict[int, tuple[asyncio.Future[Any], str, type[Exception] | None]] = {}
        self.next_id = 0
        self.sink = _LineSink(self.emit_log, run.max_output_bytes)
        self.log_used = 2
        self.log_count = 0
        self.log_overflow = False
        self.members: dict[type[Exception], str] = {}
        self.outbox: list[bytes] = []
        # Address space released before reporting a MemoryError so that the report can
        # allocate under RLIMIT_AS (an untouched mapping costs no page faults).
        self.reserve: mmap.mmap | None = mmap.mmap(-1, 4 << 20)

    # -- output -----------------------------------------------------------------------

    def emit_log(self, text: str) -> None:
        if self.log_overflow:
            return
        text = sanitize_text(text)
        sep = 1 if self.log_count else 0
        cost = sep + json_string_length(text)
        limit = min(self.run.max_output_bytes, self.run.max_frame_bytes - 256)
        if self.log_used + cost > self.run.max_output_bytes or cost > limit:
            # Ship just enough for the host's ledger to see the overflow, then go quiet.
            self.log_overflow = self.log_used + cost > self.run.max_output_bytes
            budget = max(self.run.max_output_bytes - self.log_used - sep, 0) + 16
            text = truncate_to_json_length(text, min(budget, limit))
            cost = sep + json_string_length(text)
        self.log_used += cost
        self.log_count += 1
        self.flush_calls()
        self.bridge.send(LogFrame(text=text))

    def queue_call(self, data: bytes) -> None:
        """Send a call frame at the end of this loop iteration, with its siblings.

        A ``gather`` of 100 calls then costs one write and one host wake-up instead of
        100; the program still cannot observe the difference, since nothing it awaits
        can resolve before the loop runs again.
        """
        if not self.outbox:
            self.loop.call_soon(self.flush_calls)
        self.outbox.append(data)

    def flush_calls(self) -> None:
        if self.outbox:
            data = b"".join(self.outbox)
            self.outbox.clear()
            self.bridge.send_raw(data)

    def finish(self, frame: DoneFrame) -> None:
        self.sink.close()
        self.flush_calls()
        self.bridge.send(frame)

    def terminate(self, kind: str, message: str) -> NoReturn:
        """End the run now (limits are terminal): report and exit the process."""
        if self.reserve is not None:
            self.reserve.close()
            self.reserve = None
        try:
            self.finish(DoneFrame(error=ErrorSpec(kind=kind, message=message)))
        finally:
            os._exit(0)

    def memory_message(self) -> str:
        return "memory limit exceeded (MemoryError)"

    def check_terminal(self, exc: BaseException | None) -> None:
        if isinstance(exc, MemoryError):
            self.terminate("memory", self.memory_message())
        if isinstance(exc, RecursionError):
            sys.setrecursionlimit(_RECURSION_LIMIT + 500)
            self.terminate("exception", format_exception(exc, self.lines))

    # -- bindings ---------------------------------------------------------------------

    def caller(
        self, global_name: str, names: list[str], error: type[Exception] | None
    ) -> Callable[[str, Any], _Awaitable]:
        known = frozenset(names)

        def call(name: str, payload: Any) -> _Awaitable:
            future: asyncio.Future[Any] = self.loop.create_future()
            try:
                if payload is _Lossy:
                    raise _Lossy
                args = to_json(payload)
            except (_Lossy, RecursionError):
                future.set_exception(TypeError(_ARGS_LOSSY))
                return _Awaitable(future)
            if name not in known:
                message = f'unknown binding "{global_name}.{name}"'
                future.set_exception(self.failure(error, name, message, None))
                return _Awaitable(future)
            call_id = self.next_id
            self.next_id += 1
            frame = CallFrame(id=call_id, global_name=global_name, name=name, args=args)
            try:
                data = _encode(frame)
            except (msgspec.EncodeError, UnicodeEncodeError):
                future.set_exception(TypeError(_ARGS_LOSSY))
                return _Awaitable(future)
            if len(data) > self.run.max_frame_bytes:
                cap = self.run.max_frame_bytes
                future.set_exception(
                    TypeError(f"binding arguments exceed the bridge frame limit ({cap} bytes)")
                )
                return _Awaitable(future)
            self.pending[call_id] = (future, name, error)
            self.queue_call(len(data).to_bytes(4, "big") + data)
            return _Awaitable(future)

        return call

    def failure(
        self, error: type[Exception] | None, name: str, message: str, code: str | None
    ) -> Exception:
        if error is None:
            return RuntimeError(message)
        fields: dict[str, Any] = {"code": code, self.members[error]: name}
        return error(message, **fields)

    def on_result(self, frame: ResultFrame) -> None:
        entry = self.pending.pop(frame.id, None)
        if entry is None:
            return  # unknown, duplicate or late: dropped
        future, name, error = entry
        if future.done():
            return
        if frame.ok:
            future.set_result(frame.value)
        else:
            future.set_exception(self.failure(error, name, frame.message, frame.code))

    # -- asyncio facade ---------------------------------------------------------------

    def gather(self, *aws: Any, return_exceptions: bool = False) -> _Awaitable:
        # Our awaitables wrap futures, which gather takes as they are (no task each).
        unwrapped = [a._Awaitable__inner if type(a) is _Awaitable else a for a in aws]  # type: ignore[attr-defined]
        inner = asyncio.gather(*unwrapped, return_exceptions=bool(return_exceptions))

        def check(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                return
            exc = future.exception()
            self.check_terminal(exc)
            if exc is None and return_exceptions:
                for item in future.result():
                    if isinstance(item, BaseException):
                        self.check_terminal(item)

        inner.add_done_callback(check)
        return _Awaitable(inner)

    def sleep(self, delay: Any, result: Any = None) -> _Awaitable:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)):
            raise TypeError("sleep() delay must be a number")
        return _Awaitable(asyncio.sleep(delay, result))

    # -- running ----------------------------------------------------------------------

    def exc_guard(self) -> None:
        self.check_terminal(sys.exc_info()[1])

    def build_globals(self) -> dict[str, Any]:
        facade = _py_modules.ModuleProxy("asyncio", {"gather": self.gather, "sleep": self.sleep})
        importer = _py_modules.make_importer({"asyncio": facade})
        printer = _Printer(self.sink)
        env = make_guards(
            print_factory=lambda _getattr: printer,
            exc_guard=self.exc_guard,
            returned=_Returned,
        )
        env["__builtins__"] = make_builtins(importer)
        for spec in self.run.bindings:
            if spec.global_name.startswith("_") or spec.global_name in env:
                continue  # the host refuses these; never let one replace a guard
            error: type[Exception] | None = None
            if spec.error_class is not None:
                error = _error_class(spec.error_class.name, spec.error_class.member_name_property)
                self.members[error] = spec.error_class.member_name_property
                env[spec.error_class.name] = error
            env[spec.global_name] = _Namespace(
                spec.global_name, spec.names, self.caller(spec.global_name, spec.names, error)
            )
        return env

    def execute(self) -> None:
        code = compile_program(self.run.program)
        if isinstance(code, str):
            self.finish(DoneFrame(error=ErrorSpec(kind="exception", message=code)))
            return
        env = self.build_globals()
        exec(code, env)
        main = env[MAIN]
        self.bridge.attach(self.loop, self.on_result)
        try:
            result = self.loop.run_until_complete(main())
        except BaseException as exc:
            self.check_terminal(exc)
            self.finish(DoneFrame(error=ErrorSpec(kind="exception", message=self.describe(exc))))
            return
        self.complete(result)

    def describe(self, exc: BaseException) -> str:
        try:
            return format_exception(exc, self.lines)
        except Exception:
            return f"{type(exc).__name__}: <unrenderable exception>"

    def complete(self, result: Any) -> None:
        if not isinstance(result, _Returned):
            self.finish(DoneFrame())
            return
        try:
            value = to_json(result.value)
            data = _encode(DoneFrame(value=value))
        except (_Lossy, RecursionError, msgspec.EncodeError, UnicodeEncodeError):
            self.finish(DoneFrame(error=ErrorSpec(kind="invalid-output", message=_VALUE_LOSSY)))
            return
        if len(data) > self.run.max_frame_bytes:
            # Cannot cross the bridge (the default frame cap is the output cap + 1 MiB, so
            # it could not fit the ledger either); the host renders the diagnostic.
            self.finish(DoneFrame(error=ErrorSpec(kind="output-limit", message="")))
            return
        self.sink.close()
        self.flush_calls()
        self.bridge.send_raw(len(data).to_bytes(4, "big") + data)


def serve(run: RunFrame, bridge: WorkerBridge, loop: asyncio.AbstractEventLoop) -> None:
    """Run ``run.program`` to completion and send ``done`` (guest entry point)."""
    warnings.simplefilter("ignore")
    sys.setrecursionlimit(_RECURSION_LIMIT)
    # Library code that looks up a class's module (dataclasses) finds an empty one.
    import types

    sys.modules.setdefault(FILENAME, types.ModuleType(FILENAME))
    _Run(run, bridge, loop).execute()


def warm() -> None:
    """Import and exercise everything a run needs (called in the fork server)."""
    _py_modules.warm()
    sample = (
        "import json, asyncio\n"
        "from dataclasses import dataclass\n"
        "@dataclass\nclass P:\n    x: int = 0\n"
        "d = {}\nd['a'] = d.get('a', 0)\nd['a'] += 1\n"
        "print(f'{d}', [i for i in range(2)], '{0}'.format(1))\n"
        "async def f():\n    return await asyncio.sleep(0)\n"
        "try:\n    pass\nexcept Exception as e:\n    pass\n"
        "return json.dumps(d)\n"
    )
    code = compile_program(sample)
    assert not isinstance(code, str), code
    loop = asyncio.new_event_loop()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


_WARM_PROGRAM = (
    "import json\n"
    "class C:\n    def __init__(self):\n        self.n = 0\n"
    "c = C()\nc.n += 1\nd = {'k': [1, 2.5, 'x']}\nd['k'] += [c.n]\n"
    "async def f(x):\n    return x\n"
    "try:\n    v = await f(json.dumps(d))\nexcept ValueError:\n    v = None\n"
    "return {'v': v, 's': sorted(d), 'f': f'{c.n:02d}'}\n"
)


def warm_worker(loop: asyncio.AbstractEventLoop) -> None:
    """Run a small program once in a fresh worker, before it reports ``ready``.

    A forked worker shares its pages with the fork server; the first run touches (and so
    copies) a few megabytes of them. Doing that here keeps it off the run's latency.
    """
    code = compile_program(_WARM_PROGRAM)
    assert not isinstance(code, str), code
    frame = RunFrame(
        guest="python", program=_WARM_PROGRAM, bindings=[], max_output_bytes=1 << 20,
        max_frame_bytes=1 << 20, max_sub_calls=1,
    )  # fmt: skip
    run = _Run(frame, None, loop)  # type: ignore[arg-type]
    env = run.build_globals()
    exec(code, env)
    result = loop.run_until_complete(env[MAIN]())
    to_json(result.value)
    _encode(DoneFrame(value=result.value))
    if run.reserve is not None:
        run.reserve.close()
