"""Incremental detokenisation and stop strings for one generated sequence."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ts.llm.params import SamplingParams

# Prompt tokens decoded with the first output tokens, so that a leading space or a merge with
# the prompt's last characters comes out as it would in the whole text (SentencePiece drops the
# leading space of a token decoded alone).
PROMPT_CONTEXT_TOKENS = 6


def backend_decode(tokenizer: Any) -> Any:
    """The Rust tokenizer's own ``decode`` when ``tokenizer.decode(ids, skip_special_tokens=True,
    clean_up_tokenization_spaces=False)`` is exactly that call (a fast tokenizer whose class
    changes neither step), else None. It skips transformers' Python layers: two decodes run per
    generated token, and they were most of the detokeniser's time."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        return None
    cls = type(tokenizer)
    if (isinstance(tokenizer, TokenizersBackend) and cls._decode is TokenizersBackend._decode
            and cls.decode is PreTrainedTokenizerBase.decode):
        return tokenizer.backend_tokenizer.decode
    return None


class IncrementalText:
    """Turns the output token ids of one sequence into text deltas.

    ``push(token_id)`` returns the text that can be shown now: the decoded text grows only once
    it no longer ends in an incomplete UTF-8 character (U+FFFD), and text that could be the start
    of a stop string is held back until it is known not to be one. ``stopped`` is set when a stop
    string appears; the text is cut before it (after it with ``include_stop``). A token of
    ``end_tokens`` (the sequence ends on it: ``stop_token_ids``, EOS) adds no text, as vLLM.
    ``finish()`` returns whatever is still held back.
    """

    def __init__(self, tokenizer: Any, prompt_ids: list[int], stop: list[str] | None = None, *,
                 end_tokens: Collection[int] = (), include_stop: bool = False, skip_special: bool = True) -> None:
        self._tok = tokenizer
        self._backend = backend_decode(tokenizer)
        self._end_tokens = frozenset(end_tokens)
        self._include_stop = include_stop
        self._skip_special = skip_special
        context = list(prompt_ids[-PROMPT_CONTEXT_TOKENS:])
        self._ids = context
        self._prefix = 0
        self._read = len(context)
        self._stop = [s for s in (stop or []) if s]
        self._max_stop = max((len(s) for s in self._stop), default=0)
        self.text = ""        # all output text decoded so far (cut at a stop string)
        self.emitted = 0      # characters of self.text already returned
        self.stopped = False

    @classmethod
    def for_params(cls, tokenizer: Any, prompt_ids: list[int], params: SamplingParams,
                   eos_token_ids: Collection[int]) -> IncrementalText:
        """A sequence's text under its request's settings (stop strings and tokens, vLLM's text
        settings); ``eos_token_ids`` end it unless ``ignore_eos``."""
        ends: set[int] = set()
        if not params.include_stop_str_in_output:
            ends = set(params.stop_token_ids) | (set() if params.ignore_eos else set(eos_token_ids))
        return cls(tokenizer, prompt_ids, params.stop, end_tokens=ends,
                   include_stop=params.include_stop_str_in_output, skip_special=params.skip_special_tokens)

    def _decode(self, ids: list[int]) -> str:
        text: str = (self._backend(ids, skip_special_tokens=self._skip_special) if self._backend
                     else self._tok.decode(ids, skip_special_tokens=self._skip_special,
                                           clean_up_tokenization_spaces=False))
        return text

    def _advance(self, force: bool) -> None:
        prefix_text = self._decode(self._ids[self._prefix:self._read])
        new_text = self._decode(self._ids[self._prefix:])
        if len(new_text) > len(prefix_text) and (force or not new_text.endswith("\ufffd")):
            self._append(new_text[len(prefix_text):])
            self._prefix, self._read = self._read, len(self._ids)

    def _append(self, delta: str) -> None:
        start = max(0, len(self.text) - self._max_stop + 1)
        self.text += delta
        if not self._stop:
            return
        found = [(i, len(s)) for i, s in ((self.text.find(s, start), s) for s in self._stop) if i >= 0]
        if found:
            cut, length = min(found)
            self.text = self.text[:cut + length] if self._include_stop else self.text[:cut]
            self.stopped = True

    def _held_back(self) -> int:
        """Length of the longest end of the text that is a proper prefix of a stop string."""
        text = self.text
        for n in range(min(self._max_stop - 1, len(text) - self.emitted), 0, -1):
            tail = text[-n:]
            if any(s.startswith(tail) for s in self._stop):
                return n
        return 0

    def _take(self, end: int) -> str:
        delta = self.text[self.emitted:end] if end > self.emitted else ""
        self.emitted = max(self.emitted, end)
        return delta

    def push(self, token_id: int) -> str:
        if self.stopped or token_id in self._end_tokens:
            return ""
        self._ids.append(int(token_id))
        self._advance(force=False)
        if self.stopped:
            return self._take(len(self.text))
        return self._take(len(self.text) - self._held_back())

    def finish(self) -> str:
        """The rest of the text (an incomplete character or a held-back partial stop string)."""
        if not self.stopped and self._read < len(self._ids):
            self._advance(force=True)
        return self._take(len(self.text))
