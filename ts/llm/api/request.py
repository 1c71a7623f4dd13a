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

from ts.llm.api.fields import (
    CHAT,
    COMPLETIONS,
    GENERATE,
    STREAM_HINT_HEADER,
    TS,
    bad,
    chat_ids,
    check_fields,
    choices,
    from_generate,
    header,
    load_body,
    prompt_ids,
    request_kind,
    sampling,
    typed,
    warn_ignored,
)
from ts.llm.api.logprob_format import chat_logprobs, completion_logprobs
from ts.llm.api.structured import constrains
from ts.llm.api.tools import ToolPolicy, tool_policy
from ts.llm.params import GenerationResult, LLMRequestError, SamplingParams, SequenceUpdate, TokenLogprob

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
@dataclass
class Choice:
    """One sequence of a request: a choice of the answer (``n``, ``best_of``, several prompts)."""

    prompt: int                  # which of the request's prompts
    seq_id: str                  # the engine's sequence
    index: int                   # its index in the answer's choices
    pieces: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    completion_tokens: int = 0
    started: bool = False        # its first streamed chunk went out (chat's role, an echoed prompt)
    text_offset: int = 0         # completions' logprobs text_offset so far


class LLMRequest:
    """A parsed request and the formatting of its answers: one choice per sequence, the answer
    final when every choice has finished."""

    def __init__(self, request_id: str, kind: str, model: str, tokenizer: Any = None) -> None:
        self.request_id = request_id
        self.kind = kind
        self.model = model
        self.tokenizer = tokenizer
        self.stream = False
        self.include_usage = False
        self.prompts: list[list[int]] = [[]]
        self.params = SamplingParams()
        self.n = self.best_of = 1
        self.echo = False
        self.report_logprobs = False  # the client asked (best_of alone turns them on internally)
        self.created = int(time.time())
        self.oai_id = ("chatcmpl-" if kind == CHAT else "cmpl-") + request_id
        self.choices: dict[str, Choice] = {}
        self.tools: ToolPolicy | None = None  # chat with tools (ts/llm/api/tools.py)

    @property
    def prompt_ids(self) -> list[int]:
        return self.prompts[0]

    @classmethod
    def parse(cls, request_id: str, body: Any, headers: dict[str, str] | None, *, tokenizer: Any,
              model_name: str, default_max_new_tokens: int | dict[str, int], chat_template: str | None = None,
              strict: bool = True) -> LLMRequest:
        """Raises LLMRequestError (400) naming the bad field; its ``body`` is then set. The
        answers name ``model_name`` (the model that serves them), whatever the body's ``model``."""
        kind = TS
        try:
            kind = request_kind(headers)
            obj = load_body(body, kind)
            if kind == GENERATE:
                obj = from_generate(obj)
            warn_ignored(model_name, request_id, check_fields(obj, TS if kind == GENERATE else kind, strict))
            typed(obj, "model", str, "a string")
            req = cls(request_id, kind, model_name, tokenizer)
            stream = typed(obj, "stream", bool, "true or false")
            req.stream = stream if stream is not None else header(headers, STREAM_HINT_HEADER) == "true"
            options = typed(obj, "stream_options", dict, "an object")
            if options is not None:
                if set(options) - {"include_usage"}:
                    raise bad("stream_options", f"stream_options: unknown keys {sorted(set(options) - {'include_usage'})}")
                if not req.stream:
                    raise bad("stream_options", "stream_options is only allowed with stream: true")
                req.include_usage = bool(typed(options, "include_usage", bool, "true or false"))
            form = TS if kind == GENERATE else kind
            default = (default_max_new_tokens if isinstance(default_max_new_tokens, int)
                       else default_max_new_tokens[kind])
            if kind == CHAT:  # before sampling(), which compiles response_format's grammar
                req.tools = tool_policy(obj)
                if req.tools is not None and req.tools.forced and constrains(obj.get("response_format")):
                    raise bad("tool_choice", "tool_choice required or a named function constrains the output "
                               "to a call: it cannot be combined with response_format", code="unsupported_value")
            req.params = sampling(obj, form, default)
            req.report_logprobs = req.params.logprobs is not None
            if kind in (COMPLETIONS, CHAT):
                req.n, req.best_of = choices(obj, kind, req.stream)
            req.echo = bool(typed(obj, "echo", bool, "true or false")) if kind == COMPLETIONS else False
            if req.echo and req.report_logprobs:
                raise bad("echo", "echo with logprobs is not supported (the prompt's log-probabilities are not "
                           "computed): drop one of them", code="unsupported_value")
            if req.best_of > req.n and req.params.logprobs is None:
                req.params.logprobs = 0  # best_of ranks the sequences by their cumulative logprob
            if req.tools is not None and req.tools.forced:
                req.params.grammar = req.tools.grammar()
            req.prompts = ([chat_ids(obj, tokenizer, chat_template, req.tools.tools if req.tools else None)]
                           if kind == CHAT else prompt_ids(obj, tokenizer))
            if len(req.prompts) > 1 and kind != COMPLETIONS:
                raise bad("prompt", f"one prompt per request: got a list of {len(req.prompts)} prompts")
            req._make_choices()
            return req
        except LLMRequestError as exc:
            attach_error_body(exc, kind)
            raise

    def _make_choices(self) -> None:
        for p in range(len(self.prompts)):
            for j in range(self.best_of):
                seq_id = self.request_id if p == j == 0 else f"{self.request_id}/{p}.{j}"
                self.choices[seq_id] = Choice(p, seq_id, p * self.n + j)

    def groups(self) -> list[tuple[str, list[int], list[str]]]:
        """``(seq id, prompt ids, fork ids)`` per prompt: the engine prefills each prompt once."""
        out = []
        for p, ids in enumerate(self.prompts):
            seqs = [c.seq_id for c in self.choices.values() if c.prompt == p]
            out.append((seqs[0], ids, seqs[1:]))
        return out

    @property
    def content_type(self) -> str:
        if not self.stream:
            return JSON_TYPE
        return TEXT_TYPE if self.kind == TS else SSE_TYPE

    def _generated(self, text: str, **extra: Any) -> dict[str, Any]:
        """The OIP generate extension's answer (or one streamed event of it)."""
        return {"text_output": text, "model_name": self.model, **extra}

    # ------------------------------------------------------------------ openai objects
    def _usage(self) -> dict[str, int]:
        prompt = sum(len(p) for p in self.prompts)
        completion = sum(c.completion_tokens for c in self.choices.values())
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _echoed(self, choice: Choice) -> str:
        if not self.echo:
            return ""
        return str(self.tokenizer.decode(self.prompts[choice.prompt], skip_special_tokens=True,
                                         clean_up_tokenization_spaces=False))

    def _logprobs(self, choice: Choice, entries: list[TokenLogprob]) -> dict[str, Any] | None:
        if not self.report_logprobs:
            return None
        return (chat_logprobs(self.tokenizer, entries) if self.kind == CHAT
                else completion_logprobs(self.tokenizer, entries, choice))

    def _chunk(self, choice: Choice, text: str | None, finish_reason: str | None, role: bool = False,
               logprobs: list[TokenLogprob] | None = None) -> dict[str, Any]:
        lp = self._logprobs(choice, logprobs) if logprobs else None
        if self.kind == CHAT:
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            item = {"index": choice.index, "delta": delta, "logprobs": lp, "finish_reason": finish_reason}
            obj = "chat.completion.chunk"
        else:
            item = {"index": choice.index, "text": text or "", "logprobs": lp, "finish_reason": finish_reason}
            obj = "text_completion"
        out = {"id": self.oai_id, "object": obj, "created": self.created, "model": self.model, "choices": [item]}
        if self.include_usage:
            out["usage"] = None
        return out

    @staticmethod
    def _sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"

    def _content_chunk(self, choice: Choice, text: str, logprobs: list[TokenLogprob] | None) -> bytes:
        """The streamed bytes for a text delta ('' for nothing to send)."""
        if self.kind == TS:
            return text.encode("utf-8")
        if self.kind == GENERATE:
            return self._sse(self._generated(text, done=False)) if text else b""
        out = b""
        if not choice.started:
            choice.started = True
            if self.kind == CHAT:
                out += self._sse(self._chunk(choice, "", None, role=True))
            text = self._echoed(choice) + text
        if text or (logprobs and self.report_logprobs):
            out += self._sse(self._chunk(choice, text, None, logprobs=logprobs))
        return out

    def _choice_end(self, choice: Choice) -> bytes:
        if self.kind in (TS, GENERATE):
            return b""
        return self._sse(self._chunk(choice, None if self.kind == CHAT else "", choice.finish_reason))

    def _stream_end(self) -> bytes:
        if self.kind == TS:
            return b""
        choice = next(iter(self.choices.values()))
        if self.kind == GENERATE:
            return self._sse(self._generated("", done=True, details={"finish_reason": choice.finish_reason}))
        out = b""
        if self.include_usage:
            usage: dict[str, Any] = {"id": self.oai_id, "object": "chat.completion.chunk" if self.kind == CHAT
                                     else "text_completion", "created": self.created, "model": self.model,
                                     "choices": [], "usage": self._usage()}
            out += self._sse(usage)
        return out + SSE_DONE

    def _returned(self) -> list[Choice]:
        """The answer's choices by index; with ``best_of`` the ``n`` of each prompt with the
        highest cumulative logprob (vLLM's and OpenAI's rule)."""
        if self.best_of == self.n:
            return sorted(self.choices.values(), key=lambda c: c.index)
        out = []
        for p in range(len(self.prompts)):
            mine = [c for c in self.choices.values() if c.prompt == p]
            mine.sort(key=lambda c: -sum(lp.logprob for lp in c.logprobs))
            for rank, c in enumerate(mine[:self.n]):
                c.index = p * self.n + rank
                out.append(c)
        return out

    def _complete_body(self) -> bytes:
        usage = self._usage()
        first = next(iter(self.choices.values()))
        if self.kind == TS:
            obj: dict[str, Any] = {"text": "".join(first.pieces), "finish_reason": first.finish_reason,
                                   "usage": usage}
        elif self.kind == GENERATE:
            obj = self._generated("".join(first.pieces), details={"finish_reason": first.finish_reason, **usage})
        elif self.kind == COMPLETIONS:
            obj = {"id": self.oai_id, "object": "text_completion", "created": self.created, "model": self.model,
                   "choices": [{"index": c.index, "text": self._echoed(c) + "".join(c.pieces),
                                "logprobs": self._logprobs(c, c.logprobs), "finish_reason": c.finish_reason}
                               for c in self._returned()],
                   "usage": usage}
        else:
            obj = {"id": self.oai_id, "object": "chat.completion", "created": self.created, "model": self.model,
                   "choices": [{"index": c.index, **self._message(c), "logprobs": self._logprobs(c, c.logprobs)}
                               for c in self._returned()],
                   "usage": usage}
        return json.dumps(obj, ensure_ascii=False).encode("utf-8")

    def _message(self, choice: Choice) -> dict[str, Any]:
        """A chat choice's ``message`` and ``finish_reason``: its text, or the tool calls the text holds
        (a call cut short by max_tokens stays text, with finish_reason length)."""
        text = "".join(choice.pieces)
        calls = self.tools.calls(text) if self.tools is not None and self.tools.parses_calls else None
        if calls is None:
            return {"message": {"role": "assistant", "content": text}, "finish_reason": choice.finish_reason}
        return {"message": {"role": "assistant", "content": None, "tool_calls": calls},
                "finish_reason": self.tools.finish_reason if self.tools is not None else "tool_calls"}

    def _held_choice_end(self, choice: Choice) -> bytes:
        """A chat stream whose text may be a tool call holds it back (the call is only known whole):
        one delta with the content or the calls (each with its ``index``), then the finish chunk."""
        answer = self._message(choice)
        message = answer["message"]
        chunk = self._chunk(choice, None, None)
        delta = chunk["choices"][0]["delta"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        else:
            delta["content"] = message["content"]
        end = self._chunk(choice, None, answer["finish_reason"])
        return self._sse(chunk) + self._sse(end)

    @property
    def _holds_text(self) -> bool:
        return self.kind == CHAT and self.stream and self.tools is not None and self.tools.parses_calls

    # ------------------------------------------------------------------ answers
    def on_update(self, update: SequenceUpdate) -> list[LLMEvent]:
        """The events for one engine update of one of this request's sequences: a chunk when
        streaming, the final answer when the last of its sequences finished."""
        choice = self.choices[update.seq_id]
        new_lps = update.logprobs or []
        choice.logprobs.extend(new_lps)
        ct = self.content_type
        if update.finished:
            choice.finish_reason = update.finish_reason or "stop"
            choice.completion_tokens = update.completion_tokens
        if not self.stream:
            choice.pieces.append(update.text_delta)
            if all(c.finish_reason for c in self.choices.values()):
                return [LLMEvent(self.request_id, final=self._complete_body(), content_type=ct)]
            return []
        if self._holds_text:
            choice.pieces.append(update.text_delta)
            data = b""
            if not choice.started:
                choice.started = True
                data = self._sse(self._chunk(choice, "", None, role=True))
        else:
            data = self._content_chunk(choice, update.text_delta, new_lps)
        if update.finished:
            data += self._held_choice_end(choice) if self._holds_text else self._choice_end(choice)
            if all(c.finish_reason for c in self.choices.values()):
                return [LLMEvent(self.request_id, final=data + self._stream_end(), content_type=ct)]
        return [LLMEvent(self.request_id, chunk=data, content_type=ct)] if data else []

    def whole_answer(self, results: dict[str, GenerationResult]) -> bytes:
        """The complete answer in one body (the plain batch path): a stream's chunks concatenated."""
        out = b""
        for seq_id, res in results.items():
            update = SequenceUpdate(seq_id, res.token_ids, res.text, True, res.finish_reason or "stop",
                                    res.prompt_tokens, res.completion_tokens, res.logprobs)
            for event in self.on_update(update):
                out += (event.chunk or b"") + (event.final or b"")
        return out


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
