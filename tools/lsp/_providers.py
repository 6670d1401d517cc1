"""Which language server handles which file, and where the servers' binaries are.

``default_servers`` offers ``jedi-language-server`` for Python (looked up next to the
running interpreter first, so a virtual environment's copy wins, then on ``PATH``) and
``typescript-language-server --stdio`` for TypeScript/JavaScript when its binary is found
(on ``PATH``, or the command given). A server whose binary is missing is simply not
offered: its files then answer ``LSP_UNAVAILABLE``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from ._server import LspServerSpec

__all__ = ["PYTHON_EXTENSIONS", "TYPESCRIPT_LANGUAGES", "default_servers", "find_executable"]

PYTHON_EXTENSIONS = (".py", ".pyi")
#: Extension -> LSP languageId for what ``typescript-language-server`` serves.
TYPESCRIPT_LANGUAGES = {
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
}


def find_executable(name: str) -> str | None:
    """``name`` next to ``sys.executable`` (unresolved: the venv's ``bin``), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which(name)


def _command(given: Sequence[str] | None, name: str, *extra: str) -> tuple[str, ...] | None:
    if given is not None:
        argv = tuple(given)
        if not argv:
            return None
        if os.sep in argv[0]:
            found = argv[0] if os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK) else None
        else:
            found = find_executable(argv[0])
        return (found, *argv[1:]) if found is not None else None
    found = find_executable(name)
    return (found, *extra) if found is not None else None


def default_servers(
    *,
    python_command: Sequence[str] | None = None,
    typescript_command: Sequence[str] | None = None,
) -> list[LspServerSpec]:
    """The server specs whose binaries exist here.

    ``python_command`` / ``typescript_command`` replace the default argv
    (``jedi-language-server`` / ``typescript-language-server --stdio``); a bare program name
    is looked up like the defaults, an empty sequence disables that server.
    """
    specs: list[LspServerSpec] = []
    python = _command(python_command, "jedi-language-server")
    if python is not None:
        specs.append(
            LspServerSpec(
                name="jedi-language-server",
                extensions=PYTHON_EXTENSIONS,
                language_id="python",
                command=python,
            )
        )
    typescript = _command(typescript_command, "typescript-language-server", "--stdio")
    if typescript is not None:
        specs.append(
            LspServerSpec(
                name="typescript-language-server",
                extensions=tuple(TYPESCRIPT_LANGUAGES),
                language_id=dict(TYPESCRIPT_LANGUAGES),
                command=typescript,
            )
        )
    return specs
