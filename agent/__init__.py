"""``codemode.agent``: a reference host — a model client, an agent loop and sessions.

Built only on the public API of ``codemode.engine``, ``codemode.sandbox`` and
``codemode.tools``, the way any embedder would use them.
"""
