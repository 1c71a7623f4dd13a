"""Structured output in the engine: each constrained sequence's grammar matcher (llguidance), and
the step's token masks applied to the batch's logits in one tensor op (``apply_masks``). The
grammar itself is compiled from the request by the API layer (``ts/llm/api/structured.py``) and
travels as a string in ``SamplingParams.grammar``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ts.llm.guidance import llguidance
from ts.llm.params import LLMRequestError

if TYPE_CHECKING:
    from ts.llm.engine.sequence import Sequence


class Grammars:
    """The tokenizer as llguidance sees it (built once, on the first constrained request) and
    the matchers made from it."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: set[int]) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = sorted(eos_token_ids)
        self._ll_tokenizer: Any = None
        self.executor: Any = None

    def matcher(self, grammar: str) -> Any:
        ll = llguidance()
        if self._ll_tokenizer is None:
            self._ll_tokenizer = ll.hf.from_tokenizer(self.tokenizer, n_vocab=self.vocab_size or None,
                                                      eos_token=self.eos_token_ids or None)
            self.executor = ll.LLExecutor()
        matcher = ll.LLMatcher(self._ll_tokenizer, grammar)
        if matcher.is_error():
            raise LLMRequestError(400, f"response_format: the schema cannot be used: {matcher.get_error()}",
                                  param="response_format", code="invalid_value")
        return matcher


def apply_masks(logits: torch.Tensor, seqs: list[Sequence], grammars: Grammars | None) -> None:
    """Mask, in place, every token a constrained row's grammar does not allow next: the masks of
    all constrained rows are computed together (in parallel, by llguidance) and applied in one op."""
    rows = [i for i, s in enumerate(seqs) if s.matcher is not None]
    if not rows or grammars is None:
        return
    import llguidance.torch as lt

    bitmask = lt.allocate_token_bitmask(len(rows), logits.shape[-1])
    lt.fill_next_token_bitmask_par(grammars.executor, [(seqs[i].matcher, j) for j, i in enumerate(rows)], bitmask)
    index = torch.tensor(rows, device=logits.device)
    vocab = logits.shape[-1]
    shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
    # bit j of word w allows token 32 w + j (llguidance's layout); its torch helper compiles a kernel per shape
    allowed = ((bitmask.to(logits.device).unsqueeze(-1) >> shifts) & 1).flatten(1)[:, :vocab].bool()
    logits.index_copy_(0, index, logits.index_select(0, index).masked_fill(~allowed, float("-inf")))
