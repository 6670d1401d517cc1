"""The model client: OpenAI-compatible Chat Completions over ``httpx``, always streamed.

One request per model step: ``POST {base_url}/chat/completions`` with ``"stream": true`` and
usage in the last chunk, answered with Server-Sent Events. This module parses the event
stream itself (from the response's bytes: ``data:`` lines, comments, ``[DONE]``) and decodes
each event's JSON with msgspec. Text deltas are reported as they arrive; tool-call deltas are
assembled by their ``index`` (a step may hold several parallel calls whose fragments
interleave). 429, 5xx and connection failures that happen before the response starts are
retried with capped exponential backoff and full jitter, waiting what ``Retry-After`` says
when the server says it. Cancelling the calling task closes the stream (the HTTP response is
released in a shielded ``finally``).

The API key travels in the ``Authorization`` header only (none is sent without a key): it is
never part of a message, an event, a ``repr`` or an error text, and a server that echoes it
in an error has it replaced by ``***``.

No model SDK is needed (the official ``openai`` package cost ~0.6 s of the agent's start-up
to import); ``httpx`` is imported when a client is opened, not with this module.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import msgspec

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "INSTALL_HINT",
    "ChatMessage",
    "ModelClient",
    "ModelConfig",
    "ModelError",
    "ModelReply",
    "ModelToolCallRequest",
    "RetryPolicy",
    "Usage",
]

# Kept for importers only. The agent no longer needs the openai package (nothing raises
# MODEL_NOT_INSTALLED any more); the extra now brings tzdata alone.
INSTALL_HINT = "the agent's optional extra: pip install 'codemode[agent]'"

# Reported for each streamed text fragment (the model's visible answer).
TextSink = Callable[[str], None]


class ModelError(Exception):
    """The model could not be asked: unreachable server, bad key, refused request, or retries
    exhausted. ``code`` is stable: ``MODEL_UNREACHABLE``, ``MODEL_AUTH``, ``MODEL_HTTP``,
    ``MODEL_RETRIES_EXHAUSTED``, ``MODEL_BAD_RESPONSE`` (``MODEL_NOT_INSTALLED`` is no longer
    raised: the client needs no optional package)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ModelToolCallRequest(msgspec.Struct, frozen=True):
    """One tool call the model asked for: its id, the tool name and the raw JSON arguments."""

    id: str
    name: str
    arguments: str


class ImagePart(msgspec.Struct, frozen=True):
    """An image a user message carries to the model (``media_type``, base64 ``data``)."""

    media_type: str
    data: str


class ChatMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """One Chat Completions message (``system``/``user``/``assistant``/``tool``).

    ``context`` marks a user message that is deferred tool context, not the user's words.
    ``images`` (user messages only) go to the model as ``image_url`` parts after the text;
    they are not written to the session log (its message keeps the text), so a resumed
    session has the text alone.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: tuple[ModelToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    context: bool = False
    images: tuple[ImagePart, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        """The message as the Chat Completions API takes it."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.images and self.role == "user":
            out["content"] = [
                {"type": "text", "text": self.content or ""},
                *(
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{image.media_type};base64,{image.data}"},
                    }
                    for image in self.images
                ),
            ]
        if self.role == "assistant" and self.content is None and not self.tool_calls:
            out["content"] = ""
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class Usage(msgspec.Struct):
    """Token counts as the server reported them (summed over a session's requests)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0

    def add(self, other: Usage) -> None:
        """Add ``other``'s counts to this one."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        self.requests += other.requests

    def to_json(self) -> dict[str, int]:
        """camelCase wire form."""
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "requests": self.requests,
        }


class ModelReply(msgspec.Struct, frozen=True):
    """What one model step returned: the assistant message, why it stopped, its usage."""

    message: ChatMessage
    finish_reason: str | None
    usage: Usage


class RetryPolicy(msgspec.Struct, frozen=True):
    """Retries of a request that failed before its first chunk (429, 5xx, connection).

    Attempt ``n`` (1-based) waits ``Retry-After`` when the server sent one (capped at
    ``max_delay``), else a uniform draw in ``[0, min(max_delay, base_delay * 2**(n-1))]``.
    """

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt``."""
        if retry_after is not None:
            return max(0.0, min(self.max_delay, retry_after))
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(0.0, ceiling)


class ModelConfig(msgspec.Struct, frozen=True):
    """Where the model lives: ``base_url`` (an OpenAI-compatible ``/v1`` root), ``model``
    and the retry policy. The key is not part of it (it is given to ``ModelClient`` only)."""

    base_url: str
    model: str
    retry: RetryPolicy = RetryPolicy()
    # Seconds a request may take to connect, to send, and between bytes of the answer.
    request_timeout: float = 600.0


# Named in every request: servers and proxies log who is calling.
_USER_AGENT = "codemode-agent"
# An error answer is read this far: its start explains the status, and a misbehaving
# server (or a proxy's HTML page) may send far more.
_ERROR_BODY_LIMIT = 64 * 1024
# One event may hold at most this much: a server that never ends a line must not fill memory.
_EVENT_LIMIT = 32 * 1024 * 1024
# Error texts quote at most this much of what the server said.
_MESSAGE_LIMIT = 300
# Server-Sent Events end lines at CRLF, LF or CR, and only there: event data is JSON, which
# may carry U+2028 or U+0085 unescaped (``str.splitlines`` would split on those).
_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
# What a bearer token may hold: visible ASCII.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), if any."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        # Imported here: email.utils (its charset and encoders modules) costs ~4 ms of
        # start-up, and only a date-valued Retry-After needs it.
        import datetime
        from email.utils import parsedate_to_datetime

        when = parsedate_to_datetime(value)
        return (when - datetime.datetime.now(when.tzinfo)).total_seconds()
    except (TypeError, ValueError):
        return None


class _EventStream:
    """Server-Sent Events parsed from a response's bytes, fed as they arrive.

    ``feed(chunk)`` returns the data of each event the chunk completes (the ``data:`` lines of
    one event joined by ``\\n``; an event ends at a blank line); ``close()`` returns the last
    one when the body ended without its blank line. Comments (``:``) and the other fields
    (``event``, ``id``, ``retry``) are skipped. A chunk may end anywhere, even inside a CRLF.
    """

    def __init__(self) -> None:
        # The current line's bytes while its end has not arrived.
        self._partial: list[bytes] = []
        self._pending = 0
        # The ``data`` values of the event being read, and their size.
        self._data: list[bytes] = []
        self._size = 0
        # The last chunk ended with CR: a LF opening the next one completes that CRLF.
        self._after_cr = False
        self._first_line = True

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events ``chunk`` completes."""
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if not chunk:
            return []
        self._after_cr = chunk[-1:] == b"\r"
        events: list[bytes] = []
        start = 0
        for match in _EOL.finditer(chunk):
            piece = chunk[start : match.start()]
            if self._partial:
                self._partial.append(piece)
                piece = b"".join(self._partial)
                self._partial, self._pending = [], 0
            self._line(piece, events)
            start = match.end()
        if start < len(chunk):
            self._partial.append(chunk[start:])
            self._pending += len(chunk) - start
            if self._pending > _EVENT_LIMIT:
                raise _Unreadable("a line longer than 32 MiB", b"")
        return events

    def close(self) -> list[bytes]:
        """The data of the event the body's end leaves unterminated, if any."""
        events: list[bytes] = []
        if self._partial:
            line = b"".join(self._partial)
            self._partial, self._pending = [], 0
            self._line(line, events)
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
        if self._first_line:
            self._first_line = False
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
        if not line:
            if self._data:
                events.append(b"\n".join(self._data))
                self._data, self._size = [], 0
            return
        if line.startswith(b":"):
            return  # a comment: servers send them as keep-alives
        name, _, value = line.partition(b":")
        if name != b"data":
            return
        if value.startswith(b" "):
            value = value[1:]
        self._data.append(value)
        self._size += len(value) + 1
        if self._size > _EVENT_LIMIT:
            raise _Unreadable("an event larger than 32 MiB", b"")


class _Unreadable(ValueError):
    """An event that is not a chunk of a Chat Completions stream (``data``: the event)."""

    def __init__(self, reason: str, data: bytes) -> None:
        super().__init__(reason)
        self.reason = reason
        self.data = data


class _StreamFailed(Exception):
    """The server reported a failure inside a stream it had started (an ``error`` chunk, or an
    answer without a single event)."""


def _objects(value: Any, what: str) -> list[dict[str, Any]]:
    """``value`` as a list of JSON objects (``null`` is none); anything else is unreadable."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _Unreadable(f"{what} is not a list of objects", b"")
    return value


class _Assembly:
    """Tool-call fragments of one streamed step, keyed by the delta's ``index``."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}

    def feed(self, delta: dict[str, Any]) -> None:
        """Add one ``tool_calls`` delta (a decoded JSON object)."""
        raw_index = delta.get("index")
        new_id = delta.get("id")
        if isinstance(raw_index, int) and not isinstance(raw_index, bool):
            index = raw_index
        else:
            # A server that omits ``index``: a new id opens a new call, else the last one.
            last = max(self.calls, default=-1)
            opens = last < 0 or (new_id and self.calls[last]["id"] not in ("", str(new_id)))
            index = last + 1 if opens else last
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if new_id:
            slot["id"] = str(new_id)
        function = delta.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if name:
                # Some servers resend the name on every fragment, others split it.
                name = str(name)
                slot["name"] = name if slot["name"] in ("", name) else slot["name"] + name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                slot["arguments"] += arguments
            elif arguments:
                # A server that sends the arguments as an object: the tool gets them as JSON.
                slot["arguments"] += msgspec.json.encode(arguments).decode()

    def result(self, step_key: str) -> tuple[ModelToolCallRequest, ...]:
        """The assembled calls in ``index`` order (a call without an id gets one)."""
        out = []
        for index in sorted(self.calls):
            slot = self.calls[index]
            call_id = slot["id"] or f"call_{step_key}_{index}"
            out.append(ModelToolCallRequest(call_id, slot["name"], slot["arguments"]))
        return tuple(out)


class _Step:
    """What one streamed step has said so far: text, tool calls, finish reason, usage."""

    def __init__(self, on_text: TextSink | None) -> None:
        self.text: list[str] = []
        self.calls = _Assembly()
        self.finish: str | None = None
        self.usage = Usage(requests=1)
        self._on_text = on_text

    def take(self, data: bytes) -> bool:
        """Apply one event's data (a ``chat.completion.chunk``); False at ``[DONE]``."""
        if data.strip() == b"[DONE]":
            return False
        try:
            chunk = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise _Unreadable(str(exc), data) from None
        if not isinstance(chunk, dict):
            raise _Unreadable("an event that is not a JSON object", data)
        try:
            self._apply(chunk)
        except _Unreadable as exc:
            raise _Unreadable(exc.reason, data) from None
        return True

    def _apply(self, chunk: dict[str, Any]) -> None:
        error = chunk.get("error")
        if error:
            raise _StreamFailed(_error_words(error))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            try:
                self.usage.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                self.usage.completion_tokens = int(usage.get("completion_tokens") or 0)
                self.usage.total_tokens = int(usage.get("total_tokens") or 0)
            except (TypeError, ValueError):
                raise _Unreadable("token counts that are not numbers", b"") from None
        for choice in _objects(chunk.get("choices"), "choices"):
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    self.text.append(content)
                    if self._on_text is not None:
                        self._on_text(content)
                for call in _objects(delta.get("tool_calls"), "tool_calls"):
                    self.calls.feed(call)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])


def _error_words(error: Any) -> str:
    """The message of an ``error`` member (an object with ``message``, or a string)."""
    if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
        return str(error["message"])
    if isinstance(error, str):
        return error
    return msgspec.json.encode(error).decode()


def _body_words(raw: bytes) -> str:
    """What an error body says: its JSON ``error`` message when it has one, else its text."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        return _error_words(body["error"])
    return raw.decode("utf-8", "replace")


def _transport_words(exc: Exception, timeout: float) -> str:
    """A connection failure in words: its kind (``ConnectError``, ``ReadTimeout``…), detail."""
    import httpx

    kind = type(exc).__name__
    # httpx's timeouts say little ("timed out", or nothing): say how long it waited.
    detail = (
        f"no progress for {timeout:g} s" if isinstance(exc, httpx.TimeoutException) else str(exc)
    )
    return f"{kind}: {detail}" if detail else kind


def _tls_verify(base_url: str) -> ssl.SSLContext | bool:
    """httpx's ``verify`` for a client of ``base_url``: its default (certifi's bundle, or
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``) whenever TLS may be spoken, to the server or to a
    proxy; for plain HTTP all the way, a context that trusts nothing."""
    import ssl
    from urllib.request import getproxies

    proxies = (str(url).lower() for scheme, url in getproxies().items() if scheme != "no")
    if base_url.lower().startswith("https:") or any(p.startswith("https:") for p in proxies):
        return True
    # Loading the CA bundle is ~40 ms of the agent's start-up, for a local server (Ollama,
    # vLLM, the tests' loopback one) spent for nothing. No TLS connection can happen here
    # (redirects are not followed); if one ever did, a verifying context without a trust
    # anchor refuses the peer rather than trusting it.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class ModelClient:
    """A streaming Chat Completions client (``async with ModelClient(config) as client``).

    ``usage`` sums every request's usage over the client's life (one session).
    """

    def __init__(
        self, config: ModelConfig, *, api_key: str = "", key_source: str = "the API key"
    ) -> None:
        self.config = config
        self._api_key = api_key
        self.usage = Usage()
        # Named in authentication errors ("check OPENAI_API_KEY"), never its value.
        self._key_source = key_source
        self._client: httpx.AsyncClient | None = None
        self._steps = 0

    def __repr__(self) -> str:
        return f"<ModelClient {self.config.base_url!r} model={self.config.model!r}>"

    def with_model(self, model: str) -> ModelClient:
        """A client for ``model`` on the same server, connection and key (a workflow
        child's ``model`` override); its requests count in this client's ``usage``. It
        shares this client's lifetime: use it while this one is open, never close it."""
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty string")
        clone = ModelClient(
            msgspec.structs.replace(self.config, model=model),
            api_key=self._api_key,
            key_source=self._key_source,
        )
        clone._client = self._client
        clone.usage = self.usage
        return clone

    async def __aenter__(self) -> ModelClient:
        # Imported here: ``import codemode.agent`` does not pay for httpx.
        import httpx

        # trust_env (httpx's default): HTTP(S)_PROXY, ALL_PROXY, NO_PROXY and SSL_CERT_FILE
        # apply. Redirects are not followed: a POST redirected would lose its body or its
        # key, and the redirect reported says which URL to configure instead.
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.config.request_timeout),
            # Subagents and workflow children share this client (``with_model``) and stream
            # at once: the pool must never be what they wait for.
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            headers={"User-Agent": _USER_AGENT},
            follow_redirects=False,
            verify=_tls_verify(self.config.base_url),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]],
        *,
        on_text: TextSink | None = None,
    ) -> ModelReply:
        """One streamed model step over ``messages`` offering ``tools`` (wire form)."""
        import httpx

        client = self._client
        if client is None:
            raise RuntimeError("ModelClient is not open (use `async with`)")
        self._steps += 1
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": [m.to_wire() for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = list(tools)
        body = msgspec.json.encode(request)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            if not _HEADER_SAFE.fullmatch(self._api_key):
                # httpx would refuse the header with its value (the key) in the error text.
                raise self._error(
                    "MODEL_AUTH",
                    f"{self._key_source} holds characters an HTTP header cannot carry "
                    "(a stray newline, space or quote?); no request was sent",
                )
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = self._endpoint()
        policy = self.config.retry
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await client.send(
                    client.build_request("POST", url, content=body, headers=headers), stream=True
                )
            except httpx.TransportError as exc:
                status: int | None = None
                detail = _transport_words(exc, self.config.request_timeout)
            else:
                if response.is_success:
                    return await self._consume(response, on_text)
                status = response.status_code
                retry_after = _retry_after(response.headers.get("retry-after"))
                detail = await _error_body(response)
                if response.is_redirect and "location" in response.headers:
                    detail += f" (redirected to {response.headers['location']})"
            if status == 401:
                raise self._error(
                    "MODEL_AUTH",
                    f"the model server at {self.config.base_url} refused the API key "
                    f"(HTTP 401); check {self._key_source}",
                )
            if status == 403:
                raise self._error(
                    "MODEL_AUTH",
                    f"the model server at {self.config.base_url} denied access (HTTP 403); "
                    f"check {self._key_source} and the model name {self.config.model!r}",
                )
            if status is not None and status != 429 and status < 500:
                raise self._error(
                    "MODEL_HTTP",
                    f"the model server refused the request: {self._describe(status, detail)}",
                )
            attempt += 1
            if attempt > policy.max_retries:
                if status is None:
                    raise self._error(
                        "MODEL_UNREACHABLE",
                        f"cannot reach the model server at {self.config.base_url} "
                        f"({policy.max_retries} retries): {self._describe(None, detail)}",
                    )
                raise self._error(
                    "MODEL_RETRIES_EXHAUSTED",
                    f"the model server kept failing after {policy.max_retries} retries: "
                    f"{self._describe(status, detail)}",
                )
            await anyio.sleep(policy.delay(attempt, retry_after))

    def _endpoint(self) -> httpx.URL:
        import httpx

        base = self.config.base_url
        try:
            url = httpx.URL(base)
        except httpx.InvalidURL as exc:
            raise self._error(
                "MODEL_UNREACHABLE", f"the model server URL {base!r} is not valid: {exc}"
            ) from None
        if url.scheme not in ("http", "https"):
            raise self._error(
                "MODEL_UNREACHABLE", f"the model server URL {base!r} is not an http(s) URL"
            )
        # Joined on the path, so ``…/v1`` and ``…/v1/`` both give ``…/v1/chat/completions``
        # and a query (``?api-version=…``) stays where it was.
        return url.copy_with(path=url.path.rstrip("/") + "/chat/completions")

    async def _consume(self, response: httpx.Response, on_text: TextSink | None) -> ModelReply:
        import httpx

        step = _Step(on_text)
        events = _EventStream()
        # The body's start, kept until the first event: an answer with no event at all (a
        # server that ignored ``stream``, or a proxy's page) is reported with its words.
        head = bytearray()
        seen = False
        try:
            async with _body(response) as pieces:
                done = False
                async for piece in pieces:
                    if not seen and len(head) < _ERROR_BODY_LIMIT:
                        head += piece[: _ERROR_BODY_LIMIT - len(head)]
                    for data in events.feed(piece):
                        seen = True
                        if not step.take(data):
                            done = True
                            break
                    if done:
                        break
                if not done:
                    # No ``[DONE]``: the body's end ends the step, its last event included.
                    for data in events.close():
                        seen = True
                        if not step.take(data):
                            break
            if not seen:
                words = " ".join(_body_words(bytes(head)).split())
                kind = response.headers.get("content-type", "no Content-Type")
                raise _StreamFailed(f"an answer without any event ({kind}): {words or 'empty'}")
        except _StreamFailed as exc:
            raise self._error(
                "MODEL_BAD_RESPONSE", f"the model stream failed: {self._describe(None, str(exc))}"
            ) from None
        except httpx.RequestError as exc:
            detail = _transport_words(exc, self.config.request_timeout)
            raise self._error(
                "MODEL_BAD_RESPONSE", f"the model stream failed: {self._describe(None, detail)}"
            ) from None
        except _Unreadable as exc:
            where = f" in event {self._describe(None, exc.data.decode('utf-8', 'replace'))[:80]!r}"
            raise self._error(
                "MODEL_BAD_RESPONSE",
                f"unreadable model stream: {exc.reason}{where if exc.data else ''}",
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error("MODEL_BAD_RESPONSE", f"unreadable model stream: {exc}") from None
        finally:
            # Cancelled or not, release the HTTP response.
            with anyio.CancelScope(shield=True):
                await response.aclose()
        self.usage.add(step.usage)
        message = ChatMessage(
            role="assistant",
            content="".join(step.text) or None,
            tool_calls=step.calls.result(str(self._steps)),
        )
        return ModelReply(message=message, finish_reason=step.finish, usage=step.usage)

    def _scrub(self, text: str) -> str:
        # A server (or a proxy) may echo the request's headers in its error text.
        return text.replace(self._api_key, "***") if self._api_key else text

    def _describe(self, status: int | None, message: str) -> str:
        # Scrubbed before it is cut: a cut through the key would leave part of it.
        return _describe(status, self._scrub(message))

    def _error(self, code: str, message: str) -> ModelError:
        return ModelError(code, self._scrub(message))


def _body(response: httpx.Response) -> aclosing[AsyncGenerator[bytes, None]]:
    """The response's (decoded) body pieces, closed on leaving the ``async with``, so a read
    stopped early does not leave httpx's generator to the garbage collector."""
    return aclosing(cast("AsyncGenerator[bytes, None]", response.aiter_bytes()))


async def _error_body(response: httpx.Response) -> str:
    """What an error answer says (read up to ``_ERROR_BODY_LIMIT``; the response is closed):
    its JSON ``error`` message, else its text, else the status's reason phrase."""
    import httpx

    raw = bytearray()
    try:
        async with _body(response) as pieces:
            async for piece in pieces:
                raw += piece
                if len(raw) >= _ERROR_BODY_LIMIT:
                    break
    except httpx.RequestError:
        pass  # a body that breaks off: what arrived (or the status alone) says enough
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()
    words = _body_words(bytes(raw[:_ERROR_BODY_LIMIT])).strip()
    return words or response.reason_phrase or "no explanation"


def _describe(status: int | None, message: str) -> str:
    """``HTTP {status}: {message}`` (or the message alone), on one line and bounded: a server
    may answer an error with a whole HTML page."""
    message = " ".join(message.split())
    if len(message) > _MESSAGE_LIMIT:
        message = message[:_MESSAGE_LIMIT] + "…"
    return f"HTTP {status}: {message}" if status is not None else message
