"""The model client: OpenAI-compatible Chat Completions through the official ``openai`` SDK.

One request per model step, always streamed (``stream=True`` with usage in the last chunk).
Text deltas are reported as they arrive; tool-call deltas are assembled by their ``index``
(a step may hold several parallel calls whose fragments interleave). The SDK's own retries
are off (``max_retries=0``): this module's policy retries 429, 5xx and connection failures
that happen before the first chunk, with capped exponential backoff and full jitter, and
waits what ``Retry-After`` says when the server says it. Cancelling the calling task closes
the stream (the HTTP response is released in a shielded ``finally``).

The API key is held by the SDK client only: it is never part of a message, an event, a
``repr`` or an error text.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import anyio
import msgspec

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

INSTALL_HINT = "the agent needs the openai package: pip install 'codemode[agent]'"

# Reported for each streamed text fragment (the model's visible answer).
TextSink = Callable[[str], None]


class ModelError(Exception):
    """The model could not be asked: unreachable server, bad key, refused request, or retries
    exhausted. ``code`` is stable: ``MODEL_UNREACHABLE``, ``MODEL_AUTH``, ``MODEL_HTTP``,
    ``MODEL_RETRIES_EXHAUSTED``, ``MODEL_NOT_INSTALLED``, ``MODEL_BAD_RESPONSE``."""

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
    # Seconds a request may take to connect / between bytes (the SDK's httpx timeout).
    request_timeout: float = 600.0


def _retry_after(response: Any) -> float | None:
    if response is None:
        return None
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        import datetime

        when = parsedate_to_datetime(value)
        return (when - datetime.datetime.now(when.tzinfo)).total_seconds()
    except (TypeError, ValueError):
        return None


class _Assembly:
    """Tool-call fragments of one streamed step, keyed by the delta's ``index``."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}

    def feed(self, delta: Any) -> None:
        raw_index = getattr(delta, "index", None)
        if isinstance(raw_index, int):
            index = raw_index
        else:
            # A server that omits ``index``: a new id opens a new call, else the last one.
            last = max(self.calls, default=-1)
            new_id = getattr(delta, "id", None)
            opens = last < 0 or (new_id and self.calls[last]["id"] not in ("", new_id))
            index = last + 1 if opens else last
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if getattr(delta, "id", None):
            slot["id"] = str(delta.id)
        function = getattr(delta, "function", None)
        if function is not None:
            if getattr(function, "name", None):
                # Some servers resend the name on every fragment, others split it.
                name = str(function.name)
                slot["name"] = name if slot["name"] in ("", name) else slot["name"] + name
            if getattr(function, "arguments", None):
                slot["arguments"] += str(function.arguments)

    def result(self, step_key: str) -> tuple[ModelToolCallRequest, ...]:
        out = []
        for index in sorted(self.calls):
            slot = self.calls[index]
            call_id = slot["id"] or f"call_{step_key}_{index}"
            out.append(ModelToolCallRequest(call_id, slot["name"], slot["arguments"]))
        return tuple(out)


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
        self._client: Any = None
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
        try:
            import openai
        except ImportError:
            raise ModelError("MODEL_NOT_INSTALLED", INSTALL_HINT) from None
        self._client = openai.AsyncOpenAI(
            base_url=self.config.base_url,
            # The SDK insists on a key; keyless local servers ignore this placeholder.
            api_key=self._api_key or "no-key",
            max_retries=0,
            timeout=self.config.request_timeout,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.close()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]],
        *,
        on_text: TextSink | None = None,
    ) -> ModelReply:
        """One streamed model step over ``messages`` offering ``tools`` (wire form)."""
        import openai

        if self._client is None:
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
        policy = self.config.retry
        attempt = 0
        while True:
            try:
                stream = await self._client.chat.completions.create(**request)
            except openai.AuthenticationError:
                raise ModelError(
                    "MODEL_AUTH",
                    f"the model server at {self.config.base_url} refused the API key "
                    f"(HTTP 401); check {self._key_source}",
                ) from None
            except openai.PermissionDeniedError:
                raise ModelError(
                    "MODEL_AUTH",
                    f"the model server at {self.config.base_url} denied access (HTTP 403); "
                    f"check {self._key_source} and the model name {self.config.model!r}",
                ) from None
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                retryable = status is None or status == 429 or status >= 500
                if not retryable:
                    raise ModelError(
                        "MODEL_HTTP",
                        f"the model server refused the request: {self._describe(exc)}",
                    ) from None
                attempt += 1
                if attempt > policy.max_retries:
                    if status is None:
                        raise ModelError(
                            "MODEL_UNREACHABLE",
                            f"cannot reach the model server at {self.config.base_url} "
                            f"({policy.max_retries} retries): {self._describe(exc)}",
                        ) from None
                    raise ModelError(
                        "MODEL_RETRIES_EXHAUSTED",
                        f"the model server kept failing after {policy.max_retries} retries: "
                        f"{self._describe(exc)}",
                    ) from None
                await anyio.sleep(
                    policy.delay(attempt, _retry_after(getattr(exc, "response", None)))
                )
                continue
            return await self._consume(stream, on_text)

    async def _consume(self, stream: Any, on_text: TextSink | None) -> ModelReply:
        import openai

        text: list[str] = []
        calls = _Assembly()
        finish: str | None = None
        usage = Usage(requests=1)
        try:
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    u = chunk.usage
                    usage.prompt_tokens = int(u.prompt_tokens or 0)
                    usage.completion_tokens = int(u.completion_tokens or 0)
                    usage.total_tokens = int(u.total_tokens or 0)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        if on_text is not None:
                            on_text(delta.content)
                    for tc in (delta.tool_calls if delta is not None else None) or ():
                        calls.feed(tc)
                    if choice.finish_reason:
                        finish = str(choice.finish_reason)
        except openai.APIError as exc:
            raise ModelError(
                "MODEL_BAD_RESPONSE", f"the model stream failed: {self._describe(exc)}"
            ) from None
        except (ValueError, KeyError) as exc:
            raise ModelError("MODEL_BAD_RESPONSE", f"unreadable model stream: {exc}") from None
        finally:
            # Cancelled or not, release the HTTP response.
            with anyio.CancelScope(shield=True):
                await stream.close()
        self.usage.add(usage)
        message = ChatMessage(
            role="assistant",
            content="".join(text) or None,
            tool_calls=calls.result(str(self._steps)),
        )
        return ModelReply(message=message, finish_reason=finish, usage=usage)

    def _describe(self, exc: Exception) -> str:
        # A server (or a proxy) may echo the request's headers in its error text.
        text = _describe(exc)
        return text.replace(self._api_key, "***") if self._api_key else text


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", "") or exc)
    # Bounded: a server may answer an error with a whole HTML page.
    if len(message) > 300:
        message = message[:300] + "…"
    return f"HTTP {status}: {message}" if status is not None else message
