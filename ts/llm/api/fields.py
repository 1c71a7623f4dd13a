"""The LLM handler's request fields: which form a request is in (the ``x-tserve-openai`` header),
its JSON body loaded and checked field by field, the prompt's token ids and the sampling settings.
Every bad field is a 400 ``LLMRequestError`` naming it (``ts/llm/api/request.py`` formats the answers).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from ts.llm.api.structured import grammar_from_response_format
from ts.llm.params import MAX_LOGPROBS, LLMRequestError, SamplingParams

logger = logging.getLogger(__name__)

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
    "suffix": ("",), "best_of": (1,),
}
_IGNORED = {"user", "store", "metadata", "service_tier", "parallel_tool_calls"}
# SamplingParams fields a request may set by name (TorchServe form, OpenAI forms, generate's parameters)
_SAMPLING = {"temperature", "top_p", "top_k", "seed", "stop", "ignore_eos", "presence_penalty", "frequency_penalty",
             "repetition_penalty", "min_p", "min_tokens", "stop_token_ids", "logit_bias"}
_FIELDS = {
    TS: {"prompt", "max_new_tokens", "stream"} | _SAMPLING,
    COMPLETIONS: {"model", "prompt", "max_tokens", "stream", "stream_options", "n", "best_of", "echo",
                  "suffix", "logprobs", "response_format"} | _SAMPLING | _IGNORED,
    CHAT: {"model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options", "n",
           "logprobs", "top_logprobs", "response_format", "tools", "tool_choice"} | _SAMPLING | _IGNORED,
}
_GENERATE_PARAMETERS = {"max_tokens", "max_new_tokens", "best_of"} | _SAMPLING
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
        except RecursionError:
            raise bad(None, "the request body is JSON nested too deeply to decode "
                      f"(Python's recursion limit {sys.getrecursionlimit()}); flatten it") from None
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


def check_fields(obj: dict[str, Any], kind: str, strict: bool = True) -> list[str]:
    """Refuse a supported field's unsupported value; an unknown field is refused when ``strict``
    (always in the TorchServe form), else dropped from ``obj`` and returned (vLLM ignores them
    with a warning)."""
    known = _FIELDS[kind]
    ignored = []
    for key, value in list(obj.items()):
        if key not in known:
            if strict or kind == TS:
                raise LLMRequestError(400, f"unknown parameter {key!r}; this endpoint accepts: "
                                      f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
            ignored.append(key)
            del obj[key]
            continue
        if key == "best_of" and kind == COMPLETIONS:
            continue  # supported on completions (checked against n in choices())
        allowed = _DEFAULT_ONLY.get(key)
        if allowed is not None and value is not None and value not in allowed:
            raise bad(key, f"{key}={value!r} is not supported by this server (only "
                       f"{' or '.join(json.dumps(a) for a in allowed)})", code="unsupported_value")
    return ignored


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
    values["logprobs"] = _logprobs(obj, kind)
    if kind != TS:
        values["grammar"] = grammar_from_response_format(obj.get("response_format"))
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


def _logprobs(obj: dict[str, Any], kind: str) -> int | None:
    """How many top log-probabilities per token (0: the chosen token's only), None when off:
    completions' ``logprobs: k``; chat's ``logprobs: true`` with ``top_logprobs: k``."""
    if kind == COMPLETIONS:
        k: int | None = typed(obj, "logprobs", int, f"an integer between 0 and {MAX_LOGPROBS}")
        return k
    if kind != CHAT:
        return None
    on = typed(obj, "logprobs", bool, "true or false")
    top = typed(obj, "top_logprobs", int, f"an integer between 0 and {MAX_LOGPROBS}")
    if top is not None and not on:
        raise bad("top_logprobs", "top_logprobs needs logprobs: true")
    if top is not None and not 0 <= top <= MAX_LOGPROBS:
        raise bad("top_logprobs", f"top_logprobs must be between 0 and {MAX_LOGPROBS}, got {top}")
    return (top or 0) if on else None


def choices(obj: dict[str, Any], kind: str, stream: bool) -> tuple[int, int]:
    """``(n, best_of)``: choices returned per prompt, and sequences generated per prompt."""
    n = typed(obj, "n", int, "a positive integer")
    n = 1 if n is None else n
    if n < 1:
        raise bad("n", f"n must be at least 1, got {n}")
    best_of = typed(obj, "best_of", int, "a positive integer") if kind == COMPLETIONS else None
    best_of = n if best_of is None else best_of
    if best_of < n:
        raise bad("best_of", f"best_of ({best_of}) must be at least n ({n})")
    if best_of > n and stream:
        raise bad("best_of", "best_of > n cannot be streamed (the best choices are known at the end): "
                   "drop stream or best_of")
    return n, best_of


def prompt_ids(obj: dict[str, Any], tokenizer: Any) -> list[list[int]]:
    """The prompts' token ids: a string, a list of ids, or (completions) a list of either."""
    prompt = obj.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        return [_one_prompt(p, tokenizer, f"prompt[{i}]") for i, p in enumerate(prompt)]
    return [_one_prompt(prompt, tokenizer, "prompt")]


def _one_prompt(prompt: Any, tokenizer: Any, where: str) -> list[int]:
    if isinstance(prompt, str):
        if not prompt:
            raise bad("prompt", f"{where} is empty")
        return list(tokenizer(prompt)["input_ids"])
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    raise bad("prompt", f"{where} must be a non-empty string or a list of token ids"
               if prompt is not None else "prompt is required")


def warn_ignored(model: str, request_id: str, ignored: list[str]) -> None:
    if ignored:
        logger.warning("LLM %s: request %s: ignored unknown fields %s (set handler.strict_fields: true to refuse "
                       "them)", model, request_id, ", ".join(sorted(ignored)))


def _tool_calls(calls: Any, index: int) -> list[dict[str, Any]]:
    """An assistant message's ``tool_calls`` for the chat template: the arguments' JSON string
    parsed into an object (what Hugging Face templates render, as vLLM passes them)."""
    if not isinstance(calls, list):
        raise bad("messages", f"messages[{index}].tool_calls must be a list")
    out = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad("messages", f"messages[{index}].tool_calls[{j}] must be {{\"type\": \"function\", "
                       "\"function\": {\"name\", \"arguments\"}}")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                raise bad("messages", f"messages[{index}].tool_calls[{j}].function.arguments is not JSON") from None
        out.append({**call, "type": call.get("type", "function"), "function": {**function, "arguments": arguments}})
    return out


def _chat_text(message: Any, index: int) -> dict[str, Any]:
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
    out: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = _tool_calls(message["tool_calls"], index)
    for key in ("tool_call_id", "name"):  # a tool result names its call (and a message its author)
        if isinstance(message.get(key), str):
            out[key] = message[key]
    return out


def chat_ids(obj: dict[str, Any], tokenizer: Any, chat_template: str | None,
             tools: list[dict[str, Any]] | None = None) -> list[int]:
    """The rendered chat template's token ids (tool calls, tool results and ``tools`` included)."""
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
                                             add_generation_prompt=True, tools=tools)
    except Exception as exc:  # noqa: BLE001 - a template error is about these messages
        raise bad("messages", f"the chat template failed on these messages: {exc}") from None
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
