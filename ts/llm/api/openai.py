"""The OpenAI request forms (``x-tserve-openai: completions`` / ``chat.completions``).

* ``CompletionsRequest``: ``/v1/completions``; answers a ``text_completion`` object or SSE;
  several prompts, ``best_of``, ``echo``, ``logprobs: k``;
* ``ChatRequest``: ``/v1/chat/completions``; answers ``chat.completion`` or SSE
  ``chat.completion.chunk`` objects (the first chunk carries ``role: assistant``); tools,
  ``logprobs: true`` with ``top_logprobs``.

``OpenAIRequest`` holds what both share: ``n``, ``stream_options``, ``response_format``,
OpenAI's defaults (temperature 1), the chunk objects and the error body.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ts.llm.api.fields import (
    CHAT,
    COMPLETIONS,
    IGNORED,
    SAMPLING,
    bad,
    chat_ids,
    prompt_ids,
    sampling_params,
    sampling_values,
    typed,
)
from ts.llm.api.logprob_format import chat_logprobs, completion_logprobs
from ts.llm.api.request import SSE_DONE, Choice, LLMRequest
from ts.llm.api.structured import GUIDED, constrains, grammar_from_guided, grammar_from_response_format
from ts.llm.api.tools import ToolPolicy, tool_policy
from ts.llm.params import MAX_LOGPROBS, LLMRequestError, TokenLogprob

# what both OpenAI forms accept besides their own fields (vLLM's extras that tserve implements included)
OPENAI_FIELDS = frozenset({"model", "stream", "stream_options", "n", "max_tokens", "logprobs", "response_format",
                           "truncate_prompt_tokens", *GUIDED}) | SAMPLING | IGNORED
# vLLM's own request fields that tserve does not implement: refused naming them, unless the model
# sets handler.ignore_vllm_fields (an unknown field that is not vLLM's follows strict_fields)
VLLM_ONLY = frozenset({
    "use_beam_search", "length_penalty", "early_stopping", "spaces_between_special_tokens", "allowed_token_ids",
    "prompt_logprobs", "add_special_tokens", "guided_grammar", "guided_decoding_backend", "guided_whitespace_pattern",
    "structural_tag", "priority", "logits_processors", "return_tokens_as_token_ids", "return_token_ids",
    "request_id", "bad_words", "kv_transfer_params", "vllm_xargs", "prompt_embeds", "cache_salt",
    "add_generation_prompt", "continue_final_message", "documents", "chat_template", "chat_template_kwargs",
    "mm_processor_kwargs"})


class OpenAIRequest(LLMRequest):
    """What completions and chat completions share; see the module docstring."""

    VLLM_ONLY = VLLM_ONLY
    OBJECT: ClassVar[str]       # the answer's "object"
    CHUNK_OBJECT: ClassVar[str]  # a streamed chunk's
    ID_PREFIX: ClassVar[str]

    def __init__(self, request_id: str, model: str, tokenizer: Any = None) -> None:
        super().__init__(request_id, model, tokenizer)
        self.oai_id = self.ID_PREFIX + request_id

    # ------------------------------------------------------------------ parsing
    def _read(self, obj: dict[str, Any], default_max_new_tokens: int, chat_template: str | None) -> None:
        options = typed(obj, "stream_options", dict, "an object")
        if options is not None:
            if set(options) - {"include_usage"}:
                raise bad("stream_options", f"stream_options: unknown keys {sorted(set(options) - {'include_usage'})}")
            if not self.stream:
                raise bad("stream_options", "stream_options is only allowed with stream: true")
            self.include_usage = bool(typed(options, "include_usage", bool, "true or false"))
        self._read_before_sampling(obj)
        max_tokens_name = "max_completion_tokens" if obj.get("max_completion_tokens") is not None else "max_tokens"
        max_new = obj.get(max_tokens_name)
        temp = obj.get("temperature")
        if isinstance(temp, (int, float)) and not isinstance(temp, bool) and temp > 2:
            raise bad("temperature", f"temperature must be between 0 and 2, got {temp}")
        values = sampling_values(obj)
        values.setdefault("temperature", 1.0)  # OpenAI's default: sampling at temperature 1
        values["logprobs"] = self._logprobs_asked(obj)
        values["grammar"] = self._grammar(obj)
        self.params = sampling_params(values, default_max_new_tokens if max_new is None else max_new,
                                      max_tokens_name)
        self.report_logprobs = self.params.logprobs is not None
        self.n, self.best_of = self._choices(obj)
        self._read_after_sampling(obj)
        if self.best_of > self.n and self.params.logprobs is None:
            self.params.logprobs = 0  # best_of ranks the sequences by their cumulative logprob
        self.prompts = self._truncated(obj, self._prompts(obj, chat_template))

    @staticmethod
    def _grammar(obj: dict[str, Any]) -> str | None:
        """The output's grammar: ``response_format``, or one of vLLM's ``guided_*`` fields."""
        asked = [k for k in ("response_format", *GUIDED) if obj.get(k) is not None
                 and not (k == "response_format" and not constrains(obj[k]))]
        if len(asked) > 1:
            raise bad(asked[1], f"{asked[0]} and {asked[1]} both constrain the output: give one of them",
                      code="unsupported_value")
        if asked and asked[0] in GUIDED:
            return grammar_from_guided(asked[0], obj[asked[0]])
        return grammar_from_response_format(obj.get("response_format"))

    @staticmethod
    def _truncated(obj: dict[str, Any], prompts: list[list[int]]) -> list[list[int]]:
        """vLLM's ``truncate_prompt_tokens``: each prompt's last k tokens."""
        k = typed(obj, "truncate_prompt_tokens", int, "a positive integer")
        if k is None:
            return prompts
        if k < 1:
            raise bad("truncate_prompt_tokens", f"truncate_prompt_tokens must be a positive integer (the prompt's "
                      f"last tokens to keep; tserve does not take vLLM's -1), got {k}")
        return [p[-k:] for p in prompts]

    def _read_before_sampling(self, obj: dict[str, Any]) -> None:
        """This form's fields that shape the sampling settings (chat's tools)."""

    def _read_after_sampling(self, obj: dict[str, Any]) -> None:
        """This form's fields read once the sampling settings are known."""

    def _logprobs_asked(self, obj: dict[str, Any]) -> int | None:
        """How many top log-probabilities per token (0: the chosen token's only), None when off."""
        raise NotImplementedError

    def _choices(self, obj: dict[str, Any]) -> tuple[int, int]:
        """``(n, best_of)``: choices returned per prompt, and sequences generated per prompt."""
        n = typed(obj, "n", int, "a positive integer")
        n = 1 if n is None else n
        if n < 1:
            raise bad("n", f"n must be at least 1, got {n}")
        return n, n

    def _prompts(self, obj: dict[str, Any], chat_template: str | None) -> list[list[int]]:
        raise NotImplementedError

    # ------------------------------------------------------------------ answers
    def _logprobs(self, choice: Choice, entries: list[TokenLogprob]) -> dict[str, Any] | None:
        raise NotImplementedError

    def _item(self, choice: Choice, text: str | None, finish_reason: str | None, role: bool,
              logprobs: dict[str, Any] | None) -> dict[str, Any]:
        """One choice's entry in a streamed chunk."""
        raise NotImplementedError

    def _chunk(self, choice: Choice, text: str | None, finish_reason: str | None, role: bool = False,
               logprobs: list[TokenLogprob] | None = None) -> dict[str, Any]:
        lp = self._logprobs(choice, logprobs) if logprobs else None
        out = {"id": self.oai_id, "object": self.CHUNK_OBJECT, "created": self.created, "model": self.model,
               "choices": [self._item(choice, text, finish_reason, role, lp)]}
        if self.include_usage:
            out["usage"] = None
        return out

    def _first_chunk(self, choice: Choice) -> bytes:
        """What a choice's stream starts with, before its first text."""
        return b""

    def _echoed(self, choice: Choice) -> str:
        return ""

    def _content_chunk(self, choice: Choice, text: str, logprobs: list[TokenLogprob] | None) -> bytes:
        out = b""
        if not choice.started:
            choice.started = True
            out += self._first_chunk(choice)
            text = self._echoed(choice) + text
        if text or (logprobs and self.report_logprobs):
            out += self._sse(self._chunk(choice, text, None, logprobs=logprobs))
        return out

    def _stream_end(self) -> bytes:
        out = b""
        if self.include_usage:
            out += self._sse({"id": self.oai_id, "object": self.CHUNK_OBJECT, "created": self.created,
                              "model": self.model, "choices": [], "usage": self._usage()})
        return out + SSE_DONE

    def _returned(self) -> list[Choice]:
        """The answer's choices by index; with ``best_of`` the ``n`` of each prompt with the
        highest cumulative logprob (vLLM's and OpenAI's rule)."""
        if self.best_of == self.n:
            return sorted(self.choices.values(), key=lambda c: c.index)
        out = []
        for p in range(len(self.prompts)):
            mine = [c for c in self.choices.values() if c.prompt == p]
            mine.sort(key=lambda c: -sum(lp.logprob for lp in c.logprobs))
            for rank, c in enumerate(mine[:self.n]):
                c.index = p * self.n + rank
                out.append(c)
        return out

    def _answer(self) -> dict[str, Any]:
        return {"id": self.oai_id, "object": self.OBJECT, "created": self.created, "model": self.model,
                "choices": [self._answer_choice(c) for c in self._returned()], "usage": self._usage()}

    def _answer_choice(self, choice: Choice) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def error_object(cls, exc: LLMRequestError) -> dict[str, Any]:
        return exc.to_openai()


class CompletionsRequest(OpenAIRequest):
    """``/v1/completions``; see the module docstring."""

    kind = COMPLETIONS
    FIELDS: ClassVar[frozenset[str]] = OPENAI_FIELDS | {"prompt", "best_of", "echo", "suffix"}
    OBJECT = CHUNK_OBJECT = "text_completion"
    ID_PREFIX = "cmpl-"

    def __init__(self, request_id: str, model: str, tokenizer: Any = None) -> None:
        super().__init__(request_id, model, tokenizer)
        self.echo = False

    def _logprobs_asked(self, obj: dict[str, Any]) -> int | None:
        k: int | None = typed(obj, "logprobs", int, f"an integer between 0 and {MAX_LOGPROBS}")
        return k

    def _choices(self, obj: dict[str, Any]) -> tuple[int, int]:
        n, _ = super()._choices(obj)
        best_of = typed(obj, "best_of", int, "a positive integer")
        best_of = n if best_of is None else best_of
        if best_of < n:
            raise bad("best_of", f"best_of ({best_of}) must be at least n ({n})")
        if best_of > n and self.stream:
            raise bad("best_of", "best_of > n cannot be streamed (the best choices are known at the end): "
                      "drop stream or best_of")
        return n, best_of

    def _read_after_sampling(self, obj: dict[str, Any]) -> None:
        self.echo = bool(typed(obj, "echo", bool, "true or false"))
        if self.echo and self.report_logprobs:
            raise bad("echo", "echo with logprobs is not supported (the prompt's log-probabilities are not "
                      "computed): drop one of them", code="unsupported_value")

    def _prompts(self, obj: dict[str, Any], chat_template: str | None) -> list[list[int]]:
        return prompt_ids(obj, self.tokenizer, self.limits.max_prompt_chars)

    def _echoed(self, choice: Choice) -> str:
        if not self.echo:
            return ""
        return str(self.tokenizer.decode(self.prompts[choice.prompt], skip_special_tokens=True,
                                         clean_up_tokenization_spaces=False))

    def _logprobs(self, choice: Choice, entries: list[TokenLogprob]) -> dict[str, Any] | None:
        return completion_logprobs(self.tokenizer, entries, choice) if self.report_logprobs else None

    def _item(self, choice: Choice, text: str | None, finish_reason: str | None, role: bool,
              logprobs: dict[str, Any] | None) -> dict[str, Any]:
        return {"index": choice.index, "text": text or "", "logprobs": logprobs, "finish_reason": finish_reason}

    def _choice_end(self, choice: Choice) -> bytes:
        return self._sse(self._chunk(choice, "", choice.finish_reason))

    def _answer_choice(self, choice: Choice) -> dict[str, Any]:
        return {"index": choice.index, "text": self._echoed(choice) + "".join(choice.pieces),
                "logprobs": self._logprobs(choice, choice.logprobs), "finish_reason": choice.finish_reason}


class ChatRequest(OpenAIRequest):
    """``/v1/chat/completions``; see the module docstring."""

    kind = CHAT
    FIELDS: ClassVar[frozenset[str]] = OPENAI_FIELDS | {"messages", "max_completion_tokens", "top_logprobs",
                                                        "tools", "tool_choice"}
    VLLM_ONLY = VLLM_ONLY | {"echo"}
    OBJECT = "chat.completion"
    CHUNK_OBJECT = "chat.completion.chunk"
    ID_PREFIX = "chatcmpl-"

    def __init__(self, request_id: str, model: str, tokenizer: Any = None) -> None:
        super().__init__(request_id, model, tokenizer)
        self.tools: ToolPolicy | None = None  # chat with tools (ts/llm/api/tools.py)

    def _read_before_sampling(self, obj: dict[str, Any]) -> None:
        """Tools first: sampling compiles response_format's grammar, which forced tools exclude."""
        self.tools = tool_policy(obj)
        if self.tools is not None and self.tools.forced and (constrains(obj.get("response_format"))
                                                             or any(obj.get(k) is not None for k in GUIDED)):
            raise bad("tool_choice", "tool_choice required or a named function constrains the output "
                      "to a call: it cannot be combined with response_format", code="unsupported_value")

    def _logprobs_asked(self, obj: dict[str, Any]) -> int | None:
        on = typed(obj, "logprobs", bool, "true or false")
        top = typed(obj, "top_logprobs", int, f"an integer between 0 and {MAX_LOGPROBS}")
        if top is not None and not on:
            raise bad("top_logprobs", "top_logprobs needs logprobs: true")
        if top is not None and not 0 <= top <= MAX_LOGPROBS:
            raise bad("top_logprobs", f"top_logprobs must be between 0 and {MAX_LOGPROBS}, got {top}")
        return (top or 0) if on else None

    def _read_after_sampling(self, obj: dict[str, Any]) -> None:
        if self.tools is not None and self.tools.forced:
            self.params.grammar = self.tools.grammar()

    def _prompts(self, obj: dict[str, Any], chat_template: str | None) -> list[list[int]]:
        return [chat_ids(obj, self.tokenizer, chat_template, self.tools.tools if self.tools else None,
                         self.limits.max_prompt_chars)]

    def _logprobs(self, choice: Choice, entries: list[TokenLogprob]) -> dict[str, Any] | None:
        return chat_logprobs(self.tokenizer, entries) if self.report_logprobs else None

    def _item(self, choice: Choice, text: str | None, finish_reason: str | None, role: bool,
              logprobs: dict[str, Any] | None) -> dict[str, Any]:
        delta: dict[str, Any] = {}
        if role:
            delta["role"] = "assistant"
        if text is not None:
            delta["content"] = text
        return {"index": choice.index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}

    def _first_chunk(self, choice: Choice) -> bytes:
        return self._sse(self._chunk(choice, "", None, role=True))

    def _choice_end(self, choice: Choice) -> bytes:
        return self._sse(self._chunk(choice, None, choice.finish_reason))

    def _message(self, choice: Choice) -> dict[str, Any]:
        """A choice's ``message`` and ``finish_reason``: its text, or the tool calls the text holds
        (a call cut short by max_tokens stays text, with finish_reason length)."""
        text = "".join(choice.pieces)
        calls = self.tools.calls(text) if self.tools is not None and self.tools.parses_calls else None
        if calls is None:
            return {"message": {"role": "assistant", "content": text}, "finish_reason": choice.finish_reason}
        return {"message": {"role": "assistant", "content": None, "tool_calls": calls},
                "finish_reason": self.tools.finish_reason if self.tools is not None else "tool_calls"}

    def _answer_choice(self, choice: Choice) -> dict[str, Any]:
        return {"index": choice.index, **self._message(choice), "logprobs": self._logprobs(choice, choice.logprobs)}

    def _holds_text(self) -> bool:
        return self.stream and self.tools is not None and self.tools.parses_calls

    def _held_choice_start(self, choice: Choice) -> bytes:
        if choice.started:
            return b""
        choice.started = True
        return self._first_chunk(choice)

    def _held_choice_end(self, choice: Choice) -> bytes:
        """A stream whose text may be a tool call holds it back (the call is only known whole):
        one delta with the content or the calls (each with its ``index``), then the finish chunk."""
        answer = self._message(choice)
        message = answer["message"]
        chunk = self._chunk(choice, None, None)
        delta = chunk["choices"][0]["delta"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        else:
            delta["content"] = message["content"]
        end = self._chunk(choice, None, answer["finish_reason"])
        return self._sse(chunk) + self._sse(end)
