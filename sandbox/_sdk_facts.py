"""What a runtime tells the SDK about itself: ``ProcessRuntime.sdk_facts()``.

The engine passes these plain-data facts to ``sdk_gen.render_sdk`` (see
``sdk_gen/_facts.py`` for the keys), so the prompt states the limits in force and the
guest's surface as the running code has them:

- Python's importable modules are ``python._modules.ALLOWED_MODULES``, its ``asyncio``
  names the facade the guest builds (``python._asyncio.make_asyncio``), and whether a
  tool call is a lazy coroutine follows from the guest's call object. The host states
  them from ``_PY_MODULES``/``_PY_ASYNCIO``/``_PY_LAZY``, a copy of what
  ``python_surface()`` reads from those modules: importing the guest's modules
  (RestrictedPython among them) cost a one-shot ``codemode agent`` about 18 ms of its
  start-up, in a host that never runs them (the guest lives in the fork server).
  ``tests/sandbox/test_sdk_facts.py`` compares the copy with ``python_surface()``, so a
  change to the guest that the copy misses fails the suite;
- TypeScript's syntax sentence matches what ``typescript._strip`` transforms and refuses.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._limits import Limits

__all__ = ["python_surface", "sdk_facts"]

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


# What ``python_surface()`` returns for the guest in this tree (see the module docstring).
_PY_MODULES = (
    "asyncio", "base64", "bisect", "collections", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "fractions", "functools", "hashlib",
    "heapq", "html", "io", "itertools", "json", "math", "operator", "pathlib", "pprint",
    "random", "re", "shlex", "statistics", "string", "textwrap", "time", "traceback",
    "typing", "urllib.parse", "uuid",
)  # fmt: skip
_PY_ASYNCIO = (
    "Barrier", "BoundedSemaphore", "Condition", "Event", "LifoQueue", "Lock",
    "PriorityQueue", "Queue", "Semaphore", "TaskGroup", "as_completed", "create_task",
    "ensure_future", "gather", "run", "shield", "sleep", "timeout", "wait", "wait_for",
)  # fmt: skip
_PY_LAZY = True


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


def python_surface() -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The Python guest's importable modules, ``asyncio`` names and whether its tool
    calls are lazy, read from the guest's own modules (which this imports)."""
    from .python._modules import ALLOWED_MODULES

    objects = importlib.import_module("codemode.sandbox.python._objects")
    return tuple(ALLOWED_MODULES), tuple(_python_asyncio()), hasattr(objects, "_ToolCall")


def sdk_facts(language: str, limits: Limits) -> dict[str, Any]:
    """The facts for ``language``'s guest under ``limits`` (``{}`` for other languages)."""
    if language == "typescript":
        return {"syntax": _TS_SYNTAX, "calls": _TS_CALLS, "limits": _limits(limits)}
    if language == "python":
        return {
            "modules": list(_PY_MODULES),
            "asyncio": list(_PY_ASYNCIO),
            "calls": _PY_LAZY_CALLS if _PY_LAZY else _PY_EAGER_CALLS,
            "limits": _limits(limits),
        }
    return {}
