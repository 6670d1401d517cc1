"""``web_search`` providers and the merge of several queries' results.

A provider is anything with ``async search(query, *, limit) -> SearchResponse``. Two ship
here: ``SearxngProvider`` (a self-hosted SearXNG instance's JSON API) and
``BraveSearchProvider`` (the keyed Brave Search API). ``search_provider_from_env`` picks one
from the environment. Provider base URLs are host configuration, so provider requests do
not go through ``web_fetch``'s destination policy (a local SearXNG is the common case).
API keys travel only in request headers: they are never part of a message, a ``repr`` or a
log line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import msgspec

if TYPE_CHECKING:
    pass

from .._errors import WebError

__all__ = [
    "BraveSearchProvider",
    "SearchProvider",
    "SearchResponse",
    "SearchSource",
    "SearxngProvider",
    "merge_responses",
    "search_provider_from_env",
]

_MAX_PROVIDER_BYTES = 4 * 1024 * 1024
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SearchSource:
    """One result: its URL and, when the provider has them, title, snippet and date."""

    url: str
    title: str | None = None
    snippet: str | None = None
    published_at: str | None = None

    def to_json(self) -> dict[str, str]:
        """The canonical ``{url, title?, snippet?, publishedAt?}``."""
        out = {"url": self.url}
        if self.title:
            out["title"] = self.title
        if self.snippet:
            out["snippet"] = self.snippet
        if self.published_at:
            out["publishedAt"] = self.published_at
        return out


@dataclass(frozen=True)
class SearchResponse:
    """A provider's answer to one query: an optional summary and the ranked sources."""

    answer: str | None = None
    sources: Sequence[SearchSource] = field(default_factory=tuple)


@runtime_checkable
class SearchProvider(Protocol):
    """A web search backend; ``name`` appears in error messages."""

    name: str

    async def search(self, query: str, *, limit: int) -> SearchResponse:
        """Up to ``limit`` ranked sources for ``query`` (``WebError`` on failure)."""
        ...


def _clean(value: Any) -> str | None:
    """A one-line plain-text string from a provider field (HTML tags and entities removed)."""
    if not isinstance(value, str):
        return None
    text = _SPACE.sub(" ", html.unescape(_TAG.sub("", value))).strip()
    return text or None


def _web_url(value: Any) -> str | None:
    # Only http(s) links reach the model: a "javascript:" or "file:" source is dropped.
    if not isinstance(value, str) or not value:
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return value


async def _get_json(
    provider: str, url: str, params: Mapping[str, str], headers: Mapping[str, str], hint: str = ""
) -> Any:
    """GET a provider endpoint and decode its (bounded) JSON body."""
    import httpx  # lazy: httpx's import pulls in its CLI (click, rich), ~100 ms

    try:
        async with (
            httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=None) as client,
            client.stream("GET", url, params=params, headers=headers) as response,
        ):
            if response.status_code != 200:
                # Only the status: a body may echo the request (and its key) back.
                raise WebError(
                    f"search provider {provider} failed: HTTP {response.status_code}{hint}",
                    "WEB_SEARCH_FAILED",
                )
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > _MAX_PROVIDER_BYTES:
                    raise WebError(
                        f"search provider {provider} failed: response over "
                        f"{_MAX_PROVIDER_BYTES} bytes",
                        "WEB_SEARCH_FAILED",
                    )
    except httpx.HTTPError as exc:
        raise WebError(
            f"search provider {provider} failed: {type(exc).__name__}", "WEB_SEARCH_FAILED"
        ) from None
    try:
        return msgspec.json.decode(bytes(body))
    except msgspec.DecodeError:
        raise WebError(
            f"search provider {provider} failed: the response is not JSON", "WEB_SEARCH_FAILED"
        ) from None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


class SearxngProvider:
    """A SearXNG instance's JSON API: ``GET {base_url}/search?q=...&format=json``.

    The instance must allow the ``json`` format (``search.formats`` in its settings.yml).
    """

    name = "searxng"

    def __init__(self, base_url: str, *, language: str | None = None) -> None:
        """``base_url`` is the instance root (``http://localhost:8888``)."""
        self.base_url = base_url.rstrip("/")
        self.language = language

    def __repr__(self) -> str:
        return f"SearxngProvider({self.base_url!r})"

    async def search(self, query: str, *, limit: int) -> SearchResponse:
        """Up to ``limit`` results and the instance's direct answers, joined."""
        params = {"q": query, "format": "json"}
        if self.language:
            params["language"] = self.language
        data = await _get_json(
            self.name,
            f"{self.base_url}/search",
            params,
            {"Accept": "application/json"},
            hint=" (is the json format enabled in search.formats?)",
        )
        if not isinstance(data, dict):
            raise WebError(
                "search provider searxng failed: unexpected response", "WEB_SEARCH_FAILED"
            )
        sources: list[SearchSource] = []
        for item in _dicts(data.get("results")):
            url = _web_url(item.get("url"))
            if url is None:
                continue
            sources.append(
                SearchSource(
                    url=url,
                    title=_clean(item.get("title")),
                    snippet=_clean(item.get("content")),
                    published_at=_clean(item.get("publishedDate")),
                )
            )
            if len(sources) >= limit:
                break
        answers: list[str] = []
        for answer in data.get("answers") or []:
            # Older SearXNG lists strings; newer ones {answer, url} objects.
            text = _clean(answer.get("answer") if isinstance(answer, dict) else answer)
            if text and text not in answers:
                answers.append(text)
        return SearchResponse(answer="\n\n".join(answers) or None, sources=tuple(sources))


class BraveSearchProvider:
    """The Brave Search API (``GET {base_url}/res/v1/web/search``, ``X-Subscription-Token``)."""

    name = "brave"

    def __init__(self, api_key: str, *, base_url: str = "https://api.search.brave.com") -> None:
        """``api_key`` is the subscription token; ``base_url`` is overridable for tests."""
        if not api_key:
            raise ValueError("BraveSearchProvider needs a non-empty api_key")
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")

    def __repr__(self) -> str:
        # Never the key.
        return f"BraveSearchProvider(base_url={self.base_url!r})"

    async def search(self, query: str, *, limit: int) -> SearchResponse:
        """Up to ``limit`` (at most 20, the API's page) web results."""
        data = await _get_json(
            self.name,
            f"{self.base_url}/res/v1/web/search",
            {"q": query, "count": str(max(1, min(limit, 20)))},
            {"Accept": "application/json", "X-Subscription-Token": self._api_key},
        )
        web = data.get("web") if isinstance(data, dict) else None
        results = web.get("results") if isinstance(web, dict) else []
        sources: list[SearchSource] = []
        for item in _dicts(results):
            url = _web_url(item.get("url"))
            if url is None:
                continue
            sources.append(
                SearchSource(
                    url=url,
                    title=_clean(item.get("title")),
                    snippet=_clean(item.get("description")),
                    published_at=_clean(item.get("page_age")) or _clean(item.get("age")),
                )
            )
            if len(sources) >= limit:
                break
        return SearchResponse(sources=tuple(sources))


def search_provider_from_env(env: Mapping[str, str]) -> SearchProvider | None:
    """The provider the environment configures, or ``None``.

    ``CODEMODE_SEARCH_PROVIDER`` (``searxng`` | ``brave``) chooses when both are configured;
    otherwise ``CODEMODE_SEARXNG_URL`` (a SearXNG instance) wins over
    ``BRAVE_SEARCH_API_KEY`` (with ``CODEMODE_BRAVE_SEARCH_URL`` overriding the API base).
    Raises ``ValueError`` for an unknown ``CODEMODE_SEARCH_PROVIDER`` or a chosen provider
    that is not configured.
    """
    searxng = env.get("CODEMODE_SEARXNG_URL", "").strip()
    brave_key = env.get("BRAVE_SEARCH_API_KEY", "").strip()
    choice = env.get("CODEMODE_SEARCH_PROVIDER", "").strip().lower()

    def brave() -> BraveSearchProvider:
        base = env.get("CODEMODE_BRAVE_SEARCH_URL", "").strip()
        if base:
            return BraveSearchProvider(brave_key, base_url=base)
        return BraveSearchProvider(brave_key)

    if choice == "searxng":
        if not searxng:
            raise ValueError("CODEMODE_SEARCH_PROVIDER=searxng needs CODEMODE_SEARXNG_URL")
        return SearxngProvider(searxng)
    if choice == "brave":
        if not brave_key:
            raise ValueError("CODEMODE_SEARCH_PROVIDER=brave needs BRAVE_SEARCH_API_KEY")
        return brave()
    if choice:
        raise ValueError(f"CODEMODE_SEARCH_PROVIDER must be searxng or brave, got {choice!r}")
    if searxng:
        return SearxngProvider(searxng)
    if brave_key:
        return brave()
    return None


def merge_responses(
    queries: Sequence[str], responses: Sequence[SearchResponse], *, max_sources: int
) -> dict[str, Any]:
    """The ``web_search`` value of several queries' responses.

    Sources merge round-robin by rank (every query's first, then every second, ...),
    deduplicated by URL and capped at ``max_sources`` (``truncated`` when more were left);
    answers join as ``### {query}`` sections when there are several queries.
    """
    seen: set[str] = set()
    merged: list[dict[str, str]] = []
    truncated = False
    depth = max((len(r.sources) for r in responses), default=0)
    for rank in range(depth):
        for response in responses:
            if rank >= len(response.sources):
                continue
            source = response.sources[rank]
            # Any provider's links, not just the shipped ones: only http(s) reach the model.
            if _web_url(source.url) is None or source.url in seen:
                continue
            seen.add(source.url)
            if len(merged) >= max_sources:
                truncated = True
                continue
            merged.append(source.to_json())
    answered = [(q, r.answer) for q, r in zip(queries, responses, strict=True) if r.answer]
    value: dict[str, Any] = {}
    if len(queries) == 1 and answered:
        value["content"] = answered[0][1]
    elif answered:
        value["content"] = "\n\n".join(f"### {q}\n\n{a}" for q, a in answered)
    value["sources"] = merged
    value["truncated"] = truncated
    return value
