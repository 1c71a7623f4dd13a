"""The engine's inputs and outputs: per-request sampling settings, what a step produces, the
error a refused request carries (an HTTP status and OpenAI's error fields)."""

from __future__ import annotations

import math
from collections.abc import Callable
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


def shown(value: Any, limit: int = 80) -> str:
    """A value for an error message: its repr, shortened (the message is also the HTTP reason
    phrase, and a hostile value may be megabytes long)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 20]}... ({len(text)} characters)"


def _bad(param: str, message: str) -> LLMRequestError:
    return LLMRequestError(400, message, param=param, code="invalid_value")


MAX_LOGPROBS = 20  # OpenAI's top_logprobs limit
SEED_RANGE = (-2**63, 2**63 - 1)
GREEDY_BELOW = 1e-5  # a 64-bit signed integer, as vLLM's seed field

# A setting's check: ``(name, value) -> the value to keep``; a 400 naming the field when bad.
Check = Callable[[str, Any], Any]


def _is_number(value: Any, integer: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def number(rule: str, ok: Callable[[float], bool], integer: bool = False) -> Check:
    """A finite number (an integer when ``integer``) that passes ``ok``; ``rule`` says which."""
    def check(name: str, value: Any) -> Any:
        if not _is_number(value, integer):
            raise _bad(name, f"{name} must be {'an integer' if integer else 'a number'}, got {shown(value)}")
        if not ok(value):
            raise _bad(name, f"{name} must be {rule}, got {shown(value)}")
        if integer:
            return value
        try:
            return float(value)  # an integer given for a number (tensors of Python ints overflow at 64 bits)
        except OverflowError:
            raise _bad(name, f"{name} must be {rule}, got {shown(value)}") from None
    return check


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(name, f"{name} must be true or false, got {shown(value)}")
    return value


def _stop_strings(name: str, value: Any) -> list[str]:
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise _bad(name, f"{name} must be a string or a list of non-empty strings, got {shown(value)}")
    return value


def _token_ids(name: str, value: Any) -> list[int]:
    if not isinstance(value, list) or not all(_is_number(t, True) and t >= 0 for t in value):
        raise _bad(name, f"{name} must be a list of token ids, got {shown(value)}")
    return value


def _token_biases(name: str, value: Any) -> dict[int, float]:
    """``logit_bias`` as ``{token id: bias}``; JSON gives the ids as strings (OpenAI's form)."""
    if not isinstance(value, dict):
        raise _bad(name, f"{name} must be an object of token id -> bias, got {shown(value)}")
    out: dict[int, float] = {}
    for key, bias in value.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise _bad(name, f"{name}: {shown(key)} is not a token id") from None
        if not _is_number(bias, False) or not -100 <= bias <= 100:
            raise _bad(name, f"{name}[{key}] must be a number between -100 and 100, got {shown(bias)}")
        out[token] = float(bias)
    return out


def setting(default: Any, check: Check | None = None, *, request: bool = True, vllm: bool = False) -> Any:
    """A ``SamplingParams`` field: its ``check`` (None: the engine sets it, already checked);
    ``request``: a request may set it by this name (every form); ``vllm``: vllm_handler passes it
    to vLLM's SamplingParams under the same name."""
    factory = (lambda: type(default)()) if isinstance(default, (list, dict)) else None
    metadata = {"check": check, "request": request, "vllm": vllm}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class SamplingParams:
    """Per-request generation settings, each declared with its check (``setting``).
    ``temperature`` 0 is greedy; ``top_k`` 0 and ``top_p`` 1 turn those filters off; ``seed``
    makes sampling reproducible; ``stop`` strings end the output (and are cut from it); EOS ends
    it unless ``ignore_eos``."""

    max_new_tokens: int = setting(16, number("at least 1", lambda v: v >= 1, integer=True), request=False)
    temperature: float = setting(0.0, number(">= 0", lambda v: v >= 0), vllm=True)
    top_p: float = setting(1.0, number("in (0, 1]", lambda v: 0 < v <= 1), vllm=True)
    top_k: int = setting(0, number(">= 0 (0 turns it off)", lambda v: v >= 0, integer=True))
    seed: int | None = setting(None, number(f"between {SEED_RANGE[0]} and {SEED_RANGE[1]} (64 bits)",
                                            lambda v: SEED_RANGE[0] <= v <= SEED_RANGE[1], integer=True),
                               vllm=True)
    stop: list[str] = setting([], _stop_strings)
    ignore_eos: bool = setting(False, flag, vllm=True)
    # logits processors (ts/llm/engine/sampling.py), OpenAI's / vLLM's semantics
    # subtracted once from every token already generated
    presence_penalty: float = setting(0.0, number("between -2 and 2", lambda v: -2 <= v <= 2), vllm=True)
    # subtracted per occurrence in the output
    frequency_penalty: float = setting(0.0, number("between -2 and 2", lambda v: -2 <= v <= 2), vllm=True)
    # divides positive (multiplies negative) logits of prompt + output tokens
    repetition_penalty: float = setting(1.0, number("> 0 (1 turns it off)", lambda v: v > 0), vllm=True)
    # drop tokens less likely than min_p x the most likely one
    min_p: float = setting(0.0, number("in [0, 1]", lambda v: 0 <= v <= 1), vllm=True)
    # EOS and stop_token_ids are masked until this many tokens (at most max_new_tokens: validate)
    min_tokens: int = setting(0, number(">= 0", lambda v: v >= 0, integer=True), vllm=True)
    stop_token_ids: list[int] = setting([], _token_ids)
    logit_bias: dict[int, float] = setting({}, _token_biases)
    # vLLM's text settings (ts/llm/engine/text.py): keep the stop string (or stop token's text) in the output;
    # decode special tokens too
    include_stop_str_in_output: bool = setting(False, flag, vllm=True)
    skip_special_tokens: bool = setting(True, flag, vllm=True)
    # None: off; k: the chosen token's log-probability and the k most likely
    logprobs: int | None = setting(None, number(f"between 0 and {MAX_LOGPROBS}", lambda v: 0 <= v <= MAX_LOGPROBS,
                                                integer=True), request=False)
    # structured output: an llguidance grammar (ts/llm/engine/grammar.py), compiled by the API layer
    grammar: str | None = setting(None, request=False)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SamplingParams:
        """Build from a request's fields; an unknown field is a 400 naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise LLMRequestError(400, f"unknown sampling parameter {shown(key)}; known: "
                                      f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
        params = cls(**{k: v for k, v in values.items() if v is not None})
        params.validate()
        return params

    def validate(self) -> None:
        """Every setting's check (normalising: a single stop string becomes a list, logit_bias's
        keys token ids), then the rules between settings."""
        for f in fields(self):
            value = getattr(self, f.name)
            check = f.metadata.get("check")
            if check is not None and value is not None:
                setattr(self, f.name, check(f.name, value))
        if self.min_tokens > self.max_new_tokens:
            raise _bad("min_tokens", f"min_tokens must be between 0 and max_tokens ({self.max_new_tokens}), "
                       f"got {self.min_tokens}")

    def token_ids_in(self, vocab_size: int) -> list[int]:
        """Token ids this request names (stop_token_ids, logit_bias) outside ``[0, vocab_size)``."""
        return [t for t in (*self.stop_token_ids, *self.logit_bias) if not 0 <= t < vocab_size]

    @property
    def penalised(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1)

    @property
    def greedy(self) -> bool:
        """Temperatures below ``GREEDY_BELOW`` (vLLM's epsilon) are greedy: dividing the logits by
        one would overflow them."""
        return self.temperature < GREEDY_BELOW


REQUEST_SETTINGS = frozenset(f.name for f in fields(SamplingParams) if f.metadata["request"])
VLLM_SETTINGS = tuple(f.name for f in fields(SamplingParams) if f.metadata["vllm"])


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
