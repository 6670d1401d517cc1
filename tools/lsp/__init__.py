"""``lsp``: a JSON-RPC client for language servers over stdio, started lazily per workspace."""
