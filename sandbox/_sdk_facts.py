"""What a runtime tells the SDK about itself: ``ProcessRuntime.sdk_facts()``.

The engine passes these plain-data facts to ``sdk_gen.render_sdk`` (see
``sdk_gen/_facts.py`` for the keys), so the prompt states the limits in force and the
guest's surface as the running code has them, never as a copy that can drift:

- Python's importable modules come from ``python._modules.ALLOWED_MODULES``, and its
  ``asyncio`` names from the facade the guest builds (``python._asyncio.make_asyncio`` where
  that module exists, else the ``gather``/``sleep`` pair the guest defines itself);
- whether a Python tool call is a lazy coroutine follows from the guest's call object;
- TypeScript's syntax sentence matches what ``typescript._strip`` transforms and refuses.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._limits import Limits

__all__ = ["sdk_facts"]

_TS_SYNTAX = (
    "TypeScript: types are erased; enums and constructor parameter properties are "
    "compiled; namespaces with values, decorators and `import`/`export` are refused."
)
_TS_CALLS = "A tool call starts when made; `await` it, or `Promise.all` several."
_PY_LAZY_CALLS = "Tool calls are lazy coroutines: they run once awaited, gathered or made tasks."
_PY_EAGER_CALLS = "A tool call starts when made; `await` it, or `asyncio.gather` several."
_PY_ASYNCIO_FALLBACK = ("gather", "sleep")


def _limits(limits: Limits) -> dict[str, Any]:
    return {
        "max_compute_ms": limits.max_compute_ms,
        "max_wall_ms": limits.max_wall_ms,
        "max_memory_bytes": limits.max_memory_bytes,
        "max_output_bytes": limits.max_output_bytes,
        "max_sub_calls": limits.max_sub_calls,
    }


def _python_asyncio() -> list[str]:
    """The facade's callables and classes (exceptions, constants and ``is*`` predicates go
    unsaid: the block lists what a program builds concurrency from)."""
    try:
        module = importlib.import_module("codemode.sandbox.python._asyncio")
        facade = module.make_asyncio(lambda exc: None)
        names = [name for name in dir(facade) if not name.startswith("_")]
    except Exception:  # the module is not there (or changed shape): say what is certain
        return list(_PY_ASYNCIO_FALLBACK)
    kept = []
    for name in names:
        value = getattr(facade, name, None)
        if name.isupper() or name.startswith("is"):
            continue
        if isinstance(value, type) and issubclass(value, BaseException):
            continue
        kept.append(name)
    return kept or list(_PY_ASYNCIO_FALLBACK)


def _python_calls_are_lazy() -> bool:
    objects = importlib.import_module("codemode.sandbox.python._objects")
    return hasattr(objects, "_ToolCall")


def sdk_facts(language: str, limits: Limits) -> dict[str, Any]:
    """The facts for ``language``'s guest under ``limits`` (``{}`` for other languages)."""
    if language == "typescript":
        return {"syntax": _TS_SYNTAX, "calls": _TS_CALLS, "limits": _limits(limits)}
    if language == "python":
        from .python._modules import ALLOWED_MODULES

        return {
            "modules": list(ALLOWED_MODULES),
            "asyncio": _python_asyncio(),
            "calls": _PY_LAZY_CALLS if _python_calls_are_lazy() else _PY_EAGER_CALLS,
            "limits": _limits(limits),
        }
    return {}
