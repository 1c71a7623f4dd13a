"""The engine's inputs and outputs: per-request sampling settings, what a step produces, the
error a refused request carries (an HTTP status and OpenAI's error fields)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from ts.utils.util import PredictionException


class LLMRequestError(PredictionException):
    """A request the engine refuses: ``status`` is the HTTP status, ``message`` names the limit.

    ``param`` is the offending request field (OpenAI's ``error.param``), ``code`` a short
    machine-readable reason, ``retry_after`` seconds for a 429/503 (the Retry-After header).
    """

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message, status)
        self.status = status
        self.param = param
        self.code = code
        self.retry_after = retry_after
        self.body: bytes | None = None  # the error body for the client, set by the request's form
        self.content_type = "application/json"

    def __str__(self) -> str:  # the message alone (PredictionException appends the status)
        return self.message

    @property
    def error_type(self) -> str:
        if self.status == 429:
            return "rate_limit_error"
        return "invalid_request_error" if self.status < 500 else "server_error"

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.error_type,
                          "param": self.param, "code": self.code}}


def _bad(param: str, message: str) -> LLMRequestError:
    return LLMRequestError(400, message, param=param, code="invalid_value")


MAX_LOGPROBS = 20  # OpenAI's top_logprobs limit


def _token_biases(value: Any) -> dict[int, float]:
    """``logit_bias`` as ``{token id: bias}``; JSON gives the ids as strings (OpenAI's form)."""
    if not isinstance(value, dict):
        raise _bad("logit_bias", f"logit_bias must be an object of token id -> bias, got {value!r}")
    out: dict[int, float] = {}
    for key, bias in value.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise _bad("logit_bias", f"logit_bias: {key!r} is not a token id") from None
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise _bad("logit_bias", f"logit_bias[{key}] must be a number between -100 and 100, got {bias!r}")
        out[token] = float(bias)
    return out


@dataclass
class SamplingParams:
    """Per-request generation settings. ``temperature`` 0 is greedy; ``top_k`` 0 and ``top_p`` 1
    turn those filters off; ``seed`` makes sampling reproducible; ``stop`` strings end the
    output (and are cut from it); EOS ends it unless ``ignore_eos``."""

    max_new_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    # logits processors (ts/llm/engine/sampling.py), OpenAI's / vLLM's semantics
    presence_penalty: float = 0.0      # subtracted once from every token already generated
    frequency_penalty: float = 0.0     # subtracted per occurrence in the output
    repetition_penalty: float = 1.0    # divides positive (multiplies negative) logits of prompt + output tokens
    min_p: float = 0.0                 # drop tokens less likely than min_p x the most likely one
    min_tokens: int = 0                # EOS and stop_token_ids are masked until this many tokens
    stop_token_ids: list[int] = field(default_factory=list)
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: int | None = None        # None: off; k: the chosen token's log-probability and the k most likely
    grammar: str | None = None         # structured output: an llguidance grammar (ts/llm/api/structured.py)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SamplingParams:
        """Build from a request's fields; an unknown field is a 400 naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise LLMRequestError(400, f"unknown sampling parameter {key!r}; known: "
                                      f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
        params = cls(**{k: v for k, v in values.items() if v is not None})
        params.validate()
        return params

    def validate(self) -> None:
        def number(name: str, value: Any, kind: type) -> None:
            ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
            if not ok or (isinstance(value, float) and not math.isfinite(value)):
                raise _bad(name, f"{name} must be {'a number' if kind is float else 'an integer'}, got {value!r}")

        number("max_new_tokens", self.max_new_tokens, int)
        if self.max_new_tokens < 1:
            raise _bad("max_new_tokens", f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        number("temperature", self.temperature, float)
        if self.temperature < 0:
            raise _bad("temperature", f"temperature must be >= 0, got {self.temperature}")
        number("top_p", self.top_p, float)
        if not 0 < self.top_p <= 1:
            raise _bad("top_p", f"top_p must be in (0, 1], got {self.top_p}")
        number("top_k", self.top_k, int)
        if self.top_k < 0:
            raise _bad("top_k", f"top_k must be >= 0 (0 turns it off), got {self.top_k}")
        if self.seed is not None:
            number("seed", self.seed, int)
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop):
            raise _bad("stop", f"stop must be a string or a list of non-empty strings, got {self.stop!r}")
        if not isinstance(self.ignore_eos, bool):
            raise _bad("ignore_eos", f"ignore_eos must be true or false, got {self.ignore_eos!r}")
        for name in ("presence_penalty", "frequency_penalty"):
            number(name, getattr(self, name), float)
            if not -2 <= getattr(self, name) <= 2:
                raise _bad(name, f"{name} must be between -2 and 2, got {getattr(self, name)}")
        number("repetition_penalty", self.repetition_penalty, float)
        if self.repetition_penalty <= 0:
            raise _bad("repetition_penalty", f"repetition_penalty must be > 0 (1 turns it off), "
                       f"got {self.repetition_penalty}")
        number("min_p", self.min_p, float)
        if not 0 <= self.min_p <= 1:
            raise _bad("min_p", f"min_p must be in [0, 1], got {self.min_p}")
        number("min_tokens", self.min_tokens, int)
        if not 0 <= self.min_tokens <= self.max_new_tokens:
            raise _bad("min_tokens", f"min_tokens must be between 0 and max_tokens ({self.max_new_tokens}), "
                       f"got {self.min_tokens}")
        if not isinstance(self.stop_token_ids, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.stop_token_ids):
            raise _bad("stop_token_ids", f"stop_token_ids must be a list of token ids, got {self.stop_token_ids!r}")
        self.logit_bias = _token_biases(self.logit_bias)
        if self.logprobs is not None:
            number("logprobs", self.logprobs, int)
            if not 0 <= self.logprobs <= MAX_LOGPROBS:
                raise _bad("logprobs", f"top log-probabilities must be between 0 and {MAX_LOGPROBS}, "
                           f"got {self.logprobs}")

    def token_ids_in(self, vocab_size: int) -> list[int]:
        """Token ids this request names (stop_token_ids, logit_bias) outside ``[0, vocab_size)``."""
        return [t for t in (*self.stop_token_ids, *self.logit_bias) if not 0 <= t < vocab_size]

    @property
    def penalised(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class SequenceUpdate:
    """What one step produced for one sequence."""

    seq_id: str
    new_token_ids: list[int]
    text_delta: str
    finished: bool
    finish_reason: str | None  # 'stop' | 'length' | 'cancelled' when finished
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[TokenLogprob] | None = None  # one per new token when the request asked
    # the engine process (``engine_process.py``) refused the request after ``add_all`` returned:
    # the whole request ends with this error (in process, ``add_all`` raises it instead)
    error: LLMRequestError | None = None


@dataclass
class TokenLogprob:
    """A sampled token's log-probability under the model (log_softmax of its raw logits) and the
    ``top`` most likely tokens' ``(id, logprob)``, most likely first."""

    token: int
    logprob: float
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class GenerationResult:
    """A finished sequence (``generate_all``); ``error`` is set instead when ``add`` refused it."""

    seq_id: str
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: LLMRequestError | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)
