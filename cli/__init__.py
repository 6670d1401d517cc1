"""The ``codemode`` command line: run programs in code mode against the built-in tools."""

from __future__ import annotations

from ._app import app as app
from ._app import main as main

__all__ = ["app", "main"]
