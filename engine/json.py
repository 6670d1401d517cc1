"""Lossless JSON: snapshots, deep-freezing, and JS-compatible rendering.

A *lossless JSON value* is ``None``, ``bool``, ``str``, an ``int``, a finite ``float``
other than ``-0.0``, a list of lossless values, or a ``dict`` with ``str`` keys and
lossless values. Everything else is lossy: NaN, ±inf, ``-0.0``, non-str keys, tuples,
sets, bytes, class instances, functions and cycles. Shared (non-cyclic) references are
allowed and copied.

``snapshot`` returns a detached, deep-frozen copy (``FrozenDict``/``FrozenList``, which
are ``dict``/``list`` subclasses that refuse mutation) or raises ``LosslessJsonError``.
Traversal is iterative, so 5,000-deep nesting works without touching the recursion limit.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, NoReturn

import msgspec

from codemode.sdk_gen import js_number

__all__ = [
    "FrozenDict",
    "FrozenList",
    "LosslessJsonError",
    "dumps_compact",
    "dumps_pretty",
    "encode_bytes",
    "is_lossless",
    "js_number",
    "snapshot",
    "thaw",
]


class LosslessJsonError(TypeError):
    """A value is not lossless JSON; the message says where and why."""


def _frozen(*_a: Any, **_k: Any) -> NoReturn:
    raise TypeError("this JSON value is frozen (deep-frozen snapshot); copy it to modify")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation. Hashing is not supported (like ``dict``).

    Instances built by ``snapshot`` are *sealed*: known lossless and deep-frozen, so a
    later ``snapshot`` returns them as they are instead of copying again.
    """

    # __weakref__: a session log remembers the marker of the last large value it elided
    # without keeping the value alive. _digest: ``(json_bytes, sha256_hex, head)`` of the
    # value's compact JSON, set by code that had those bytes at hand (the sandbox bridge,
    # off the event loop), so a session log need not encode and hash a big value again.
    # ``snapshot`` and ``sealed`` set it to None: reading an unset slot raises inside
    # ``getattr(v, "_digest", None)``, which cost a session log more than encoding a
    # small event (readers accept None, unset and a tuple alike).
    __slots__ = ("__weakref__", "_digest", "_sealed")
    _sealed: bool
    _digest: tuple[int, str, bytes] | None
    __setitem__ = __delitem__ = __ior__ = _frozen
    clear = pop = popitem = setdefault = update = _frozen

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation (sealed like ``FrozenDict`` when built by ``snapshot``)."""

    __slots__ = ("__weakref__", "_digest", "_sealed")
    _sealed: bool
    _digest: tuple[int, str, bytes] | None
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen
    append = extend = insert = pop = remove = clear = sort = reverse = _frozen

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


_SCALARS = (str, bool, type(None))


def _fits_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


# A path is rendered only when an error is raised: building ``f"{path}.{key}"`` for every
# node costs O(depth) per node, O(depth²) for a deep value (a 200,000-deep argument once
# took minutes and gigabytes). A path is the root label (str) or ``(parent, key_or_index)``.
_PathNode = Any


def _render(path: _PathNode) -> str:
    segments: list[str | int] = []
    while not isinstance(path, str):
        path, segment = path
        segments.append(segment)
    parts = [path]
    for segment in reversed(segments):
        parts.append(f"[{segment}]" if isinstance(segment, int) else f".{segment}")
    return "".join(parts)


def _check_scalar(value: Any, path: _PathNode) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, int):
        if not _fits_float(value):
            # Unbounded Python ints past float range have no JSON-number reading (JS: Infinity).
            raise LosslessJsonError(f"{_render(path)}: integer too large for a finite JSON number")
        # ``int`` subclasses (IntEnum, ...) are normalised to plain ints; bool handled above.
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise LosslessJsonError(f"{_render(path)}: {value!r} is not a finite JSON number")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise LosslessJsonError(f"{_render(path)}: -0.0 is not lossless JSON")
        return float(value)
    raise LosslessJsonError(f"{_render(path)}: {type(value).__name__} is not a JSON value")


class _Slow(Exception):
    """The fast path met something it leaves to the exact (slow) path."""


_MAX_FLOAT_INT = int(sys.float_info.max)
_copysign = math.copysign
_FAST_DEPTH = 200


def _is_sealed(value: Any) -> bool:
    return getattr(value, "_sealed", False) is True


def _fast(value: Any, freeze: bool, depth: int) -> Any:
    # Recursive, exact-type-only copy: the common case (small, plain JSON) at C-ish speed.
    # Anything unusual (subclasses, lossy floats, deep nesting, cycles) raises _Slow and
    # the iterative path redoes the work with precise error paths.
    t = type(value)
    # Containers first: a top-level snapshot is nearly always one, and a container's
    # leaves are handled inline below (a call per leaf costs more than the copy).
    if t is dict or t is FrozenDict:
        if depth > _FAST_DEPTH:
            raise _Slow
        if freeze and t is FrozenDict and getattr(value, "_sealed", False) is True:
            return value
        out: dict[str, Any] = {}
        for key, child in value.items():
            if type(key) is not str:
                raise _Slow
            tc = type(child)
            # Inline the commonest leaves: a call per leaf costs more than the copy.
            if (
                tc is str
                or child is None
                or tc is bool
                or (tc is int and -_MAX_FLOAT_INT <= child <= _MAX_FLOAT_INT)
                # finite (inf - inf is nan) and not -0.0
                or (tc is float and child - child == 0.0 and (child or _copysign(1.0, child) > 0))
            ):
                out[key] = child
            else:
                out[key] = _fast(child, freeze, depth + 1)
        if not freeze:
            return out
        frozen_d = FrozenDict(out)
        frozen_d._sealed = True
        frozen_d._digest = None
        return frozen_d
    if t is list or t is FrozenList:
        if depth > _FAST_DEPTH:
            raise _Slow
        if freeze and t is FrozenList and getattr(value, "_sealed", False) is True:
            return value
        items = [
            child if type(child) is str else _fast(child, freeze, depth + 1) for child in value
        ]
        if not freeze:
            return items
        frozen_l = FrozenList(items)
        frozen_l._sealed = True
        frozen_l._digest = None
        return frozen_l
    if t is str or value is None or t is bool:
        return value
    if t is int:
        if -_MAX_FLOAT_INT <= value <= _MAX_FLOAT_INT:
            return value
        raise _Slow
    if t is float:
        if (
            value != value
            or value in (math.inf, -math.inf)
            or (value == 0.0 and math.copysign(1.0, value) < 0)
        ):
            raise _Slow
        return value
    raise _Slow


def sealed(items: dict[str, Any]) -> FrozenDict:
    """A sealed ``FrozenDict`` of ``items`` *without* checking them.

    Internal: for dicts the engine assembles from values it already knows are lossless
    (sealed snapshots, strings, finite numbers), so a later ``snapshot`` (e.g. a session
    log's) returns them without another copy.
    """
    out = FrozenDict(items)
    out._sealed = True
    out._digest = None
    return out


def sealed_list(items: list[Any]) -> FrozenList:
    """``sealed``'s list twin: a sealed ``FrozenList`` of ``items`` *without* checking
    them (internal: for lists of values known to be lossless and frozen, such as sealed
    dicts, strings and finite numbers, that a later ``snapshot`` returns uncopied)."""
    out = FrozenList(items)
    out._sealed = True
    out._digest = None
    return out


def snapshot(value: Any, *, freeze: bool = True, label: str = "value") -> Any:
    """Return a detached copy of ``value`` (deep-frozen unless ``freeze=False``).

    A sealed frozen value (built by an earlier ``snapshot``) is returned as is when
    ``freeze`` is true: it is immutable and already known to be lossless.
    Raises ``LosslessJsonError`` naming the first offending path.
    """
    # The sealed case first, before any call: a sub-call snapshots the same sealed
    # arguments and values four times on its way through the pipeline.
    t = type(value)
    if freeze and (t is FrozenDict or t is FrozenList) and getattr(value, "_sealed", False) is True:
        return value
    if t is str:
        return value  # immutable and always lossless (many tools return a string)
    try:
        return _fast(value, freeze, 0)
    except (_Slow, RecursionError):
        pass
    return _snapshot_slow(value, freeze=freeze, label=label)


class _Cycle(Exception):
    """A sparse ancestor check met a cycle; the exact pass finds where it starts."""


# Ancestors are remembered only every ``_SPARSE`` levels on the first pass: a cycle of
# length L is still met (within _SPARSE + L levels of where it starts), and the set stays
# small next to the copy (a ``set`` grows fourfold at a time, which would otherwise make
# peak memory jump by more than the value grew). Meeting one reruns with every ancestor
# remembered, for the exact path of the message.
_SPARSE = 16


def _snapshot_slow(value: Any, *, freeze: bool, label: str) -> Any:
    if not isinstance(value, (dict, list)):
        return _check_scalar(value, label)
    try:
        return _walk(value, freeze, label, _SPARSE)
    except _Cycle:
        return _walk(value, freeze, label, 1)


def _walk(value: Any, freeze: bool, label: str, every: int) -> Any:
    dict_t: type[dict[str, Any]] = FrozenDict if freeze else dict
    list_t: type[list[Any]] = FrozenList if freeze else list
    # Iterative post-order build. Each frame: (source, path, collected children, items,
    # remembered as an ancestor). Paths are linked nodes, rendered only for an error
    # message (see ``_render``), so the cost is linear in the value's size whatever its
    # depth.
    active: set[int] = set()
    root_out: list[Any] = []
    stack: list[tuple[Any, _PathNode, list[Any], Any, bool]] = []

    def push(container: Any, path: _PathNode) -> None:
        if id(container) in active:
            if every > 1:
                raise _Cycle
            raise LosslessJsonError(f"{_render(path)}: cycle detected")
        if type(container) not in (dict, list, FrozenDict, FrozenList):
            raise LosslessJsonError(
                f"{_render(path)}: {type(container).__name__} is not a JSON value"
            )
        remember = len(stack) % every == 0
        if remember:
            active.add(id(container))
        if isinstance(container, dict):
            items = iter(list(container.items()))
        else:
            items = iter(enumerate(list(container)))
        stack.append((container, path, [], items, remember))

    push(value, label)
    while stack:
        container, path, out, items, remembered = stack[-1]
        is_dict = isinstance(container, dict)
        advanced = False
        for key, child in items:
            if is_dict and not isinstance(key, str):
                raise LosslessJsonError(f"{_render(path)}: key {key!r} is not a string")
            if isinstance(child, (dict, list)):
                if freeze and type(child) in (FrozenDict, FrozenList) and _is_sealed(child):
                    out.append((key, child))  # already known lossless and frozen
                    continue
                out.append((key, None))
                push(child, (path, key))
                advanced = True
                break
            out.append((key, _check_scalar(child, (path, key))))
        if advanced:
            continue
        stack.pop()
        if remembered:
            active.discard(id(container))
        built: Any
        if is_dict:
            built = dict_t((k, v) for k, v in out)
        else:
            built = list_t(v for _k, v in out)
        if freeze:
            built._sealed = True  # type: ignore[attr-defined]
            built._digest = None  # type: ignore[attr-defined]
        if stack:
            parent_out = stack[-1][2]
            k, _ = parent_out[-1]
            parent_out[-1] = (k, built)
        else:
            root_out.append(built)
    return root_out[0]


def is_lossless(value: Any) -> bool:
    """True when ``snapshot(value)`` would succeed."""
    if type(value) in (FrozenDict, FrozenList) and _is_sealed(value):
        return True  # built by ``snapshot``: known lossless, no copy needed to tell
    try:
        snapshot(value, freeze=False)
    except LosslessJsonError:
        return False
    except RecursionError:
        return False
    return True


def thaw(value: Any) -> Any:
    """A mutable deep copy of a (possibly frozen) JSON value."""
    return snapshot(value, freeze=False)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _escape_string(s: str) -> str:
    text = json.dumps(s, ensure_ascii=False)
    if not _LONE_SURROGATE.search(text):
        return text
    # JSON.stringify (ES2019 well-formed) keeps a surrogate pair as its character and
    # escapes a lone surrogate as \udXXX, so the output always encodes as UTF-8.
    text = _SURROGATE_PAIR.sub(
        lambda m: m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le"), text
    )
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_msgspec_encode = msgspec.json.Encoder().encode


def encode_bytes(value: Any) -> bytes:
    """Compact JSON bytes of a lossless value as msgspec writes them, at any depth.

    msgspec's encoder recurses; past its reach the value is written iteratively, each
    scalar and key still by msgspec (so the bytes are the same, at C speed per token).
    Raises ``UnicodeEncodeError`` for a lone surrogate, like msgspec.
    """
    try:
        return _msgspec_encode(value)
    except RecursionError:
        pass
    parts: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is bytes:  # a literal queued below; JSON values are never bytes
            parts.append(item)
        elif isinstance(item, dict):
            if not item:
                parts.append(b"{}")
                continue
            stack.append(b"}")
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                key, child = entries[i]
                stack.append(child)
                stack.append((b"," if i else b"{") + _msgspec_encode(key) + b":")
        elif isinstance(item, list):
            if not item:
                parts.append(b"[]")
                continue
            stack.append(b"]")
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                stack.append(b"," if i else b"[")
        else:
            parts.append(_msgspec_encode(item))
    return b"".join(parts)


def dumps_compact(value: Any) -> str:
    """``JSON.stringify(value)``: compact, insertion order, JS number formatting."""
    return _dumps(value, indent=0, compact_depth=0)


def dumps_pretty(value: Any, indent: int = 2, max_indent: int | None = None) -> str:
    """``JSON.stringify(value, null, indent)``; with ``max_indent`` set, containers whose
    indentation would exceed it render compact (how ``run_code`` keeps a deep value readable: past the
    indentation cap it prints one line per container)."""
    compact_depth = 10**9 if max_indent is None else max_indent // indent
    return _dumps(value, indent=indent, compact_depth=compact_depth)


def _dumps(value: Any, *, indent: int, compact_depth: int) -> str:
    # Iterative writer: a stack of pending work items: "t" text, "v" value at depth,
    # "x" a container leaving the ancestor set (so a cycle raises instead of looping).
    out: list[str] = []
    work: list[tuple[str, Any, int]] = [("v", value, 0)]
    active: set[int] = set()
    while work:
        kind, item, depth = work.pop()
        if kind == "t":
            out.append(item)
            continue
        if kind == "x":
            active.discard(item)
            continue
        if item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, str):
            out.append(_escape_string(item))
        elif isinstance(item, (int, float)):
            if isinstance(item, float) and (math.isnan(item) or math.isinf(item)):
                raise LosslessJsonError(f"{item!r} is not a finite JSON number")
            if isinstance(item, int) and not _fits_float(item):
                raise LosslessJsonError("integer too large for a finite JSON number")
            out.append(js_number(item))
        elif isinstance(item, (list, dict)):
            pretty = indent > 0 and depth < compact_depth
            is_dict = isinstance(item, dict)
            entries: list[Any] = list(item.items()) if isinstance(item, dict) else list(item)
            open_c, close_c = ("{", "}") if is_dict else ("[", "]")
            if not entries:
                out.append(open_c + close_c)
                continue
            if id(item) in active:
                raise LosslessJsonError("cycle detected")
            active.add(id(item))
            pad = "\n" + " " * (indent * (depth + 1)) if pretty else ""
            end_pad = "\n" + " " * (indent * depth) if pretty else ""
            sep = ": " if pretty else ":"
            pending: list[tuple[str, Any, int]] = [("t", open_c, depth)]
            for i, entry in enumerate(entries):
                prefix = ("," if i else "") + pad
                if is_dict:
                    key, child = entry
                    if not isinstance(key, str):
                        raise LosslessJsonError(f"key {key!r} is not a string")
                    pending.append(("t", prefix + _escape_string(key) + sep, depth))
                else:
                    child = entry
                    pending.append(("t", prefix, depth))
                pending.append(("v", child, depth + 1))
            pending.append(("t", end_pad + close_c, depth))
            pending.append(("x", id(item), depth))
            work.extend(reversed(pending))
        else:
            raise LosslessJsonError(f"{type(item).__name__} is not a JSON value")
    return "".join(out)
