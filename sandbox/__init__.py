"""codemode's sandbox: ``CodeRuntime`` implementations that run programs in workers.

Layout (details in ``sandbox/README.md``):

- ``_runtime`` (``ProcessRuntime``, ``PythonRuntime``), ``_ts_runtime``
  (``TypeScriptRuntime``) and ``_limits`` (``Limits``): the public face, host side;
- ``host/``: one run's supervision on the host: the run supervisor, the bridge to the
  worker, the output ledger, the warm worker pool and the fork-server client;
- ``worker/``: the fork server, the worker it forks, the kernel boundary (namespaces,
  Landlock, seccomp, rlimits), the frame protocol and the ``Guest`` protocol;
- ``python/`` and ``typescript/``: the two guests, loaded by the fork server.

Host code imports the worker side's data types; the worker side never imports the host
(anyio, the engine, ``host/``), which ``tests/test_layering.py`` enforces. Glossary: one
program execution is a *run*; the only "session" in the API is the engine's
``SessionLog``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._limits import Limits as Limits
    from ._runtime import ProcessRuntime as ProcessRuntime
    from ._runtime import PythonRuntime as PythonRuntime
    from ._runtime import RuntimeProcesses as RuntimeProcesses
    from ._runtime import RuntimeStats as RuntimeStats
    from ._ts_runtime import TypeScriptRuntime as TypeScriptRuntime

# The names load on first access (PEP 562) so that the fork server and its workers, which
# import ``codemode.sandbox.worker`` and the guests, never load the host side (anyio, the
# engine) through this package's ``__init__``.
#: public name -> the private module that defines it.
_LAZY = {
    "Limits": "._limits",
    "ProcessRuntime": "._runtime",
    "PythonRuntime": "._runtime",
    "RuntimeProcesses": "._runtime",
    "RuntimeStats": "._runtime",
    "TypeScriptRuntime": "._ts_runtime",
}

__all__ = [
    "Limits",
    "ProcessRuntime",
    "PythonRuntime",
    "RuntimeProcesses",
    "RuntimeStats",
    "TypeScriptRuntime",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
