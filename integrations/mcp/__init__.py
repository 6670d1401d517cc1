"""MCP integration: import an MCP server's tools, and serve code mode over MCP.

Needs the ``mcp`` extra (``pip install 'codemode[mcp]'``).

- Import (``_import``): ``connect_upstreams([Upstream.stdio("cmd args"), ...])`` connects
  to upstream MCP servers (stdio subprocesses with an explicit environment, streamable
  HTTP URLs, in-process SDK servers) and yields ``ImportedTools`` whose raw
  ``ToolDefinition``s register on a ``ToolRuntime``. Schemas are normalised into the
  enforced subset (``normalize_schema``; ``McpSchemaError`` names the tool and keyword
  it cannot represent); results prefer ``structured_content``; ``is_error`` becomes a
  ``McpToolError`` failure; ``read_only_hint`` makes a tool parallel-safe. Colliding
  names across upstreams are mangled to ``<upstream>__<tool>`` (``split_mangled``
  reverses it) or rejected.
- Serve (``_server``): ``CodeModeServer(runtime, agent=...)`` exposes ``run_code`` (its
  description carries the generated SDK) over stdio or streamable HTTP; ``codemode
  serve-mcp`` is the CLI front end. Each MCP session runs as its own scope.
- HTTP (``_http``): ``HttpOptions`` (limits, allowed hosts/origins, a ``TokenVerifier``
  such as ``StaticTokenVerifier``, resource-server metadata, TLS) for ``serve_http``.
- Large catalogs (``_catalog``): past ``sdk_budget`` characters of SDK, ``run_code``
  carries a compact index and programs discover the rest with ``search_tools`` and
  ``describe_tool``.
"""

from ._catalog import DISCOVERY_TOOL_NAMES as DISCOVERY_TOOL_NAMES
from ._catalog import compact_index as compact_index
from ._catalog import discovery_tools as discovery_tools
from ._http import HttpOptions as HttpOptions
from ._http import StaticTokenVerifier as StaticTokenVerifier
from ._http import is_loopback as is_loopback
from ._import import ImportedTool as ImportedTool
from ._import import ImportedTools as ImportedTools
from ._import import McpImportError as McpImportError
from ._import import McpToolError as McpToolError
from ._import import Upstream as Upstream
from ._import import connect_upstreams as connect_upstreams
from ._import import mangle as mangle
from ._import import split_mangled as split_mangled
from ._import import tool_definition as tool_definition
from ._schema import McpSchemaError as McpSchemaError
from ._schema import normalize_schema as normalize_schema
from ._server import DEFAULT_SDK_BUDGET as DEFAULT_SDK_BUDGET
from ._server import CodeModeServer as CodeModeServer
from ._server import RecentEventsLog as RecentEventsLog
from ._server import SessionScopeFactory as SessionScopeFactory
from ._server import call_result as call_result

__all__ = [
    "CodeModeServer",
    "DEFAULT_SDK_BUDGET",
    "DISCOVERY_TOOL_NAMES",
    "HttpOptions",
    "ImportedTool",
    "ImportedTools",
    "McpImportError",
    "McpSchemaError",
    "McpToolError",
    "RecentEventsLog",
    "SessionScopeFactory",
    "StaticTokenVerifier",
    "Upstream",
    "call_result",
    "compact_index",
    "connect_upstreams",
    "discovery_tools",
    "is_loopback",
    "mangle",
    "normalize_schema",
    "split_mangled",
    "tool_definition",
]
