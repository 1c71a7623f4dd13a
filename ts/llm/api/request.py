"""What every LLM request form shares: ``LLMRequest``, a parsed request and the events of its
answer (one choice per engine sequence, the answer final when every choice has finished), and
``LLMEvent``, one thing to send. Each form is a subclass (``forms.py`` picks it from the
``x-tserve-openai`` header): ``torchserve.TorchServeRequest``, ``torchserve.GenerateRequest``,
``openai.CompletionsRequest``, ``openai.ChatRequest``; each declares the fields it accepts,
reads them, and formats its chunks, answers and errors.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ts.llm.api.fields import STREAM_HINT_HEADER, TS, bad, check_fields, header, load_body, typed, warn_ignored
from ts.llm.params import GenerationResult, LLMRequestError, SamplingParams, SequenceUpdate, TokenLogprob

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"
SSE_TYPE = "text/event-stream"
SSE_DONE = b"data: [DONE]\n\n"
REASON_LIMIT = 512  # characters of an error message that go in the HTTP reason phrase

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


@dataclass(frozen=True)
class RequestLimits:
    """What the serving engine can ever take, checked while parsing (before a giant request costs
    the worker anything): ``max_prompt_chars``, a prompt text's characters (a longer one cannot
    fit the context: refused untokenized); ``max_sequences``, the sequences of one request
    (prompts x best_of), named by ``sequences_limit`` in the error, or with ``per_prompt`` those
    of each of its prompts (an engine that queues a request's prompts apart: vLLM). None: unchecked."""

    max_prompt_chars: int | None = None
    max_sequences: int | None = None
    sequences_limit: str = ""
    per_prompt: bool = False


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
    """A parsed request of one form and the formatting of its answers; see the module docstring.
    A subclass declares ``kind``, ``FIELDS`` and reads its own fields in ``_read``; the answer's
    pieces are ``_content_chunk``, ``_choice_end``, ``_stream_end`` and ``_answer``."""

    kind: ClassVar[str] = TS
    FIELDS: ClassVar[frozenset[str]] = frozenset()
    PLAIN_TEXT_PROMPT: ClassVar[bool] = False  # a body that is not a JSON object is the prompt
    ALWAYS_STRICT: ClassVar[bool] = False      # an unknown field is refused even without strict_fields
    VLLM_ONLY: ClassVar[frozenset[str]] = frozenset()  # vLLM's fields of this form that tserve does not implement
    STREAM_TYPE: ClassVar[str] = SSE_TYPE

    def __init__(self, request_id: str, model: str, tokenizer: Any = None) -> None:
        self.request_id = request_id
        self.model = model
        self.tokenizer = tokenizer
        self.stream = False
        self.include_usage = False
        self.prompts: list[list[int]] = [[]]
        self.params = SamplingParams()
        self.n = self.best_of = 1
        self.report_logprobs = False  # the client asked (best_of alone turns them on internally)
        self.created = int(time.time())
        self.choices: dict[str, Choice] = {}
        self.streamed = False  # a chunk went out: an error now ends the stream as one more event
        self.limits = RequestLimits()

    @property
    def prompt_ids(self) -> list[int]:
        return self.prompts[0]

    # ------------------------------------------------------------------ parsing
    @classmethod
    def parse(cls, request_id: str, body: Any, headers: dict[str, str] | None, *, tokenizer: Any,
              model_name: str, default_max_new_tokens: int, chat_template: str | None = None,
              strict: bool = True, ignore_vllm_fields: bool = False,
              limits: RequestLimits | None = None) -> LLMRequest:
        """Raises LLMRequestError (400) naming the bad field; its ``body`` is then set. The
        answers name ``model_name`` (the model that serves them), whatever the body's ``model``.
        vLLM's fields that tserve does not implement are refused unless ``ignore_vllm_fields``;
        ``limits``: what the engine can ever take."""
        try:
            obj = cls._body(load_body(body, cls.PLAIN_TEXT_PROMPT))
            refused = frozenset() if ignore_vllm_fields else cls.VLLM_ONLY
            warn_ignored(model_name, request_id, check_fields(obj, cls.FIELDS, strict or cls.ALWAYS_STRICT, refused))
            typed(obj, "model", str, "a string")
            req = cls(request_id, model_name, tokenizer)
            req.limits = limits or RequestLimits()
            stream = typed(obj, "stream", bool, "true or false")
            req.stream = stream if stream is not None else header(headers, STREAM_HINT_HEADER) == "true"
            req._read(obj, default_max_new_tokens, chat_template)
            req._check_sequences()
            req._make_choices()
            return req
        except LLMRequestError as exc:
            cls.attach_error_body(exc)
            raise

    @classmethod
    def _body(cls, obj: dict[str, Any]) -> dict[str, Any]:
        """The body as this form's fields (the generate form maps its own onto them)."""
        return obj

    def _read(self, obj: dict[str, Any], default_max_new_tokens: int, chat_template: str | None) -> None:
        """This form's fields: ``params``, ``prompts``, ``n`` / ``best_of`` and its own options."""
        raise NotImplementedError

    def _check_sequences(self) -> None:
        """More sequences than the engine ever holds can never be scheduled: a 400 (not a 503 the
        client retries forever), before a choice is made for each."""
        most = self.limits.max_sequences
        prompts = 1 if self.limits.per_prompt else len(self.prompts)
        sequences = prompts * self.best_of
        if most is not None and sequences > most:
            param = "prompt" if prompts > 1 else "n"
            what = f"{prompts} prompts x n / best_of {self.best_of}" if prompts > 1 else f"n / best_of {self.best_of}"
            raise bad(param, f"{sequences} sequences ({what}) can never be scheduled: the engine holds at most "
                      f"{self.limits.sequences_limit or most}: ask for fewer")

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

    # ------------------------------------------------------------------ answers
    @property
    def content_type(self) -> str:
        return self.STREAM_TYPE if self.stream else JSON_TYPE

    def _usage(self) -> dict[str, int]:
        prompt = sum(len(p) for p in self.prompts)
        completion = sum(c.completion_tokens for c in self.choices.values())
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    @staticmethod
    def _sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"

    def _content_chunk(self, choice: Choice, text: str, logprobs: list[TokenLogprob] | None) -> bytes:
        """The streamed bytes for a text delta (b'' for nothing to send)."""
        raise NotImplementedError

    def _choice_end(self, choice: Choice) -> bytes:
        """The streamed bytes that end one choice."""
        return b""

    def _stream_end(self) -> bytes:
        """The streamed bytes that end the answer."""
        return b""

    def _answer(self) -> dict[str, Any]:
        """The whole answer of a request that does not stream."""
        raise NotImplementedError

    def _holds_text(self) -> bool:
        """Whether a stream holds a choice's text back until it ends (a chat's tool calls)."""
        return False

    def _held_choice_start(self, choice: Choice) -> bytes:
        return b""

    def _held_choice_end(self, choice: Choice) -> bytes:
        return b""

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
                body = json.dumps(self._answer(), ensure_ascii=False).encode("utf-8")
                return [LLMEvent(self.request_id, final=body, content_type=ct)]
            return []
        held = self._holds_text()
        if held:
            choice.pieces.append(update.text_delta)
            data = self._held_choice_start(choice)
        else:
            data = self._content_chunk(choice, update.text_delta, new_lps)
        if update.finished:
            data += self._held_choice_end(choice) if held else self._choice_end(choice)
            if all(c.finish_reason for c in self.choices.values()):
                return [LLMEvent(self.request_id, final=data + self._stream_end(), content_type=ct)]
        if not data:
            return []
        self.streamed = True
        return [LLMEvent(self.request_id, chunk=data, content_type=ct)]

    def whole_answer(self, results: dict[str, GenerationResult]) -> bytes:
        """The complete answer in one body (the plain batch path): a stream's chunks concatenated."""
        out = b""
        for seq_id, res in results.items():
            update = SequenceUpdate(seq_id, res.token_ids, res.text, True, res.finish_reason or "stop",
                                    res.prompt_tokens, res.completion_tokens, res.logprobs)
            for event in self.on_update(update):
                out += (event.chunk or b"") + (event.final or b"")
        return out

    # ------------------------------------------------------------------ errors
    @classmethod
    def error_object(cls, exc: LLMRequestError) -> dict[str, Any]:
        """The error body this form's clients expect (TorchServe's by default)."""
        return {"code": exc.status, "type": _TS_TYPES.get(exc.status, "InternalServerException"),
                "message": exc.message}

    @classmethod
    def attach_error_body(cls, exc: LLMRequestError) -> LLMRequestError:
        """Give the error the body this form expects (``exc.body``, ``exc.content_type``)."""
        exc.body = json.dumps(cls.error_object(exc), ensure_ascii=False).encode("utf-8")
        exc.content_type = JSON_TYPE
        return exc

    def error_event(self, exc: LLMRequestError) -> LLMEvent:
        """The final event when this request is refused or fails; once an SSE stream started, its
        error is one more event, ``data: {"error": ...}`` (the frontend passes it through)."""
        event = error_event(self.request_id, exc, type(self))
        if self.streamed and self.STREAM_TYPE == SSE_TYPE:
            event.final = self._sse(self.error_object(exc))
            event.content_type = SSE_TYPE
        return event


def error_event(request_id: str, exc: LLMRequestError, form: type[LLMRequest] | None = None) -> LLMEvent:
    """The final event for a refused or failed request, its body in ``form`` (by default the body
    the error already has, else TorchServe's)."""
    if form is not None or exc.body is None:
        (form or LLMRequest).attach_error_body(exc)
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
    # the message is also the HTTP reason phrase: a line, however long the value a message quotes
    reason = exc.message if len(exc.message) <= REASON_LIMIT else exc.message[:REASON_LIMIT - 3] + "..."
    return LLMEvent(request_id, final=exc.body, status=exc.status, content_type=exc.content_type,
                    message=reason.replace("\r", " ").replace("\n", " "), headers=headers)
