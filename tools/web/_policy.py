"""Where ``web_fetch`` may connect: URL checks, address classification, DNS pinning.

The policy is applied to the *resolved* addresses of every hop (redirects included), and the
client then connects to exactly an address that passed (see ``_client``), so a hostname that
answers a public address to the check and ``127.0.0.1`` to the connect (DNS rebinding)
never reaches the loopback interface.

Refused by default: loopback, private (RFC 1918, unique-local), link-local (cloud metadata
``169.254.169.254`` included), shared/CGNAT ``100.64.0.0/10``, multicast, unspecified,
documentation/benchmark/reserved ranges, and IPv6 forms that embed a refused IPv4 address
(IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::/96``,
6to4 ``2002::/16``). IPv6 outside global unicast ``2000::/3`` is refused as reserved.
IPv4 hosts are read the way browsers read them (``2130706433``, ``0177.0.0.1``,
``0x7f.1`` and ``127.1`` are all ``127.0.0.1``), so odd spellings cannot dodge the check.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import anyio

if TYPE_CHECKING:
    import httpx

from .._errors import WebError
from .._text import article

__all__ = [
    "Destination",
    "DestinationPolicy",
    "address_refusal",
    "check_url",
    "parse_ipv4_host",
    "resolve_destination",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_V4_REFUSED: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "reserved"),
    ("192.88.99.0/24", "reserved"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_V6_REFUSED: tuple[tuple[str, str], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "private"),
    ("100::/64", "reserved"),
    ("2001::/23", "reserved"),
    ("2001:db8::/32", "reserved"),
    ("3fff::/20", "reserved"),
    ("5f00::/16", "reserved"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "link-local"),
    ("ff00::/8", "multicast"),
)
_V4_NETS = [(ipaddress.IPv4Network(net), why) for net, why in _V4_REFUSED]
_V6_NETS = [(ipaddress.IPv6Network(net), why) for net, why in _V6_REFUSED]
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_COMPAT = ipaddress.IPv6Network("::/96")


def _embedded_v4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    # Addresses a dual-stack kernel or a translator turns back into IPv4.
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    if ip in _COMPAT and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why the default policy refuses ``ip`` (``"loopback"``, ``"IPv4-mapped private"``, ...),
    or ``None`` when it is a public address."""
    if isinstance(ip, ipaddress.IPv4Address):
        for net, why in _V4_NETS:
            if ip in net:
                return why
        return None
    embedded = _embedded_v4(ip)
    if embedded is not None:
        inner, form = embedded
        inner_why = address_refusal(inner)
        return f"{form} {inner_why}" if inner_why is not None else None
    for net6, why in _V6_NETS:
        if ip in net6:
            return why
    if ip not in _GLOBAL_UNICAST:
        return "reserved"
    return None


def parse_ipv4_host(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read as an IPv4 address the WHATWG way (1-4 dotted parts, each decimal,
    ``0``-prefixed octal or ``0x`` hex, the last filling the remaining bytes), or ``None``
    when it is not one. Raises ``ValueError`` for a numeric host out of range."""
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts.pop()
    if not parts or len(parts) > 4:
        return None
    last = parts[-1]
    if not last or not (
        last.isdigit()
        or (last[:2].lower() == "0x" and all(c in "0123456789abcdefABCDEF" for c in last[2:]))
    ):
        return None
    numbers: list[int] = []
    for part in parts:
        if not part:
            raise ValueError("empty IPv4 part")
        if part[:2].lower() == "0x":
            digits, base = part[2:], 16
        elif len(part) > 1 and part[0] == "0":
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        try:
            numbers.append(int(digits, base) if digits else 0)
        except ValueError:
            raise ValueError(f"invalid IPv4 part {part!r}") from None
    *head, tail = numbers
    if any(n > 255 for n in head) or tail >= 256 ** (5 - len(numbers)):
        raise ValueError("IPv4 address out of range")
    value = tail
    for index, n in enumerate(head):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _host_address(host: str) -> IPAddress | None:
    """The literal address ``host`` spells (IPv6, or IPv4 in any WHATWG form), else ``None``."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise WebError(f'invalid IPv6 address "{host}"', "WEB_INVALID_URL") from None
    try:
        return parse_ipv4_host(host)
    except ValueError as exc:
        raise WebError(f'invalid host "{host}": {exc}', "WEB_INVALID_URL") from None


@dataclass(frozen=True)
class DestinationPolicy:
    """Which destinations ``web_fetch`` may connect to.

    By default only public addresses. ``allow_private`` lifts the address check entirely;
    ``allow_hosts`` names hosts (exact, case-insensitive; IP literals too) whose addresses
    are not checked; ``allow_cidrs`` lists networks (``"127.0.0.0/8"``, ``"fd00::/8"``)
    whose addresses are allowed wherever a name resolves into them.
    """

    allow_private: bool = False
    allow_hosts: frozenset[str] = field(default_factory=frozenset)
    allow_cidrs: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(
        cls,
        *,
        hosts: Iterable[str] = (),
        cidrs: Iterable[str] = (),
        private: bool = False,
    ) -> DestinationPolicy:
        """A policy from plain strings (``ValueError`` for a malformed CIDR)."""
        return cls(
            allow_private=private,
            allow_hosts=frozenset(_normal_host(h) for h in hosts),
            allow_cidrs=tuple(ipaddress.ip_network(c, strict=False) for c in cidrs),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DestinationPolicy:
        """A policy from ``CODEMODE_WEB_ALLOW_PRIVATE`` (``1``/``true``/``yes``),
        ``CODEMODE_WEB_ALLOW_HOSTS`` and ``CODEMODE_WEB_ALLOW_CIDRS`` (comma-separated);
        unset means the default, public-only policy. ``ValueError`` for a bad CIDR."""

        def items(key: str) -> list[str]:
            return [item.strip() for item in env.get(key, "").split(",") if item.strip()]

        flag = env.get("CODEMODE_WEB_ALLOW_PRIVATE", "").strip().lower()
        return cls.allowing(
            hosts=items("CODEMODE_WEB_ALLOW_HOSTS"),
            cidrs=items("CODEMODE_WEB_ALLOW_CIDRS"),
            private=flag in ("1", "true", "yes", "on"),
        )

    def refusal(self, host: str, ip: IPAddress) -> str | None:
        """Why ``ip`` (an address of ``host``) is refused, or ``None`` when allowed."""
        if self.allow_private or _normal_host(host) in self.allow_hosts:
            return None
        if any(ip.version == net.version and ip in net for net in self.allow_cidrs):
            return None
        return address_refusal(ip)


def _normal_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


@dataclass(frozen=True)
class Destination:
    """A checked hop: the URL, the host as written (IDNA-encoded) and the addresses that
    passed the policy, in resolver order; the client connects only to these."""

    url: httpx.URL
    host: str
    addresses: tuple[IPAddress, ...]


def _canonical_ipv4(raw: str) -> str:
    """``raw`` with a WHATWG-style IPv4 host (``0177.0.0.1``, ``2130706433``) in dotted
    form, so every spelling of an address meets the same check (and httpx accepts it)."""
    try:
        parts = urlsplit(raw)
        host = parts.hostname
    except ValueError:
        return raw
    if not host or ":" in host:
        return raw
    try:
        ip = parse_ipv4_host(host)
    except ValueError:
        return raw
    if ip is None or str(ip) == host:
        return raw
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    name, colon, port = hostport.partition(":")
    if name.lower() != host:
        return raw
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{ip}{colon}{port}"))


def check_url(raw: str) -> httpx.URL:
    """``raw`` parsed and checked: http(s) only, no credentials, a host, a valid port."""
    import httpx  # lazy: httpx's import pulls in its CLI (click, rich), ~100 ms

    try:
        url = httpx.URL(_canonical_ipv4(raw))
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise WebError(f'invalid URL "{raw}": {exc}', "WEB_INVALID_URL") from None
    scheme = url.scheme.lower()
    if scheme not in ("http", "https"):
        shown = f"{scheme}:" if scheme else "(none)"
        raise WebError(
            f'only http and https URLs can be fetched (got scheme "{shown}")',
            "WEB_UNSUPPORTED_SCHEME",
        )
    if url.userinfo:
        raise WebError(
            "URLs with credentials (user:password@) cannot be fetched", "WEB_CREDENTIALS_IN_URL"
        )
    host = url.raw_host.decode("ascii", "replace")
    if not host:
        raise WebError(f'invalid URL "{raw}": no host', "WEB_INVALID_URL")
    if "%" in host or any(c in host for c in " \\/@?#"):
        raise WebError(f'invalid URL "{raw}": bad host "{host}"', "WEB_INVALID_URL")
    if url.port is not None and not 0 < url.port < 65536:
        raise WebError(f'invalid URL "{raw}": port out of range', "WEB_INVALID_URL")
    return url


def _refused(url: httpx.URL, host: str, ip: IPAddress, why: str, literal: bool) -> WebError:
    where = f"{ip} is" if literal else f'host "{host}" resolves to {ip},'
    return WebError(
        f"refusing to fetch {url}: {where} {article(why)} address, which the destination policy "
        "does not allow",
        "WEB_DESTINATION_REFUSED",
    )


async def resolve_destination(url: httpx.URL, policy: DestinationPolicy) -> Destination:
    """Resolve ``url``'s host and keep the addresses ``policy`` allows.

    Raises ``WebError`` ``WEB_DESTINATION_REFUSED`` when none is allowed (naming the first
    refused address) and ``WEB_DNS_FAILED`` when the name does not resolve.
    """
    host = url.raw_host.decode("ascii")
    literal = _host_address(host)
    if literal is not None:
        why = policy.refusal(host, literal)
        if why is not None:
            raise _refused(url, host, literal, why, True)
        return Destination(url, host, (literal,))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebError(f'cannot resolve host "{host}": {exc}', "WEB_DNS_FAILED") from None
    allowed: list[IPAddress] = []
    first_refusal: tuple[IPAddress, str] | None = None
    for _family, _type, _proto, _canon, sockaddr in infos:
        text = str(sockaddr[0]).split("%", 1)[0]
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        why = policy.refusal(host, ip)
        if why is None:
            if ip not in allowed:
                allowed.append(ip)
        elif first_refusal is None:
            first_refusal = (ip, why)
    if not allowed:
        if first_refusal is None:
            raise WebError(f'cannot resolve host "{host}": no addresses', "WEB_DNS_FAILED")
        raise _refused(url, host, first_refusal[0], first_refusal[1], False)
    return Destination(url, host, tuple(allowed))
