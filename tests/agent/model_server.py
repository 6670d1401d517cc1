"""A scripted model server on loopback speaking the Chat Completions wire protocol.

A real HTTP server (``http.server`` in a thread, so both in-process async tests and CLI
subprocesses can reach it) answers ``POST /v1/chat/completions`` from a script: each
request takes the next entry, one of

* ``Reply(text=[...], calls=[Call(...)])``: a streamed answer as SSE ``data: {...}``
  chunks: the text pieces, then the tool calls' deltas (ids and names first, argument
  pieces interleaved across parallel calls, each with its ``index``), a finish chunk, a
  usage chunk (``stream_options.include_usage``) and ``data: [DONE]``;
* ``Status(code, retry_after=...)``: an HTTP error with a JSON error body;
* ``Hold(text=[...])``: streams the text pieces, then holds the stream open until the
  client goes away (then ``dropped`` is set) or ``release()`` (``holding`` is set once it
  holds);
* ``Raw(pieces, ...)``: a hand-written answer for the client's edge cases: the status,
  headers and body ``pieces`` written one by one (a pause between, no Nagle delay), optionally
  with chunked framing that ``truncate`` breaks off (a server dying mid-stream);
* a callable ``(request body) -> entry``: the reply is made from the request (a model
  naming an id it was told earlier).

Every request is recorded (``requests``: the JSON body and the headers), so tests assert
what the model was sent.

Several agents talking at once (subagents, workflows) make the arrival order of requests
nondeterministic, so ``by_prompt={marker: [entries...]}`` gives each conversation its own
script: a request whose *first user message* contains ``marker`` takes the next entry of
that script (the first marker that matches, in insertion order); other requests take the
main script.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Call:
    """A tool call of a scripted reply; ``arguments`` pieces are sent as separate deltas."""

    id: str
    name: str
    arguments: Sequence[str] = ("{}",)


@dataclass(frozen=True)
class Reply:
    """A streamed assistant answer."""

    text: Sequence[str] = ()
    calls: Sequence[Call] = ()
    usage: tuple[int, int] = (10, 5)


@dataclass(frozen=True)
class Status:
    """An HTTP error answer."""

    code: int
    retry_after: str | None = None
    message: str = "scripted failure"


@dataclass(frozen=True)
class Hold:
    """Stream ``text`` then hold the response open."""

    text: Sequence[str] = ("working",)


@dataclass(frozen=True)
class Raw:
    """An answer written by hand: ``status``, ``headers`` and the body's ``pieces``, each
    written and flushed on its own, ``pause`` seconds apart (so they reach the client as
    separate reads, split wherever the test split them). ``chunked`` frames the pieces with
    chunked transfer encoding; ``truncate`` then closes the connection without the final
    chunk, which the client sees as a broken body. Without ``chunked`` the body ends when
    the connection closes."""

    pieces: Sequence[bytes]
    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/event-stream"),)
    pause: float = 0.01
    chunked: bool = False
    truncate: bool = False


@dataclass
class Recorded:
    """One request the server got."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    # The request target as sent (``/v1/chat/completions``, or a proxy's absolute URL).
    path: str = ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` the client sent."""
        return list(self.body.get("messages") or [])


Entry = Reply | Status | Hold | Raw | Callable[[dict[str, Any]], "Reply | Status | Hold | Raw"]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _reply_chunks(reply: Reply) -> Iterator[dict[str, Any]]:
    yield _chunk({"role": "assistant", "content": ""})
    for piece in reply.text:
        yield _chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        yield _chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
    # Argument pieces round-robin across the calls: parallel calls' deltas interleave.
    longest = max((len(c.arguments) for c in reply.calls), default=0)
    for k in range(longest):
        for index, call in enumerate(reply.calls):
            if k < len(call.arguments):
                yield _chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": call.arguments[k]}}]}
                )
    yield _chunk({}, "tool_calls" if reply.calls else "stop")
    prompt, completion = reply.usage
    yield {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "scripted",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


class ModelServer:
    """``with ModelServer(script) as server:`` serves on ``server.base_url``."""

    def __init__(
        self, script: Sequence[Entry], *, by_prompt: dict[str, Sequence[Entry]] | None = None
    ) -> None:
        self.script = list(script)
        self.by_prompt = {k: list(v) for k, v in (by_prompt or {}).items()}
        self.requests: list[Recorded] = []
        self.holding = threading.Event()
        # Set when a held stream found its client gone (the client closed the response).
        self.dropped = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer._lock:
                    outer.requests.append(
                        Recorded(body, {k.lower(): v for k, v in self.headers.items()}, self.path)
                    )
                    queue = outer._queue_for(body)
                    entry = queue.pop(0) if queue else None
                if callable(entry):
                    # A reply made from the request (e.g. naming an id the model was told).
                    entry = entry(body)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._error(404, "no such route")
                elif entry is None:
                    self._error(400, "the script has no more replies")
                elif isinstance(entry, Status):
                    self._error(entry.code, entry.message, entry.retry_after)
                elif isinstance(entry, Hold):
                    self._hold(entry)
                elif isinstance(entry, Raw):
                    self._raw(entry)
                else:
                    self._stream(_reply_chunks(entry))

            def _error(self, code: int, message: str, retry_after: str | None = None) -> None:
                payload = json.dumps({"error": {"message": message, "type": "scripted"}}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(payload)

            def _start_stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            def _send(self, data: str) -> None:
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()

            def _stream(self, chunks: Iterator[dict[str, Any]]) -> None:
                self._start_stream()
                for chunk in chunks:
                    self._send(json.dumps(chunk))
                self._send("[DONE]")

            def _raw(self, entry: Raw) -> None:
                # Each piece its own TCP segment: the client's reads split where the test did.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.send_response(entry.status)
                for name, value in entry.headers:
                    self.send_header(name, value)
                if entry.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for piece in entry.pieces:
                        time.sleep(entry.pause)
                        framed = b"%x\r\n%s\r\n" % (len(piece), piece) if entry.chunked else piece
                        self.wfile.write(framed)
                        self.wfile.flush()
                    if entry.chunked and not entry.truncate:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    outer.dropped.set()

            def _hold(self, entry: Hold) -> None:
                self._start_stream()
                self._send(json.dumps(_chunk({"role": "assistant", "content": ""})))
                for piece in entry.text:
                    self._send(json.dumps(_chunk({"content": piece})))
                outer.holding.set()
                # Until released, with a keep-alive comment every 50 ms. A client that closes
                # the response is noticed within 10 ms, by its end of stream arriving (a
                # failed write would take two keep-alives): tests look right after the
                # client's process exits, which would close it too.
                try:
                    ticks = 0
                    while not outer._release.wait(0.01):
                        if self._client_gone():
                            outer.dropped.set()
                            return
                        ticks += 1
                        if ticks % 5 == 0:
                            self.wfile.write(b": keep-alive\n\n")
                            self.wfile.flush()
                except OSError:
                    outer.dropped.set()

            def _client_gone(self) -> bool:
                # The request was read whole: the socket turns readable only at its end.
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _queue_for(self, body: dict[str, Any]) -> list[Entry]:
        first = next(
            (
                m
                for m in body.get("messages") or []
                if isinstance(m, dict) and m.get("role") == "user"
            ),
            None,
        )
        content = str(first.get("content") or "") if first else ""
        for marker, queue in self.by_prompt.items():
            if marker in content:
                return queue
        return self.script

    def requests_for(self, marker: str) -> list[Recorded]:
        """The recorded requests whose first user message contains ``marker``."""
        out = []
        for request in self.requests:
            users = [m for m in request.messages if m.get("role") == "user"]
            if users and marker in str(users[0].get("content") or ""):
                out.append(request)
        return out

    @property
    def base_url(self) -> str:
        """The ``/v1`` root to give the client."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def release(self) -> None:
        """End every held stream (the handler returns without finishing the answer)."""
        self._release.set()

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
