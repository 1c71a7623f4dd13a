"""Structured output: ``response_format`` (``json_object``, ``json_schema``) as a grammar that
masks the tokens a sequence may sample next, with llguidance (``pip install llguidance``).

Why llguidance: its wheel has no dependencies (xgrammar pulls triton and a torch pin, outlines-core
builds an index over the whole vocabulary per schema, which costs seconds for a large vocabulary);
it compiles JSON schemas lazily (a new schema costs next to nothing at request time) and computes
each step's masks for all constrained rows in parallel in Rust. The masks of one step are applied
to the batch's logits in one tensor op (``apply_masks``).

A request's grammar travels in ``SamplingParams.grammar`` (llguidance's grammar JSON, a string, so
tensor-parallel and pipeline ranks replay it); each sequence gets its own matcher (``Sequence.matcher``),
which consumes every token the sequence accepts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import torch

from ts.llm.params import LLMRequestError

if TYPE_CHECKING:
    from ts.llm.sequence import Sequence

MISSING = ("structured output (response_format json_object / json_schema) needs llguidance in the worker's "
           "Python: pip install llguidance")


def _llguidance() -> Any:
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
    except ImportError:
        raise LLMRequestError(400, MISSING, param="response_format", code="unsupported_value") from None
    return llguidance


def constrains(response_format: Any) -> bool:
    """Whether ``response_format`` asks for structured output (anything but absent or text)."""
    return response_format is not None and not (isinstance(response_format, dict)
                                                and response_format.get("type") == "text")


def grammar_from_response_format(value: Any) -> str | None:
    """OpenAI's ``response_format`` as a grammar (None for plain text); a bad one is a 400."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        schema: Any = {"type": "object"}
    elif kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise LLMRequestError(400, "response_format json_schema needs json_schema.schema, a JSON schema object",
                                  param="response_format", code="invalid_value")
    else:
        raise LLMRequestError(400, "response_format.type must be text, json_object or json_schema, got "
                              f"{json.dumps(kind)}", param="response_format", code="invalid_value")
    return grammar_from_schema(schema)


def grammar_from_schema(schema: dict[str, Any], param: str = "response_format") -> str:
    """The grammar of JSON text that validates against ``schema`` (compact: no free whitespace between
    tokens, what a client parses in the fewest tokens)."""
    try:
        return str(_llguidance().LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False}))
    except LLMRequestError as exc:
        exc.param = param
        raise


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
        ll = _llguidance()
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
