"""``ModelClient`` on the wire: our own streaming Chat Completions client over httpx, against
the real loopback model server (tests/agent/model_server.py) and, for what that server
cannot do, bare sockets. Event streams are written byte by byte (``Raw``) to split them at
odd places, break them off, or fill them with what a real server sends besides chunks."""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import socket
import threading
from collections.abc import Iterator
from email.utils import format_datetime
from typing import Any

import anyio
import pytest

from codemode.agent import (
    ChatMessage,
    ModelClient,
    ModelConfig,
    ModelError,
    ModelReply,
    RetryPolicy,
)
from codemode.agent._model import _EventStream, _tls_verify
from tests.agent.model_server import Hold, ModelServer, Raw, Reply, Status

pytestmark = pytest.mark.anyio

KEY = "sk-wire-secret-0042"
FAST = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01)
HELLO = [ChatMessage(role="user", content="hello")]
_DELAYS: list[tuple[int, float | None]] = []


class _NoWait(RetryPolicy, frozen=True):
    """A retry policy that records what it was asked to wait and waits nothing."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        _DELAYS.append((attempt, retry_after))
        return 0.0


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-raw",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _event(obj: Any, eol: bytes = b"\n") -> bytes:
    # ensure_ascii=False: the bytes carry raw UTF-8 (and U+2028) as many servers send them.
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + eol + eol


def _cut(data: bytes, *at: int) -> list[bytes]:
    edges = [0, *sorted(set(at)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


async def _complete(
    server: ModelServer,
    *,
    key: str = KEY,
    retry: RetryPolicy = FAST,
    seen: list[str] | None = None,
    base_url: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> ModelReply:
    config = ModelConfig(base_url or server.base_url, "scripted", retry=retry)
    async with ModelClient(config, api_key=key, key_source="$WIRE_KEY") as client:
        on_text = seen.append if seen is not None else None
        return await client.complete(HELLO, tools or [], on_text=on_text)


async def _failure(server: ModelServer, **kw: Any) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await _complete(server, **kw)
    return caught.value


# --- the request ---------------------------------------------------------------------


async def test_the_request_on_the_wire() -> None:
    tool = {"type": "function", "function": {"name": "read", "parameters": {}}}
    with ModelServer([Reply(text=["hi"]), Reply(text=["again"])]) as server:
        config = ModelConfig(server.base_url + "/", "scripted", retry=FAST)
        async with ModelClient(config, api_key=KEY) as client:
            first = await client.complete(HELLO, [tool])
            second = await client.with_model("other-model").complete(HELLO, [])
    assert first.message.content == "hi" and second.message.content == "again"
    sent = server.requests[0]
    # A base URL ending in "/" joins without a double slash.
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["accept"] == "text/event-stream"
    assert "codemode" in sent.headers["user-agent"]
    assert sent.body == {
        "model": "scripted",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [tool],
    }
    # with_model: the same client and usage, another model, no tools member without tools.
    assert server.requests[1].body["model"] == "other-model"
    assert "tools" not in server.requests[1].body
    assert client.usage.requests == 2 and client.usage.total_tokens == 30


async def test_without_a_key_no_authorization_is_sent() -> None:
    with ModelServer([Reply(text=["ok"])]) as server:
        reply = await _complete(server, key="")
    assert reply.message.content == "ok"
    assert "authorization" not in server.requests[0].headers


async def test_a_key_no_header_can_carry_is_refused_unsent() -> None:
    # httpx would reject the header and quote its value, the key, in its error.
    with ModelServer([Reply(text=["never"])]) as server:
        failure = await _failure(server, key=KEY + "\n")
    assert failure.code == "MODEL_AUTH" and not server.requests
    assert str(failure) == (
        "$WIRE_KEY holds characters an HTTP header cannot carry (a stray newline, space or "
        "quote?); no request was sent"
    )


async def test_the_standard_proxy_variables_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer([]) as server:
        root = server.base_url.removesuffix("/v1")
        for name in ("HTTP_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", root)
        failure = await _failure(server, base_url="http://model.invalid/v1")
    # The request went to the proxy (the loopback server), in absolute form.
    assert server.requests[0].path == "http://model.invalid/v1/chat/completions"
    assert failure.code == "MODEL_HTTP" and "HTTP 404" in str(failure)


def test_the_ca_bundle_is_loaded_only_where_tls_may_be_spoken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ssl

    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    assert _tls_verify("https://api.example.com/v1") is True
    plain = _tls_verify("http://localhost:11434/v1")
    # Plain HTTP: a context that still verifies, with nothing it trusts.
    assert isinstance(plain, ssl.SSLContext)
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0
    monkeypatch.setenv("http_proxy", "https://proxy.example.com:443")
    assert _tls_verify("http://localhost:11434/v1") is True


# --- the event stream ----------------------------------------------------------------


def test_event_stream_parsing_is_the_same_wherever_the_bytes_are_cut() -> None:
    stream = (
        b"\xef\xbb\xbf: a comment first, after a byte order mark\r\n"
        b"data: one\r\n\r\n"
        b"data: x\r\ndata: y\r\n\r\n"
        b"event: x\rdata:two\rdata\r\r"
        b"id: 5\nretry: 10\n\n"
        + 'data: {"t": "a\u2028b\u0085c é"}\n\n'.encode()
        + b"data:  spaced\n\n"
        b"data: last"
    )
    expected = [
        b"one",
        b"x\ny",  # a CRLF cut between its CR and LF is one line end, not two
        b"two\n",  # a bare "data" line adds an empty line
        '{"t": "a\u2028b\u0085c é"}'.encode(),  # U+2028/U+0085 end no line
        b" spaced",  # one space after the colon is dropped, not two
        b"last",  # the body's end completes the last event
    ]

    def parse(pieces: list[bytes]) -> list[bytes]:
        events = _EventStream()
        out = [data for piece in pieces for data in events.feed(piece)]
        return out + events.close()

    assert parse([stream]) == expected
    assert parse([stream[i : i + 1] for i in range(len(stream))]) == expected
    for i in range(len(stream) + 1):
        assert parse([stream[:i], stream[i:]]) == expected, i


async def test_events_cut_at_odd_places_across_tcp_writes() -> None:
    stream = b"".join(
        [
            _event(_chunk({"role": "assistant", "content": ""}), b"\r\n"),
            _event(_chunk({"content": "héllo "}), b"\r\n"),
            _event(_chunk({"content": "wörld"}), b"\r\n"),
            _event(_chunk(finish="stop"), b"\r\n"),
            _event(_usage(7, 3), b"\r\n"),
            b"data: [DONE]\r\n\r\n",
        ]
    )
    cuts = [
        stream.index(b"data") + 2,  # inside the field name
        stream.index(b"\r\n") + 1,  # between CR and LF
        stream.index("é".encode()) + 1,  # inside a UTF-8 character
        stream.index(b'"content": "w') + 5,  # inside the JSON
        stream.index(b"\r\n\r\n", stream.index(b"w\xc3\xb6rld")) + 3,  # inside the blank line
        stream.index(b"[DONE]") + 3,
    ]
    seen: list[str] = []
    with ModelServer([Raw(_cut(stream, *cuts))]) as server:
        reply = await _complete(server, seen=seen)
    assert seen == ["héllo ", "wörld"] and reply.message.content == "héllo wörld"
    assert reply.finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 3)


async def test_multi_line_data_comments_and_other_fields() -> None:
    body = json.dumps(_chunk({"content": "line\u2028sep"}), ensure_ascii=False)
    # Cut between two members: the "\n" that joins the lines falls between JSON tokens.
    middle = body.index('"choices"')
    head, tail = body[:middle], body[middle:]
    pieces = [
        b": keep-alive\n\n",
        b"event: message\nid: 1\nretry: 3000\n",
        # One event's JSON over two data lines: joined with "\n" it is whitespace.
        f"data: {head}\ndata: {tail}\n\n".encode(),
        b": ping\n\n",
        b'data:{"choices": [{"delta": {"content": "!"}, "finish_reason": "stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    with ModelServer([Raw(pieces)]) as server:
        reply = await _complete(server)
    assert reply.message.content == "line\u2028sep!" and reply.finish_reason == "stop"


async def test_a_stream_that_just_ends_without_done() -> None:
    # No [DONE], and the last event lacks its blank line: the body's end ends both.
    pieces = [_event(_chunk({"content": "partial answer"}, "stop")), _event(_usage(4, 2))[:-1]]
    with ModelServer([Raw(pieces)]) as server:
        reply = await _complete(server)
    assert reply.message.content == "partial answer" and reply.finish_reason == "stop"
    assert reply.usage.total_tokens == 6


async def test_events_after_done_are_ignored() -> None:
    pieces = [
        _event(_chunk({"content": "kept"})),
        b"data: [DONE]\n\n",
        _event(_chunk({"content": " dropped"})),
    ]
    with ModelServer([Raw(pieces)]) as server:
        reply = await _complete(server)
    assert reply.message.content == "kept"


async def test_interleaved_parallel_tool_call_fragments() -> None:
    def call(index: int, **fields: Any) -> bytes:
        function = {k: v for k, v in fields.items() if k in ("name", "arguments")}
        delta: dict[str, Any] = {"index": index, "function": function}
        if "id" in fields:
            delta.update(id=fields["id"], type="function")
        return _event(_chunk({"tool_calls": [delta]}))

    stream = b"".join(
        [
            call(0, id="c0", name="re", arguments=""),
            call(1, id="c1", name="glob", arguments='{"pat'),
            call(0, name="ad", arguments='{"file_'),  # the name itself comes in fragments
            call(2, id="c2", name="grep", arguments="{}"),
            call(1, arguments='tern": "*.py"}'),
            call(0, arguments='path": "a.txt"}'),
            _event(_chunk(finish="tool_calls")),
            b"data: [DONE]\n\n",
        ]
    )
    cuts = range(7, len(stream), 53)  # every 53 bytes: through names, JSON and blank lines
    with ModelServer([Raw(_cut(stream, *cuts), pause=0.002)]) as server:
        reply = await _complete(server)
    calls = [(c.id, c.name, c.arguments) for c in reply.message.tool_calls]
    assert calls == [
        ("c0", "read", '{"file_path": "a.txt"}'),
        ("c1", "glob", '{"pattern": "*.py"}'),
        ("c2", "grep", "{}"),
    ]
    assert reply.finish_reason == "tool_calls" and reply.message.content is None


# --- failures inside a started stream ------------------------------------------------


async def test_an_error_chunk_mid_stream_fails_the_step() -> None:
    pieces = [
        _event(_chunk({"content": "so far "})),
        _event({"error": {"message": f"upstream overloaded (key {KEY})", "type": "server"}}),
        _event(_chunk({"content": "never seen"})),
    ]
    seen: list[str] = []
    with ModelServer([Raw(pieces)]) as server:
        failure = await _failure(server, seen=seen)
    assert failure.code == "MODEL_BAD_RESPONSE"
    assert str(failure) == "the model stream failed: upstream overloaded (key ***)"
    assert seen == ["so far "] and len(server.requests) == 1


async def test_a_failed_stream_is_closed_not_left_open() -> None:
    # After the error chunk the server goes on for a minute; the client hangs up at once.
    pieces = [_event(_chunk({"content": "a"})), _event({"error": {"message": "gone"}})]
    pieces += [b": keep-alive\n\n"] * 1200
    with ModelServer([Raw(pieces, pause=0.05)]) as server:
        async with ModelClient(ModelConfig(server.base_url, "m", retry=FAST)) as client:
            with pytest.raises(ModelError) as caught:
                await client.complete(HELLO, [])
            # Still open (closing the client would close every connection): the step did.
            assert await anyio.to_thread.run_sync(server.dropped.wait, 20.0)
    assert caught.value.code == "MODEL_BAD_RESPONSE"


async def test_a_connection_closed_mid_stream_fails_the_step_unretried() -> None:
    pieces = [_event(_chunk({"content": "half "})), _event(_chunk({"content": "an"}))]
    seen: list[str] = []
    with ModelServer([Raw(pieces, chunked=True, truncate=True), Reply(text=["x"])]) as server:
        failure = await _failure(server, seen=seen)
    assert failure.code == "MODEL_BAD_RESPONSE"
    assert str(failure).startswith("the model stream failed: RemoteProtocolError")
    assert seen == ["half ", "an"] and len(server.requests) == 1


async def test_unreadable_json_is_a_bad_response() -> None:
    pieces = [_event(_chunk({"content": "ok"})), f'data: {{"oops": {KEY}\n\n'.encode()]
    with ModelServer([Raw(pieces)]) as server:
        failure = await _failure(server)
    assert failure.code == "MODEL_BAD_RESPONSE"
    assert str(failure).startswith("unreadable model stream: JSON is malformed")
    assert '{"oops": ***' in str(failure) and KEY not in str(failure)


async def test_an_answer_that_is_no_event_stream_says_what_it_was() -> None:
    body = json.dumps({"error": {"message": "streaming is not supported"}}).encode()
    raw = Raw([body], headers=(("Content-Type", "application/json"),))
    with ModelServer([raw]) as server:
        failure = await _failure(server)
    assert failure.code == "MODEL_BAD_RESPONSE"
    assert str(failure) == (
        "the model stream failed: an answer without any event (application/json): "
        "streaming is not supported"
    )


# --- statuses and retries ------------------------------------------------------------


async def test_401_and_403_are_auth_errors_and_not_retried() -> None:
    with ModelServer([Status(401, message="bad key"), Status(403, message="no access")]) as server:
        refused = await _failure(server)
        denied = await _failure(server)
    assert (refused.code, denied.code) == ("MODEL_AUTH", "MODEL_AUTH")
    assert str(refused) == (
        f"the model server at {server.base_url} refused the API key (HTTP 401); check $WIRE_KEY"
    )
    assert str(denied) == (
        f"the model server at {server.base_url} denied access (HTTP 403); check $WIRE_KEY "
        "and the model name 'scripted'"
    )
    assert len(server.requests) == 2


async def test_400_is_refused_with_the_servers_message() -> None:
    with ModelServer([Status(400, message="unknown model 'scripted'")]) as server:
        failure = await _failure(server)
    assert failure.code == "MODEL_HTTP" and len(server.requests) == 1
    assert (
        str(failure) == "the model server refused the request: HTTP 400: unknown model 'scripted'"
    )


async def test_an_error_body_that_is_not_json_is_quoted_bounded_on_one_line() -> None:
    page = b"<html>\n  <body>\n" + b"gateway says no " * 100 + b"</body></html>"
    raw = Raw([page], status=418, headers=(("Content-Type", "text/html"),))
    with ModelServer([raw]) as server:
        failure = await _failure(server)
    text = str(failure)
    assert failure.code == "MODEL_HTTP"
    assert text.startswith("the model server refused the request: HTTP 418: <html> <body> gateway")
    assert "\n" not in text and text.endswith("…")
    assert len(text) == len("the model server refused the request: HTTP 418: ") + 300 + 1


async def test_an_error_body_is_read_only_so_far() -> None:
    # 24 MiB that would take the server long to write: the client reads ~64 KiB, closes,
    # and the server's next writes fail.
    raw = Raw([b"x" * 65536] * 384, status=400, pause=0.0, chunked=True)
    with ModelServer([raw]) as server:
        failure = await _failure(server)
        assert await anyio.to_thread.run_sync(server.dropped.wait, 20.0)
    assert failure.code == "MODEL_HTTP" and "HTTP 400: xxxx" in str(failure)


async def test_retry_after_is_passed_to_the_policy_then_success() -> None:
    _DELAYS.clear()
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    script = [
        Status(429, retry_after="7"),
        Status(503, retry_after=format_datetime(soon, usegmt=True)),
        Status(502),
        Reply(text=["finally"]),
    ]
    with ModelServer(script) as server:
        reply = await _complete(server, retry=_NoWait(max_retries=3))
    assert reply.message.content == "finally" and len(server.requests) == 4
    assert [attempt for attempt, _ in _DELAYS] == [1, 2, 3]
    assert _DELAYS[0][1] == 7.0 and _DELAYS[2][1] is None
    assert _DELAYS[1][1] is not None and 20.0 < _DELAYS[1][1] <= 30.0


async def test_5xx_retries_run_out() -> None:
    with ModelServer([Status(500, message=f"crash near {KEY}")] * 3) as server:
        failure = await _failure(server)
    assert failure.code == "MODEL_RETRIES_EXHAUSTED" and len(server.requests) == 3
    assert str(failure) == (
        "the model server kept failing after 2 retries: HTTP 500: crash near ***"
    )


@contextlib.contextmanager
def _silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A server that accepts connections and never answers (each is kept in the list)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


async def test_a_timeout_before_the_answer_is_retried_then_unreachable() -> None:
    with _silent_server() as (port, accepted):
        config = ModelConfig(f"http://127.0.0.1:{port}/v1", "m", retry=FAST, request_timeout=0.3)
        async with ModelClient(config, api_key=KEY) as client:
            with pytest.raises(ModelError) as caught:
                await client.complete(HELLO, [])
        assert len(accepted) == 3  # the first attempt and FAST's 2 retries
    assert caught.value.code == "MODEL_UNREACHABLE"
    assert str(caught.value) == (
        f"cannot reach the model server at http://127.0.0.1:{port}/v1 (2 retries): "
        "ReadTimeout: no progress for 0.3 s"
    )


async def test_a_redirect_is_reported_not_followed() -> None:
    raw = Raw(
        [b"moved"],
        status=308,
        headers=(("Location", "https://elsewhere.example/v1/chat/completions"),),
    )
    with ModelServer([raw, Reply(text=["x"])]) as server:
        failure = await _failure(server)
    assert failure.code == "MODEL_HTTP" and len(server.requests) == 1
    assert "HTTP 308: moved (redirected to https://elsewhere.example/v1/chat/completions)" in str(
        failure
    )


async def test_the_key_is_in_no_error_text_even_cut_through() -> None:
    # The key straddles the 300-character cut: scrubbed before cutting, no part of it shows.
    straddling = "y" * 290 + KEY
    script = [
        Status(400, message=straddling),
        Status(401, message=KEY),
        Status(422, message=f"echo {KEY}"),
        Raw([_event({"error": KEY})]),
    ]
    texts = []
    with ModelServer(script) as server:
        for _ in script:
            failure = await _failure(server)
            texts.append(str(failure))
        async with ModelClient(ModelConfig(server.base_url, "m"), api_key=KEY) as client:
            texts.append(repr(client))
    assert all(KEY[:6] not in t for t in texts), texts
    assert texts[0].endswith("y" * 290 + "***")


# --- cancellation --------------------------------------------------------------------


async def test_cancelling_mid_stream_releases_the_connection() -> None:
    with ModelServer([Hold(text=["thinking"]), Reply(text=["next"])]) as server:
        async with ModelClient(ModelConfig(server.base_url, "m", retry=FAST)) as client:
            streamed = anyio.Event()

            def on_text(piece: str) -> None:
                streamed.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.complete(HELLO, [], on_text=on_text))
                with anyio.fail_after(20):
                    await streamed.wait()
                tg.cancel_scope.cancel()
            # The response was closed: the server's next keep-alive found no client.
            assert await anyio.to_thread.run_sync(server.dropped.wait, 20.0)
            # And the client is still whole.
            reply = await client.complete(HELLO, [])
    assert reply.message.content == "next" and client.usage.requests == 1
