"""``render_sdk``: pick the flavour for a runtime language and render the section."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from ._tool import ToolView, normalize_tools

__all__ = ["SDK_LANGUAGES", "render_sdk"]

_Renderer = Callable[[Sequence[ToolView], Mapping[str, Any] | None], str]


def _typescript() -> _Renderer:
    from ._ts import render_typescript

    return render_typescript


def _python() -> _Renderer:
    from ._py import render_python

    return render_python


# Registration order is the order the error message lists the known languages in. Each
# renderer's module loads on its first render: a process renders one language.
_RENDERERS: Final[dict[str, Callable[[], _Renderer]]] = {
    "typescript": _typescript,
    "python": _python,
}

SDK_LANGUAGES: Final[tuple[str, ...]] = tuple(_RENDERERS)
"""The runtime languages :func:`render_sdk` can render for."""


def render_sdk(
    tools: Iterable[object], language: str, facts: Mapping[str, Any] | None = None
) -> str:
    """Render the whole ``tools:sdk`` prompt section for ``tools`` in ``language``.

    ``tools`` holds :class:`SdkTool` values or anything with the same four attributes
    (``name``, ``description``, ``parameters``, ``output_schema``), or mappings with
    those keys. The result is the fixed usage instructions, a blank line, and one fenced
    block (```` ```ts ```` or ```` ```python ````) with the declarations; it is
    byte-identical for the same tool set whatever the input order, because tools are
    sorted by name in UTF-16 code-unit order.

    ``facts`` (optional, plain data) adds the "sandbox facts" block before the tool list:
    importable modules, the asyncio surface, when calls start, limits, the workspace
    root, read-before-write tools and (TypeScript) syntax; see ``_facts.py``. With tools
    present the block always states once that argument objects accept undeclared keys.

    Raises ``ValueError`` for an unknown ``language`` or a repeated tool name, and
    ``TypeError`` for a tool without a string name. Schemas never raise: one outside the
    supported subset renders as ``unknown`` (TypeScript) or ``Any`` (Python).
    """
    renderer = _RENDERERS.get(language) if isinstance(language, str) else None
    if renderer is None:
        known = ", ".join(f'"{name}"' for name in SDK_LANGUAGES)
        raise ValueError(
            f'no SDK renderer registered for runtime language "{language}" (known: {known})'
        )
    return renderer()(normalize_tools(tools), facts)
