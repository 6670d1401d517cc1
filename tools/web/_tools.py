"""The ``web_fetch`` and ``web_search`` tool definitions and their configuration."""

from __future__ import annotations

import ssl
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import anyio

from codemode.engine import AbortError, ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import is_blank, result_parts
from .._config import ToolsConfig
from .._errors import WebError
from .._text import utf16_head, utf16_len
from ._policy import DestinationPolicy
from ._search import SearchProvider, SearchResponse, merge_responses, search_provider_from_env

if TYPE_CHECKING:
    # The fetch (and its HTTP client) and the HTML conversion load on the first
    # ``web_fetch``: a session that never fetches a page never imports them.
    from ._markdown import Converted

__all__ = [
    "WebConfig",
    "build_web_fetch",
    "build_web_search",
    "build_web_tools",
    "render_fetch",
    "render_search",
]

PACKAGE = "@deepseek-ai/dsh-tool-web"
TIMEOUT_MS = 30_000
TRUNCATION_NOTE = "\n\n(Content truncated. Fetch a more specific URL or section for the full text.)"
CITE = "Cite the relevant URLs above as markdown links in your answer."

T = TypeVar("T")


@dataclass(kw_only=True)
class WebConfig:
    """Destination policy, caps and search provider of the web tools.

    - ``policy``: where ``web_fetch`` may connect (default: public addresses only).
    - ``provider``: the ``web_search`` backend; ``None`` makes ``web_search`` fail with
      ``WEB_SEARCH_UNAVAILABLE`` at call time.
    - ``timeout_ms``: the tools' own total deadline per call (``WEB_TIMEOUT``).
    - ``max_response_bytes``: decoded body bytes kept while streaming; the rest is not read.
    - ``max_redirects``: redirects followed (each hop re-checked by ``policy``).
    - ``max_output_chars`` / ``max_source_chars``: the rendered text's cap and the HTML
      source cut before conversion (UTF-16 units).
    - ``max_sources`` / ``max_queries``: ``web_search``'s merge cap and query cap.
    - ``tls_context``: how HTTPS servers are verified (default: httpx's CA bundle); the
      name verified is always the URL's host, whatever address the connection is pinned to.
    """

    policy: DestinationPolicy = field(default_factory=DestinationPolicy)
    provider: SearchProvider | None = None
    timeout_ms: int = TIMEOUT_MS
    max_response_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 10
    max_output_chars: int = 200_000
    max_source_chars: int = 200_000
    max_sources: int = 8
    max_queries: int = 4
    user_agent: str = "codemode-web-fetch/1.0"
    tls_context: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        for name in (
            "timeout_ms",
            "max_response_bytes",
            "max_output_chars",
            "max_source_chars",
            "max_sources",
            "max_queries",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"WebConfig.{name} must be a positive integer, got {value!r}")
        if isinstance(self.max_redirects, bool) or not isinstance(self.max_redirects, int):
            raise ValueError("WebConfig.max_redirects must be an integer")
        if self.max_redirects < 0:
            raise ValueError("WebConfig.max_redirects must not be negative")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, policy: DestinationPolicy | None = None
    ) -> WebConfig:
        """A config from the environment: the provider from ``search_provider_from_env``,
        the policy (unless given) from ``DestinationPolicy.from_env``."""
        return cls(
            policy=policy if policy is not None else DestinationPolicy.from_env(env),
            provider=search_provider_from_env(env),
        )


# --- conversion cache: execute converts off the event loop, render reuses the result -------


class _Conversions:
    """A small LRU of ``html -> Converted`` so the pure ``render`` need not redo the work."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, int], Converted] = OrderedDict()

    def convert(self, html: str, max_source_chars: int) -> Converted:
        from ._markdown import Converted, html_to_markdown

        # Only the cut source matters, so that is the key: an entry holds at most
        # ``max_source_chars`` of source whatever the page's size. ``len`` first: it is O(1)
        # and settles the common large case without scanning the whole page.
        cut = len(html) > max_source_chars or utf16_len(html) > max_source_chars
        source = utf16_head(html, max_source_chars) if cut else html
        key = (source, max_source_chars)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return Converted(hit.text, cut, hit.converted)
        done = html_to_markdown(source, max_source_chars=max_source_chars)
        with self._lock:
            self._items[key] = done
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return Converted(done.text, cut, done.converted)


# Sixteen pages of at most 200,000 source chars each: a few MB, enough for the calls in flight.
_conversions = _Conversions()


async def _bounded(ctx: Any, ms: int, what: str, body: Callable[[], Awaitable[T]]) -> T:
    """``body()`` under the tool's own deadline, cancelled when the caller aborts."""
    outcome: list[T] = []
    failure: list[BaseException] = []
    aborted = False
    signal = getattr(ctx, "signal", None)
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal aborted
            assert signal is not None
            await signal.wait()
            aborted = True
            group.cancel_scope.cancel()

        if signal is not None:
            group.start_soon(watch)
        with anyio.move_on_after(ms / 1000) as deadline:
            try:
                outcome.append(await body())
            except Exception as exc:  # re-raised below, outside the task group
                failure.append(exc)
        group.cancel_scope.cancel()
    if aborted:
        raise AbortError("tool call aborted")
    if failure:
        raise failure[0]
    if deadline.cancelled_caught or not outcome:
        raise WebError(f"{what} timed out after {ms}ms", "WEB_TIMEOUT")
    return outcome[0]


# --- web_fetch ---------------------------------------------------------------------------

_FETCH_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "url": {"type": "string", "required": True},
        "statusCode": {"type": "integer", "required": True},
        "body": {
            "type": "object",
            "additionalProperties": False,
            "required": True,
            "properties": {
                "kind": {"type": "string", "enum": ["html", "text"], "required": True},
                "content": {"type": "string", "required": True},
            },
        },
        "truncated": {"type": "boolean", "required": True},
    },
}


def render_fetch(web: WebConfig, value: Any) -> tuple[str, bool]:
    """The model-facing text of a ``web_fetch`` value and whether anything was cut."""
    header = f"Fetched {value['url']} (HTTP {value['statusCode']})\n\n"
    body = value["body"]["content"]
    cut = bool(value["truncated"])
    if value["body"]["kind"] == "html":
        converted = _conversions.convert(body, web.max_source_chars)
        body = converted.text
        cut = cut or converted.source_cut
    whole = header + body
    cap = web.max_output_chars
    if cut or len(whole) > cap or utf16_len(whole) > cap:
        room = cap - utf16_len(TRUNCATION_NOTE)
        whole = utf16_head(whole, room) + TRUNCATION_NOTE if room > 0 else utf16_head(whole, cap)
        return whole, True
    return whole, False


def build_web_fetch(cfg: ToolsConfig, web: WebConfig) -> ToolDefinition:
    """The ``web_fetch`` tool bound to ``web``'s policy and caps."""

    async def execute(args: Any, ctx: Any) -> Any:
        raw = args["url"]
        if is_blank(raw):
            raise WebError("url must be a non-empty string", "WEB_INVALID_ARGS")
        url = raw.strip()

        async def run() -> Any:
            from ._client import fetch

            return await fetch(
                url,
                web.policy,
                max_bytes=web.max_response_bytes,
                max_redirects=web.max_redirects,
                user_agent=web.user_agent,
                tls_context=web.tls_context,
            )

        result = await _bounded(ctx, web.timeout_ms, f"fetching {url}", run)
        if result.kind == "html":
            # render (top-level calls) and presentation_meta (also a program's sub-call, for
            # its session card) need the Markdown: convert in a worker thread now, so they
            # find it cached instead of blocking the event loop.
            await anyio.to_thread.run_sync(_conversions.convert, result.text, web.max_source_chars)
        return {
            "url": result.url,
            "statusCode": result.status,
            "body": {"kind": result.kind, "content": result.text},
            "truncated": result.truncated,
        }

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(render_fetch(web, value)[0])]

    def meta(args: Any, value: Any) -> Any:
        return {
            "kind": "fetch",
            "url": value["url"],
            "statusCode": value["statusCode"],
            "truncated": render_fetch(web, value)[1],
        }

    def present_result(args: Any, result: Any) -> Any:
        _content, is_error, card_meta = result_parts(result)
        if is_error or not isinstance(card_meta, dict) or card_meta.get("kind") != "fetch":
            return None
        return {"card": "web", **card_meta}

    return define_catalog_tool(
        "web_fetch",
        package=PACKAGE,
        output=ToolOutput(schema=_FETCH_SCHEMA, render=render, presentation_meta=meta),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        timeout_ms=TIMEOUT_MS,
        present_call=lambda args: {
            "card": "generic",
            "title": f"Fetch {args['url']}",
            "kind": "fetch",
            "rawInput": args["url"],
        },
        present_result=present_result,
    )


# --- web_search --------------------------------------------------------------------------

_SOURCE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "url": {"type": "string", "required": True},
        "title": {"type": "string"},
        "snippet": {"type": "string"},
        "publishedAt": {"type": "string"},
    },
}
_SEARCH_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "content": {"type": "string"},
        "sources": {"type": "array", "items": _SOURCE, "required": True},
        "truncated": {"type": "boolean", "required": True},
    },
}


def _source_line(source: Mapping[str, Any]) -> str:
    label = source.get("title")
    if not label:
        try:
            label = urlsplit(source["url"]).hostname or source["url"]
        except ValueError:
            label = source["url"]
    line = f"- [{label}]({source['url']})"
    if source.get("snippet"):
        line += f" — {source['snippet']}"
    if source.get("publishedAt"):
        line += f" ({source['publishedAt']})"
    return line


def render_search(value: Any) -> str:
    """The model-facing text of a ``web_search`` value."""
    parts: list[str] = []
    content = value.get("content")
    sources = value["sources"]
    if content:
        parts.append(content)
    if sources:
        parts.append("Sources:\n" + "\n".join(_source_line(s) for s in sources))
    elif not content:
        parts.append("No results found.")
    if value["truncated"]:
        parts.append(f"(Showing the first {len(sources)} sources. Refine the query for more.)")
    parts.append(CITE)
    return "\n\n".join(parts)


def _queries(args: Any, limit: int) -> list[str]:
    raw = args["queries"]
    if not raw:
        raise WebError("queries must contain at least one query", "WEB_INVALID_ARGS")
    if any(is_blank(q) for q in raw):
        raise WebError("each query must be a non-empty string", "WEB_INVALID_ARGS")
    queries = list(dict.fromkeys(q.strip() for q in raw))
    if len(queries) > limit:
        noun = "query" if limit == 1 else "queries"
        raise WebError(f"queries must contain at most {limit} {noun}", "WEB_INVALID_ARGS")
    return queries


def build_web_search(cfg: ToolsConfig, web: WebConfig) -> ToolDefinition:
    """The ``web_search`` tool over ``web.provider``."""

    async def execute(args: Any, ctx: Any) -> Any:
        queries = _queries(args, web.max_queries)
        provider = web.provider
        if provider is None:
            raise WebError(
                "web_search has no search provider configured (set CODEMODE_SEARXNG_URL to a "
                "SearXNG instance or BRAVE_SEARCH_API_KEY)",
                "WEB_SEARCH_UNAVAILABLE",
            )

        async def run() -> list[SearchResponse]:
            responses: list[SearchResponse | None] = [None] * len(queries)
            errors: list[BaseException | None] = [None] * len(queries)

            async def one(index: int) -> None:
                try:
                    responses[index] = await provider.search(queries[index], limit=web.max_sources)
                except Exception as exc:  # reported in query order after all settle
                    errors[index] = exc

            async with anyio.create_task_group() as group:
                for index in range(len(queries)):
                    group.start_soon(one, index)
            for error in errors:
                if error is not None:
                    raise error
            return [r if r is not None else SearchResponse() for r in responses]

        responses = await _bounded(ctx, web.timeout_ms, "web search", run)
        return merge_responses(queries, responses, max_sources=web.max_sources)

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [text(render_search(value))]

    def meta(args: Any, value: Any) -> Any:
        out: dict[str, Any] = {"kind": "search", "sources": value["sources"]}
        if value.get("content"):
            out["answer"] = value["content"]
        out["truncated"] = value["truncated"]
        return out

    def present_result(args: Any, result: Any) -> Any:
        _content, is_error, card_meta = result_parts(result)
        if is_error or not isinstance(card_meta, dict) or card_meta.get("kind") != "search":
            return None
        return {"card": "web", **card_meta}

    def present_call(args: Any) -> Any:
        queries = [q for q in args["queries"] if isinstance(q, str)]
        return {
            "card": "generic",
            "title": "Search the web: " + " | ".join(queries),
            "kind": "search",
            "rawInput": args["queries"],
        }

    return define_catalog_tool(
        "web_search",
        package=PACKAGE,
        output=ToolOutput(schema=_SEARCH_SCHEMA, render=render, presentation_meta=meta),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        timeout_ms=TIMEOUT_MS,
        present_call=present_call,
        present_result=present_result,
    )


def build_web_tools(cfg: ToolsConfig, web: WebConfig | None = None) -> list[ToolDefinition]:
    """``web_fetch`` and ``web_search`` (``web`` defaults to a public-only policy and no
    search provider)."""
    web = web or WebConfig()
    return [build_web_fetch(cfg, web), build_web_search(cfg, web)]
