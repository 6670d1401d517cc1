"""codemode's integrations: the engine seen from the protocols and services around it.

Layout: ``mcp`` (import an MCP server's tools into a ``ToolRuntime``; serve code mode as
an MCP server in front of other MCP servers), ``providers`` (pure adapters between
``ToolRuntime.schemas`` / ``run_tool_calls`` and the model providers' tool formats),
``otel`` (OpenTelemetry spans for every tool execution). Each depends on an optional
extra (``mcp``, ``otel``); importing this package needs none of them.

Place in the whole: built only on the public names of ``engine``, ``sandbox``, ``tools``
and ``sdk_gen``, the way any embedder would; ``cli`` builds on it.
"""
