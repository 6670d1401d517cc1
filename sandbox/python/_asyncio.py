"""The ``asyncio`` a program imports: a curated surface on the guest's own event loop.

``import asyncio`` yields a read-only module proxy (built per run by the guest) with
``gather`` (``return_exceptions`` too), ``sleep``, ``create_task``, ``ensure_future``,
``TaskGroup``, ``wait_for``, ``wait``, ``as_completed``, ``timeout``, ``shield``,
``iscoroutine``/``iscoroutinefunction``, the synchronisation primitives (``Lock``,
``Event``, ``Semaphore``, ``BoundedSemaphore``, ``Condition``, ``Barrier``) and queues
(``Queue``, ``LifoQueue``, ``PriorityQueue``), with the exception types and ``wait``
constants. Tool calls are lazy coroutines (``_objects._ToolCall``): every function
here accepts them and starts them as asyncio would start a coroutine.

What the program holds stays opaque: a task is a ``_Task`` proxy (state, result,
cancellation, name, done callbacks) whose real task or future sits in a name-mangled
slot; no function here hands out the loop, a real task (``get_coro``, ``get_loop``,
``get_stack``), a coroutine it did not create itself, or a future. The primitives are
asyncio's own classes: their loop and waiters live in underscore attributes, which the
guards refuse.
"""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import Callable, Iterable
from typing import Any

from ._modules import ModuleProxy
from ._objects import _Awaitable, _ToolCall, awaitable_future

__all__ = ["make_asyncio"]

_NOT_AWAITABLE = "An asyncio.Future, a coroutine or an awaitable is required"
_RUN_HINT = (
    "asyncio.run() is not available: the program already runs inside an event loop; "
    "use `return await main()` (top-level await works)"
)


class _Task:
    """A task as a program sees it: state, result and cancellation; nothing else."""

    __slots__ = ("__inner", "__name", "__relays", "__terminal")

    def __init__(self, inner: asyncio.Future[Any], name: str, terminal: Callable[..., None]):
        self.__inner = inner
        self.__name = name
        self.__terminal = terminal
        self.__relays: list[tuple[Any, Any]] = []

    def __await__(self) -> Any:
        return (yield from self.__inner.__await__())

    def done(self) -> bool:
        """Whether the task finished (result, exception or cancellation)."""
        return self.__inner.done()

    def cancelled(self) -> bool:
        """Whether the task was cancelled."""
        return self.__inner.cancelled()

    def cancel(self, msg: Any = None) -> bool:
        """Request cancellation; False when the task is already done."""
        return self.__inner.cancel(None if msg is None else str(msg))

    def result(self) -> Any:
        """The result; raises the task's exception, or ``InvalidStateError`` if pending."""
        return self.__inner.result()

    def exception(self) -> BaseException | None:
        """The task's exception (None if it succeeded)."""
        exc = self.__inner.exception()
        self.__terminal(exc)
        return exc

    def get_name(self) -> str:
        """The task's name."""
        return self.__name

    def set_name(self, value: Any) -> None:
        """Rename the task."""
        self.__name = str(value)

    def add_done_callback(self, fn: Callable[[Any], Any]) -> None:
        """Call ``fn(task)`` once the task is done (this proxy, never the real task)."""
        if not callable(fn):
            raise TypeError("add_done_callback() needs a callable")

        def relay(_future: Any) -> None:
            try:
                fn(self)
            except BaseException as exc:
                # The loop would log and swallow it; limits and denials stay terminal.
                self.__terminal(exc)

        self.__relays.append((fn, relay))
        self.__inner.add_done_callback(relay)

    def remove_done_callback(self, fn: Any) -> int:
        """Remove the callbacks added with ``fn``; returns how many."""
        count = 0
        for entry in [e for e in self.__relays if e[0] is fn]:
            self.__relays.remove(entry)
            count += self.__inner.remove_done_callback(entry[1])
        return count

    def __repr__(self) -> str:
        if not self.__inner.done():
            state = "pending"
        elif self.__inner.cancelled():
            state = "cancelled"
        else:
            state = "finished"
        return f"<Task {self.__name!r} {state}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("tasks cannot be copied or pickled")


def _inner(task: _Task) -> asyncio.Future[Any]:
    return task._Task__inner  # type: ignore[attr-defined,no-any-return]


async def _drive(future: Any) -> Any:
    """A coroutine that awaits an already started tool call (for ``TaskGroup``)."""
    return await future


class _Facade:
    """The functions of the program's ``asyncio``, bound to one run."""

    def __init__(self, terminal: Callable[[BaseException | None], None]) -> None:
        self.terminal = terminal
        self.count = 0

    def name(self, name: Any) -> str:
        self.count += 1
        return f"Task-{self.count}" if name is None else str(name)

    def future(self, aw: Any) -> asyncio.Future[Any]:
        """A started future for any awaitable the program may pass (tool calls too)."""
        if type(aw) is _Task:
            return _inner(aw)
        inner = awaitable_future(aw)
        if isinstance(inner, asyncio.Future) or asyncio.iscoroutine(inner):
            return asyncio.ensure_future(inner)
        raise TypeError(_NOT_AWAITABLE)

    def task(self, future: asyncio.Future[Any], name: Any = None) -> _Task:
        if name is None and isinstance(future, asyncio.Task):
            return _Task(future, future.get_name(), self.terminal)
        return _Task(future, self.name(name), self.terminal)

    # -- the program's functions ------------------------------------------------------

    def gather(self, *aws: Any, return_exceptions: bool = False) -> _Awaitable:
        unique: dict[int, asyncio.Future[Any]] = {}
        futures = []
        for aw in aws:
            # As in asyncio: the same awaitable twice runs once and gives its result twice.
            if id(aw) not in unique:
                unique[id(aw)] = self.future(aw)
            futures.append(unique[id(aw)])
        inner = asyncio.gather(*futures, return_exceptions=bool(return_exceptions))

        def check(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                return
            exc = future.exception()
            self.terminal(exc)
            if exc is None and return_exceptions:
                for item in future.result():
                    if isinstance(item, BaseException):
                        self.terminal(item)

        inner.add_done_callback(check)
        return _Awaitable(inner)

    def sleep(self, delay: Any, result: Any = None) -> _Awaitable:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)):
            raise TypeError("sleep() delay must be a number")
        return _Awaitable(asyncio.sleep(delay, result))

    def create_task(self, coro: Any, *, name: Any = None, context: Any = None) -> _Task:
        if context is not None:
            raise TypeError("create_task(context=...) is not available in the sandbox")
        if type(coro) is _ToolCall:
            return self.task(awaitable_future(coro), name)
        if not isinstance(coro, types.CoroutineType):
            raise TypeError(f"a coroutine was expected, got {coro!r}")
        return self.task(asyncio.get_running_loop().create_task(coro, name=name))

    def ensure_future(self, aw: Any) -> _Task:
        if type(aw) is _Task:
            return aw
        return self.task(self.future(aw))

    def wait_for(self, aw: Any, timeout: Any) -> _Awaitable:
        return _Awaitable(asyncio.wait_for(self.future(aw), timeout))

    def wait(
        self, aws: Iterable[Any], *, timeout: Any = None, return_when: Any = "ALL_COMPLETED"
    ) -> _Awaitable:
        proxies: dict[asyncio.Future[Any], _Task] = {}
        for aw in aws:
            if type(aw) is _Task:
                proxies[_inner(aw)] = aw
            else:
                future = self.future(aw)
                proxies[future] = self.task(future)
        if not proxies:
            raise ValueError("Set of Tasks/Futures is empty.")

        async def wait() -> tuple[set[_Task], set[_Task]]:
            done, pending = await asyncio.wait(
                list(proxies), timeout=timeout, return_when=return_when
            )
            return {proxies[f] for f in done}, {proxies[f] for f in pending}

        return _Awaitable(wait())

    def as_completed(self, aws: Iterable[Any], *, timeout: Any = None) -> Any:
        futures = {id(aw): self.future(aw) for aw in aws}
        return iter(
            [_Awaitable(c) for c in asyncio.as_completed(futures.values(), timeout=timeout)]
        )

    def shield(self, aw: Any) -> _Awaitable:
        return _Awaitable(asyncio.shield(self.future(aw)))

    def iscoroutine(self, obj: Any) -> bool:
        return type(obj) is _ToolCall or asyncio.iscoroutine(obj)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        for arg in args:
            if asyncio.iscoroutine(arg):
                arg.close()  # refused: the coroutine never runs (and warns nowhere)
        raise RuntimeError(_RUN_HINT)

    def task_group(self) -> _TaskGroup:
        return _TaskGroup(self)


class _TaskGroup:
    """``asyncio.TaskGroup`` whose ``create_task`` hands out ``_Task`` proxies."""

    __slots__ = ("__facade", "__group")

    def __init__(self, facade: _Facade) -> None:
        self.__facade = facade
        self.__group = asyncio.TaskGroup()

    async def __aenter__(self) -> _TaskGroup:
        await self.__group.__aenter__()
        return self

    async def __aexit__(self, et: Any, exc: Any, tb: Any) -> None:
        # Never suppresses: the group re-raises its tasks' failures as an ExceptionGroup.
        await self.__group.__aexit__(et, exc, tb)

    def create_task(self, coro: Any, *, name: Any = None, context: Any = None) -> _Task:
        """Start ``coro`` (a coroutine or a tool call) as a task of this group."""
        if context is not None:
            raise TypeError("create_task(context=...) is not available in the sandbox")
        if type(coro) is _ToolCall:
            coro = _drive(awaitable_future(coro))
        elif not isinstance(coro, types.CoroutineType):
            raise TypeError(f"a coroutine was expected, got {coro!r}")
        return self.__facade.task(self.__group.create_task(coro, name=name))

    def __repr__(self) -> str:
        return "<TaskGroup>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("task groups cannot be copied or pickled")


def make_asyncio(terminal: Callable[[BaseException | None], None]) -> ModuleProxy:
    """The program's ``asyncio`` module proxy for one run.

    ``terminal(exc)`` ends the run when ``exc`` is a limit or a guard denial; it is
    called on every exception a task hands back outside a program ``except``.
    """
    facade = _Facade(terminal)
    table: dict[str, Any] = {
        "gather": facade.gather,
        "sleep": facade.sleep,
        "create_task": facade.create_task,
        "ensure_future": facade.ensure_future,
        "wait_for": facade.wait_for,
        "wait": facade.wait,
        "as_completed": facade.as_completed,
        "shield": facade.shield,
        "iscoroutine": facade.iscoroutine,
        "iscoroutinefunction": inspect.iscoroutinefunction,
        "run": facade.run,
        "TaskGroup": facade.task_group,
        "timeout": asyncio.timeout,
        "Lock": asyncio.Lock,
        "Event": asyncio.Event,
        "Condition": asyncio.Condition,
        "Semaphore": asyncio.Semaphore,
        "BoundedSemaphore": asyncio.BoundedSemaphore,
        "Barrier": asyncio.Barrier,
        "BrokenBarrierError": asyncio.BrokenBarrierError,
        "Queue": asyncio.Queue,
        "LifoQueue": asyncio.LifoQueue,
        "PriorityQueue": asyncio.PriorityQueue,
        "QueueEmpty": asyncio.QueueEmpty,
        "QueueFull": asyncio.QueueFull,
        "CancelledError": asyncio.CancelledError,
        "TimeoutError": asyncio.TimeoutError,
        "InvalidStateError": asyncio.InvalidStateError,
        "FIRST_COMPLETED": asyncio.FIRST_COMPLETED,
        "FIRST_EXCEPTION": asyncio.FIRST_EXCEPTION,
        "ALL_COMPLETED": asyncio.ALL_COMPLETED,
    }
    return ModuleProxy("asyncio", table)
