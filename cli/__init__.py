"""The ``codemode`` command line: run programs in code mode against the built-in tools.

``main`` is the console script; ``app`` the typer application (``_app``). Both load on
first use: importing the CLI's modules costs ~300 ms (typer, rich, the engine, the tools,
the agent), which ``codemode --version`` does not need.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ._app import app as app

__all__ = ["app", "main"]


def _forget_start_directory() -> None:
    """Take the directory the command started in off the module search path.

    ``python -m codemode.cli`` (and ``-c``) puts it first on ``sys.path``, and it is often
    the agent's workspace, where a program's tools write files. Modules load on first use
    here (rich when a line needs it, a tool's implementation on its first call, parts of
    the standard library), and each would be looked for there first: a ``rich/`` or an
    ``html.py`` a program wrote would run in the host. The package is loaded already and
    its dependencies live in site-packages, so the command loses nothing it needs.
    ``-P`` (``PYTHONSAFEPATH``) adds no such entry; the console script's is its own
    ``bin`` directory.
    """
    if sys.flags.safe_path or not sys.path:
        return
    try:
        start = os.getcwd()
    except OSError:  # the directory is gone: nothing can be planted in it
        start = None
    if sys.path[0] == "" or sys.path[0] == start:
        del sys.path[0]


def main() -> None:
    """Console-script entry point."""
    _forget_start_directory()
    if sys.argv[1:] == ["--version"]:
        from importlib import metadata

        # The text of ``_app``'s eager --version option, without loading the application.
        try:
            version = metadata.version("codemode")
        except metadata.PackageNotFoundError:
            version = "unknown"
        sys.stdout.write(f"codemode {version}\n")
        return
    # httpx's package imports its own command line (click, rich's syntax highlighting,
    # pygments: ~26 ms of `codemode agent`'s start-up) unless that import fails, when it
    # keeps a stub: this process never runs httpx's CLI. Only here, in the console
    # script: a host that embeds codemode keeps its httpx as it is.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    from ._app import main as app_main

    try:
        app_main()
    except SystemExit as stop:
        if stop.code is not None and not isinstance(stop.code, int):
            raise  # a message to print: the interpreter's own exit prints it
        _leave(stop.code or 0)
    _leave(0)


def _leave(code: int) -> NoReturn:
    """End the process as the interpreter would, without its teardown.

    A command is done when it returns: every file, session log, worker and server is
    closed by then. What the interpreter would still do is wait for non-daemon threads,
    run the ``atexit`` handlers, flush the standard streams, then tear every module and
    object down one by one: 70-170 ms after ``codemode agent`` has answered (measured),
    for nothing the user can see. This does the first three and skips the last; with a
    non-daemon thread still running (or a stream that cannot be flushed) it leaves the
    ordinary way, so the thread is waited for and the error reported as usual.
    """
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


def __getattr__(name: str) -> Any:
    if name == "app":
        from ._app import app

        globals()["app"] = app
        return app
    raise AttributeError(f"module 'codemode.cli' has no attribute {name!r}")
