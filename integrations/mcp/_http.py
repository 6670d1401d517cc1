"""Streamable HTTP for ``CodeModeServer``: limits, host checks, bearer authentication, TLS.

Over HTTP the server is a remote code runner, so what reaches it is bounded before any
handler runs:

- **Authentication.** ``HttpOptions.token_verifier`` is an ``mcp.server.auth``
  ``TokenVerifier``; the SDK's bearer middleware asks it about every request, answers
  401 with ``WWW-Authenticate`` otherwise, and binds each session to the credential that
  opened it. ``StaticTokenVerifier`` is the one-secret verifier (compared in constant
  time); with ``resource_url`` and ``issuer_url`` the server is an OAuth resource server
  (MCP authorization spec): it publishes RFC 9728 protected-resource metadata at
  ``/.well-known/oauth-protected-resource/mcp``, names it in its 401s, and accepts only
  tokens issued for ``resource_url`` (``AccessToken.resource``).
- **Hosts.** Loopback binds keep the SDK's DNS-rebinding protection (a foreign ``Host``
  is 421, a foreign ``Origin`` 403); ``allowed_hosts``/``allowed_origins`` extend it and
  switch it on for other binds.
- **Limits.** ``max_sessions`` (503 past it), ``max_body_bytes`` (413, as a JSON-RPC
  error, when the declared length is over; a chunked body is cut by the SDK at the same
  size), ``session_idle_s`` (an idle session ends; its id then answers 404).
- **TLS.** ``tls_cert``/``tls_key`` (PEM files) make uvicorn serve HTTPS.

Every refusal is one log line (``log``). Shutdown is graceful: the listener closes, open
requests get ``shutdown_grace_s``, then the session manager ends every session.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

if TYPE_CHECKING:
    from ._server import CodeModeServer

__all__ = ["HttpOptions", "StaticTokenVerifier", "is_loopback"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")

# What a refused request is logged as, by status.
_REFUSALS = {
    401: "no valid bearer token",
    403: "forbidden (foreign Origin or missing scope)",
    404: "unknown or expired session",
    413: "request body too large",
    421: "foreign Host header",
    503: "too many open sessions",
}


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (127.0.0.0/8, ``::1``, localhost)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How ``CodeModeServer.serve_http`` guards its endpoint (see the module docstring).

    ``allowed_hosts``: ``Host`` values accepted (``name`` or ``name:port``; a bare name
    accepts any port); ``allowed_origins``: ``Origin`` values accepted (``scheme://name``
    or with a port). ``token_verifier``: an ``mcp.server.auth.provider.TokenVerifier``
    (``None``: no authentication). ``issuer_url``/``resource_url``/``required_scopes``:
    the resource-server metadata (both URLs or neither).
    """

    max_sessions: int | None = 100
    max_body_bytes: int = 4 * 2**20
    session_idle_s: float | None = 1800.0
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    token_verifier: Any = None
    issuer_url: str | None = None
    resource_url: str | None = None
    required_scopes: tuple[str, ...] = ()
    tls_cert: str | None = None
    tls_key: str | None = None
    shutdown_grace_s: float = 3.0

    def __post_init__(self) -> None:
        if self.max_sessions is not None and self.max_sessions < 1:
            raise ValueError("max_sessions must be >= 1 (or None)")
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be >= 1")
        if self.session_idle_s is not None and not self.session_idle_s > 0:
            raise ValueError("session_idle_s must be > 0 (or None)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and its key")
        if (self.issuer_url is None) != (self.resource_url is None):
            raise ValueError("resource-server metadata needs both issuer_url and resource_url")
        if self.resource_url is not None and self.token_verifier is None:
            raise ValueError("resource_url needs a token_verifier")


class StaticTokenVerifier:
    """A ``TokenVerifier`` accepting one shared secret (compared in constant time).

    Every holder of the secret is the same principal (``client_id``), so the SDK's
    session binding cannot tell two of them apart: give each client its own server, or
    use a real authorization server, when clients must not reach each other's sessions
    by id.
    """

    def __init__(self, token: str, *, client_id: str = "bearer-token") -> None:
        if len(token) < 16:
            raise ValueError("a bearer token must be at least 16 characters")
        self._secret = token.encode("utf-8")
        self._client_id = client_id

    def __repr__(self) -> str:
        return f"<StaticTokenVerifier client_id={self._client_id!r}>"

    async def verify_token(self, token: str) -> Any:
        """The access token when ``token`` is the secret, else ``None``."""
        from mcp.server.auth.provider import AccessToken

        # compare_digest's time depends on the lengths only, never on where they differ.
        if not hmac.compare_digest(token.encode("utf-8", "surrogatepass"), self._secret):
            return None
        return AccessToken(token="<static>", client_id=self._client_id, scopes=[])


def _allow_any_port(entries: tuple[str, ...], *, origins: bool) -> list[str]:
    out: list[str] = []
    for entry in entries:
        out.append(entry)
        tail = entry.split("://", 1)[1] if origins and "://" in entry else entry
        has_port = tail.rsplit("]", 1)[-1].count(":") == 1 if tail.startswith("[") else ":" in tail
        if not has_port:
            out.append(f"{entry}:*")
    return out


def _transport_security(host: str, options: HttpOptions) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = _allow_any_port(options.allowed_hosts, origins=False)
    origins = _allow_any_port(options.allowed_origins, origins=True)
    if is_loopback(host):
        # The SDK's own loopback defaults, kept alongside any additions.
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
        origins += ["https://127.0.0.1:*", "https://localhost:*", "https://[::1]:*"]
    elif not hosts and not origins:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _auth(options: HttpOptions) -> Any:
    if options.token_verifier is None:
        return None
    from mcp.server.auth.settings import AuthSettings

    if options.resource_url is None:
        # The SDK wires its bearer middleware only under AuthSettings, whose issuer is
        # required; without a resource URL nothing publishes or reads it, so a
        # placeholder stands in.
        return AuthSettings(
            issuer_url="http://localhost",  # type: ignore[arg-type]
            resource_server_url=None,
            validate_token_resource=False,
        )
    return AuthSettings(
        issuer_url=options.issuer_url,  # type: ignore[arg-type]
        resource_server_url=options.resource_url,  # type: ignore[arg-type]
        required_scopes=list(options.required_scopes) or None,
        validate_token_resource=True,
    )


def _jsonrpc_error(status: int, message: str) -> tuple[int, bytes]:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return status, json.dumps(body).encode()


class _Gate:
    """The outer ASGI layer: a declared body over the limit is refused before anything
    reads it, and every refusal, whichever layer answers it, is logged."""

    def __init__(self, app: Any, options: HttpOptions, log: Callable[[str], None]) -> None:
        self.app = app
        self.options = options
        self.log = log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        where = f"{scope.get('method', '?')} {scope.get('path', '?')} from {client[0]}"
        limit = self.options.max_body_bytes
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    self.log(f"refused {where}: 413 body of {declared} bytes (limit {limit})")
                    status, body = _jsonrpc_error(
                        413,
                        f"request body too large: {declared} bytes (the limit is {limit} bytes)",
                    )
                    await _respond(send, status, body)
                    return

        started = False

        async def watched(message: Any) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
                status = int(message.get("status", 0))
                reason = _REFUSALS.get(status)
                if reason is not None:
                    if status == 503 and self.options.max_sessions is not None:
                        reason += f" (limit {self.options.max_sessions})"
                    self.log(f"refused {where}: {status} {reason}")
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError) as exc:
            # The SDK (mcp 2.3) raises when a message reaches a session whose transport
            # is closing (the client deleted it, or it expired, meanwhile): for a
            # notification after its 202 went out, and then again trying to send a 500
            # on the finished response (RuntimeError). Answered like an unknown session
            # (or not at all, when the answer is already out), not as a traceback.
            if isinstance(exc, RuntimeError) and not started:
                raise
            self.log(f"dropped {where}: the session closed as the message arrived")
            if not started:
                status, body = _jsonrpc_error(404, "Session not found")
                await _respond(send, status, body)


async def _respond(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _ClosingSessionRace(logging.Filter):
    """Drops the SDK's traceback for a message that raced its session's close (see
    ``_Gate``), which then logs the one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, (anyio.ClosedResourceError, anyio.BrokenResourceError))


def _quiet_sdk_races() -> None:
    sdk = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, _ClosingSessionRace) for f in sdk.filters):
        sdk.addFilter(_ClosingSessionRace())


def build_app(
    server: CodeModeServer, host: str, options: HttpOptions, log: Callable[[str], None]
) -> Any:
    """The ASGI app serving ``server`` at ``/mcp`` under ``options``."""
    _quiet_sdk_races()
    app = server.lowlevel_server().streamable_http_app(
        host=host,
        max_request_body_size=options.max_body_bytes,
        session_idle_timeout=options.session_idle_s,
        max_sessions=options.max_sessions,
        transport_security=_transport_security(host, options),
        auth=_auth(options),
        token_verifier=options.token_verifier,
    )
    return _Gate(app, options, log)


async def serve_app(
    server: CodeModeServer,
    host: str,
    port: int,
    options: HttpOptions,
    *,
    log: Callable[[str], None],
    on_ready: Callable[[int], None] | None,
) -> None:
    """Run uvicorn with ``build_app`` until cancelled, then shut it down gracefully."""
    import uvicorn

    class _Server(uvicorn.Server):
        # The host owns the signals (a CLI turns them into cancellation): uvicorn's own
        # handlers would swallow them and re-raise them after a shutdown of its choosing.
        def install_signal_handlers(self) -> None:  # uvicorn < 0.29
            return None

        def capture_signals(self) -> Any:
            import contextlib

            return contextlib.nullcontext()

    config = uvicorn.Config(
        build_app(server, host, options, log),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        ssl_certfile=options.tls_cert,
        ssl_keyfile=options.tls_key,
        timeout_graceful_shutdown=max(1, int(options.shutdown_grace_s)),
    )
    web = _Server(config)
    stopped = anyio.Event()
    # Shielded: a cancel in the middle of uvicorn's loop would skip its shutdown (and
    # print the lifespan's traceback); the cancel becomes ``should_exit`` instead.
    web_scope = anyio.CancelScope(shield=True)

    async def run() -> None:
        with web_scope:
            try:
                await web.serve()
            finally:
                stopped.set()

    async def announce() -> None:
        # uvicorn exposes only a flag for "listening", no event to wait on.
        while not web.started:
            if stopped.is_set():
                return
            await anyio.sleep(0.02)
        if on_ready is not None:
            sockets = [s for srv in web.servers for s in srv.sockets]
            on_ready(sockets[0].getsockname()[1] if sockets else port)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        tg.start_soon(announce)
        try:
            await stopped.wait()
        except anyio.get_cancelled_exc_class():
            web.should_exit = True
            with anyio.move_on_after(options.shutdown_grace_s + 5, shield=True):
                await stopped.wait()
            web_scope.cancel()
            raise
        tg.cancel_scope.cancel()
    if not web.started:
        # uvicorn logs a bind failure and returns; the caller needs to know.
        raise OSError(f"cannot listen on {host}:{port}")
