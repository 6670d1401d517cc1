"""``lsp``: a JSON-RPC client for language servers over stdio, started lazily per workspace.

Layout:

- ``_jsonrpc``: JSON-RPC 2.0 with ``Content-Length`` framing on anyio byte streams (request
  ids, one reader task dispatching responses, server-to-client requests answered).
- ``_server``: ``LspServerSpec`` (which files, which command), ``LanguageServer`` (one
  process: initialize, document sync, shutdown) and ``LspManager`` (an async context
  manager that starts servers per (workspace, server) on first use and stops them all).
- ``_providers``: ``default_servers()``: ``jedi-language-server`` for Python, and
  ``typescript-language-server`` for TypeScript/JavaScript when installed.
- ``_tool``: the ``lsp`` tool (``build_lsp_tool``): validation, rendering, caps.
"""

from __future__ import annotations

from ._providers import default_servers
from ._server import LanguageServer, LspManager, LspServerSpec, kill_all_servers
from ._tool import build_lsp_tool, render_lsp

__all__ = [
    "LanguageServer",
    "LspManager",
    "LspServerSpec",
    "build_lsp_tool",
    "default_servers",
    "kill_all_servers",
    "render_lsp",
]
