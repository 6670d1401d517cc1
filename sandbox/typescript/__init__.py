"""The TypeScript guest: programs are stripped to JavaScript on the host and run in QuickJS.

``_strip`` (tree-sitter, position-preserving) erases types on the host before any worker
is used, so a syntax error never costs a worker; ``_options`` is the slice of ``Limits``
a worker builds its QuickJS context from; ``_worker`` is the guest module the fork server
loads (it meets ``worker._guest.Guest``) and drives ``_guest.JsGuest``, one QuickJS
(quickjs-ng) context per run; ``_catch`` rewrites ``catch`` clauses so a program cannot
swallow the sandbox's terminal errors; ``_prelude.js`` builds the program's globals
(``tools``, ``console``, timers, ``ToolCallError``) and ``_inspect.js`` is the console's
port of Node's ``util.inspect``.

Worker side: apart from ``_strip`` and ``_options``, which the host imports (both pure),
nothing here imports the host (anyio, ``codemode.engine``, ``sandbox/host``);
``tests/test_layering.py`` enforces it.
"""
