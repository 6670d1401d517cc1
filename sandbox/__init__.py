"""codemode's sandbox: ``CodeRuntime`` implementations that run programs in workers.

Public names only; implementation lives in private modules (see ``sandbox/README.md``).
"""

from __future__ import annotations

from ._limits import Limits as Limits
from ._runtime import ProcessRuntime as ProcessRuntime
from ._runtime import PythonRuntime as PythonRuntime
from ._runtime import RuntimeStats as RuntimeStats
from ._ts_runtime import TypeScriptRuntime as TypeScriptRuntime

__all__ = [
    "Limits",
    "ProcessRuntime",
    "PythonRuntime",
    "RuntimeStats",
    "TypeScriptRuntime",
]
