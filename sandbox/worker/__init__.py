"""The worker side of the sandbox: the fork server, the workers it forks, their boundary.

``_forkserver`` is the pre-imported interpreter that forks workers; ``_main`` is what a
worker does between ``fork()`` and ``_exit()``; ``_boundary`` (with ``_seccomp``,
``_landlock``, ``_mountns``, ``_pidns``) locks a worker down; ``_frames`` and ``_bridge``
are the bridge protocol; ``_guest`` is the ``Guest`` protocol every guest module meets.
It runs in processes with no event loop of the host's and no engine: it imports the
standard library and msgspec only, and never ``codemode.engine``, anyio or ``host/``
(``tests/sandbox/test_worker_imports.py`` checks a live worker). The host side imports
its frame and boundary types; the guests (``python/``, ``typescript/``) import its bridge.
"""
