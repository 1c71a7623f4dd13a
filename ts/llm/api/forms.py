"""The request form a request is in, from the ``x-tserve-openai`` header, and its parsing."""

from __future__ import annotations

from typing import Any

from ts.llm.api.fields import OPENAI_HEADER, bad, header
from ts.llm.api.openai import ChatRequest, CompletionsRequest
from ts.llm.api.request import LLMRequest, RequestLimits
from ts.llm.api.torchserve import GenerateRequest, TorchServeRequest
from ts.llm.params import LLMRequestError, shown

FORMS: dict[str, type[LLMRequest]] = {form.kind: form for form in (
    TorchServeRequest, CompletionsRequest, ChatRequest, GenerateRequest)}


def request_form(headers: dict[str, str] | None) -> type[LLMRequest]:
    value = header(headers, OPENAI_HEADER)
    if value in (None, ""):
        return TorchServeRequest
    form = FORMS.get(str(value).strip().lower())
    if form is None or form is TorchServeRequest:
        raise bad(None, f"header {OPENAI_HEADER}: {shown(str(value).strip().lower())} is none of 'completions', "
                  "'chat.completions', 'generate'")
    return form


def parse_request(request_id: str, body: Any, headers: dict[str, str] | None, *, tokenizer: Any,
                  model_name: str, default_max_new_tokens: int | dict[str, int], chat_template: str | None = None,
                  strict: bool = True, ignore_vllm_fields: bool = False,
                  limits: RequestLimits | None = None) -> LLMRequest:
    """The request in its form; raises LLMRequestError (400) naming the bad field, its ``body``
    set in the request's form. ``default_max_new_tokens``: one for every form, or one per
    ``LLMRequest.kind``."""
    try:
        form = request_form(headers)
    except LLMRequestError as exc:
        TorchServeRequest.attach_error_body(exc)
        raise
    default = (default_max_new_tokens if isinstance(default_max_new_tokens, int)
               else default_max_new_tokens[form.kind])
    return form.parse(request_id, body, headers, tokenizer=tokenizer, model_name=model_name,
                      default_max_new_tokens=default, chat_template=chat_template, strict=strict,
                      ignore_vllm_fields=ignore_vllm_fields, limits=limits)
