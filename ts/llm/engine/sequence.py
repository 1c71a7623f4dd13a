"""One sequence in the engine (``engine.py``): its tokens, sampling and the rule that ends it.

``Sequence.accept`` takes a sampled token and says whether the sequence is finished (stop string,
EOS, ``max_new_tokens`` or the context); ``ends_by_length`` says ahead of a step whether its next
token is its last by length (the engine's scheduler frees those slots for the step's prompts).
Sampling itself is ``sampling.py``'s, over the whole batch.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import torch

from ts.llm.engine.text import IncrementalText
from ts.llm.params import LLMRequestError, SamplingParams, SequenceUpdate, TokenLogprob


@dataclass
class StepStats:
    """The last step's schedule (for tests, metrics and logs)."""

    decode_tokens: int = 0
    prefill_tokens: int = 0
    prefilled: list[str] = field(default_factory=list)  # sequences whose prompt finished prefilling
    running: int = 0
    waiting: int = 0
    decode_s: float = 0.0   # time decoding (engine.py's step says what counts)
    prefill_s: float = 0.0  # time prefilling and in the prefilled sequences' first tokens


class Sequence:
    __slots__ = ("seq_id", "prompt_ids", "params", "generator", "output_ids", "cache", "prefilled",
                 "text", "finish_reason", "forks", "cumulative_logprob", "matcher")

    def __init__(self, seq_id: str, prompt_ids: list[int], params: SamplingParams, tokenizer: Any,
                 detokenize: bool = True, eos_token_ids: Collection[int] = ()) -> None:
        self.seq_id = seq_id
        self.prompt_ids = prompt_ids
        self.params = params
        self.generator: torch.Generator | None = None
        self.output_ids: list[int] = []
        self.cache: Any = None          # own cache while prefilling
        self.prefilled = 0              # prompt tokens in the cache so far
        # the text deltas; None: the engine's caller detokenizes (an engine process's worker),
        # except where a stop string must be found here to end the sequence
        self.text = (IncrementalText.for_params(tokenizer, prompt_ids, params, eos_token_ids)
                     if detokenize or params.stop else None)
        self.finish_reason: str | None = None
        self.forks: list[Sequence] = []  # n / best_of: siblings that take this prompt's KV once prefilled
        self.cumulative_logprob = 0.0     # sum of the chosen tokens' logprobs (when logprobs are on)
        self.matcher: Any = None          # structured output: the grammar's state (ts/llm/engine/grammar.py)

    @property
    def slots(self) -> int:
        """Batch rows this sequence takes once prefilled: itself and its forks."""
        return 1 + len(self.forks)

    @property
    def cached_len(self) -> int:
        """Tokens in the KV cache once running: the prompt and every output token but the last."""
        return len(self.prompt_ids) + len(self.output_ids) - 1

    def _length_reached(self, outputs: int, max_context: int) -> bool:
        return outputs >= self.params.max_new_tokens or len(self.prompt_ids) + outputs >= max_context

    def ends_by_length(self, max_context: int) -> bool:
        """Whether the next token is the last by ``max_new_tokens`` or the context."""
        return self._length_reached(len(self.output_ids) + 1, max_context)

    def accept(self, token: int, eos_token_ids: set[int], max_context: int,
               logprob: TokenLogprob | None = None) -> SequenceUpdate:
        """Append ``token``; the update to report (``finished`` with its reason when it ends)."""
        self.output_ids.append(token)
        if self.matcher is not None:
            self.matcher.consume_token(token)
        if logprob is not None:
            self.cumulative_logprob += logprob.logprob
        delta = self.text.push(token) if self.text is not None else ""
        reason = None
        if self.matcher is not None and self.matcher.is_error():  # no text of the grammar goes on from here
            return self._grammar_failed(token, logprob)
        if self.text is not None and self.text.stopped:
            reason = "stop"
        elif token in eos_token_ids and not self.params.ignore_eos or token in self.params.stop_token_ids:
            reason = "stop"
        elif self._length_reached(len(self.output_ids), max_context):
            reason = "length"
        if reason is not None:
            delta += self.text.finish() if self.text is not None else ""
            self.finish_reason = reason
        return SequenceUpdate(self.seq_id, [token], delta, reason is not None, reason, len(self.prompt_ids),
                              len(self.output_ids), None if logprob is None else [logprob])

    def _grammar_failed(self, token: int, logprob: TokenLogprob | None) -> SequenceUpdate:
        """The structured output's grammar has no way on (a schema no finite text satisfies, e.g.
        an object that must hold another one): the request fails naming it, rather than ending
        with a cut-off text as if it were complete."""
        self.finish_reason = "error"
        error = LLMRequestError(400, "response_format: no text satisfies the schema past "
                                f"{len(self.output_ids)} tokens ({self.matcher.get_error().strip()}); a schema whose "
                                "required properties nest without end has no finite JSON text: make one optional",
                                param="response_format", code="invalid_value")
        return SequenceUpdate(self.seq_id, [token], "", True, "error", len(self.prompt_ids), len(self.output_ids),
                              None if logprob is None else [logprob], error=error)
