"""``web_search`` over real HTTP: a fake SearXNG JSON endpoint and a fake Brave Search API,
both served by the loopback server of ``test_web``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_web import Handler, Host, LoopbackServer, text_of
from test_web import server as server  # the loopback server fixture, shared

from codemode.engine._presentation import call_card_fields, result_card_fields
from codemode.tools._errors import WebError
from codemode.tools.web import (
    BraveSearchProvider,
    SearchProvider,
    SearchResponse,
    SearchSource,
    SearxngProvider,
    WebConfig,
    search_provider_from_env,
)

pytestmark = pytest.mark.anyio

CITE = "Cite the relevant URLs above as markdown links in your answer."
KEY = "brave-secret-key-123"


def _results(n: int, prefix: str) -> list[dict[str, Any]]:
    return [
        {"url": f"https://{prefix}.example/{i}", "title": f"{prefix} {i}", "content": ""}
        for i in range(n)
    ]


def searxng_route(data: dict[str, dict[str, Any]]) -> Any:
    def route(h: Handler) -> None:
        query = h.query()
        if query.get("format") != ["json"]:
            h.reply(403, b"Forbidden", "text/html")
            return
        [q] = query["q"]
        body = data.get(q, {"results": [], "answers": []})
        h.reply(200, json.dumps(body).encode(), "application/json")

    return route


def brave_route(h: Handler) -> None:
    token = h.headers.get("X-Subscription-Token")
    if token != KEY:
        # A careless API echoing the credential back: it must not reach the model.
        h.reply(401, json.dumps({"error": f"bad token {token}"}).encode(), "application/json")
        return
    [q] = h.query()["q"]
    [count] = h.query()["count"]
    body = {
        "web": {
            "results": [
                {
                    "url": f"https://brave.example/{q}",
                    "title": f"<strong>{q}</strong> &amp; more",
                    "description": f"All about <strong>{q}</strong>\n  today",
                    "page_age": "2025-01-02T03:04:05",
                },
                {"url": "https://brave.example/aged", "title": "Aged", "age": "2 days ago"},
            ][: int(count)]
        }
    }
    h.reply(200, json.dumps(body).encode(), "application/json")


def searxng_host(tmp_path: Path, server: LoopbackServer, data: dict[str, Any]) -> Host:
    server.routes["/search"] = searxng_route(data)
    return Host(tmp_path, WebConfig(provider=SearxngProvider(server.url("") + "/")))


async def test_one_query_with_answer(tmp_path: Path, server: LoopbackServer) -> None:
    data = {
        "rust async": {
            "answers": ["Use tokio.", {"answer": "Or async-std.", "url": "https://x"}],
            "results": [
                {
                    "url": "https://tokio.rs/",
                    "title": "Tokio",
                    "content": "An  asynchronous\nruntime",
                    "publishedDate": "2024-05-01",
                },
                {"url": "https://async.rs/", "title": "", "content": "", "publishedDate": None},
                {"url": "javascript:alert(1)", "title": "evil"},
                {"url": "file:///etc/passwd", "title": "evil"},
            ],
        }
    }
    h = searxng_host(tmp_path, server, data)
    result = await h.ok("web_search", {"queries": ["  rust async  "]})
    assert result.value == {
        "content": "Use tokio.\n\nOr async-std.",
        "sources": [
            {
                "url": "https://tokio.rs/",
                "title": "Tokio",
                "snippet": "An asynchronous runtime",
                "publishedAt": "2024-05-01",
            },
            {"url": "https://async.rs/"},
        ],
        "truncated": False,
    }
    assert text_of(result) == (
        "Use tokio.\n\nOr async-std.\n\n"
        "Sources:\n"
        "- [Tokio](https://tokio.rs/) — An asynchronous runtime (2024-05-01)\n"
        "- [async.rs](https://async.rs/)\n\n" + CITE
    )
    [tool] = [t for t in h.tools if t.name == "web_search"]
    args = {"queries": ["  rust async  "]}
    assert result_card_fields(tool, args, result)["resultCard"] == {
        "card": "web",
        "kind": "search",
        "sources": result.value["sources"],
        "answer": "Use tokio.\n\nOr async-std.",
        "truncated": False,
    }
    assert call_card_fields(tool, args)["callCard"]["kind"] == "search"
    [(path, headers)] = server.requests
    assert path.startswith("/search?") and "format=json" in path
    assert headers["Accept"] == "application/json"


async def test_queries_merge_round_robin(tmp_path: Path, server: LoopbackServer) -> None:
    data = {
        "a": {"results": [*_results(5, "a"), {"url": "https://shared.example/", "title": "S"}]},
        "b": {
            "results": [{"url": "https://a.example/0", "title": "dup"}, *_results(5, "b")],
            "answers": ["B answer"],
        },
        "c": {"results": [], "answers": ["C answer"]},
    }
    h = searxng_host(tmp_path, server, data)
    result = await h.ok("web_search", {"queries": ["a", "b", "c", "a"]})
    urls = [s["url"] for s in result.value["sources"]]
    # rank 0: a0, (b's a0 is a duplicate); rank 1: a1, b0; rank 2: a2, b1; ...; capped at 8.
    assert urls == [
        "https://a.example/0",
        "https://a.example/1",
        "https://b.example/0",
        "https://a.example/2",
        "https://b.example/1",
        "https://a.example/3",
        "https://b.example/2",
        "https://a.example/4",
    ]
    assert result.value["truncated"] is True
    assert result.value["content"] == "### b\n\nB answer\n\n### c\n\nC answer"
    out = text_of(result)
    assert out.startswith("### b\n\nB answer\n\n### c\n\nC answer\n\nSources:\n- [a 0](")
    assert out.endswith("\n\n(Showing the first 8 sources. Refine the query for more.)\n\n" + CITE)
    # The duplicate query was asked once.
    assert len(server.requests) == 3


async def test_no_results(tmp_path: Path, server: LoopbackServer) -> None:
    h = searxng_host(tmp_path, server, {})
    result = await h.ok("web_search", {"queries": ["nothing"]})
    assert result.value == {"sources": [], "truncated": False}
    assert text_of(result) == "No results found.\n\n" + CITE


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        ([], "queries must contain at least one query"),
        (["ok", "  "], "each query must be a non-empty string"),
        (["1", "2", "3", "4", "5"], "queries must contain at most 4 queries"),
    ],
)
async def test_query_checks(
    tmp_path: Path, server: LoopbackServer, queries: list[str], message: str
) -> None:
    h = searxng_host(tmp_path, server, {})
    assert await h.fail("web_search", {"queries": queries}) == (message, "WEB_INVALID_ARGS")
    assert server.requests == []


async def test_query_cap_is_configurable(tmp_path: Path, server: LoopbackServer) -> None:
    server.routes["/search"] = searxng_route({})
    web = WebConfig(provider=SearxngProvider(server.url("")), max_queries=1)
    h = Host(tmp_path, web)
    assert await h.fail("web_search", {"queries": ["x", "y"]}) == (
        "queries must contain at most 1 query",
        "WEB_INVALID_ARGS",
    )


async def test_no_provider(tmp_path: Path) -> None:
    h = Host(tmp_path, WebConfig())
    message, code = await h.fail("web_search", {"queries": ["x"]})
    assert code == "WEB_SEARCH_UNAVAILABLE"
    assert "CODEMODE_SEARXNG_URL" in message and "BRAVE_SEARCH_API_KEY" in message


async def test_searxng_without_json_format(tmp_path: Path, server: LoopbackServer) -> None:
    server.routes["/search"] = lambda h: h.reply(403, b"Forbidden", "text/html")
    h = Host(tmp_path, WebConfig(provider=SearxngProvider(server.url(""))))
    assert await h.fail("web_search", {"queries": ["x"]}) == (
        "search provider searxng failed: HTTP 403 (is the json format enabled in search.formats?)",
        "WEB_SEARCH_FAILED",
    )
    server.routes["/search"] = lambda h: h.reply(200, b"<html>not json", "text/html")
    assert await h.fail("web_search", {"queries": ["x"]}) == (
        "search provider searxng failed: the response is not JSON",
        "WEB_SEARCH_FAILED",
    )


async def test_brave(tmp_path: Path, server: LoopbackServer) -> None:
    server.routes["/res/v1/web/search"] = brave_route
    provider = BraveSearchProvider(KEY, base_url=server.url(""))
    assert isinstance(provider, SearchProvider)
    assert KEY not in repr(provider)
    h = Host(tmp_path, WebConfig(provider=provider))
    result = await h.ok("web_search", {"queries": ["zig"]})
    assert result.value == {
        "sources": [
            {
                "url": "https://brave.example/zig",
                "title": "zig & more",
                "snippet": "All about zig today",
                "publishedAt": "2025-01-02T03:04:05",
            },
            {"url": "https://brave.example/aged", "title": "Aged", "publishedAt": "2 days ago"},
        ],
        "truncated": False,
    }
    [(path, headers)] = server.requests
    assert "count=8" in path
    assert headers["X-Subscription-Token"] == KEY
    # A wrong key: the API's body echoes it, the error does not.
    wrong = Host(
        tmp_path, WebConfig(provider=BraveSearchProvider("wrong-key-456", base_url=server.url("")))
    )
    message, code = await wrong.fail("web_search", {"queries": ["zig"]})
    assert (message, code) == ("search provider brave failed: HTTP 401", "WEB_SEARCH_FAILED")


async def test_search_deadline(tmp_path: Path, server: LoopbackServer) -> None:
    def stall(h: Handler) -> None:
        h.server.release.wait(20)

    server.routes["/search"] = stall
    web = WebConfig(provider=SearxngProvider(server.url("")), timeout_ms=200)
    h = Host(tmp_path, web)
    assert await h.fail("web_search", {"queries": ["x"]}) == (
        "web search timed out after 200ms",
        "WEB_TIMEOUT",
    )


def test_provider_from_env() -> None:
    assert search_provider_from_env({}) is None
    searx = search_provider_from_env({"CODEMODE_SEARXNG_URL": "http://127.0.0.1:8888/"})
    assert isinstance(searx, SearxngProvider) and searx.base_url == "http://127.0.0.1:8888"
    brave = search_provider_from_env({"BRAVE_SEARCH_API_KEY": KEY})
    assert isinstance(brave, BraveSearchProvider)
    assert brave.base_url == "https://api.search.brave.com"
    both = {"CODEMODE_SEARXNG_URL": "http://s", "BRAVE_SEARCH_API_KEY": KEY}
    assert isinstance(search_provider_from_env(both), SearxngProvider)
    chosen = search_provider_from_env(
        {**both, "CODEMODE_SEARCH_PROVIDER": "brave", "CODEMODE_BRAVE_SEARCH_URL": "http://b/"}
    )
    assert isinstance(chosen, BraveSearchProvider) and chosen.base_url == "http://b"
    with pytest.raises(ValueError, match="searxng or brave"):
        search_provider_from_env({"CODEMODE_SEARCH_PROVIDER": "bing"})
    with pytest.raises(ValueError) as info:
        search_provider_from_env({"CODEMODE_SEARCH_PROVIDER": "brave"})
    assert KEY not in str(info.value)
    assert isinstance(WebConfig.from_env(both).provider, SearxngProvider)


class StaticProvider:
    """A host's own provider: fixed responses per query (the protocol is all it needs)."""

    name = "static"

    def __init__(self, responses: dict[str, SearchResponse | Exception]) -> None:
        self.responses = responses

    async def search(self, query: str, *, limit: int) -> SearchResponse:
        answer = self.responses[query]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_a_host_provider(tmp_path: Path) -> None:
    provider = StaticProvider(
        {
            "only answer": SearchResponse(answer="42"),
            "links": SearchResponse(
                sources=(
                    SearchSource("javascript:alert(1)", title="evil"),
                    SearchSource("https://ok.example/", title="OK"),
                )
            ),
            "down": WebError("search provider static failed: HTTP 503", "WEB_SEARCH_FAILED"),
        }
    )
    assert isinstance(provider, SearchProvider)
    h = Host(tmp_path, WebConfig(provider=provider))
    result = await h.ok("web_search", {"queries": ["only answer"]})
    assert result.value == {"content": "42", "sources": [], "truncated": False}
    assert text_of(result) == "42\n\n" + CITE
    result = await h.ok("web_search", {"queries": ["links"]})
    assert result.value["sources"] == [{"url": "https://ok.example/", "title": "OK"}]
    assert await h.fail("web_search", {"queries": ["links", "down"]}) == (
        "search provider static failed: HTTP 503",
        "WEB_SEARCH_FAILED",
    )
