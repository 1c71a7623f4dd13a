"""Request parsing and response formatting for the LLM handler.

Four request forms, chosen by the ``x-tserve-openai`` header:

* absent: TorchServe style, ``{"prompt": ..., "max_new_tokens": ..., "stream": ...}`` or a
  plain-text prompt; answers ``{"text", "finish_reason", "usage"}``, streams raw text deltas;
* ``completions``: OpenAI ``/v1/completions``; answers a ``text_completion`` object or SSE;
* ``chat.completions``: OpenAI ``/v1/chat/completions``; answers ``chat.completion`` or SSE
  ``chat.completion.chunk`` objects (the first chunk carries ``role: assistant``);
* ``generate``: the Open Inference Protocol's generate extension (``/v2/models/{m}/generate`` and
  ``/generate_stream``), ``{"text_input", "parameters"}``; answers ``{"text_output", "model_name"}``
  or SSE events of those with ``done``; errors ``{"error"}`` (422 for a bad request, as the spec).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ts.llm.engine import LLMRequestError, SamplingParams
from ts.llm.fields import (
    CHAT,
    COMPLETIONS,
    GENERATE,
    STREAM_HINT_HEADER,
    TS,
    bad,
    chat_ids,
    check_fields,
    from_generate,
    header,
    load_body,
    prompt_ids,
    request_kind,
    sampling,
    typed,
)

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"
SSE_TYPE = "text/event-stream"
SSE_DONE = b"data: [DONE]\n\n"

_TS_TYPES = {400: "BadRequestException", 404: "ModelNotFoundException", 409: "ConflictException",
             429: "TooManyRequestsException", 503: "ServiceUnavailableException",
             507: "InsufficientStorageException"}


@dataclass
class LLMEvent:
    """One thing to send for one request: a ``chunk`` (more follow) or its ``final`` answer.

    A status other than 200 makes ``final`` an error body and ``message`` its text. ``headers``
    are extra response headers (``Retry-After`` on a 503).
    """

    request_id: str
    chunk: bytes | None = None
    final: bytes | None = None
    status: int = 200
    content_type: str = JSON_TYPE
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------- one request
class LLMRequest:
    """A parsed request and the formatting of its answers."""

    def __init__(self, request_id: str, kind: str, model: str) -> None:
        self.request_id = request_id
        self.kind = kind
        self.model = model
        self.stream = False
        self.include_usage = False
        self.prompt_ids: list[int] = []
        self.params = SamplingParams()
        self.created = int(time.time())
        self.oai_id = ("chatcmpl-" if kind == CHAT else "cmpl-") + request_id
        self._role_sent = False
        self._text: list[str] = []

    @classmethod
    def parse(cls, request_id: str, body: Any, headers: dict[str, str] | None, *, tokenizer: Any,
              model_name: str, default_max_new_tokens: int, chat_template: str | None = None) -> LLMRequest:
        """Raises LLMRequestError (400) naming the bad field; its ``body`` is then set."""
        kind = TS
        try:
            kind = request_kind(headers)
            obj = load_body(body, kind)
            if kind == GENERATE:
                obj = from_generate(obj)
            check_fields(obj, TS if kind == GENERATE else kind)
            req = cls(request_id, kind, typed(obj, "model", str, "a string") or model_name)
            stream = typed(obj, "stream", bool, "true or false")
            req.stream = stream if stream is not None else header(headers, STREAM_HINT_HEADER) == "true"
            options = typed(obj, "stream_options", dict, "an object")
            if options is not None:
                if set(options) - {"include_usage"}:
                    raise bad("stream_options", f"stream_options: unknown keys {sorted(set(options) - {'include_usage'})}")
                if not req.stream:
                    raise bad("stream_options", "stream_options is only allowed with stream: true")
                req.include_usage = bool(typed(options, "include_usage", bool, "true or false"))
            req.params = sampling(obj, TS if kind == GENERATE else kind, default_max_new_tokens)
            req.prompt_ids = (chat_ids(obj, tokenizer, chat_template) if kind == CHAT
                              else prompt_ids(obj, tokenizer))
            return req
        except LLMRequestError as exc:
            attach_error_body(exc, kind)
            raise

    @property
    def content_type(self) -> str:
        if not self.stream:
            return JSON_TYPE
        return TEXT_TYPE if self.kind == TS else SSE_TYPE

    def _generated(self, text: str, **extra: Any) -> dict[str, Any]:
        """The OIP generate extension's answer (or one streamed event of it)."""
        return {"text_output": text, "model_name": self.model, **extra}

    # ------------------------------------------------------------------ openai objects
    def _usage(self, completion_tokens: int) -> dict[str, int]:
        prompt = len(self.prompt_ids)
        return {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens}

    def _chunk(self, text: str | None, finish_reason: str | None, role: bool = False) -> dict[str, Any]:
        if self.kind == CHAT:
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            obj = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
            obj = "text_completion"
        out = {"id": self.oai_id, "object": obj, "created": self.created, "model": self.model, "choices": [choice]}
        if self.include_usage:
            out["usage"] = None
        return out

    @staticmethod
    def _sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"

    def _content_chunk(self, text: str) -> bytes:
        """The streamed bytes for a text delta ('' for nothing to send)."""
        if self.kind == TS:
            return text.encode("utf-8")
        if self.kind == GENERATE:
            return self._sse(self._generated(text, done=False)) if text else b""
        out = b""
        if self.kind == CHAT and not self._role_sent:
            self._role_sent = True
            out += self._sse(self._chunk("", None, role=True))
        if text:
            out += self._sse(self._chunk(text, None))
        return out

    def _stream_end(self, finish_reason: str, completion_tokens: int) -> bytes:
        if self.kind == TS:
            return b""
        if self.kind == GENERATE:
            return self._sse(self._generated("", done=True, details={"finish_reason": finish_reason}))
        out = self._sse(self._chunk(None if self.kind == CHAT else "", finish_reason))
        if self.include_usage:
            usage: dict[str, Any] = {"id": self.oai_id, "object": "chat.completion.chunk" if self.kind == CHAT else "text_completion",
                     "created": self.created, "model": self.model, "choices": [],
                     "usage": self._usage(completion_tokens)}
            out += self._sse(usage)
        return out + SSE_DONE

    def _complete_body(self, text: str, finish_reason: str, completion_tokens: int) -> bytes:
        usage = self._usage(completion_tokens)
        if self.kind == TS:
            obj: dict[str, Any] = {"text": text, "finish_reason": finish_reason, "usage": usage}
        elif self.kind == GENERATE:
            obj = self._generated(text, details={"finish_reason": finish_reason, **usage})
        elif self.kind == COMPLETIONS:
            obj = {"id": self.oai_id, "object": "text_completion", "created": self.created, "model": self.model,
                   "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
                   "usage": usage}
        else:
            obj = {"id": self.oai_id, "object": "chat.completion", "created": self.created, "model": self.model,
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                "logprobs": None, "finish_reason": finish_reason}],
                   "usage": usage}
        return json.dumps(obj, ensure_ascii=False).encode("utf-8")

    # ------------------------------------------------------------------ answers
    def on_update(self, text_delta: str, finished: bool, finish_reason: str | None,
                  completion_tokens: int) -> list[LLMEvent]:
        """The events for one engine update: a chunk when streaming, the final when finished."""
        ct = self.content_type
        if not finished:
            if not self.stream:
                self._text.append(text_delta)
                return []
            data = self._content_chunk(text_delta)
            return [LLMEvent(self.request_id, chunk=data, content_type=ct)] if data else []
        reason = finish_reason or "stop"
        if self.stream:
            final = self._content_chunk(text_delta) + self._stream_end(reason, completion_tokens)
        else:
            self._text.append(text_delta)
            final = self._complete_body("".join(self._text), reason, completion_tokens)
        return [LLMEvent(self.request_id, final=final, content_type=ct)]

    def whole_answer(self, text: str, finish_reason: str, completion_tokens: int) -> bytes:
        """The complete answer in one body (the plain batch path): a stream's chunks concatenated."""
        if not self.stream:
            return self._complete_body(text, finish_reason, completion_tokens)
        return self._content_chunk(text) + self._stream_end(finish_reason, completion_tokens)


def attach_error_body(exc: LLMRequestError, kind: str) -> LLMRequestError:
    """Give the error the body its request form expects (``exc.body``, ``exc.content_type``)."""
    if kind in (COMPLETIONS, CHAT):
        obj = exc.to_openai()
    elif kind == GENERATE:  # the spec's error body; a bad request is its 422 (input validation error)
        if exc.status == 400:
            exc.status = exc.error_code = 422
        obj = {"error": exc.message}
    else:
        obj = {"code": exc.status, "type": _TS_TYPES.get(exc.status, "InternalServerException"),
               "message": exc.message}
    exc.body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    exc.content_type = JSON_TYPE
    return exc


def error_event(request_id: str, exc: LLMRequestError, kind: str | None = None) -> LLMEvent:
    """The final event for a refused or failed request."""
    if kind is not None or getattr(exc, "body", None) is None:
        attach_error_body(exc, kind or TS)
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
    return LLMEvent(request_id, final=exc.body, status=exc.status, content_type=exc.content_type,
                    message=exc.message, headers=headers)
