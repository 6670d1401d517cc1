"""The Python guest: RestrictedPython programs on an asyncio loop inside a worker.

``_guest`` is the guest module (``warm``, ``prepare_template``, ``prefault``, ``serve``); ``_policy`` is the
compile-time transformer, ``_builtins`` and ``_stdlib`` the run-time guards and
replacements, ``_modules`` the import allow-list, ``_asyncio`` the curated ``asyncio``,
``_objects`` what a program holds (bindings, awaitables, ``print``), ``_traceback`` its
diagnostics, and ``_audit`` the classified list of every name a program can reach. The
fork server loads it through ``worker/_guest`` (``PythonRuntime`` names it only as a
string); ``_sdk_facts`` describes its allow-lists to models from a copy checked
against them by a test, so the host never imports this package. It
imports ``worker/``'s bridge and frames and RestrictedPython, never ``host/``, anyio or
``codemode.engine``.
"""
