"""The "sandbox facts" block: what a program can rely on, said once, in a few lines.

``render_sdk(..., facts=...)`` takes the facts as plain data so ``sdk_gen`` stays pure:
the engine gathers them from the code runtime (``sdk_facts()``, optional on the
``CodeRuntime`` seam) and from the host (``ToolRuntime.sdk_facts``). Every key is
optional; unknown keys and values of the wrong type are ignored, so a runtime that knows
more than this renderer cannot break the prompt.

``modules``
    importable module names (Python).
``asyncio``
    the ``asyncio`` names a program may use (Python).
``calls``
    one sentence on when a tool call starts (lazy coroutine, or at once).
``syntax``
    one sentence on what TypeScript syntax is transformed or refused.
``limits``
    the ``Limits`` field names: ``max_compute_ms``, ``max_wall_ms``, ``max_memory_bytes``,
    ``max_output_bytes``, ``max_sub_calls``.
``workspace``
    the workspace root file tools resolve relative paths against.
``read_before_write``
    tool names that need a prior ``read`` of a file they change (``edit``, ``write``).

The block also carries the one note on additional keys (``open_args``): argument
objects accept undeclared keys unless the declaration marks them closed, which the
renderers then need not repeat per type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

__all__ = ["render_facts"]

_CLOSED_MARK: Final = {"typescript": "`// closed`", "python": "`# closed`"}


def _names(value: object) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return []
    return [item for item in value if isinstance(item, str) and item]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _seconds(ms: float) -> str:
    seconds = ms / 1000
    return f"{seconds:g} s" if seconds >= 1 else f"{ms:g} ms"


def _bytes(count: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count:g} bytes"


def _limits(limits: Mapping[str, Any]) -> str | None:
    parts: list[str] = []
    renderers: tuple[tuple[str, Callable[[float], str]], ...] = (
        ("max_compute_ms", lambda v: f"{_seconds(v)} CPU (awaiting tools is free)"),
        ("max_wall_ms", lambda v: f"{_seconds(v)} wall"),
        ("max_memory_bytes", lambda v: f"{_bytes(v)} memory"),
        ("max_output_bytes", lambda v: f"{_bytes(v)} output"),
        ("max_sub_calls", lambda v: f"{int(v):,} tool calls"),
    )
    for key, render in renderers:
        value = _number(limits.get(key))
        if value is not None:
            parts.append(render(value))
    if not parts:
        return None
    return "Limits per run, terminal even if caught: " + ", ".join(parts) + "."


def _code(names: list[str]) -> str:
    quoted = [f"`{name}`" for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def render_facts(facts: Mapping[str, Any] | None, language: str, *, open_args: bool) -> str:
    """The facts block (``""`` when there is nothing to say), ending in a blank line."""
    facts = facts if isinstance(facts, Mapping) else {}
    lines: list[str] = []
    syntax = facts.get("syntax")
    if isinstance(syntax, str) and syntax:
        lines.append(syntax)
    modules = _names(facts.get("modules"))
    if modules:
        lines.append(f"Modules (no others): {', '.join(modules)}.")
    asyncio = _names(facts.get("asyncio"))
    if asyncio:
        lines.append(f"`asyncio` offers {', '.join(asyncio)}.")
    calls = facts.get("calls")
    if isinstance(calls, str) and calls:
        lines.append(calls)
    limits = facts.get("limits")
    if isinstance(limits, Mapping):
        text = _limits(limits)
        if text is not None:
            lines.append(text)
    workspace = facts.get("workspace")
    if isinstance(workspace, str) and workspace:
        lines.append(f"Workspace: `{workspace}`; file tools take paths relative to it.")
    guarded = _names(facts.get("read_before_write"))
    if guarded:
        lines.append(f"{_code(guarded)} change an existing file only after a `read`.")
    if open_args:
        mark = _CLOSED_MARK.get(language, "closed")
        lines.append(f"Argument objects take undeclared keys unless marked {mark}.")
    if not lines:
        return ""
    return "Sandbox facts:\n" + "".join(f"- {line}\n" for line in lines) + "\n"
