"""Web: ``web_fetch`` and ``web_search`` (package ``@deepseek-ai/dsh-tool-web``).

Layout:

- ``_policy``: URL checks (http/https only, no credentials) and the ``DestinationPolicy``
  applied to every hop's *resolved* addresses (loopback, private, link-local, CGNAT,
  multicast, reserved and their IPv4-embedding IPv6 forms refused by default).
- ``_client``: the fetch itself over ``httpx``: connections pinned to a checked address
  (DNS rebinding cannot swap it), redirects followed by hand (each hop re-checked),
  bounded streaming with gzip/deflate handled here, content-type and charset handling.
- ``_markdown``: HTML to Markdown (markdownify), script/style removed, GFM tables, raw HTML
  kept when nesting is deeper than 512 or conversion fails.
- ``_search``: the ``SearchProvider`` protocol, ``SearxngProvider``, ``BraveSearchProvider``,
  ``search_provider_from_env`` and the merge of several queries.
- ``_tools``: ``WebConfig`` and the tool definitions (``build_web_tools``).

Failures are ``WebError`` with ``WEB_*`` codes: ``WEB_INVALID_ARGS``, ``WEB_INVALID_URL``,
``WEB_UNSUPPORTED_SCHEME``, ``WEB_CREDENTIALS_IN_URL``, ``WEB_DESTINATION_REFUSED``,
``WEB_DNS_FAILED``, ``WEB_CONNECT_FAILED``, ``WEB_REQUEST_FAILED``, ``WEB_BAD_RESPONSE``,
``WEB_TOO_MANY_REDIRECTS``, ``WEB_UNSUPPORTED_CONTENT``, ``WEB_UNSUPPORTED_ENCODING``,
``WEB_TIMEOUT``, ``WEB_SEARCH_UNAVAILABLE``, ``WEB_SEARCH_FAILED``.
"""

from __future__ import annotations

from ._policy import DestinationPolicy, address_refusal
from ._search import (
    BraveSearchProvider,
    SearchProvider,
    SearchResponse,
    SearchSource,
    SearxngProvider,
    search_provider_from_env,
)
from ._tools import WebConfig, build_web_fetch, build_web_search, build_web_tools

__all__ = [
    "BraveSearchProvider",
    "DestinationPolicy",
    "SearchProvider",
    "SearchResponse",
    "SearchSource",
    "SearxngProvider",
    "WebConfig",
    "address_refusal",
    "build_web_fetch",
    "build_web_search",
    "build_web_tools",
    "search_provider_from_env",
]
