"""codemode: models write programs against tools; every sub-call takes one guarded pipeline.

This package is a small facade over the five subpackages, each a layer of the whole:

- ``codemode.sdk_gen``: pure renderers that turn tool schemas into the SDK text a model
  reads (TypeScript or Python declarations);
- ``codemode.engine``: the tool registry, schemas, the guarded pipeline, code mode (the
  ``run_code`` tool and its sub-call driver), policies, scheduling and session logs;
- ``codemode.sandbox``: ``CodeRuntime`` implementations that run programs in confined
  worker processes (host side, worker side, Python and TypeScript guests);
- ``codemode.tools``: the first-party tools bound to one workspace;
- ``codemode.cli``: the ``codemode`` command, the composition root of the above.

Arrows point one way: ``sdk_gen <- engine <- {sandbox, tools} <- cli``. The names below
are what the README's examples use; they load on first access, so importing a worker-side
module (``codemode.sandbox.worker``) never pulls the engine or anyio into a worker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.engine import AbortController as AbortController
    from codemode.engine import AbortSignal as AbortSignal
    from codemode.engine import CodeRunFailedError as CodeRunFailedError
    from codemode.engine import HarnessError as HarnessError
    from codemode.engine import MemorySessionLog as MemorySessionLog
    from codemode.engine import Scope as Scope
    from codemode.engine import SqliteSessionLog as SqliteSessionLog
    from codemode.engine import ToolDefinition as ToolDefinition
    from codemode.engine import ToolExecutionInput as ToolExecutionInput
    from codemode.engine import ToolExecutionResult as ToolExecutionResult
    from codemode.engine import ToolOutput as ToolOutput
    from codemode.engine import ToolRuntime as ToolRuntime
    from codemode.engine import define_tool as define_tool
    from codemode.engine import text as text
    from codemode.engine.policies import SpillPolicy as SpillPolicy
    from codemode.engine.policies import TimeoutPolicy as TimeoutPolicy
    from codemode.sandbox import Limits as Limits
    from codemode.sandbox import PythonRuntime as PythonRuntime
    from codemode.sandbox import TypeScriptRuntime as TypeScriptRuntime
    from codemode.tools import default_tools as default_tools

#: public name -> the module that defines it (imported on first access).
_LAZY = {
    "AbortController": "codemode.engine",
    "AbortSignal": "codemode.engine",
    "CodeRunFailedError": "codemode.engine",
    "HarnessError": "codemode.engine",
    "MemorySessionLog": "codemode.engine",
    "Scope": "codemode.engine",
    "SqliteSessionLog": "codemode.engine",
    "ToolDefinition": "codemode.engine",
    "ToolExecutionInput": "codemode.engine",
    "ToolExecutionResult": "codemode.engine",
    "ToolOutput": "codemode.engine",
    "ToolRuntime": "codemode.engine",
    "define_tool": "codemode.engine",
    "text": "codemode.engine",
    "SpillPolicy": "codemode.engine.policies",
    "TimeoutPolicy": "codemode.engine.policies",
    "Limits": "codemode.sandbox",
    "PythonRuntime": "codemode.sandbox",
    "TypeScriptRuntime": "codemode.sandbox",
    "default_tools": "codemode.tools",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
