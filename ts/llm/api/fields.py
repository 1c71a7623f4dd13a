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

from ts.llm.params import REQUEST_SETTINGS, LLMRequestError, SamplingParams, shown

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
        except ValueError as exc:  # an integer past Python's digit limit for int(): not a JSONDecodeError
            raise bad(None, f"the request body cannot be decoded: {exc}") from None
        except RecursionError:
            raise bad(None, "the request body is JSON nested too deeply to decode "
                      f"(Python's recursion limit {sys.getrecursionlimit()}); flatten it") from None
        if isinstance(body, str) and plain_text_prompt:
            body = {"prompt": body}
    if not isinstance(body, dict):
        raise bad(None, f"the request body must be a JSON object, got {type(body).__name__}")
    lone_surrogates(body)
    return body


def check_default_only(key: str, value: Any) -> None:
    """A field tserve accepts but does not implement: only its default value passes."""
    allowed = DEFAULT_ONLY.get(key)
    if allowed is not None and value is not None and value not in allowed:
        raise bad(key, f"{key}={shown(value)} is not supported by this server (only "
                  f"{' or '.join(json.dumps(a) for a in allowed)})", code="unsupported_value")


def check_fields(obj: dict[str, Any], known: frozenset[str], strict: bool,
                 refused: frozenset[str] = frozenset()) -> list[str]:
    """Refuse a supported field's unsupported value, and the fields of ``refused`` (vLLM's own
    that tserve does not implement); another unknown field is refused when ``strict``, else
    dropped from ``obj`` and returned (vLLM ignores them with a warning)."""
    ignored = []
    for key, value in list(obj.items()):
        if key in refused:
            raise LLMRequestError(400, f"{key} is a vLLM request field that tserve does not implement: drop it, or "
                                  "set handler.ignore_vllm_fields: true in the model's model-config.yaml to have "
                                  "such fields ignored", param=key, code="unsupported_parameter")
        if key not in known:
            if strict:
                raise LLMRequestError(400, f"unknown parameter {shown(key)}; this endpoint accepts: "
                                      f"{', '.join(sorted(known))}", param=key, code="unknown_parameter")
            ignored.append(key)
            del obj[key]
            continue
        check_default_only(key, value)
    return ignored


def lone_surrogates(body: dict[str, Any]) -> None:
    """A JSON ``\\udXXX`` escape that is half a pair decodes to a string no UTF-8 can hold (the
    tokenizer and the answer's encoding would fail on it): a 400 naming the field that has one."""
    def bad_text(value: Any) -> bool:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
            return False
        if isinstance(value, dict):
            return any(bad_text(k) or bad_text(v) for k, v in value.items())
        if isinstance(value, list):
            return any(bad_text(v) for v in value)
        return False

    for key, value in body.items():
        if bad_text(key) or bad_text(value):
            inner = [k for k, v in value.items() if bad_text(k) or bad_text(v)] if isinstance(value, dict) else []
            name = inner[0] if key == "parameters" and inner else key  # OIP generate's fields sit in parameters
            raise bad(name if isinstance(name, str) and not bad_text(name) else None,
                      f"{shown(name)} holds a lone surrogate (half of a \\uD800-\\uDFFF pair): send valid Unicode text")


def typed(obj: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, bool) if kind is bool else isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        raise bad(key, f"{key} must be {what}, got {shown(value)}")
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


def tokenize(tokenizer: Any, text: str, param: str, max_chars: int | None, **kwargs: Any) -> list[int]:
    """``text``'s token ids; a text longer than ``max_chars`` (more characters than the context's
    tokens can hold) is refused before the tokenizer runs: a long run without spaces costs it
    minutes, and the worker answers nothing meanwhile."""
    if max_chars is not None and len(text) > max_chars:
        raise LLMRequestError(400, f"{param} has {len(text)} characters, more than the model's context can hold in "
                              f"tokens (at most {max_chars}): shorten it", param=param,
                              code="context_length_exceeded")
    return list(tokenizer(text, **kwargs)["input_ids"])


def prompt_ids(obj: dict[str, Any], tokenizer: Any, max_chars: int | None = None,
               name: str = "prompt") -> list[list[int]]:
    """The prompts' token ids: a string, a list of ids, or (completions) a list of either; errors
    name the request's own field (``name``: OIP generate's is text_input)."""
    prompt = obj.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        return [_one_prompt(p, tokenizer, f"{name}[{i}]", max_chars, name) for i, p in enumerate(prompt)]
    return [_one_prompt(prompt, tokenizer, name, max_chars, name)]


def _one_prompt(prompt: Any, tokenizer: Any, where: str, max_chars: int | None, name: str) -> list[int]:
    if isinstance(prompt, str):
        if not prompt:
            raise bad(name, f"{where} is empty")
        return tokenize(tokenizer, prompt, name, max_chars)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    raise bad(name, f"{where} must be a non-empty string or a list of token ids"
              if prompt is not None else f"{name} is required")


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
            except (ValueError, RecursionError):  # not JSON, or past the digit or nesting limits
                raise bad("messages", f"messages[{index}].tool_calls[{j}].function.arguments is not JSON") from None
        out.append({**call, "type": call.get("type", "function"), "function": {**function, "arguments": arguments}})
    return out


def _chat_text(message: Any, index: int) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise bad("messages", f"messages[{index}] must be an object with role and content")
    role, content = message.get("role"), message.get("content")
    if role not in CHAT_ROLES:
        raise bad("messages", f"messages[{index}].role must be one of {', '.join(sorted(CHAT_ROLES))}, got {shown(role)}")
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
             tools: list[dict[str, Any]] | None = None, max_chars: int | None = None) -> list[int]:
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
    return tokenize(tokenizer, text, "messages", max_chars, add_special_tokens=False)
