"""One sequence in the engine (``engine.py``): its tokens, sampling and the rule that ends it.

``Sequence.accept`` takes a sampled token and says whether the sequence is finished (stop string,
EOS, ``max_new_tokens`` or the context); ``ends_by_length`` says ahead of a step whether its next
token is its last by length (the engine's scheduler frees those slots for the step's prompts).
``sample_tokens`` picks each sequence's next token from a step's logits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ts.llm.params import SamplingParams, SequenceUpdate
from ts.llm.text import IncrementalText


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
                 "text", "finish_reason")

    def __init__(self, seq_id: str, prompt_ids: list[int], params: SamplingParams, tokenizer: Any) -> None:
        self.seq_id = seq_id
        self.prompt_ids = prompt_ids
        self.params = params
        self.generator: torch.Generator | None = None
        self.output_ids: list[int] = []
        self.cache: Any = None          # own cache while prefilling
        self.prefilled = 0              # prompt tokens in the cache so far
        self.text = IncrementalText(tokenizer, prompt_ids, params.stop)
        self.finish_reason: str | None = None

    @property
    def cached_len(self) -> int:
        """Tokens in the KV cache once running: the prompt and every output token but the last."""
        return len(self.prompt_ids) + len(self.output_ids) - 1

    def _length_reached(self, outputs: int, max_context: int) -> bool:
        return outputs >= self.params.max_new_tokens or len(self.prompt_ids) + outputs >= max_context

    def ends_by_length(self, max_context: int) -> bool:
        """Whether the next token is the last by ``max_new_tokens`` or the context."""
        return self._length_reached(len(self.output_ids) + 1, max_context)

    def accept(self, token: int, eos_token_ids: set[int], max_context: int) -> SequenceUpdate:
        """Append ``token``; the update to report (``finished`` with its reason when it ends)."""
        self.output_ids.append(token)
        delta = self.text.push(token)
        reason = None
        if self.text.stopped:
            reason = "stop"
        elif token in eos_token_ids and not self.params.ignore_eos:
            reason = "stop"
        elif self._length_reached(len(self.output_ids), max_context):
            reason = "length"
        if reason is not None:
            delta += self.text.finish()
            self.finish_reason = reason
        return SequenceUpdate(self.seq_id, [token], delta, reason is not None, reason, len(self.prompt_ids),
                              len(self.output_ids))


def sample_tokens(logits: torch.Tensor, seqs: list[Sequence]) -> list[int]:
    """Row ``i`` of ``logits`` gives ``seqs[i]``'s next token: the argmax when greedy, else drawn
    with its temperature, top-k and top-p from its own generator."""
    tokens = logits.argmax(dim=-1).tolist()
    for i, seq in enumerate(seqs):
        p = seq.params
        if p.greedy:
            continue
        row = logits[i] / p.temperature
        if p.top_k and p.top_k < row.numel():
            kth = torch.topk(row, p.top_k).values[-1]
            row = row.masked_fill(row < kth, float("-inf"))
        if p.top_p < 1.0:
            sorted_logits, order = torch.sort(row, descending=True)
            probs = torch.softmax(sorted_logits, dim=-1)
            drop = probs.cumsum(dim=-1) - probs > p.top_p  # keep the smallest set reaching top_p
            row = row.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
        probs = torch.softmax(row, dim=-1)
        tokens[i] = int(torch.multinomial(probs, 1, generator=seq.generator).item())
    return tokens
