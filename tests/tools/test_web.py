"""``web_fetch`` against a real loopback HTTP server started here, natively and from programs.

The server is explicitly allowed by the test configuration (``DestinationPolicy.allowing``);
the default policy is shown refusing it (and every other internal spelling) too.
"""

from __future__ import annotations

import gzip
import ipaddress
import ssl
import subprocess
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from codemode.engine import (
    AbortController,
    MemorySessionLog,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRuntime,
)
from codemode.engine._presentation import call_card_fields, result_card_fields
from codemode.engine.policies import LocalSpillStore
from codemode.sandbox import Limits, PythonRuntime, TypeScriptRuntime
from codemode.tools._config import ToolsConfig
from codemode.tools._errors import WebError
from codemode.tools.fs._paths import Workspace
from codemode.tools.web import (
    DestinationPolicy,
    SearxngProvider,
    WebConfig,
    address_refusal,
    build_web_tools,
)
from codemode.tools.web._client import _hop, decode_body
from codemode.tools.web._markdown import html_to_markdown
from codemode.tools.web._policy import (
    Destination,
    check_url,
    parse_ipv4_host,
    resolve_destination,
)

pytestmark = pytest.mark.anyio

NOTE = "\n\n(Content truncated. Fetch a more specific URL or section for the full text.)"

Route = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    """Dispatches to the server's routes; records each request's path and headers."""

    server: LoopbackServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self.server.requests.append((self.path, dict(self.headers.items())))
        route = self.server.routes.get(urlsplit(self.path).path)
        if route is None:
            self.reply(404, b"<h1>nope</h1>", "text/html")
            return
        try:
            route(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading, as it should past a cap

    def reply(self, status: int, body: bytes, ctype: str | None, **headers: str) -> None:
        self.send_response(status)
        if ctype is not None:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)


class LoopbackServer(ThreadingHTTPServer):
    """A real HTTP server on 127.0.0.1 with per-path routes."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.release = threading.Event()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    srv = LoopbackServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()
    thread.join(5)


class Host:
    """A runtime with the web tools registered, called the way a host would."""

    def __init__(self, tmp: Path, web: WebConfig, code_runtime: Any = None) -> None:
        (tmp / "ws").mkdir(exist_ok=True)
        cfg = ToolsConfig(
            workspace=Workspace(tmp / "ws"),
            spill_store=LocalSpillStore(str(tmp / "spill")),
            output_dir=str(tmp / "out"),
        )
        if code_runtime is None:
            self.rt = ToolRuntime()
        else:
            self.rt = ToolRuntime(mode="code", code_runtime=code_runtime)
        self.tools = build_web_tools(cfg, web)
        for tool in self.tools:
            self.rt.register(tool)
        self.session = MemorySessionLog()
        self.agent = self.rt.scope("agent", session=self.session)

    async def call(
        self, name: str, arguments: Any, controller: AbortController | None = None
    ) -> ToolExecutionResult:
        return await self.rt.execute(
            ToolExecutionInput(
                call_id="call-1",
                name=name,
                arguments=arguments,
                signal=(controller or AbortController()).signal,
                agent=self.agent,
            )
        )

    async def ok(self, name: str, arguments: Any) -> ToolExecutionResult:
        result = await self.call(name, arguments)
        assert not result.is_error, result.to_json()
        return result

    async def fail(self, name: str, arguments: Any) -> tuple[str, str | None]:
        result = await self.call(name, arguments)
        assert result.is_error, result.to_json()
        info = result.error.info
        assert [b["text"] for b in result.content] == [f"Error: {result.error.message}"]
        return result.error.message, (info.code if info is not None else None)


def text_of(result: ToolExecutionResult) -> str:
    [block] = result.content
    return str(block["text"])


ALLOW_LOOPBACK = DestinationPolicy.allowing(hosts=["127.0.0.1"])


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path, WebConfig(policy=ALLOW_LOOPBACK))


# -- content ------------------------------------------------------------------------------

PAGE = (
    b"<!doctype html><html><head><title>T</title><style>body{color:red}</style>"
    b"<script>alert('x')</script></head><body><h1>Hello</h1><noscript>enable js</noscript>"
    b"<p>Some <b>bold</b> text and a <a href='/next'>link</a>.</p>"
    b"<table><tr><td>name</td><td>qty</td></tr><tr><td>apple</td><td>3</td></tr></table>"
    b"</body></html>"
)


async def test_html_becomes_markdown(host: Host, server: LoopbackServer) -> None:
    server.routes["/page"] = lambda h: h.reply(200, PAGE, "text/html; charset=utf-8")
    result = await host.ok("web_fetch", {"url": server.url("/page")})
    value = result.value
    assert value["url"] == server.url("/page")
    assert value["statusCode"] == 200
    assert value["body"] == {"kind": "html", "content": PAGE.decode()}
    assert value["truncated"] is False
    out = text_of(result)
    assert out.startswith(f"Fetched {server.url('/page')} (HTTP 200)\n\n")
    assert "# Hello" in out
    assert "Some **bold** text and a [link](/next)." in out
    assert "| name | qty |\n| --- | --- |\n| apple | 3 |" in out
    for gone in ("alert", "color:red", "enable js", "<table"):
        assert gone not in out
    assert result.meta == {
        "kind": "fetch",
        "url": server.url("/page"),
        "statusCode": 200,
        "truncated": False,
    }
    # The cards a session event stores, built from the meta.
    [tool] = [t for t in host.tools if t.name == "web_fetch"]
    args = {"url": server.url("/page")}
    assert call_card_fields(tool, args)["callCard"] == {
        "card": "generic",
        "title": f"Fetch {server.url('/page')}",
        "kind": "fetch",
        "rawInput": server.url("/page"),
    }
    assert result_card_fields(tool, args, result)["resultCard"] == {
        "card": "web",
        "kind": "fetch",
        "url": server.url("/page"),
        "statusCode": 200,
        "truncated": False,
    }


async def test_text_json_and_error_status(host: Host, server: LoopbackServer) -> None:
    server.routes["/t"] = lambda h: h.reply(200, b"plain <b>text</b>\n", "text/plain")
    server.routes["/j"] = lambda h: h.reply(200, b'{"a": [1, 2]}', "application/json")
    server.routes["/x"] = lambda h: h.reply(200, b"<a>1</a>", "application/atom+xml")
    for path, body in [("/t", "plain <b>text</b>\n"), ("/j", '{"a": [1, 2]}'), ("/x", "<a>1</a>")]:
        result = await host.ok("web_fetch", {"url": server.url(path)})
        assert result.value["body"] == {"kind": "text", "content": body}
        assert text_of(result) == f"Fetched {server.url(path)} (HTTP 200)\n\n{body}"
    # A 404 page is a fetched document too: the status is in the value and the text.
    result = await host.ok("web_fetch", {"url": server.url("/missing")})
    assert result.value["statusCode"] == 404
    assert text_of(result) == f"Fetched {server.url('/missing')} (HTTP 404)\n\n# nope"


async def test_binary_content_is_refused(host: Host, server: LoopbackServer) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    server.routes["/img"] = lambda h: h.reply(200, png, "image/png")
    server.routes["/untyped"] = lambda h: h.reply(200, png, None)
    server.routes["/pdf"] = lambda h: h.reply(200, b"%PDF-1.4", "application/pdf")
    message, code = await host.fail("web_fetch", {"url": server.url("/img")})
    assert code == "WEB_UNSUPPORTED_CONTENT"
    assert message == (
        f"cannot fetch {server.url('/img')}: content type image/png is binary; web_fetch "
        "returns text only (HTML, plain text, JSON, XML)"
    )
    assert (await host.fail("web_fetch", {"url": server.url("/pdf")}))[1] == (
        "WEB_UNSUPPORTED_CONTENT"
    )
    message, code = await host.fail("web_fetch", {"url": server.url("/untyped")})
    assert code == "WEB_UNSUPPORTED_CONTENT"
    assert "binary (no content type)" in message


async def test_untyped_text_and_html_are_sniffed(host: Host, server: LoopbackServer) -> None:
    server.routes["/u1"] = lambda h: h.reply(200, b"<!DOCTYPE html><p>hi</p>", None)
    server.routes["/u2"] = lambda h: h.reply(200, "héllo".encode(), None)
    assert (await host.ok("web_fetch", {"url": server.url("/u1")})).value["body"]["kind"] == "html"
    value = (await host.ok("web_fetch", {"url": server.url("/u2")})).value
    assert value["body"] == {"kind": "text", "content": "héllo"}


async def test_charsets(host: Host, server: LoopbackServer) -> None:
    latin = "<html><head><meta charset='iso-8859-1'></head><body><p>café</p></body></html>"
    server.routes["/meta"] = lambda h: h.reply(200, latin.encode("latin-1"), "text/html")
    equiv = '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><p>日本語</p>'
    server.routes["/equiv"] = lambda h: h.reply(200, equiv.encode("shift_jis"), "text/html")
    server.routes["/header"] = lambda h: h.reply(
        200, "привет".encode("koi8-r"), "text/plain; charset=KOI8-R"
    )
    # The header wins over a lying <meta>.
    lying = "<meta charset='shift_jis'><p>zürich</p>"
    server.routes["/wins"] = lambda h: h.reply(
        200, lying.encode("utf-8"), 'text/html; charset="utf-8"'
    )
    server.routes["/cp1252"] = lambda h: h.reply(200, b"caf\xe9 \x93quoted\x94", "text/plain")
    server.routes["/bogus"] = lambda h: h.reply(
        200, b"\\u0041 plain", "text/plain; charset=unicode_escape"
    )
    assert (
        "café"
        in (await host.ok("web_fetch", {"url": server.url("/meta")})).value["body"]["content"]
    )
    assert (
        "日本語"
        in (await host.ok("web_fetch", {"url": server.url("/equiv")})).value["body"]["content"]
    )
    value = (await host.ok("web_fetch", {"url": server.url("/header")})).value
    assert value["body"]["content"] == "привет"
    assert (
        "zürich"
        in (await host.ok("web_fetch", {"url": server.url("/wins")})).value["body"]["content"]
    )
    # Not UTF-8 and no label: windows-1252, the web's fallback.
    value = (await host.ok("web_fetch", {"url": server.url("/cp1252")})).value
    assert value["body"]["content"] == "café \u201cquoted\u201d"
    # A Python-only codec named by the server is not used (it would rewrite the text).
    value = (await host.ok("web_fetch", {"url": server.url("/bogus")})).value
    assert value["body"]["content"] == "\\u0041 plain"


def test_decode_body_edges() -> None:
    # A BOM beats the header; one BOM is stripped.
    assert decode_body(b"\xef\xbb\xbfhi", "text/plain; charset=latin-1", "text", complete=True) == (
        "hi"
    )
    assert decode_body("hi".encode("utf-16"), "text/plain", "text", complete=True) == "hi"
    # A cut body drops a partial trailing character rather than inventing U+FFFD.
    assert decode_body("ab€".encode()[:-1], "text/plain", "text", complete=False) == "ab"
    assert decode_body(b"a\xff", "text/plain; charset=utf-8", "text", complete=True) == "a\ufffd"


# -- caps ----------------------------------------------------------------------------------


async def test_huge_body_is_cut_while_streaming(tmp_path: Path, server: LoopbackServer) -> None:
    sent: list[int] = []

    def huge(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(64 * 1024 * 1024))
        h.end_headers()
        chunk = b"x" * 65536
        for _ in range(1024):
            h.wfile.write(chunk)
            sent.append(len(chunk))

    server.routes["/huge"] = huge
    web = WebConfig(policy=ALLOW_LOOPBACK, max_response_bytes=300_000)
    h = Host(tmp_path, web)
    result = await h.ok("web_fetch", {"url": server.url("/huge")})
    assert result.value["truncated"] is True
    assert result.value["body"]["content"] == "x" * 300_000
    out = text_of(result)
    assert out.endswith(NOTE)
    assert len(out) == 200_000
    assert out.startswith(f"Fetched {server.url('/huge')} (HTTP 200)\n\nxxx")
    assert result.meta["truncated"] is True
    # The client stopped reading: the server could not push all 64 MiB.
    assert sum(sent) < 64 * 1024 * 1024


async def test_gzip_bomb_is_bounded(tmp_path: Path, server: LoopbackServer) -> None:
    bomb = gzip.compress(b"A" * (50 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 100_000
    server.routes["/bomb"] = lambda h: h.reply(200, bomb, "text/plain", Content_Encoding="gzip")
    small = gzip.compress("gzip körper".encode())
    server.routes["/gz"] = lambda h: h.reply(
        200, small, "text/plain; charset=utf-8", Content_Encoding="gzip"
    )
    h = Host(tmp_path, WebConfig(policy=ALLOW_LOOPBACK, max_response_bytes=1_000_000))
    value = (await h.ok("web_fetch", {"url": server.url("/gz")})).value
    assert value == {
        "url": server.url("/gz"),
        "statusCode": 200,
        "body": {"kind": "text", "content": "gzip körper"},
        "truncated": False,
    }
    value = (await h.ok("web_fetch", {"url": server.url("/bomb")})).value
    assert value["truncated"] is True
    assert value["body"]["content"] == "A" * 1_000_000
    server.routes["/br"] = lambda h: h.reply(200, b"xx", "text/plain", Content_Encoding="br")
    assert (await h.fail("web_fetch", {"url": server.url("/br")}))[1] == "WEB_UNSUPPORTED_ENCODING"


async def test_output_cap_counts_utf16_units(tmp_path: Path, server: LoopbackServer) -> None:
    # Astral characters count twice: a body of 120,000 of them is 240,000 units.
    body = "😀" * 120_000
    server.routes["/emoji"] = lambda h: h.reply(200, body.encode(), "text/plain; charset=utf-8")
    h = Host(tmp_path, WebConfig(policy=ALLOW_LOOPBACK))
    result = await h.ok("web_fetch", {"url": server.url("/emoji")})
    assert result.value["truncated"] is False
    out = text_of(result)
    assert out.endswith(NOTE)
    assert len(out.encode("utf-16-le")) // 2 <= 200_000
    assert len(out.encode("utf-16-le")) // 2 >= 199_999  # a pair straddling the cut goes whole


async def test_source_cut_and_deep_nesting(host: Host, server: LoopbackServer) -> None:
    big = "<p>" + "word " * 60_000 + "</p><p>TAIL</p>"
    server.routes["/big"] = lambda h: h.reply(200, big.encode(), "text/html")
    deep = "<div>" * 600 + "deep text" + "</div>" * 600
    server.routes["/deep"] = lambda h: h.reply(200, deep.encode(), "text/html")
    result = await host.ok("web_fetch", {"url": server.url("/big")})
    assert result.value["truncated"] is False  # the provider kept everything...
    out = text_of(result)
    assert out.endswith(NOTE)  # ...but the source cut did not
    assert "TAIL" not in out
    assert len(out) <= 200_000
    assert result.meta["truncated"] is True
    result = await host.ok("web_fetch", {"url": server.url("/deep")})
    assert text_of(result) == f"Fetched {server.url('/deep')} (HTTP 200)\n\n{deep}"


def test_markdown_conversion_rules() -> None:
    converted = html_to_markdown("<div>" * 513 + "x" + "</div>" * 513)
    assert converted.converted is False
    converted = html_to_markdown("<div>" * 100 + "<h2>Title</h2>" + "</div>" * 100)
    assert (converted.converted, converted.text) == (True, "## Title")
    # A table with its own header row keeps it.
    converted = html_to_markdown(
        "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td>"
        "</tr></tbody></table>"
    )
    assert converted.text == "| a | b |\n| --- | --- |\n| 1 | 2 |"
    cut = html_to_markdown("<p>" + "é" * 50 + "</p>", max_source_chars=20)
    assert cut.source_cut is True


# -- redirects ----------------------------------------------------------------------------


def _redirect(target: str, status: int = 302) -> Route:
    return lambda h: h.reply(status, b"", "text/plain", Location=target)


async def test_redirects_are_followed_and_reported(host: Host, server: LoopbackServer) -> None:
    server.routes["/final"] = lambda h: h.reply(200, b"landed", "text/plain")
    server.routes["/r1"] = _redirect("/r2", 301)
    server.routes["/r2"] = _redirect(server.url("/final"), 307)
    result = await host.ok("web_fetch", {"url": server.url("/r1")})
    assert result.value["url"] == server.url("/final")
    assert text_of(result) == f"Fetched {server.url('/final')} (HTTP 200)\n\nlanded"
    server.routes["/loop"] = _redirect("/loop")
    message, code = await host.fail("web_fetch", {"url": server.url("/loop")})
    assert code == "WEB_TOO_MANY_REDIRECTS"
    assert message == f"fetching {server.url('/loop')} failed: more than 10 redirects"
    assert sum(1 for path, _ in server.requests if path == "/loop") == 11


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("http://localhost:{port}/final", "WEB_DESTINATION_REFUSED"),
        ("http://10.1.2.3/", "WEB_DESTINATION_REFUSED"),
        ("http://169.254.169.254/latest/meta-data/", "WEB_DESTINATION_REFUSED"),
        ("http://[::1]:{port}/final", "WEB_DESTINATION_REFUSED"),
        ("file:///etc/passwd", "WEB_UNSUPPORTED_SCHEME"),
        ("http://u:p@127.0.0.1:{port}/final", "WEB_CREDENTIALS_IN_URL"),
    ],
)
async def test_every_redirect_hop_is_rechecked(
    host: Host, server: LoopbackServer, target: str, code: str
) -> None:
    server.routes["/final"] = lambda h: h.reply(200, b"secret", "text/plain")
    server.routes["/hop"] = _redirect(target.format(port=server.port))
    message, got = await host.fail("web_fetch", {"url": server.url("/hop")})
    assert got == code
    assert "secret" not in message
    assert [path for path, _ in server.requests] == ["/hop"]


# -- destination policy ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:{port}/t", "127.0.0.1 is a loopback address"),
        ("http://[::1]:{port}/t", "::1 is a loopback address"),
        ("http://10.0.0.5/", "10.0.0.5 is a private address"),
        ("http://192.168.1.1/", "192.168.1.1 is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://100.64.0.1/", "100.64.0.1 is a shared (CGNAT) address"),
        ("http://0.0.0.0:{port}/t", "0.0.0.0 is an unspecified address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
        ("http://2130706433:{port}/t", "127.0.0.1 is a loopback address"),
        ("http://0177.0.0.1:{port}/t", "127.0.0.1 is a loopback address"),
        ("http://0x7f.1:{port}/t", "127.0.0.1 is a loopback address"),
        ("http://127.1:{port}/t", "127.0.0.1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]:{port}/t", "::ffff:7f00:1 is an IPv4-mapped loopback address"),
        ("http://[64:ff9b::a9fe:a9fe]/", "64:ff9b::a9fe:a9fe is a NAT64 link-local address"),
        ("http://[2002:a00:1::]/", "2002:a00:1:: is a 6to4 private address"),
        ("http://[fd12::1]/", "fd12::1 is a private address"),
        ("http://[fe80::1]/", "fe80::1 is a link-local address"),
        ("http://localhost:{port}/t", 'host "localhost" resolves to'),
    ],
)
async def test_default_policy_refuses_internal_destinations(
    tmp_path: Path, server: LoopbackServer, url: str, why: str
) -> None:
    server.routes["/t"] = lambda h: h.reply(200, b"internal", "text/plain")
    h = Host(tmp_path, WebConfig())  # the default policy
    message, code = await h.fail("web_fetch", {"url": url.format(port=server.port)})
    assert code == "WEB_DESTINATION_REFUSED"
    assert why in message
    assert message.endswith("which the destination policy does not allow")
    assert server.requests == []


async def test_allow_lists(tmp_path: Path, server: LoopbackServer) -> None:
    server.routes["/t"] = lambda h: h.reply(200, b"ok", "text/plain")
    by_cidr = Host(tmp_path, WebConfig(policy=DestinationPolicy.allowing(cidrs=["127.0.0.0/8"])))
    # A name resolving into an allowed network is fetched, connecting to the checked address
    # while the request still names the host (Host header).
    result = await by_cidr.ok("web_fetch", {"url": server.url("/t", "localhost")})
    assert result.value["url"] == server.url("/t", "localhost")
    assert server.requests[-1][1]["Host"] == f"localhost:{server.port}"
    everything = Host(tmp_path, WebConfig(policy=DestinationPolicy(allow_private=True)))
    await everything.ok("web_fetch", {"url": server.url("/t", "localhost")})
    # Allowing one host allows only that host, not another name for the same address.
    only_ip = Host(tmp_path, WebConfig(policy=ALLOW_LOOPBACK))
    assert (await only_ip.fail("web_fetch", {"url": server.url("/t", "localhost")}))[1] == (
        "WEB_DESTINATION_REFUSED"
    )


def test_address_classification() -> None:
    public = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::"]
    for text in public:
        assert address_refusal(ipaddress.ip_address(text)) is None, text
    refused = {
        "172.16.0.1": "private",
        "198.18.0.1": "reserved",
        "255.255.255.255": "reserved",
        "::": "unspecified",
        "::127.0.0.1": "IPv4-compatible loopback",
        "ff02::1": "multicast",
        "100::1": "reserved",
        "2001:db8::1": "reserved",
        "::ffff:10.0.0.1": "IPv4-mapped private",
    }
    for text, why in refused.items():
        assert address_refusal(ipaddress.ip_address(text)) == why, text
    assert parse_ipv4_host("3232235777") == ipaddress.IPv4Address("192.168.1.1")
    assert parse_ipv4_host("0300.0250.1.1") == ipaddress.IPv4Address("192.168.1.1")
    assert parse_ipv4_host("example.com") is None
    with pytest.raises(ValueError):
        parse_ipv4_host("1.2.3.256")


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        ("   ", "WEB_INVALID_ARGS", "url must be a non-empty string"),
        (
            "ftp://example.com/x",
            "WEB_UNSUPPORTED_SCHEME",
            'only http and https URLs can be fetched (got scheme "ftp:")',
        ),
        (
            "javascript:alert(1)",
            "WEB_UNSUPPORTED_SCHEME",
            'only http and https URLs can be fetched (got scheme "javascript:")',
        ),
        (
            "https://user:secret@example.com/",
            "WEB_CREDENTIALS_IN_URL",
            "URLs with credentials (user:password@) cannot be fetched",
        ),
        ("http:///nohost", "WEB_INVALID_URL", None),
    ],
)
async def test_url_refusals(host: Host, url: str, code: str, message: str | None) -> None:
    got_message, got_code = await host.fail("web_fetch", {"url": url})
    assert got_code == code
    if message is not None:
        assert got_message == message
    assert "secret" not in got_message


# -- time -----------------------------------------------------------------------------------


def _stall(h: Handler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", "100")
    h.end_headers()
    h.wfile.write(b"partial")
    h.wfile.flush()
    h.server.release.wait(20)


async def test_total_deadline(tmp_path: Path, server: LoopbackServer) -> None:
    server.routes["/slow"] = _stall
    h = Host(tmp_path, WebConfig(policy=ALLOW_LOOPBACK, timeout_ms=300))
    message, code = await h.fail("web_fetch", {"url": server.url("/slow")})
    assert (message, code) == (
        f"fetching {server.url('/slow')} timed out after 300ms",
        "WEB_TIMEOUT",
    )


async def test_abort_stops_a_fetch(tmp_path: Path, server: LoopbackServer) -> None:
    entered = threading.Event()

    def stall(h: Handler) -> None:
        entered.set()
        _stall(h)

    server.routes["/slow"] = stall
    h = Host(tmp_path, WebConfig(policy=ALLOW_LOOPBACK))
    controller = AbortController()

    async def abort_when_served() -> None:
        await anyio.to_thread.run_sync(entered.wait, 10)
        controller.abort()

    async with anyio.create_task_group() as group:
        group.start_soon(abort_when_served)
        result = await h.call("web_fetch", {"url": server.url("/slow")}, controller)
    assert result.is_error
    assert result.error.message == "tool call aborted"


def test_declarations(tmp_path: Path) -> None:
    h = Host(tmp_path, WebConfig())
    for tool in h.tools:
        assert tool.timeout_ms == 30000
        assert tool.is_concurrency_safe is not None
    fetch_tool, search_tool = h.tools
    assert fetch_tool.is_concurrency_safe({"url": "https://example.com/"}) is True
    assert search_tool.is_concurrency_safe({"queries": ["x"]}) is True
    assert WebError.code == "WEB_ERROR"


# -- programs -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def python_runtime() -> AsyncIterator[PythonRuntime]:
    async with PythonRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as rt:
        yield rt


@pytest.fixture(scope="module")
async def ts_runtime() -> AsyncIterator[TypeScriptRuntime]:
    async with TypeScriptRuntime(Limits(max_compute_ms=10_000, max_wall_ms=30_000)) as rt:
        yield rt


def _searxng(h: Handler) -> None:
    [q] = h.query()["q"]
    body = (
        '{"results": [{"url": "https://example.org/' + q + '", "title": "About ' + q + '", '
        '"content": "snippet", "publishedDate": null}], "answers": []}'
    )
    h.reply(200, body.encode(), "application/json")


async def run_code(h: Host, code: str) -> ToolExecutionResult:
    return await h.rt.execute(
        ToolExecutionInput(
            call_id="run-1",
            name="run_code",
            arguments={"code": code, "description": "Use the web tools"},
            signal=AbortController().signal,
            agent=h.agent,
        )
    )


def _program_host(tmp_path: Path, server: LoopbackServer, runtime: Any) -> Host:
    server.routes["/page"] = lambda h: h.reply(200, PAGE, "text/html; charset=utf-8")
    server.routes["/search"] = _searxng
    web = WebConfig(policy=ALLOW_LOOPBACK, provider=SearxngProvider(server.url("")))
    return Host(tmp_path, web, code_runtime=runtime)


async def test_python_program(
    tmp_path: Path, server: LoopbackServer, python_runtime: PythonRuntime
) -> None:
    h = _program_host(tmp_path, server, python_runtime)
    code = f"""
page = await tools.web_fetch({{'url': {server.url("/page")!r}}})
found = await tools.web_search({{'queries': ['alpha', 'beta']}})
try:
    await tools.web_fetch({{'url': 'http://10.0.0.1/'}})
except ToolCallError as e:
    print(e.code)
return {{'status': page['statusCode'], 'kind': page['body']['kind'],
        'has_script': '<script>' in page['body']['content'],
        'urls': [s['url'] for s in found['sources']]}}
"""
    result = await run_code(h, code)
    assert not result.is_error, result.to_json()
    assert result.value == {
        "logs": ["WEB_DESTINATION_REFUSED"],
        "result": {
            "status": 200,
            "kind": "html",
            "has_script": True,  # programs get the canonical (raw) value
            "urls": ["https://example.org/alpha", "https://example.org/beta"],
        },
    }


async def test_typescript_program(
    tmp_path: Path, server: LoopbackServer, ts_runtime: TypeScriptRuntime
) -> None:
    h = _program_host(tmp_path, server, ts_runtime)
    code = f"""
const page = await tools.web_fetch({{ url: {server.url("/page")!r} }})
const found = await tools.web_search({{ queries: ['gamma'] }})
let refused = ''
try {{
  await tools.web_fetch({{ url: 'http://169.254.169.254/' }})
}} catch (e) {{
  refused = (e as any).code
}}
return {{ status: page.statusCode, truncated: page.truncated, title: found.sources[0].title,
         refused }}
"""
    result = await run_code(h, code)
    assert not result.is_error, result.to_json()
    assert result.value == {
        "logs": [],
        "result": {
            "status": 200,
            "truncated": False,
            "title": "About gamma",
            "refused": "WEB_DESTINATION_REFUSED",
        },
    }


# -- TLS: the connection is pinned to an address, the certificate is checked for the name ----


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway CA and a leaf certificate for ``localhost`` only (DNS SAN, no IP SAN)."""
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost\n")
    for argv in (
        [
            "req",
            "-x509",
            *ec,
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=codemode test CA",
        ],
        ["req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=localhost"],
        [
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    ):
        subprocess.run(["openssl", *argv], cwd=d, check=True, capture_output=True)
    return d


@pytest.fixture
def tls_server(certs: Path) -> Iterator[tuple[LoopbackServer, list[str | None]]]:
    srv = LoopbackServer()
    names: list[str | None] = []
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs / "leaf.pem", certs / "leaf.key")
    ctx.sni_callback = lambda sock, name, _ctx: names.append(name)  # type: ignore[assignment,func-returns-value]
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    srv.routes["/t"] = lambda h: h.reply(200, b"secure", "text/plain")
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv, names
    srv.shutdown()
    srv.server_close()
    thread.join(5)


async def test_https_pins_the_address_and_verifies_the_name(
    tmp_path: Path, certs: Path, tls_server: tuple[LoopbackServer, list[str | None]]
) -> None:
    srv, names = tls_server
    trusting = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    policy = DestinationPolicy.allowing(cidrs=["127.0.0.0/8"])
    h = Host(tmp_path, WebConfig(policy=policy, tls_context=trusting))
    url = f"https://localhost:{srv.port}/t"
    result = await h.ok("web_fetch", {"url": url})
    assert text_of(result) == f"Fetched {url} (HTTP 200)\n\nsecure"
    # The connection went to the checked 127.0.0.1, yet TLS named the host (SNI) and the
    # certificate (valid for "localhost" only) was verified for it.
    assert names == ["localhost"]
    assert srv.requests[-1][1]["Host"] == f"localhost:{srv.port}"
    # The same server by address: its certificate does not cover 127.0.0.1.
    message, code = await h.fail("web_fetch", {"url": f"https://127.0.0.1:{srv.port}/t"})
    assert code == "WEB_CONNECT_FAILED"
    assert "CERTIFICATE_VERIFY_FAILED" in message
    # Without the test CA the certificate is not trusted at all.
    untrusting = Host(tmp_path, WebConfig(policy=policy))
    message, code = await untrusting.fail("web_fetch", {"url": url})
    assert code == "WEB_CONNECT_FAILED"
    assert "CERTIFICATE_VERIFY_FAILED" in message


async def test_connections_never_re_resolve_the_name(server: LoopbackServer) -> None:
    # DNS rebinding needs the client to resolve the name a second time when it connects.
    # Hand the client a checked hop for a name that does not resolve at all (``.invalid``):
    # it still reaches the server, so the connect used the checked address and nothing else.
    server.routes["/t"] = lambda h: h.reply(200, b"pinned", "text/plain")
    url = check_url(f"http://rebind.invalid:{server.port}/t")
    dest = Destination(url, "rebind.invalid", (ipaddress.ip_address("127.0.0.1"),))
    status, location, result = await _hop(
        dest, max_bytes=1000, user_agent="t", connect_timeout=5, tls=ssl.create_default_context()
    )
    assert (status, location) == (200, None)
    assert result is not None and result.text == "pinned"
    assert server.requests[-1][1]["Host"] == f"rebind.invalid:{server.port}"
    # And the resolver step itself refuses the name before any connection.
    with pytest.raises(WebError) as info:
        await resolve_destination(url, DestinationPolicy())
    assert info.value.code == "WEB_DNS_FAILED"


def test_policy_and_config_from_env() -> None:
    assert DestinationPolicy.from_env({}) == DestinationPolicy()
    policy = DestinationPolicy.from_env(
        {
            "CODEMODE_WEB_ALLOW_HOSTS": " 127.0.0.1, Intranet.Local. ",
            "CODEMODE_WEB_ALLOW_CIDRS": "10.0.0.0/8",
        }
    )
    loopback = ipaddress.ip_address("127.0.0.1")
    assert policy.refusal("127.0.0.1", loopback) is None
    assert policy.refusal("intranet.local", loopback) is None
    assert policy.refusal("other", loopback) == "loopback"
    assert policy.refusal("other", ipaddress.ip_address("10.9.9.9")) is None
    assert DestinationPolicy.from_env({"CODEMODE_WEB_ALLOW_PRIVATE": "true"}).allow_private
    with pytest.raises(ValueError):
        DestinationPolicy.from_env({"CODEMODE_WEB_ALLOW_CIDRS": "not-a-net"})
    cfg = WebConfig.from_env(
        {"CODEMODE_WEB_ALLOW_PRIVATE": "1", "CODEMODE_SEARXNG_URL": "http://s"}
    )
    assert cfg.policy.allow_private and isinstance(cfg.provider, SearxngProvider)
    with pytest.raises(ValueError, match="max_response_bytes"):
        WebConfig(max_response_bytes=0)


def test_the_http_and_html_libraries_load_only_when_used() -> None:
    # Every host that builds the tools imports codemode.tools; httpx (with its CLI's click and
    # rich) and BeautifulSoup/markdownify cost ~200 ms of imports, paid only by a fetch.
    import subprocess
    import sys

    probe = (
        "import sys, codemode.tools, codemode.tools.web\n"
        "codemode.tools.default_tools('.')\n"
        "print(sorted(m for m in ('httpx', 'bs4', 'markdownify') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
