"""Request parsing and response formatting for the LLM handler.

Three request forms, chosen by the ``x-tserve-openai`` header:

* absent: TorchServe style, ``{"prompt": ..., "max_new_tokens": ..., "stream": ...}`` or a
  plain-text prompt; answers ``{"text", "finish_reason", "usage"}``, streams raw text deltas;
* ``completions``: OpenAI ``/v1/completions``; answers a ``text_completion`` object or SSE;
* ``chat.completions``: OpenAI ``/v1/chat/completions``; answers ``chat.completion`` or SSE
  ``chat.completion.chunk`` objects (the first chunk carries ``role: assistant``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ts.llm.engine import LLMRequestError, SamplingParams

OPENAI_HEADER = "x-tserve-openai"
TS, COMPLETIONS, CHAT = "torchserve", "completions", "chat.completions"
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


def _bad(param: str | None, message: str, code: str = "invalid_value") -> LLMRequestError:
    return LLMRequestError(400, message, param=param, code=code)


# ---------------------------------------------------------------------- request fields
# Accepted OpenAI fields that tserve does not implement: only these values pass.
_DEFAULT_ONLY: dict[str, tuple[Any, ...]] = {
    "n": (1,), "best_of": (1,), "echo": (False,), "suffix": ("",), "logprobs": (False, 0),
    "top_logprobs": (0,), "frequency_penalty": (0,), "presence_penalty": (0,), "logit_bias": ({},),
    "response_format": ({"type": "text"},), "tools": ([],), "tool_choice": ("none",),
}
_IGNORED = {"user", "store", "metadata", "service_tier", "parallel_tool_calls"}
_SAMPLING = {"temperature", "top_p", "top_k", "seed", "stop", "ignore_eos"}
_FIELDS = {
    TS: {"prompt", "max_new_tokens", "stream"} | _SAMPLING,
    COMPLETIONS: {"model", "prompt", "max_tokens", "stream", "stream_options", "n", "best_of", "echo",
                  "suffix", "logprobs", "frequency_penalty", "presence_penalty", "logit_bias"} | _SAMPLING | _IGNORED,
    CHAT: {"model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options", "n",
           "logprobs", "top_logprobs", "frequency_penalty", "presence_penalty", "logit_bias",
           "response_format", "tools", "tool_choice"} | _SAMPLING | _IGNORED,
}
_CHAT_ROLES = {"system", "developer", "user", "assistant", "tool"}


def request_kind(headers: dict[str, str] | None) -> str:
    value = next((v for k, v in (headers or {}).items() if k.lower() == OPENAI_HEADER), None)
    if value in (None, ""):
        return TS
    value = str(value).strip().lower()
    if value not in (COMPLETIONS, CHAT):
        raise _bad(None, f"header {OPENAI_HEADER}: {value!r} is neither 'completions' nor 'chat.completions'")
    return value


def _load(body: Any, kind: str) -> dict[str, Any]:
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(None, "the request body is not UTF-8") from None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            if kind != TS:
                raise _bad(None, "the request body is not valid JSON") from None
            return {"prompt": body}  # TorchServe style: a plain-text prompt
        if isinstance(body, str) and kind == TS:
            return {"prompt": body}
    if not isinstance(body, dict):
        raise _bad(None, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _check_fields(obj: dict[str, Any], kind: str) -> None:
    known = _FIELDS[kind]
    for key, value in obj.items():
        if key not in known:
            raise LLMRequestError(400, f"unknown parameter {key!r}; this endpoint accepts: "
                                  f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
        allowed = _DEFAULT_ONLY.get(key)
        if allowed is not None and value is not None and value not in allowed:
            raise _bad(key, f"{key}={value!r} is not supported by this server (only "
                       f"{' or '.join(json.dumps(a) for a in allowed)})", code="unsupported_value")


def _typed(obj: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, bool) if kind is bool else isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        raise _bad(key, f"{key} must be {what}, got {value!r}")
    return value


def _sampling(obj: dict[str, Any], kind: str, default_max_new_tokens: int) -> SamplingParams:
    if kind == TS:
        max_new = obj.get("max_new_tokens")
        names = {}
    else:
        max_new = obj.get("max_completion_tokens", obj.get("max_tokens"))
        names = {"max_new_tokens": "max_completion_tokens" if obj.get("max_completion_tokens") is not None
                 else "max_tokens"}
        temp = obj.get("temperature")
        if isinstance(temp, (int, float)) and not isinstance(temp, bool) and temp > 2:
            raise _bad("temperature", f"temperature must be between 0 and 2, got {temp}")
    values = {k: obj[k] for k in _SAMPLING if obj.get(k) is not None}
    if kind != TS:  # OpenAI's defaults: sampling at temperature 1
        values.setdefault("temperature", 1.0)
    params = SamplingParams(max_new_tokens=default_max_new_tokens if max_new is None else max_new, **values)
    try:
        params.validate()
    except LLMRequestError as exc:
        name = names.get(exc.param or "", exc.param)
        if name != exc.param:
            exc.message = exc.message.replace(exc.param or "", name or "")
            exc.args = (exc.message,)
            exc.param = name
        raise
    return params


def _prompt_ids(obj: dict[str, Any], tokenizer: Any) -> list[int]:
    prompt = obj.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # OpenAI's batch form with one prompt
    if isinstance(prompt, str):
        if not prompt:
            raise _bad("prompt", "prompt is empty")
        return list(tokenizer(prompt)["input_ids"])
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) > 1:
        raise _bad("prompt", f"one prompt per request: got a list of {len(prompt)} prompts")
    raise _bad("prompt", "prompt must be a non-empty string or a list of token ids"
               if prompt is not None else "prompt is required")


def _chat_text(message: Any, index: int) -> dict[str, str]:
    if not isinstance(message, dict):
        raise _bad("messages", f"messages[{index}] must be an object with role and content")
    role, content = message.get("role"), message.get("content")
    if role not in _CHAT_ROLES:
        raise _bad("messages", f"messages[{index}].role must be one of {', '.join(sorted(_CHAT_ROLES))}, got {role!r}")
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad("messages", f"messages[{index}].content: only text parts are supported")
            parts.append(part["text"])
        content = "".join(parts)
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise _bad("messages", f"messages[{index}].content must be a string or a list of text parts")
    return {"role": role, "content": content}


def _chat_ids(obj: dict[str, Any], tokenizer: Any, chat_template: str | None) -> list[int]:
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages", "messages must be a non-empty list" if messages is not None else "messages is required")
    messages = [_chat_text(m, i) for i, m in enumerate(messages)]
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if not template:
        raise _bad("messages", "this model has no chat template: its tokenizer has none and model-config.yaml "
                   "sets no handler.chat_template", code="no_chat_template")
    try:
        text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                             add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - a template error is about these messages
        raise _bad("messages", f"the chat template failed on these messages: {exc}") from None
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


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
            obj = _load(body, kind)
            _check_fields(obj, kind)
            req = cls(request_id, kind, _typed(obj, "model", str, "a string") or model_name)
            req.stream = bool(_typed(obj, "stream", bool, "true or false"))
            options = _typed(obj, "stream_options", dict, "an object")
            if options is not None:
                if set(options) - {"include_usage"}:
                    raise _bad("stream_options", f"stream_options: unknown keys {sorted(set(options) - {'include_usage'})}")
                if not req.stream:
                    raise _bad("stream_options", "stream_options is only allowed with stream: true")
                req.include_usage = bool(_typed(options, "include_usage", bool, "true or false"))
            req.params = _sampling(obj, kind, default_max_new_tokens)
            req.prompt_ids = (_chat_ids(obj, tokenizer, chat_template) if kind == CHAT
                              else _prompt_ids(obj, tokenizer))
            return req
        except LLMRequestError as exc:
            attach_error_body(exc, kind)
            raise

    @property
    def content_type(self) -> str:
        if not self.stream:
            return JSON_TYPE
        return TEXT_TYPE if self.kind == TS else SSE_TYPE

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
        out = self._sse(self._chunk(None if self.kind == CHAT else "", finish_reason))
        if self.include_usage:
            usage = {"id": self.oai_id, "object": "chat.completion.chunk" if self.kind == CHAT else "text_completion",
                     "created": self.created, "model": self.model, "choices": [],
                     "usage": self._usage(completion_tokens)}
            out += self._sse(usage)
        return out + SSE_DONE

    def _complete_body(self, text: str, finish_reason: str, completion_tokens: int) -> bytes:
        usage = self._usage(completion_tokens)
        if self.kind == TS:
            obj: dict[str, Any] = {"text": text, "finish_reason": finish_reason, "usage": usage}
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
