"""The host side of the sandbox: what runs in the engine's process, on its event loop.

``_forkserver_client`` starts and talks to the fork server, ``_pool`` keeps warm workers
ready, ``_bridge`` reads and writes one worker's frames, ``_supervisor`` runs one program
on one worker (a *run*) and enforces its budgets, and ``_ledger`` meters its output.
Imported by ``codemode.sandbox``'s runtimes (``_runtime``, ``_ts_runtime``); it may use
anyio, ``codemode.engine`` and the worker side's frame and boundary types, but nothing in
``worker/``, ``python/`` or ``typescript/`` ever imports it: workers must not load it.
"""
