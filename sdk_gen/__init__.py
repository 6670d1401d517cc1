"""Generated SDK text: registered tool schemas → the ``tools:sdk`` prompt section.

Pure and stdlib-only (no I/O, no ``engine`` import): the engine calls
:func:`render_sdk` on every prompt assembly with the calling scope's visible tools, in
the language of the loaded code runtime (``"typescript"`` or ``"python"``). The output
is deterministic and golden-tested.
"""

from __future__ import annotations

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
