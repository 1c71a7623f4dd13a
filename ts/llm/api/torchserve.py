"""The TorchServe request forms (no ``x-tserve-openai`` header, or ``generate``).

* ``TorchServeRequest``: ``{"prompt": ..., "max_new_tokens": ..., "stream": ...}`` or a plain-text
  prompt; answers ``{"text", "finish_reason", "usage"}``, streams raw text deltas;
* ``GenerateRequest``: the Open Inference Protocol's generate extension (``/v2/models/{m}/generate``
  and ``/generate_stream``), ``{"text_input", "parameters"}``; answers ``{"text_output",
  "model_name"}`` or SSE events of those with ``done``; errors ``{"error"}`` (422 for a bad
  request, as the spec).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ts.llm.api.fields import (
    GENERATE,
    SAMPLING,
    TS,
    bad,
    check_default_only,
    prompt_ids,
    sampling_params,
    sampling_values,
)
from ts.llm.api.request import TEXT_TYPE, Choice, LLMRequest
from ts.llm.params import LLMRequestError, TokenLogprob, shown


class TorchServeRequest(LLMRequest):
    """TorchServe's own form; see the module docstring."""

    kind = TS
    FIELDS: ClassVar[frozenset[str]] = frozenset({"prompt", "max_new_tokens", "stream"}) | SAMPLING
    PLAIN_TEXT_PROMPT = True
    ALWAYS_STRICT = True
    STREAM_TYPE = TEXT_TYPE

    PROMPT_NAME: ClassVar[str] = "prompt"  # the prompt's field in this form's body

    def _read(self, obj: dict[str, Any], default_max_new_tokens: int, chat_template: str | None) -> None:
        name = next((k for k in ("max_new_tokens", "max_tokens") if obj.get(k) is not None), "max_new_tokens")
        max_new = obj.get(name)
        self.params = sampling_params(sampling_values(obj), default_max_new_tokens if max_new is None else max_new,
                                      name)
        self.prompts = prompt_ids(obj, self.tokenizer, self.limits.max_prompt_chars, self.PROMPT_NAME)
        if len(self.prompts) > 1:
            raise bad("prompt", f"one prompt per request: got a list of {len(self.prompts)} prompts")

    def _first(self) -> Choice:
        return next(iter(self.choices.values()))

    def _content_chunk(self, choice: Choice, text: str, logprobs: list[TokenLogprob] | None) -> bytes:
        return text.encode("utf-8")

    def _answer(self) -> dict[str, Any]:
        first = self._first()
        return {"text": "".join(first.pieces), "finish_reason": first.finish_reason, "usage": self._usage()}


GENERATE_PARAMETERS = frozenset({"max_tokens", "max_new_tokens", "best_of"}) | SAMPLING


class GenerateRequest(TorchServeRequest):
    """The OIP generate extension; its body is mapped onto the TorchServe form's fields."""

    kind = GENERATE
    FIELDS: ClassVar[frozenset[str]] = TorchServeRequest.FIELDS | {"max_tokens"}
    PLAIN_TEXT_PROMPT = False
    PROMPT_NAME = "text_input"
    STREAM_TYPE = LLMRequest.STREAM_TYPE

    @classmethod
    def _body(cls, obj: dict[str, Any]) -> dict[str, Any]:
        """``text_input`` is the prompt, the ``parameters`` the sampling fields (``max_tokens`` =
        ``max_new_tokens``)."""
        for key in obj:
            if key not in ("text_input", "parameters"):
                raise LLMRequestError(400, f"unknown field {shown(key)}; generate accepts text_input and parameters",
                                      param=key, code="unknown_parameter")
        text = obj.get("text_input")
        if not isinstance(text, str) or not text:
            raise bad("text_input", "text_input must be a non-empty string" if text is not None else
                      "text_input is required")
        params = obj.get("parameters") or {}
        if not isinstance(params, dict):
            raise bad("parameters", f"parameters must be an object, got {shown(params)}")
        for key, value in params.items():
            if key not in GENERATE_PARAMETERS:
                raise LLMRequestError(400, f"unknown parameter {shown(key)}; generate's parameters may be: "
                                      f"{', '.join(sorted(GENERATE_PARAMETERS))}", param=key,
                                      code="unknown_parameter")
            if key == "best_of" and value not in (None, 1):
                raise bad(key, f"best_of={shown(value)} is not supported by this server (only 1)",
                          code="unsupported_value")
            check_default_only(key, value)
        return {"prompt": text, **{k: params[k] for k in (*SAMPLING, "max_new_tokens", "max_tokens") if k in params}}

    def _generated(self, text: str, **extra: Any) -> dict[str, Any]:
        return {"text_output": text, "model_name": self.model, **extra}

    def _content_chunk(self, choice: Choice, text: str, logprobs: list[TokenLogprob] | None) -> bytes:
        return self._sse(self._generated(text, done=False)) if text else b""

    def _stream_end(self) -> bytes:
        return self._sse(self._generated("", done=True, details={"finish_reason": self._first().finish_reason}))

    def _answer(self) -> dict[str, Any]:
        first = self._first()
        return self._generated("".join(first.pieces), details={"finish_reason": first.finish_reason,
                                                               **self._usage()})

    @classmethod
    def error_object(cls, exc: LLMRequestError) -> dict[str, Any]:
        if exc.status == 400:  # the spec's error body; a bad request is its 422 (input validation error)
            exc.status = exc.error_code = 422
        return {"error": exc.message}
