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
