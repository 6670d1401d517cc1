"""MCP integration: import an MCP server's tools, and serve code mode over MCP.

Needs the ``mcp`` extra (``pip install 'codemode[mcp]'``).
"""
