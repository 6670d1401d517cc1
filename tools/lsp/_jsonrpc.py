"""JSON-RPC 2.0 over a byte stream pair with LSP's ``Content-Length`` framing.

One ``JsonRpcConnection`` per server process. Requests from any number of tasks share it:
each gets a fresh integer id and waits on its own slot, and a single reader task (``run``)
dispatches every incoming message — responses to their slot, server-to-client requests to
``on_request`` (answered at once, so a server that blocks on ``workspace/configuration``
never deadlocks the client), notifications to ``on_notification``. When the stream ends
every waiting request fails with ``ConnectionLost``.

Incoming frames are bounded (header block and body) so a misbehaving server cannot make
the host buffer without limit; an oversized or malformed frame ends the connection.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from .._text import article

__all__ = [
    "MAX_FRAME_BYTES",
    "ConnectionLost",
    "JsonRpcConnection",
    "ResponseError",
    "encode_frame",
]

#: The largest message body accepted from a server (a references list of a huge project
#: stays far below it).
MAX_FRAME_BYTES = 64 * 1024 * 1024
_MAX_HEADER_BYTES = 8192
_METHOD_NOT_FOUND = -32601

RequestHandler = Callable[[str, Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], None]


class ConnectionLost(Exception):
    """The stream ended (the server exited or sent something unreadable)."""


class ResponseError(Exception):
    """The server answered a request with an error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def encode_frame(message: dict[str, Any]) -> bytes:
    """``message`` as one framed LSP message (compact UTF-8 JSON after the header)."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class _FrameReader:
    """Splits a byte stream into message bodies."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def _fill(self) -> None:
        try:
            chunk = await self._stream.receive(65536)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ConnectionLost("the language server closed its output") from None
        self._buffer += chunk

    async def read(self) -> bytes:
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buffer) > _MAX_HEADER_BYTES:
                raise ConnectionLost("the language server sent an oversized header")
            await self._fill()
        header = bytes(self._buffer[:end]).decode("ascii", "replace")
        del self._buffer[: end + 4]
        length: int | None = None
        for line in header.split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    length = None
        if length is None or length < 0:
            raise ConnectionLost("the language server sent a frame without a Content-Length")
        if length > MAX_FRAME_BYTES:
            raise ConnectionLost(
                f"the language server sent {article(f'{length}-byte')} message "
                f"(limit {MAX_FRAME_BYTES})"
            )
        while len(self._buffer) < length:
            await self._fill()
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body


@dataclass(eq=False)
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None


async def _no_requests(method: str, params: Any) -> Any:
    raise ResponseError(_METHOD_NOT_FOUND, f"unhandled method {method}")


def _ignore(method: str, params: Any) -> None:
    return None


class JsonRpcConnection:
    """A JSON-RPC 2.0 client endpoint: call ``run`` in a task, then ``request``/``notify``."""

    def __init__(
        self,
        send: anyio.abc.ByteSendStream,
        receive: anyio.abc.ByteReceiveStream,
        *,
        on_request: RequestHandler = _no_requests,
        on_notification: NotificationHandler = _ignore,
    ) -> None:
        self._send = send
        self._reader = _FrameReader(receive)
        self._on_request = on_request
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._write_lock = anyio.Lock()
        self._lost: ConnectionLost | None = None
        self.closed = anyio.Event()
        """Set once the reader has stopped (the stream ended or broke)."""

    @property
    def lost(self) -> ConnectionLost | None:
        """Why the connection ended, once it has."""
        return self._lost

    async def _write(self, message: dict[str, Any]) -> None:
        if self._lost is not None:
            raise self._lost
        # One frame at a time: interleaved writes from concurrent requests would corrupt both.
        async with self._write_lock:
            try:
                await self._send.send(encode_frame(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                raise ConnectionLost("the language server closed its input") from None

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer expected)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result; raises ``ResponseError`` or
        ``ConnectionLost``. Cancelling the caller sends ``$/cancelRequest``."""
        request_id = next(self._ids)
        pending = _Pending()
        self._pending[request_id] = pending
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._write(message)
            await pending.done.wait()
        except BaseException:
            if not pending.done.is_set() and self._lost is None:
                # Best effort and shielded: the caller is going away, the server may stop work.
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    try:
                        await self.notify("$/cancelRequest", {"id": request_id})
                    except ConnectionLost:
                        pass
            raise
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def run(self) -> None:
        """Read and dispatch messages until the stream ends; then fail what still waits."""
        try:
            while True:
                body = await self._reader.read()
                try:
                    message = json.loads(body)
                except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
                    raise ConnectionLost("the language server sent invalid JSON") from None
                if isinstance(message, dict):
                    await self._dispatch(message)
        except ConnectionLost as exc:
            self._lost = exc
        except Exception as exc:
            # Whatever a server sends must not take the host's task group down: a message
            # the client cannot handle ends this connection only.
            self._lost = ConnectionLost(f"protocol error: {type(exc).__name__}: {exc}")
        finally:
            if self._lost is None:
                self._lost = ConnectionLost("the connection to the language server was closed")
            for pending in list(self._pending.values()):
                if not pending.done.is_set():
                    pending.error = self._lost
                    pending.done.set()
            self.closed.set()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        has_id = "id" in message
        if isinstance(method, str):
            if has_id:
                await self._answer(message["id"], method, message.get("params"))
            else:
                self._on_notification(method, message.get("params"))
            return
        if not has_id:
            return
        request_id = message["id"]
        pending = self._pending.get(request_id) if isinstance(request_id, int) else None
        if pending is None or pending.done.is_set():
            return  # a late answer to a cancelled request
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            pending.error = ResponseError(
                code if isinstance(code, int) else 0,
                str(error.get("message", "unknown error")),
                error.get("data"),
            )
        else:
            pending.result = message.get("result")
        pending.done.set()

    async def _answer(self, request_id: Any, method: str, params: Any) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            reply["result"] = await self._on_request(method, params)
        except ResponseError as exc:
            reply["error"] = {"code": exc.code, "message": exc.message}
        except Exception as exc:  # a handler bug must not take the reader (and host) down
            reply["error"] = {"code": -32603, "message": f"internal client error: {exc}"}
        await self._write(reply)
