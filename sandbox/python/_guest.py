"""The Python guest: compile a program restricted, run it on an asyncio loop, report.

``serve(run, bridge, loop)`` is called in a locked-down worker with the ``run`` frame.
The program sees its bindings (``tools``: attribute and subscript access; ``ToolCallError``),
restricted builtins and the allow-listed modules (``asyncio`` is ``_asyncio``'s).
Binding calls are coroutines, as in CPython: ``tools.x(args)`` does nothing until it is
awaited, gathered or wrapped in a task; calls never started are summed up in one last
log line. A started call's ``call`` frame leaves as soon as the program yields to the
loop (all calls of one step in one write) and resolves when the host's ``result`` frame
arrives, in whatever order. ``print`` is coalesced into one log entry per line and each
line is written to the host before ``print`` returns.

Limits and guard denials are terminal: ``MemoryError`` (kind ``memory``),
``RecursionError`` (``recursion``) and a refused access (``DeniedAccess``/``DeniedWrite``,
kind ``forbidden``) end the run wherever they are caught (``_exc_guard_`` in every
handler, a done-callback on every task, checks where asyncio hands exceptions back), and
the compute/wall budgets are enforced from outside by killing the process.
"""

from __future__ import annotations

import asyncio
import keyword
import marshal
import mmap
import os
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import msgspec
from RestrictedPython.compile import compile_restricted_exec

from ..worker._bridge import WorkerBridge
from ..worker._frames import (
    MAX_PREPARED_BYTES,
    CallFrame,
    DoneFrame,
    ErrorSpec,
    LogFrame,
    PreparedFrame,
    ResultFrame,
    RunFrame,
    encode_frame,
    sanitize_text,
    truncate_to_json_length,
)
from ..worker._ledger import LogLedger
from . import _modules
from ._asyncio import make_asyncio
from ._builtins import DeniedAccess, DeniedWrite, make_builtins, make_guards
from ._objects import (
    _BadArity,
    _error_class,
    _LineSink,
    _Lossy,
    _Namespace,
    _Printer,
    _Returned,
    _ToolCall,
    is_awaitable_value,
    match_guard,
    namedtuple_getattr,
    own_getattr,
    own_write,
    program_delattr,
    program_getattr,
    program_hasattr,
    program_setattr,
    to_json,
)
from ._policy import MAIN, TOP_LEVEL_YIELD, SandboxPolicy
from ._traceback import (
    FILENAME,
    format_exception,
    format_policy_errors,
    format_syntax_error,
    program_traceback,
)

__all__ = ["compile_program", "prefault", "prepare_template", "serve", "warm"]

_RECURSION_LIMIT = 1000
# ``ErrorClass()``'s name and member (``codemode.engine.code_mode``), prepared ahead.
_DEFAULT_ERROR = ("ToolCallError", "toolName")
_ARGS_LOSSY = "binding arguments must be lossless JSON"
_VALUE_LOSSY = "program completion must be lossless JSON"
_DENIALS = (DeniedAccess, DeniedWrite)
_encode = encode_frame  # length-prefixed; deep values are written iteratively (see _frames)
#: A loop iteration's first so many tool calls leave together, before it ends
#: (``_Run.queue_call``): at least the engine's default cap on calls running at once, so
#: a fan-out's first round can start; a smaller gather leaves whole at the iteration's end.
_FIRST_CHUNK = 16


def compile_program(source: str) -> Any:
    """The code object of ``source`` (wrapped, restricted), or ``(kind, message)``.

    A program that does not parse is ``syntax``; one the policy refuses (dunders,
    guard names, ``exec``...) is ``forbidden``, except a top-level ``yield``, which is
    a plain syntax error.
    """
    import ast

    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename=FILENAME, mode="exec")
        result = compile_restricted_exec(tree, filename=FILENAME, policy=SandboxPolicy)
    except SyntaxError as exc:
        return ("syntax", format_syntax_error(exc, lines))
    except (ValueError, RecursionError, MemoryError) as exc:
        return ("syntax", f"SyntaxError: {exc}")
    if result.errors:
        errors = list(result.errors)
        kind = "syntax" if all(TOP_LEVEL_YIELD in e for e in errors) else "forbidden"
        return (kind, format_policy_errors(errors, lines))
    return result.code


def _code_of(prepared: bytes) -> Any:
    """The code object an earlier worker compiled from this same program (the host kept
    it: ``host/_prepared``), or None when ``prepared`` is not one (compile instead)."""
    try:
        code = marshal.loads(prepared)
    except (ValueError, EOFError, TypeError):
        return None
    return code if type(code) is types.CodeType else None


def _label(global_name: str, name: str) -> str:
    """How the program spells the call: ``tools.echo`` or ``tools["my-tool"]``."""
    if name.isidentifier() and not keyword.iskeyword(name):
        return f"{global_name}.{name}"
    return f"{global_name}[{msgspec.json.encode(name).decode()}]"


# Values CPython itself refuses to change: ``t[0] = 1`` on a tuple is the program's
# ordinary TypeError (catchable), not a guard denial.
_IMMUTABLE = frozenset({tuple, str, bytes, frozenset, int, float, complex, bool, type(None), range})


def _immutable_or(guard: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def write(obj: Any) -> Any:
        if type(obj) in _IMMUTABLE:
            return obj
        if isinstance(obj, BaseException) and type(obj).__module__ == "builtins":
            # ``e = ValueError(...); e.status = 404``: a built-in exception's own
            # attributes hold nothing of the host's (``ToolCallError`` included).
            return obj
        return guard(obj)

    return write


def _leaves(exc: BaseException) -> list[BaseException]:
    """``exc`` and, for exception groups, every exception nested in it (iteratively)."""
    out: list[BaseException] = []
    todo = [exc]
    while todo and len(out) < 10_000:
        item = todo.pop()
        out.append(item)
        if isinstance(item, BaseExceptionGroup):
            todo.extend(item.exceptions)
    return out


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
        # The host's ledger is the one that counts; this one tells the guest when the host
        # must have seen the overflow, so that it stops sending output nobody keeps.
        self.ledger = LogLedger(run.max_output_bytes)
        self.env: dict[str, Any] | None = None  # the globals, once built (``prepare``)
        # Error classes made ahead of the run frame (``prepare``), by (name, member): the
        # engine's default one is what nearly every run binds.
        self.errors: dict[tuple[str, str], type[Exception]] = {}
        self.members: dict[type[Exception], str] = {}
        self.outbox: list[bytearray] = []
        # How many queued calls leave at once before this loop iteration ends
        # (``queue_call``): ``_FIRST_CHUNK``, then doubling; back to it once the
        # iteration's flush ran.
        self.chunk = _FIRST_CHUNK
        # Tool calls created but not (yet) started, per label: summed up at the end.
        self.unawaited: dict[str, int] = {}
        self.terminating = False
        # Address space released before reporting a MemoryError so that the report can
        # allocate under RLIMIT_AS (an untouched mapping costs no page faults).
        self.reserve: mmap.mmap | None = mmap.mmap(-1, 4 << 20)

    # -- output -----------------------------------------------------------------------

    def emit_log(self, text: str) -> None:
        ledger = self.ledger
        if ledger.overflowed:
            return
        text = sanitize_text(text)
        cost = ledger.cost(text)
        limit = min(self.run.max_output_bytes, self.run.max_frame_bytes - 256)
        if not ledger.fits(cost) or cost > limit:
            # Ship just enough for the host's ledger to see the overflow, then go quiet.
            ledger.overflowed = not ledger.fits(cost)
            budget = max(ledger.room(), 0) + 16
            text = truncate_to_json_length(text, min(budget, limit))
        ledger.record(text)
        self.flush_calls()
        self.bridge.send(LogFrame(text=text))

    def queue_call(self, data: bytearray) -> None:
        """Send a call frame soon, with its siblings of this loop iteration.

        Sent in chunks that double (the first ``_FIRST_CHUNK`` calls, then 32, 64...;
        the rest at the end of the iteration): a ``gather`` of 100 calls costs three
        writes, not 100 host wake-ups, and the host starts the first calls while this
        iteration still makes the others (all in one write at the iteration's end had
        the first call wait for the hundredth: ~3 ms of every fan-out here). A smaller
        ``gather`` still leaves in one write. The program cannot observe when a call
        leaves, since nothing it awaits can resolve before the loop runs again.
        """
        outbox = self.outbox
        if not outbox and self.chunk == _FIRST_CHUNK:
            self.loop.call_soon(self.end_iteration)
        outbox.append(data)
        if len(outbox) >= self.chunk:
            self.flush_calls()
            self.chunk *= 2

    def end_iteration(self) -> None:
        """Send what this loop iteration's calls left queued; chunks start over."""
        self.chunk = _FIRST_CHUNK
        self.flush_calls()

    def idle(self) -> bool:
        """Whether nothing in this worker can run before a binding result arrives: no
        call queued to send, no callback ready and no timer in the loop (the bridge
        socket is its only other source of events). Reads the stdlib
        ``BaseEventLoop``'s queues, which the worker's loop is."""
        loop: Any = self.loop
        return not self.outbox and not loop._ready and not loop._scheduled

    def flush_calls(self) -> None:
        outbox = self.outbox
        if outbox:
            # One call (a big argument) leaves as it is; joining would copy it.
            data = outbox[0] if len(outbox) == 1 else b"".join(outbox)
            outbox.clear()
            self.bridge.send_raw(data)

    def finish(self, frame: DoneFrame) -> None:
        self.close_logs()
        self.flush_calls()
        self.bridge.send(frame)

    def close_logs(self) -> None:
        """Ship the trailing partial line, then the never-awaited summary (if any)."""
        self.sink.close()
        pending = [(label, n) for label, n in self.unawaited.items() if n > 0]
        self.unawaited.clear()
        if pending:
            total = sum(n for _, n in pending)
            verb = "call was" if total == 1 else "calls were"
            counts = ", ".join(f"{label} ×{n}" for label, n in pending)
            self.emit_log(f"{total} tool {verb} never awaited: {counts}")

    def terminate(self, kind: str, message: str) -> NoReturn:
        """End the run now (limits are terminal): report and exit the process."""
        self.terminating = True
        if self.reserve is not None:
            self.reserve.close()
            self.reserve = None
        try:
            self.finish(DoneFrame(error=ErrorSpec(kind=kind, message=message)))
            self.bridge.linger()
        finally:
            os._exit(0)

    def memory_message(self) -> str:
        return "memory limit exceeded (MemoryError)"

    def check_terminal(self, exc: BaseException | None) -> None:
        """End the run if ``exc`` (or one inside an exception group) is terminal."""
        if exc is None:
            return
        for leaf in _leaves(exc) if isinstance(exc, BaseExceptionGroup) else (exc,):
            if isinstance(leaf, MemoryError):
                self.terminate("memory", self.memory_message())
            if isinstance(leaf, RecursionError):
                sys.setrecursionlimit(_RECURSION_LIMIT + 500)
                self.terminating = True  # before rendering, which may run program code
                self.terminate("recursion", self.describe(leaf))
            if isinstance(leaf, _DENIALS):
                self.terminating = True
                self.terminate("forbidden", self.describe(leaf))

    def on_task_done(self, task: asyncio.Future[Any]) -> None:
        # Every task's outcome passes here, retrieved by the program or not: a denial
        # or a limit inside a task nobody awaits still ends the run.
        if not task.cancelled():
            self.check_terminal(task.exception())

    def task_factory(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        task.add_done_callback(self.on_task_done)
        return task

    # -- bindings ---------------------------------------------------------------------

    def caller(
        self, global_name: str, names: list[str], error: type[Exception] | None
    ) -> Callable[[str, Any], _ToolCall]:
        known = frozenset(names)
        available = ", ".join(names) or "(none)"
        unawaited = self.unawaited

        def start(label: str, name: str, payload: Any, now: bool = False) -> asyncio.Future[Any]:
            unawaited[label] -= 1
            future: asyncio.Future[Any] = self.loop.create_future()
            if name not in known:
                message = f"unknown tool {label}; available: {available}"
                future.set_exception(self.failure(error, name, message, None))
                return future
            try:
                args = self.arguments(label, payload)
            except TypeError as exc:
                future.set_exception(exc)
                return future
            call_id = self.next_id
            self.next_id += 1
            frame = CallFrame(id=call_id, global_name=global_name, name=name, args=args)
            try:
                data = _encode(frame)
            except (msgspec.EncodeError, UnicodeEncodeError):
                future.set_exception(
                    TypeError(f"{_ARGS_LOSSY}: arguments hold a str that is not valid Unicode")
                )
                return future
            if len(data) - 4 > self.run.max_frame_bytes:
                cap = self.run.max_frame_bytes
                future.set_exception(
                    TypeError(f"binding arguments exceed the bridge frame limit ({cap} bytes)")
                )
                return future
            pending = self.pending
            pending[call_id] = (future, name, error)
            if now and len(pending) == 1 and self.idle():
                # Awaited directly and nothing else can run until its result is back:
                # exchange it here, off the loop (``WorkerBridge.wait_now``), and the
                # ``await`` of a done future returns without a yield -- three loop
                # iterations (flush, read, wake-up) fewer per sequential call.
                bridge = self.bridge
                bridge.send_raw(data)
                while not future.done() and not bridge.closed:
                    bridge.wait_now()
                return future
            self.queue_call(data)
            return future

        labels = {name: _label(global_name, name) for name in names}

        def make(name: str, payload: Any) -> _ToolCall:
            label = labels.get(name) or _label(global_name, name)
            unawaited[label] = unawaited.get(label, 0) + 1
            return _ToolCall(start, label, name, payload)

        return make

    def arguments(self, label: str, payload: Any) -> Any:
        """``payload`` as JSON, or a ``TypeError`` that names the path and the fix."""
        if type(payload) is _BadArity:
            raise TypeError(
                f"{label}() takes one dict of arguments (or keyword arguments), "
                f"got {payload.positional} positional"
                + (" and keyword arguments" if payload.keywords else "")
            )
        try:
            return to_json(payload)
        except _Lossy as exc:
            detail = exc.describe("arguments", "pass").replace("arguments at $", "arguments")
            raise TypeError(f"{_ARGS_LOSSY}: {detail}") from None
        except RecursionError:
            raise TypeError(f"{_ARGS_LOSSY}: arguments nest too deeply") from None

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

    # -- running ----------------------------------------------------------------------

    def denying(self, guard: Callable[..., Any]) -> Callable[..., Any]:
        """``guard`` that turns a denial into the end of the run (kind ``forbidden``)."""
        deny = self.deny

        def checked(*args: Any) -> Any:
            try:
                return guard(*args)
            except _DENIALS as exc:
                deny(exc)

        return checked

    def denying_getattr(self, guard: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``denying`` for ``_getattr_``, the hottest guard: two arguments, no packing."""
        deny = self.deny

        def checked(obj: Any, name: Any) -> Any:
            try:
                return guard(obj, name)
            except _DENIALS as exc:
                deny(exc)

        return checked

    def deny(self, exc: BaseException) -> NoReturn:
        # The exception has not reached a program frame yet: give it the program's
        # stack so the report points at the line that made the access.
        if self.terminating:
            # Rendering the report ran program code (a ``__str__``) that was denied too:
            # let the renderer's fallback take it instead of starting a second report.
            raise exc
        self.terminating = True
        exc = exc.with_traceback(program_traceback(sys._getframe(2)))
        self.terminate("forbidden", self.describe(exc))

    def exc_guard(self) -> None:
        self.check_terminal(sys.exc_info()[1])

    def attach(self, run: RunFrame, bridge: WorkerBridge) -> None:
        """Give a prepared run (``prepare``, before the frame arrived) its frame."""
        self.run = run
        self.bridge = bridge
        self.lines = run.program.splitlines()
        self.sink.set_max_line(run.max_output_bytes)
        self.ledger = LogLedger(run.max_output_bytes)

    def prepare(self) -> None:
        """Build the program-independent globals now (ahead of the run frame), and the
        default binding error class (a class is ~15 us to make hot, several times that in
        a cold worker). Every worker has its own copy of them: nothing is shared between
        runs."""
        self.env = self.base_globals()
        self.errors[_DEFAULT_ERROR] = _error_class(*_DEFAULT_ERROR)

    def build_globals(self) -> dict[str, Any]:
        env = self.env if self.env is not None else self.base_globals()
        self.env = None
        self.bind(env)
        return env

    def base_globals(self) -> dict[str, Any]:
        """Guards, builtins, ``print`` and the module facades: nothing of the program's."""
        facade = make_asyncio(self.check_terminal)
        importer = _modules.make_importer({"asyncio": facade})
        printer = _Printer(self.sink)
        env = make_guards(
            print_factory=lambda _getattr: printer,
            exc_guard=self.exc_guard,
            returned=_Returned,
        )
        env["_nt_getattr_"] = namedtuple_getattr
        env["_match_guard_"] = match_guard
        env["_own_getattr_"] = own_getattr
        env["_own_write_"] = own_write
        env["_write_"] = _immutable_or(env["_write_"])
        builtins = make_builtins(importer)
        builtins.update(
            getattr=program_getattr,
            hasattr=program_hasattr,
            setattr=program_setattr,
            delattr=program_delattr,
        )
        # A denial ends the run where it happens, before any handler -- the program's
        # or a library's (a real ``getattr(x, name, default)`` or ``str()`` fallback
        # around program code) -- can swallow it. ``hasattr`` stays a plain probe.
        for table, names in (
            (env, ("_write_", "_nt_getattr_", "_match_guard_", "_own_getattr_", "_own_write_")),
            (builtins, ("getattr", "setattr", "delattr")),
        ):
            for name in names:
                table[name] = self.denying(table[name])
        env["_getattr_"] = self.denying_getattr(env["_getattr_"])
        env["__builtins__"] = builtins
        return env

    def bind(self, env: dict[str, Any]) -> None:
        """Add the run's binding namespaces (and their error classes) to ``env``."""
        for spec in self.run.bindings:
            if spec.global_name.startswith("_") or spec.global_name in env:
                continue  # the host refuses these; never let one replace a guard
            error: type[Exception] | None = None
            if spec.error_class is not None:
                key = (spec.error_class.name, spec.error_class.member_name_property)
                error = self.errors.pop(key, None) or _error_class(*key)
                self.members[error] = spec.error_class.member_name_property
                env[spec.error_class.name] = error
            env[spec.global_name] = _Namespace(
                spec.global_name, spec.names, self.caller(spec.global_name, spec.names, error)
            )

    def execute(self) -> None:
        run = self.run
        code = _code_of(run.prepared) if run.prepared else None
        if code is None:
            code = compile_program(run.program)
            if isinstance(code, tuple):
                kind, message = code
                self.finish(DoneFrame(error=ErrorSpec(kind=kind, message=message)))
                return
            if run.prepare:
                # Now, before any of the program's code runs: nothing it does can reach
                # what later runs of the same text will execute (``host/_prepared``).
                data = marshal.dumps(code)
                if len(data) <= MAX_PREPARED_BYTES:
                    self.bridge.send(PreparedFrame(data=data))
        env = self.build_globals()
        exec(code, env)
        main = env[MAIN]
        pending = self.pending
        self.bridge.attach(self.loop, self.on_result, lambda: bool(pending))
        self.loop.set_task_factory(self.task_factory)  # type: ignore[arg-type]
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
        except _Lossy as exc:
            if exc.path == "$" and is_awaitable_value(result.value):
                detail = "the program returned a coroutine — did you forget await?"
            else:
                detail = exc.describe("the program's result", "return")
                if exc.path == "$":
                    detail = detail.replace("the program's result is", "the program returned", 1)
            message = f"{_VALUE_LOSSY}: {detail}"
            self.finish(DoneFrame(error=ErrorSpec(kind="invalid-output", message=message)))
            return
        except (RecursionError, msgspec.EncodeError, UnicodeEncodeError):
            self.finish(DoneFrame(error=ErrorSpec(kind="invalid-output", message=_VALUE_LOSSY)))
            return
        except Exception as exc:
            # A container subclass of the program's raised while being read (``items``).
            self.check_terminal(exc)
            message = f"{_VALUE_LOSSY}: reading the result raised {self.describe(exc)}"
            self.finish(DoneFrame(error=ErrorSpec(kind="invalid-output", message=message)))
            return
        if len(data) - 4 > self.run.max_frame_bytes:
            # Cannot cross the bridge (the default frame cap is the output cap + 1 MiB, so
            # it could not fit the ledger either); the host renders the diagnostic.
            self.finish(DoneFrame(error=ErrorSpec(kind="output-limit", message="")))
            return
        self.close_logs()
        self.flush_calls()
        self.bridge.send_raw(data)


def _process_settings() -> None:
    """What every run's process needs set: warnings silenced, the recursion limit, and
    the program's empty module (library code that looks up a class's module, as
    dataclasses does, finds it)."""
    warnings.simplefilter("ignore")
    sys.setrecursionlimit(_RECURSION_LIMIT)
    sys.modules.setdefault(FILENAME, types.ModuleType(FILENAME))


def serve(run: RunFrame, bridge: WorkerBridge, loop: asyncio.AbstractEventLoop) -> None:
    """Run ``run.program`` to completion and send ``done`` (guest entry point)."""
    global _prepared
    if _prepared is None:
        _process_settings()  # a worker without the template's (``prepare_template``)
    prepared, _prepared = _prepared, None
    if prepared is not None:
        prepared.loop = loop  # built in the fork server, whose loop is gone
        prepared.attach(run, bridge)
    else:
        prepared = _Run(run, bridge, loop)
    prepared.execute()


def warm() -> None:
    """Import and exercise everything a run needs (called in the fork server)."""
    _modules.warm()
    sample = (
        "import json, asyncio\n"
        "from dataclasses import dataclass\n"
        "@dataclass\nclass P:\n    x: int = 0\n"
        "d = {}\nd['a'] = d.get('a', 0)\nd['a'] += 1\n"
        "print(f'{d}', [i for i in range(2)], '{0}'.format(1))\n"
        "async def f():\n    return await asyncio.sleep(0)\n"
        "try:\n    pass\nexcept Exception as e:\n    pass\n"
        "try:\n    pass\nexcept* ValueError:\n    pass\n"
        "match d:\n    case {'a': int(n)} if n:\n        pass\n    case P(x=0):\n        pass\n"
        "return json.dumps(d)\n"
    )
    code = compile_program(sample)
    assert not isinstance(code, tuple), code
    loop = asyncio.new_event_loop()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


# Small on purpose: it runs in every worker (``prefault``), so its compile is paid per
# fork; it writes what nearly every run writes (compile, globals, the loop, the result).
_PREFAULT_PROGRAM = "d = {'k': [1, 'x']}\nreturn {'v': len(d), 's': f'{1:02d}'}\n"

_WARM_PROGRAM = (
    "import json\n"
    "class C:\n    def __init__(self):\n        self.n = 0\n"
    "c = C()\nc.n += 1\nd = {'k': [1, 2.5, 'x']}\nd['k'] += [c.n]\n"
    "async def f(x):\n    return x\n"
    "try:\n    v = await f(json.dumps(d))\nexcept ValueError:\n    v = None\n"
    "return {'v': v, 's': sorted(d), 'f': f'{c.n:02d}'}\n"
)


def prepare_template(
    loop: asyncio.AbstractEventLoop, options: dict[str, Any] | None = None
) -> None:
    """In the fork server: run the warm-up program once, then build the globals every
    worker's run starts from (guards, builtins, module facades: about a tenth of a warm
    start's worker time, moved off the run). ``options`` is unused: the Python guest
    needs none of the runtime's limits ahead of time.

    The prepared run is made of fresh objects (the warm-up's are dropped), so nothing
    of the warm-up program can reach a real one; each worker gets its own copy.
    """
    _run_warm_program(loop)
    # Made here, inherited by every worker: off the run's path (a cold worker took
    # ~0.1 ms for them). Nothing in the fork server warns or recurses deeply.
    _process_settings()
    global _prepared
    frame = RunFrame(
        guest="python", program=_WARM_PROGRAM, bindings=[], max_output_bytes=1 << 20,
        max_frame_bytes=1 << 20, max_sub_calls=1,
    )  # fmt: skip
    _prepared = _Run(frame, None, None)  # type: ignore[arg-type]
    _prepared.prepare()


def prefault(loop: asyncio.AbstractEventLoop) -> None:
    """In a fresh, locked-down worker: run a small program once, before the run frame.

    The worker shares its pages with the fork server; the first run writes (and so
    copies) a few megabytes of them. Doing it here, while the worker idles, keeps those
    faults off the run's latency. The program runs on its own globals, never on the
    prepared run's.
    """
    _run_warm_program(loop, _PREFAULT_PROGRAM)
    if _prepared is not None and _prepared.env is not None:
        # Reading the prepared globals writes their reference counts: their pages are
        # copied now, not when the run first touches them.
        for value in (*_prepared.env.values(), *_prepared.errors.values()):
            del value


def _run_warm_program(loop: asyncio.AbstractEventLoop, program: str = "") -> None:
    program = program or _WARM_PROGRAM
    code = compile_program(program)
    assert not isinstance(code, tuple), code
    frame = RunFrame(
        guest="python", program=program, bindings=[], max_output_bytes=1 << 20,
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


_prepared: _Run | None = None

#: The worker may register the bridge's reader before the run frame (``Guest``): this
#: guest reads results only through ``WorkerBridge.attach`` / ``wait_now``.
EARLY_READER = True
