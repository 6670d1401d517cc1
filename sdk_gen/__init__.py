"""Generated SDK text: registered tool schemas → the ``tools:sdk`` prompt section.

Pure and stdlib-only (no I/O, no ``engine`` import): the engine calls
:func:`render_sdk` on every prompt assembly with the calling scope's visible tools, in
the language of the loaded code runtime (``"typescript"`` or ``"python"``). The output
is deterministic and golden-tested.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._py import json_schema_to_py as json_schema_to_py
    from ._py_names import MAX_CLASS_NAME_BASE as MAX_CLASS_NAME_BASE
    from ._py_names import MAX_LIST_NESTING as MAX_LIST_NESTING
    from ._render import SDK_LANGUAGES as SDK_LANGUAGES
    from ._render import render_sdk as render_sdk
    from ._text import js_number as js_number
    from ._tool import SdkTool as SdkTool
    from ._ts import json_schema_to_ts as json_schema_to_ts

__all__ = [
    "MAX_CLASS_NAME_BASE",
    "MAX_LIST_NESTING",
    "SDK_LANGUAGES",
    "SdkTool",
    "js_number",
    "json_schema_to_py",
    "json_schema_to_ts",
    "render_sdk",
]

# Each name loads its module on first access: ``import codemode.engine`` needs ``SdkTool``
# and ``render_sdk``, and the renderer of one language only when it renders.
_HOMES = {
    "MAX_CLASS_NAME_BASE": "._py_names",
    "MAX_LIST_NESTING": "._py_names",
    "SDK_LANGUAGES": "._render",
    "SdkTool": "._tool",
    "js_number": "._text",
    "json_schema_to_py": "._py",
    "json_schema_to_ts": "._ts",
    "render_sdk": "._render",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
