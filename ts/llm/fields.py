"""The LLM handler's request fields: which form a request is in (the ``x-tserve-openai`` header),
its JSON body loaded and checked field by field, the prompt's token ids and the sampling settings.
Every bad field is a 400 ``LLMRequestError`` naming it (``ts/llm/api.py`` formats the answers).
"""

from __future__ import annotations

import json
from typing import Any

from ts.llm.engine import LLMRequestError, SamplingParams

OPENAI_HEADER = "x-tserve-openai"
# Set by the frontend on gRPC StreamPredictions/StreamPredictions2: the client reads a stream, so
# "stream" defaults to true there.
STREAM_HINT_HEADER = "x-tserve-stream"
TS, COMPLETIONS, CHAT, GENERATE = "torchserve", "completions", "chat.completions", "generate"
def bad(param: str | None, message: str, code: str = "invalid_value") -> LLMRequestError:
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
_GENERATE_PARAMETERS = {"max_tokens", "max_new_tokens", "best_of", "frequency_penalty"} | _SAMPLING
_CHAT_ROLES = {"system", "developer", "user", "assistant", "tool"}


def header(headers: dict[str, str] | None, name: str) -> str | None:
    return next((v for k, v in (headers or {}).items() if k.lower() == name), None)


def request_kind(headers: dict[str, str] | None) -> str:
    value = header(headers, OPENAI_HEADER)
    if value in (None, ""):
        return TS
    value = str(value).strip().lower()
    if value not in (COMPLETIONS, CHAT, GENERATE):
        raise bad(None, f"header {OPENAI_HEADER}: {value!r} is none of 'completions', 'chat.completions', "
                   "'generate'")
    return value


def load_body(body: Any, kind: str) -> dict[str, Any]:
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise bad(None, "the request body is not UTF-8") from None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            if kind != TS:
                raise bad(None, "the request body is not valid JSON") from None
            return {"prompt": body}  # TorchServe style: a plain-text prompt
        if isinstance(body, str) and kind == TS:
            return {"prompt": body}
    if not isinstance(body, dict):
        raise bad(None, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def from_generate(obj: dict[str, Any]) -> dict[str, Any]:
    """An OIP generate request as the TorchServe form: ``text_input`` is the prompt, the
    ``parameters`` the sampling fields (``max_tokens`` = ``max_new_tokens``)."""
    for key in obj:
        if key not in ("text_input", "parameters"):
            raise LLMRequestError(400, f"unknown field {key!r}; generate accepts text_input and parameters",
                                  param=key, code="unknown_parameter")
    text = obj.get("text_input")
    if not isinstance(text, str) or not text:
        raise bad("text_input", "text_input must be a non-empty string" if text is not None else
                   "text_input is required")
    params = obj.get("parameters") or {}
    if not isinstance(params, dict):
        raise bad("parameters", f"parameters must be an object, got {params!r}")
    for key, value in params.items():
        if key not in _GENERATE_PARAMETERS:
            raise LLMRequestError(400, f"unknown parameter {key!r}; generate's parameters may be: "
                                  f"{', '.join(sorted(_GENERATE_PARAMETERS))}", param=key, code="unknown_parameter")
        allowed = _DEFAULT_ONLY.get(key)
        if allowed is not None and value is not None and value not in allowed:
            raise bad(key, f"{key}={value!r} is not supported by this server (only "
                       f"{' or '.join(json.dumps(a) for a in allowed)})", code="unsupported_value")
    out = {"prompt": text, **{k: params[k] for k in _SAMPLING if k in params}}
    max_new = params.get("max_new_tokens", params.get("max_tokens"))
    if max_new is not None:
        out["max_new_tokens"] = max_new
    return out


def check_fields(obj: dict[str, Any], kind: str) -> None:
    known = _FIELDS[kind]
    for key, value in obj.items():
        if key not in known:
            raise LLMRequestError(400, f"unknown parameter {key!r}; this endpoint accepts: "
                                  f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
        allowed = _DEFAULT_ONLY.get(key)
        if allowed is not None and value is not None and value not in allowed:
            raise bad(key, f"{key}={value!r} is not supported by this server (only "
                       f"{' or '.join(json.dumps(a) for a in allowed)})", code="unsupported_value")


def typed(obj: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, bool) if kind is bool else isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        raise bad(key, f"{key} must be {what}, got {value!r}")
    return value


def sampling(obj: dict[str, Any], kind: str, default_max_new_tokens: int) -> SamplingParams:
    if kind == TS:
        max_new = obj.get("max_new_tokens")
        names = {}
    else:
        max_new = obj.get("max_completion_tokens", obj.get("max_tokens"))
        names = {"max_new_tokens": "max_completion_tokens" if obj.get("max_completion_tokens") is not None
                 else "max_tokens"}
        temp = obj.get("temperature")
        if isinstance(temp, (int, float)) and not isinstance(temp, bool) and temp > 2:
            raise bad("temperature", f"temperature must be between 0 and 2, got {temp}")
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


def prompt_ids(obj: dict[str, Any], tokenizer: Any) -> list[int]:
    prompt = obj.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # OpenAI's batch form with one prompt
    if isinstance(prompt, str):
        if not prompt:
            raise bad("prompt", "prompt is empty")
        return list(tokenizer(prompt)["input_ids"])
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) > 1:
        raise bad("prompt", f"one prompt per request: got a list of {len(prompt)} prompts")
    raise bad("prompt", "prompt must be a non-empty string or a list of token ids"
               if prompt is not None else "prompt is required")


def _chat_text(message: Any, index: int) -> dict[str, str]:
    if not isinstance(message, dict):
        raise bad("messages", f"messages[{index}] must be an object with role and content")
    role, content = message.get("role"), message.get("content")
    if role not in _CHAT_ROLES:
        raise bad("messages", f"messages[{index}].role must be one of {', '.join(sorted(_CHAT_ROLES))}, got {role!r}")
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad("messages", f"messages[{index}].content: only text parts are supported")
            parts.append(part["text"])
        content = "".join(parts)
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise bad("messages", f"messages[{index}].content must be a string or a list of text parts")
    return {"role": role, "content": content}


def chat_ids(obj: dict[str, Any], tokenizer: Any, chat_template: str | None) -> list[int]:
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages", "messages must be a non-empty list" if messages is not None else "messages is required")
    messages = [_chat_text(m, i) for i, m in enumerate(messages)]
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if not template:
        raise bad("messages", "this model has no chat template: its tokenizer has none and model-config.yaml "
                   "sets no handler.chat_template", code="no_chat_template")
    try:
        text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                             add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - a template error is about these messages
        raise bad("messages", f"the chat template failed on these messages: {exc}") from None
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
