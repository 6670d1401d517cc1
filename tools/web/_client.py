"""The HTTP side of ``web_fetch``: pinned connections, manual redirects, bounded bodies.

Each hop is checked by the destination policy (``_policy``) and then requested from exactly
an address that passed: the request URL carries the IP, the ``Host`` header the original
host, and for HTTPS the TLS server name (SNI and certificate verification) is the original
host too (httpcore's ``sni_hostname`` extension). A fresh transport per hop means a pooled
connection verified for one name is never reused for another. Proxies from the environment
are ignored (``trust_env=False``): a proxy would connect somewhere the policy never saw.

Bodies are streamed raw and decompressed here (gzip/deflate) with a bound on the output, so
a small compressed body cannot expand past ``max_bytes`` in memory; reading stops at the cap
and the result is marked truncated.
"""

from __future__ import annotations

import codecs
import re
import ssl
import zlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import httpx

from .._errors import WebError
from ._policy import Destination, DestinationPolicy, check_url, resolve_destination

__all__ = ["FetchResult", "decode_body", "fetch", "media_kind"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_ACCEPT = (
    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8,*/*;q=0.5"
)
_TEXT_APPLICATION = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/x-sh",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/sql",
        "application/graphql",
        "application/x-ndjson",
        "application/x-www-form-urlencoded",
        "image/svg+xml",
    }
)
# Python codecs that are not web charsets: a page must not pick them by label.
_DENIED_CODECS = frozenset(
    {
        "unicode_escape",
        "raw_unicode_escape",
        "idna",
        "punycode",
        "undefined",
        "utf_7",
        "charmap",
        "mbcs",
        "oem",
    }
)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE
)

Kind = Literal["html", "text"]


@dataclass(frozen=True)
class FetchResult:
    """A fetched document: the final URL, its status, its text and whether it was cut."""

    url: str
    status: int
    kind: Kind
    text: str
    truncated: bool


def _params(content_type: str) -> tuple[str, dict[str, str]]:
    media, _, rest = content_type.partition(";")
    params: dict[str, str] = {}
    for item in rest.split(";"):
        key, sep, value = item.partition("=")
        if sep:
            params[key.strip().lower()] = value.strip().strip("\"'")
    return media.strip().lower(), params


def media_kind(media: str, head: bytes) -> Kind | None:
    """``"html"``/``"text"`` for a textual media type (sniffing ``head`` when the type is
    missing), ``None`` for binary content."""
    if media in ("text/html", "application/xhtml+xml"):
        return "html"
    if media.startswith("text/") or media in _TEXT_APPLICATION:
        return "text"
    if media.startswith(("application/", "image/")) and media.endswith(("+json", "+xml")):
        return "text"
    if media:
        return None
    # No type at all: HTML by its opening, text if it has no NUL and decodes as UTF-8.
    start = head.lstrip()[:64].lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html"
    if b"\x00" in head:
        return None
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return None
    return "text"


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().lower()).name
    except (LookupError, ValueError):
        return None
    if name.replace("-", "_") in _DENIED_CODECS:
        return None
    try:
        # Only text encodings have an incremental bytes->str decoder.
        codecs.getincrementaldecoder(name)
        b"".decode(name)
    except (LookupError, TypeError):
        return None
    # The web reads ASCII and Latin-1 labels as windows-1252 (WHATWG Encoding).
    if name in ("ascii", "latin-1", "iso8859-1"):
        return "cp1252"
    return name


def _bom(data: bytes) -> str | None:
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return None


def decode_body(data: bytes, content_type: str, kind: Kind, *, complete: bool) -> str:
    """``data`` as text: a BOM, else the ``Content-Type`` charset, else (HTML) a ``<meta>``
    charset in the first 1024 bytes, else UTF-8 when it decodes, else windows-1252.

    A cut body (``complete=False``) drops a partial trailing character instead of
    replacing it; other undecodable bytes become U+FFFD.
    """
    codec = _bom(data)
    if codec is None:
        codec = _codec(_params(content_type)[1].get("charset"))
    if codec is None and kind == "html":
        match = _META_CHARSET.search(data[:1024])
        if match is not None:
            codec = _codec(match.group(1).decode("ascii"))
            # A page cannot be UTF-16 by its own ASCII-compatible <meta> (WHATWG).
            if codec is not None and codec.startswith("utf-16"):
                codec = "utf-8"
    if codec is None:
        try:
            data.decode("utf-8")
            codec = "utf-8"
        except UnicodeDecodeError as exc:
            partial_tail = not complete and exc.start >= len(data) - 3
            codec = "utf-8" if partial_tail else "cp1252"
    if codec == "utf-8":
        codec = "utf-8-sig"
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    return str(decoder.decode(data, final=complete))


class _Decompressor:
    """gzip/deflate/identity with a bound on the output of every step."""

    def __init__(self, encoding: str, url: str) -> None:
        names = [e.strip().lower() for e in encoding.split(",") if e.strip()]
        names = [n for n in names if n != "identity"]
        self._z: zlib._Decompress | None = None
        self._deflate = False
        if not names:
            return
        if len(names) > 1 or names[0] not in ("gzip", "x-gzip", "deflate"):
            raise WebError(
                f"cannot fetch {url}: unsupported content encoding {encoding!r}",
                "WEB_UNSUPPORTED_ENCODING",
            )
        self._deflate = names[0] == "deflate"
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 16 if not self._deflate else zlib.MAX_WBITS)
        self._first = True

    def feed(self, chunk: bytes, limit: int) -> bytes:
        """Up to ``limit`` bytes of output for ``chunk`` (more input is kept for later)."""
        if self._z is None:
            return chunk[:limit]
        try:
            out = self._z.decompress(chunk, limit)
        except zlib.error as exc:
            if self._deflate and self._first:
                # "deflate" is sometimes sent raw (no zlib header).
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self._first = False
                return self.feed(chunk, limit)
            raise WebError(
                "the response body is not valid compressed data", "WEB_BAD_RESPONSE"
            ) from exc
        self._first = False
        return out

    @property
    def pending(self) -> bytes:
        """Compressed input not yet expanded (because of the output bound)."""
        return self._z.unconsumed_tail if self._z is not None else b""


@cache
def _tls_context() -> ssl.SSLContext:
    import httpx  # lazy: httpx's import pulls in its CLI (click, rich), ~100 ms

    # One verifying context for every hop (building one loads the CA bundle); the server
    # name each connection verifies is passed per connection (SNI), not stored here.
    return httpx.create_ssl_context()


def _host_header(url: httpx.URL) -> str:
    host = url.raw_host.decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    default = 443 if url.scheme == "https" else 80
    return host if url.port in (None, default) else f"{host}:{url.port}"


async def _read(response: httpx.Response, url: str, max_bytes: int) -> tuple[bytes, bool]:
    decompressor = _Decompressor(response.headers.get("content-encoding", ""), url)
    body = bytearray()
    raw_seen = 0
    async for chunk in response.aiter_raw():
        raw_seen += len(chunk)
        piece = decompressor.feed(chunk, max_bytes - len(body) + 1)
        body += piece
        while len(body) <= max_bytes and decompressor.pending:
            piece = decompressor.feed(decompressor.pending, max_bytes - len(body) + 1)
            if not piece:
                break
            body += piece
        # Past the cap (decoded or, for a body that decompresses to little, raw): stop.
        if len(body) > max_bytes or raw_seen > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


async def _hop(
    dest: Destination,
    *,
    max_bytes: int,
    user_agent: str,
    connect_timeout: float,
    tls: ssl.SSLContext,
) -> tuple[int, str | None, FetchResult | None]:
    """One request: ``(status, location, None)`` for a redirect, else the result."""
    import httpx  # lazy: httpx's import pulls in its CLI (click, rich), ~100 ms

    url = dest.url
    headers = {
        "Host": _host_header(url),
        "User-Agent": user_agent,
        "Accept": _ACCEPT,
        "Accept-Encoding": "gzip, deflate",
    }
    extensions = {"sni_hostname": dest.host} if url.scheme == "https" else {}
    last_error: Exception | None = None
    for address in dest.addresses:
        pinned = url.copy_with(host=str(address))
        transport = httpx.AsyncHTTPTransport(retries=0, verify=tls)
        client = httpx.AsyncClient(
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(None, connect=connect_timeout),
        )
        async with client:
            try:
                async with client.stream(
                    "GET", pinned, headers=headers, extensions=extensions
                ) as response:
                    status = response.status_code
                    location = response.headers.get("location")
                    if status in _REDIRECTS and location:
                        return status, location, None
                    content_type = response.headers.get("content-type", "")
                    media = _params(content_type)[0]
                    decided = media_kind(media, b"") if media else None
                    if media and decided is None:
                        raise WebError(
                            f"cannot fetch {url}: content type {media} is binary; web_fetch "
                            "returns text only (HTML, plain text, JSON, XML)",
                            "WEB_UNSUPPORTED_CONTENT",
                        )
                    data, truncated = await _read(response, str(url), max_bytes)
                    kind = decided or media_kind("", data[:1024])
                    if kind is None:
                        raise WebError(
                            f"cannot fetch {url}: the response is binary (no content type); "
                            "web_fetch returns text only",
                            "WEB_UNSUPPORTED_CONTENT",
                        )
                    text = decode_body(data, content_type, kind, complete=not truncated)
                    return status, None, FetchResult(str(url), status, kind, text, truncated)
            except httpx.ConnectError as exc:
                # Another checked address of the same name may answer.
                last_error = exc
                continue
            except httpx.HTTPError as exc:
                raise WebError(
                    f"fetching {url} failed: {exc or type(exc).__name__}", "WEB_REQUEST_FAILED"
                ) from None
    raise WebError(
        f"fetching {url} failed: cannot connect ({last_error or 'no address'})",
        "WEB_CONNECT_FAILED",
    )


async def fetch(
    raw_url: str,
    policy: DestinationPolicy,
    *,
    max_bytes: int,
    max_redirects: int,
    user_agent: str,
    connect_timeout: float = 10.0,
    tls_context: ssl.SSLContext | None = None,
) -> FetchResult:
    """GET ``raw_url``, following up to ``max_redirects`` redirects, each hop re-checked.

    ``tls_context`` verifies HTTPS servers (default: the system's CA bundle via httpx);
    the server name checked is always the URL's host. The caller bounds the total time
    (``anyio.fail_after``/``move_on_after``).
    """
    import httpx  # lazy: httpx's import pulls in its CLI (click, rich), ~100 ms

    tls = tls_context if tls_context is not None else _tls_context()
    url = check_url(raw_url)
    for _hop_index in range(max_redirects + 1):
        dest = await resolve_destination(url, policy)
        status, location, result = await _hop(
            dest,
            max_bytes=max_bytes,
            user_agent=user_agent,
            connect_timeout=connect_timeout,
            tls=tls,
        )
        if result is not None:
            return result
        assert location is not None
        try:
            target = str(url.join(location))
        except (httpx.InvalidURL, ValueError) as exc:
            raise WebError(
                f"{url} redirected (HTTP {status}) to an invalid URL: {exc}", "WEB_INVALID_URL"
            ) from None
        url = check_url(target)
    raise WebError(
        f"fetching {raw_url} failed: more than {max_redirects} redirects",
        "WEB_TOO_MANY_REDIRECTS",
    )
