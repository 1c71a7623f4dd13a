"""OpenAI's ``logprobs`` objects from the engine's token log-probabilities: completions' (tokens,
their logprobs, the top alternatives, text offsets) and chat's (``content`` entries with bytes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ts.llm.params import TokenLogprob

if TYPE_CHECKING:
    from ts.llm.api.request import Choice


def _token(tokenizer: Any, token: int) -> str:
    return str(tokenizer.decode([token], skip_special_tokens=False, clean_up_tokenization_spaces=False))


def completion_logprobs(tokenizer: Any, entries: list[TokenLogprob], choice: Choice) -> dict[str, Any]:
    """Completions' ``logprobs``: tokens, their logprobs, the top alternatives (the chosen token
    always among them, as vLLM) and each token's offset in the choice's text."""
    tokens = [_token(tokenizer, e.token) for e in entries]
    offsets = []
    for text in tokens:
        offsets.append(choice.text_offset)
        choice.text_offset += len(text)
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{**{_token(tokenizer, t): v for t, v in e.top}, tokens[i]: e.logprob}
                             for i, e in enumerate(entries)],
            "text_offset": offsets}


def chat_logprobs(tokenizer: Any, entries: list[TokenLogprob]) -> dict[str, Any]:
    """Chat's ``logprobs``: ``{"content": [{token, logprob, bytes, top_logprobs}]}``."""
    def item(token: int, logprob: float) -> dict[str, Any]:
        text = _token(tokenizer, token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}
    return {"content": [{**item(e.token, e.logprob), "top_logprobs": [item(t, v) for t, v in e.top]}
                        for e in entries]}
