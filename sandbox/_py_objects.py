"""The objects a Python program holds: bindings, awaitables, print, JSON conversion.

Everything here is reachable from program code, so each class exposes no public
attribute beyond what the program is meant to use (state lives in name-mangled slots,
which the guards refuse to read), and refuses to be copied or pickled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["to_json"]


class _Lossy(Exception):
    pass


_CONTAINERS = (dict, list, tuple)


def to_json(value: Any) -> Any:
    """A plain JSON copy of ``value``, or raise ``_Lossy``.

    What ``json.dumps`` accepts, minus what JSON cannot carry exactly: dicts with str
    keys, lists, str, int, bool, None and finite floats other than -0.0. As in
    ``json.dumps``, tuples (named or not) become arrays and dict/list subclasses
    (``Counter``, ``defaultdict``) plain objects/arrays -- what a Python programmer
    expects from ``return counter.most_common(3)``. Sets, NaN, non-str keys, cycles and
    other objects are lossy. Iterative: deep input cannot hit the recursion limit (nor
    can the bridge codec, see ``_frames``), so nesting is bounded by the frame cap only,
    as in the TypeScript guest.
    """
    if not isinstance(value, _CONTAINERS):
        return _scalar(value)
    root: list[Any] = [None]
    active: set[int] = set()
    stack: list[tuple[Any, Any, Any]] = []

    def enter(src: Any, parent: Any, key: Any) -> None:
        if id(src) in active:
            raise _Lossy
        active.add(id(src))
        dst: Any = {} if isinstance(src, dict) else []
        if isinstance(parent, dict):
            parent[key] = dst
        elif isinstance(parent, list):
            parent.append(dst)
        else:
            root[0] = dst
        items = iter(src.items()) if isinstance(src, dict) else iter(enumerate(src))
        stack.append((src, dst, items))

    enter(value, None, None)
    while stack:
        src, dst, items = stack[-1]
        for key, child in items:
            if isinstance(src, dict) and type(key) is not str:
                raise _Lossy
            if isinstance(child, _CONTAINERS):
                enter(child, dst, key)
                break
            if isinstance(dst, dict):
                dst[key] = _scalar(child)
            else:
                dst.append(_scalar(child))
        else:
            stack.pop()
            active.discard(id(src))
    return root[0]


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value) or (value == 0.0 and math.copysign(1.0, value) < 0):
            raise _Lossy
        return float(value)
    raise _Lossy


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Awaitable:
    """What ``tools.x(...)``, ``gather`` and ``sleep`` return: only ``await`` works."""

    __slots__ = ("__inner",)

    def __init__(self, inner: Any) -> None:
        self.__inner = inner

    def __await__(self) -> Any:
        return (yield from self.__inner.__await__())

    def __repr__(self) -> str:
        return "<awaitable>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("awaitables cannot be copied or pickled")


class _ToolFunction:
    __slots__ = ("__call", "__name")

    def __init__(self, call: Callable[[str, Any], _Awaitable], name: str) -> None:
        self.__call = call
        self.__name = name

    def __call__(self, *args: Any, **kwargs: Any) -> _Awaitable:
        if len(args) > 1 or (args and kwargs):
            return self.__call(self.__name, _Lossy)
        payload = args[0] if args else (dict(kwargs) if kwargs else _Lossy)
        return self.__call(self.__name, payload)

    def __repr__(self) -> str:
        return f"<tool {self.__name}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("tools cannot be copied or pickled")


class _Namespace:
    """A binding global (``tools``): ``tools.name(args)`` and ``tools["my-tool"](args)``."""

    __slots__ = ("__call", "__global", "__names")
    __call: Callable[[str, Any], _Awaitable]
    __global: str
    __names: tuple[str, ...]

    def __init__(self, global_name: str, names: list[str], call: Callable[[str, Any], _Awaitable]):
        object.__setattr__(self, "_Namespace__global", global_name)
        object.__setattr__(self, "_Namespace__names", tuple(names))
        object.__setattr__(self, "_Namespace__call", call)

    def __getattr__(self, name: str) -> _ToolFunction:
        if name.startswith("__") and name.endswith("__"):
            # Protocol lookups (``__deepcopy__``, ``__length_hint__``...) must not turn
            # into tool calls; dunder-named tools stay reachable as ``tools["__x__"]``.
            raise AttributeError(name)
        return _ToolFunction(self.__call, name)

    def __getitem__(self, name: Any) -> _ToolFunction:
        if not isinstance(name, str):
            raise TypeError(f"{self.__global} names are strings")
        return _ToolFunction(self.__call, str(name))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self.__global} is read-only")

    def __contains__(self, name: Any) -> bool:
        return name in self.__names

    def __iter__(self) -> Any:
        return iter(self.__names)

    def __dir__(self) -> list[str]:
        return list(self.__names)

    def __repr__(self) -> str:
        return f"<{self.__global}: {', '.join(self.__names)}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"{self.__global} cannot be copied or pickled")


def _error_class(name: str, member: str) -> type[Exception]:
    def __init__(self: Any, message: Any = "", *args: Any, **fields: Any) -> None:
        Exception.__init__(self, message, *args)
        self.message = message
        self.code = fields.pop("code", None)
        setattr(self, member, fields.pop(member, None))

    def __str__(self: Any) -> str:
        return str(self.message)

    namespace = {"__init__": __init__, "__str__": __str__, "__module__": "builtins"}
    cls = type(name, (Exception,), namespace)
    cls.__qualname__ = name
    return cls


class _LineSink:
    """``print``'s file: splits output into lines and ships each one at once."""

    def __init__(self, emit: Callable[[str], None], max_line: int) -> None:
        self._emit = emit
        self._partial: list[str] = []
        self._partial_size = 0
        self._max_line = max_line

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("print() output must be str")
        if "\n" not in text:
            self._partial.append(text)
            self._partial_size += len(text)
            if self._partial_size > self._max_line:
                # A line longer than the whole output budget: ship it now so that the
                # ledger fails the run instead of the line filling memory.
                self.close()
            return len(text)
        self._partial_size = 0
        first, *rest = text.split("\n")
        self._partial.append(first)
        for piece in rest:
            self._emit("".join(self._partial))
            self._partial = [piece]
        return len(text)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        """Ship a trailing partial line, if any."""
        if self._partial and "".join(self._partial):
            self._emit("".join(self._partial))
        self._partial = []
        self._partial_size = 0


class _Printer:
    __slots__ = ("__sink",)

    def __init__(self, sink: _LineSink) -> None:
        self.__sink = sink

    def _call_print(
        self, *objects: Any, sep: Any = " ", end: Any = "\n", file: Any = None, flush: bool = False
    ) -> None:
        if file is not None:
            raise TypeError("print(file=...) is not available in the sandbox")
        print(*objects, sep=sep, end=end, file=self.__sink)

    def __call__(self) -> str:
        return ""
