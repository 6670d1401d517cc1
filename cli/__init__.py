"""The ``codemode`` command line: run programs in code mode against the built-in tools.

``main`` is the console script; ``app`` the typer application (``_app``). Both load on
first use: importing the CLI's modules costs ~300 ms (typer, rich, the engine, the tools,
the agent), which ``codemode --version`` does not need.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import app as app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        from importlib import metadata

        # The text of ``_app``'s eager --version option, without loading the application.
        try:
            version = metadata.version("codemode")
        except metadata.PackageNotFoundError:
            version = "unknown"
        sys.stdout.write(f"codemode {version}\n")
        return
    from ._app import main as app_main

    app_main()


def __getattr__(name: str) -> Any:
    if name == "app":
        from ._app import app

        globals()["app"] = app
        return app
    raise AttributeError(f"module 'codemode.cli' has no attribute {name!r}")
