"""The request fields every form shares: the JSON body loaded and checked field by field, the
prompt's token ids (a string, ids, chat messages through the template) and the sampling settings.
Every bad field is a 400 ``LLMRequestError`` naming it. Which fields a form accepts, and what it
does with them, is that form's request class (``torchserve.py``, ``openai.py``).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from ts.llm.params import REQUEST_SETTINGS, LLMRequestError, SamplingParams

logger = logging.getLogger(__name__)

OPENAI_HEADER = "x-tserve-openai"
# Set by the frontend on gRPC StreamPredictions/StreamPredictions2: the client reads a stream, so
# "stream" defaults to true there.
STREAM_HINT_HEADER = "x-tserve-stream"
# the forms (``LLMRequest.kind``): the header's values, "torchserve" without it
TS, COMPLETIONS, CHAT, GENERATE = "torchserve", "completions", "chat.completions", "generate"


def bad(param: str | None, message: str, code: str = "invalid_value") -> LLMRequestError:
    return LLMRequestError(400, message, param=param, code=code)


# ---------------------------------------------------------------------- request fields
# Accepted OpenAI fields that tserve does not implement: only these values pass.
DEFAULT_ONLY: dict[str, tuple[Any, ...]] = {"suffix": ("",)}
IGNORED = frozenset({"user", "store", "metadata", "service_tier", "parallel_tool_calls"})
# SamplingParams fields a request may set by name (every form): declared there (``setting``)
SAMPLING = REQUEST_SETTINGS
CHAT_ROLES = {"system", "developer", "user", "assistant", "tool"}


def header(headers: dict[str, str] | None, name: str) -> str | None:
    return next((v for k, v in (headers or {}).items() if k.lower() == name), None)


def load_body(body: Any, plain_text_prompt: bool) -> dict[str, Any]:
    """The body as a JSON object; ``plain_text_prompt`` (the TorchServe form): a body that is not
    JSON, or a JSON string, is the prompt."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise bad(None, "the request body is not UTF-8") from None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            if not plain_text_prompt:
                raise bad(None, "the request body is not valid JSON") from None
            return {"prompt": body}  # TorchServe style: a plain-text prompt
        except RecursionError:
            raise bad(None, "the request body is JSON nested too deeply to decode "
                      f"(Python's recursion limit {sys.getrecursionlimit()}); flatten it") from None
        if isinstance(body, str) and plain_text_prompt:
            return {"prompt": body}
    if not isinstance(body, dict):
        raise bad(None, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def check_default_only(key: str, value: Any) -> None:
    """A field tserve accepts but does not implement: only its default value passes."""
    allowed = DEFAULT_ONLY.get(key)
    if allowed is not None and value is not None and value not in allowed:
        raise bad(key, f"{key}={value!r} is not supported by this server (only "
                  f"{' or '.join(json.dumps(a) for a in allowed)})", code="unsupported_value")


def check_fields(obj: dict[str, Any], known: frozenset[str], strict: bool) -> list[str]:
    """Refuse a supported field's unsupported value; an unknown field is refused when ``strict``,
    else dropped from ``obj`` and returned (vLLM ignores them with a warning)."""
    ignored = []
    for key, value in list(obj.items()):
        if key not in known:
            if strict:
                raise LLMRequestError(400, f"unknown parameter {key!r}; this endpoint accepts: "
                                      f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
            ignored.append(key)
            del obj[key]
            continue
        check_default_only(key, value)
    return ignored


def typed(obj: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, bool) if kind is bool else isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        raise bad(key, f"{key} must be {what}, got {value!r}")
    return value


def sampling_values(obj: dict[str, Any]) -> dict[str, Any]:
    """The sampling fields the body sets (``SAMPLING``)."""
    return {k: obj[k] for k in SAMPLING if obj.get(k) is not None}


def sampling_params(values: dict[str, Any], max_new_tokens: int, max_tokens_name: str) -> SamplingParams:
    """Checked sampling settings; an error about ``max_new_tokens`` names the request's own field
    (``max_tokens_name``)."""
    params = SamplingParams(max_new_tokens=max_new_tokens, **values)
    try:
        params.validate()
    except LLMRequestError as exc:
        if exc.param == "max_new_tokens" and max_tokens_name != "max_new_tokens":
            exc.message = exc.message.replace("max_new_tokens", max_tokens_name)
            exc.args = (exc.message,)
            exc.param = max_tokens_name
        raise
    return params


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
    if role not in CHAT_ROLES:
        raise bad("messages", f"messages[{index}].role must be one of {', '.join(sorted(CHAT_ROLES))}, got {role!r}")
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
