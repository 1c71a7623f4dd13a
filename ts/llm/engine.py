"""A continuous-batching generation engine for Hugging Face causal language models.

One batched KV cache (a ``DynamicCache``) holds the running sequences, one row each, left-padded
to a common length; a 2-D attention mask hides the padding and every row gets its own position
ids, so each sequence sees exactly its own tokens. A step:

1. **decode**: one forward for all running sequences (one token each), then each samples its
   next token; sequences that finish leave the batch (their rows are dropped, and columns of
   padding no row needs any more are trimmed);
2. **prefill** with what is left of the step's token budget (``max_tokens_per_step`` minus the
   decode tokens): waiting sequences, oldest first, while a slot is free (``max_batch_size``
   running or prefilling). Each prompt runs alone in its own cache, in chunks when it does not
   fit the budget; a fully prefilled sequence samples its first token and its cache is
   left-padded into the batch, so it decodes with the others from the next step on.

Single-threaded: the caller (the worker's engine loop) calls ``add`` and ``cancel`` between
``step`` calls. ``generate_all`` runs a batch to completion.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from ts.llm.params import GenerationResult, LLMRequestError, SamplingParams, SequenceUpdate
from ts.llm.text import IncrementalText

__all__ = ["GenerationEngine", "GenerationResult", "LLMRequestError", "SamplingParams", "SequenceUpdate",
           "StepStats"]

logger = logging.getLogger(__name__)


@dataclass
class StepStats:
    """The last step's schedule (for tests, metrics and logs)."""

    decode_tokens: int = 0
    prefill_tokens: int = 0
    prefilled: list[str] = field(default_factory=list)  # sequences whose prompt finished prefilling
    running: int = 0
    waiting: int = 0


class _Sequence:
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


class GenerationEngine:
    """Continuous batching over one model; see the module docstring."""

    def __init__(self, model: Any, tokenizer: Any, max_batch_size: int = 8, max_tokens_per_step: int = 512,
                 max_waiting: int = 256, max_context: int | None = None,
                 eos_token_ids: list[int] | None = None) -> None:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if max_tokens_per_step < max_batch_size:
            raise ValueError(f"max_tokens_per_step ({max_tokens_per_step}) must be at least max_batch_size "
                             f"({max_batch_size}): every running sequence decodes one token per step")
        if max_waiting < 1:
            raise ValueError(f"max_waiting must be at least 1, got {max_waiting}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.max_tokens_per_step = max_tokens_per_step
        self.max_waiting = max_waiting
        config = model.config
        model_ctx = getattr(config, "max_position_embeddings", None)
        if max_context is not None and model_ctx is not None and max_context > model_ctx:
            raise ValueError(f"max_context={max_context} is more than the model's "
                             f"max_position_embeddings={model_ctx}")
        self.max_context = max_context or model_ctx
        self.context_limit_name = ("max_context" if max_context else "max_position_embeddings")
        if not self.max_context:
            raise ValueError("the model config has no max_position_embeddings: give max_context")
        self.vocab_size = int(getattr(config, "vocab_size", 0) or 0)
        self.eos_token_ids = set(eos_token_ids if eos_token_ids is not None else self._find_eos())
        self._cache_cls = DynamicCache
        probe = DynamicCache(config=config)
        odd = {type(layer).__name__ for layer in getattr(probe, "layers", []) if type(layer) is not DynamicLayer}
        if odd:
            raise ValueError(f"{type(model).__name__} uses {', '.join(sorted(odd))} cache layers (sliding-window "
                             "or recurrent attention); the engine batches full-attention caches only")
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._logits_to_keep = "logits_to_keep" in params
        self.device = next(model.parameters()).device
        self._waiting: deque[_Sequence] = deque()
        self._prefilling: list[_Sequence] = []
        self._running: list[_Sequence] = []   # row i of the batch cache is _running[i]
        self._cache: Any = None
        self._mask: torch.Tensor | None = None  # (rows, columns) 1 = real token, 0 = left padding
        self._cancelled: list[SequenceUpdate] = []
        self._ids: set[str] = set()
        self.last_step = StepStats()

    def _find_eos(self) -> list[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.model.config, self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return sorted(ids)

    # ------------------------------------------------------------------ requests
    def add(self, seq_id: str, prompt_ids: list[int], params: SamplingParams) -> None:
        """Queue a sequence; raises LLMRequestError (400 bad prompt, 409 id in use, 503 queue full)."""
        if seq_id in self._ids:
            raise LLMRequestError(409, f"request id {seq_id!r} is already in the engine", code="duplicate_id")
        if not prompt_ids:
            raise LLMRequestError(400, "the prompt is empty: give at least one token", param="prompt",
                                  code="empty_prompt")
        if self.vocab_size and any(not 0 <= int(t) < self.vocab_size for t in prompt_ids):
            raise LLMRequestError(400, f"the prompt has token ids outside the vocabulary [0, {self.vocab_size})",
                                  param="prompt", code="invalid_token")
        if len(prompt_ids) >= self.max_context:
            raise LLMRequestError(
                400, f"the prompt has {len(prompt_ids)} tokens, but the model's context is {self.max_context} "
                f"tokens ({self.context_limit_name}={self.max_context}) and needs room for at least one new "
                "token: shorten the prompt", param="prompt", code="context_length_exceeded")
        if len(self._waiting) >= self.max_waiting:
            raise LLMRequestError(
                503, f"the engine queue is full: {len(self._waiting)} requests are waiting "
                f"(max_waiting={self.max_waiting}) behind {len(self._running) + len(self._prefilling)} running "
                "(max_batch_size={}); retry after 1 second".format(self.max_batch_size),
                code="queue_full", retry_after=1)
        params.validate()
        seq = _Sequence(seq_id, [int(t) for t in prompt_ids], params, self.tokenizer)
        if not params.greedy:
            seq.generator = torch.Generator(device=self.device)
            if params.seed is None:
                seq.generator.seed()
            else:
                seq.generator.manual_seed(int(params.seed))
        self._waiting.append(seq)
        self._ids.add(seq_id)

    def cancel(self, seq_id: str) -> bool:
        """Drop a sequence now (its KV rows too); the next step reports it as 'cancelled'."""
        if seq_id not in self._ids:
            return False
        for seq in self._waiting:
            if seq.seq_id == seq_id:
                self._waiting.remove(seq)
                break
        else:
            for seq in self._prefilling:
                if seq.seq_id == seq_id:
                    self._prefilling.remove(seq)
                    seq.cache = None
                    break
            else:
                row = next(i for i, s in enumerate(self._running) if s.seq_id == seq_id)
                seq = self._running[row]
                self._drop_rows([row])
        self._ids.discard(seq_id)
        self._cancelled.append(SequenceUpdate(seq_id, [], "", True, "cancelled", len(seq.prompt_ids),
                                              len(seq.output_ids)))
        return True

    def has_work(self) -> bool:
        return bool(self._waiting or self._prefilling or self._running or self._cancelled)

    @property
    def num_running(self) -> int:
        return len(self._running) + len(self._prefilling)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    def abort_all(self) -> list[str]:
        """Forget every sequence (after a failed step); returns their ids."""
        ids = [s.seq_id for s in (*self._running, *self._prefilling, *self._waiting)]
        self._waiting.clear()
        self._prefilling.clear()
        self._running.clear()
        self._cache = self._mask = None
        self._cancelled.clear()
        self._ids.clear()
        return ids

    # ------------------------------------------------------------------ stepping
    def step(self) -> list[SequenceUpdate]:
        """One decode forward for the running batch, then prefill with the budget left."""
        updates, self._cancelled = self._cancelled, []
        stats = StepStats()
        with torch.inference_mode():
            if self._running:
                stats.decode_tokens = len(self._running)
                updates.extend(self._decode())
            budget = self.max_tokens_per_step - stats.decode_tokens
            while budget > 0:
                seq = self._next_prefill()
                if seq is None:
                    break
                n = min(budget, len(seq.prompt_ids) - seq.prefilled)
                budget -= n
                stats.prefill_tokens += n
                update = self._prefill(seq, n)
                if update is not None:
                    stats.prefilled.append(seq.seq_id)
                    updates.append(update)
        stats.running, stats.waiting = self.num_running, len(self._waiting)
        self.last_step = stats
        return updates

    def _next_prefill(self) -> _Sequence | None:
        if self._prefilling:
            return self._prefilling[0]
        if self._waiting and len(self._running) < self.max_batch_size:
            seq = self._waiting.popleft()
            seq.cache = self._cache_cls(config=self.model.config)
            self._prefilling.append(seq)
            return seq
        return None

    def _forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                 attention_mask: torch.Tensor | None) -> torch.Tensor:
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, **kwargs)
        return out.logits[:, -1, :].float()

    def _prefill(self, seq: _Sequence, n: int) -> SequenceUpdate | None:
        start = seq.prefilled
        ids = torch.tensor([seq.prompt_ids[start:start + n]], device=self.device)
        positions = torch.arange(start, start + n, device=self.device).unsqueeze(0)
        logits = self._forward(ids, positions, seq.cache, None)
        seq.prefilled += n
        if seq.prefilled < len(seq.prompt_ids):
            return None
        self._prefilling.remove(seq)
        token = self._sample(logits, [seq])[0]
        update = self._accept(seq, token)
        if update.finished:
            seq.cache = None
        else:
            self._join(seq)
        return update

    def _decode(self) -> list[SequenceUpdate]:
        rows = len(self._running)
        ids = torch.tensor([[s.output_ids[-1]] for s in self._running], device=self.device)
        positions = torch.tensor([[s.cached_len] for s in self._running], device=self.device)
        assert self._mask is not None
        self._mask = torch.cat([self._mask, self._mask.new_ones(rows, 1)], dim=1)
        logits = self._forward(ids, positions, self._cache, self._mask)
        tokens = self._sample(logits, self._running)
        updates = [self._accept(seq, tok) for seq, tok in zip(self._running, tokens, strict=True)]
        done = [i for i, u in enumerate(updates) if u.finished]
        if done:
            self._drop_rows(done)
        return updates

    def _sample(self, logits: torch.Tensor, seqs: list[_Sequence]) -> list[int]:
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

    def _accept(self, seq: _Sequence, token: int) -> SequenceUpdate:
        seq.output_ids.append(token)
        p = seq.params
        delta = seq.text.push(token)
        reason = None
        if seq.text.stopped:
            reason = "stop"
        elif token in self.eos_token_ids and not p.ignore_eos:
            reason = "stop"
        elif len(seq.output_ids) >= p.max_new_tokens or len(seq.prompt_ids) + len(seq.output_ids) >= self.max_context:
            reason = "length"
        if reason is not None:
            delta += seq.text.finish()
            seq.finish_reason = reason
            self._ids.discard(seq.seq_id)
        return SequenceUpdate(seq.seq_id, [token], delta, reason is not None, reason, len(seq.prompt_ids),
                              len(seq.output_ids))

    # ------------------------------------------------------------------ the batch cache
    def _layers(self, cache: Any) -> list[Any]:
        return list(cache.layers)

    def _join(self, seq: _Sequence) -> None:
        """Left-pad the sequence's own cache into the batch cache as a new last row."""
        length = seq.cached_len
        if self._cache is None:
            self._cache, self._mask = seq.cache, torch.ones(1, length, dtype=torch.long, device=self.device)
        else:
            width = self._mask.shape[1]
            grow = max(0, length - width)
            pad = max(0, width - length)
            for batch_layer, own in zip(self._layers(self._cache), self._layers(seq.cache), strict=True):
                batch_layer.keys = torch.cat([_left_pad(batch_layer.keys, grow), _left_pad(own.keys, pad)], dim=0)
                batch_layer.values = torch.cat([_left_pad(batch_layer.values, grow), _left_pad(own.values, pad)], dim=0)
            row = torch.cat([self._mask.new_zeros(1, pad), self._mask.new_ones(1, length)], dim=1)
            self._mask = torch.cat([torch.cat([self._mask.new_zeros(len(self._running), grow), self._mask], dim=1),
                                    row], dim=0)
        seq.cache = None
        self._running.append(seq)

    def _drop_rows(self, rows: list[int]) -> None:
        gone = set(rows)
        keep = [i for i in range(len(self._running)) if i not in gone]
        self._running = [self._running[i] for i in keep]
        if not keep:
            self._cache = self._mask = None
            return
        assert self._mask is not None
        index = torch.tensor(keep, device=self.device)
        mask = self._mask.index_select(0, index)
        used = mask.any(dim=0).nonzero()
        first = int(used[0]) if used.numel() else mask.shape[1]  # columns before it are padding in every row
        self._mask = mask[:, first:]
        for layer in self._layers(self._cache):
            layer.keys = layer.keys.index_select(0, index)[:, :, first:]
            layer.values = layer.values.index_select(0, index)[:, :, first:]

    # ------------------------------------------------------------------ run to completion
    def generate_all(self, batch: list[tuple[str, list[int], SamplingParams]]) -> dict[str, GenerationResult]:
        """Run a batch to completion; a request ``add`` refuses gets a result with ``error`` set."""
        if self.has_work():
            raise RuntimeError("generate_all needs an idle engine: it would swallow the updates of the "
                               "sequences already running")
        results: dict[str, GenerationResult] = {}
        pending = deque(batch)
        texts: dict[str, list[str]] = {}
        while pending or self.has_work():
            while pending and len(self._waiting) < self.max_waiting:
                seq_id, ids, params = pending.popleft()
                try:
                    self.add(seq_id, ids, params)
                except LLMRequestError as exc:
                    results[seq_id] = GenerationResult(seq_id, error=exc)
                    continue
                results[seq_id] = GenerationResult(seq_id, prompt_tokens=len(ids))
                texts[seq_id] = []
            for u in self.step():
                res = results[u.seq_id]
                res.token_ids.extend(u.new_token_ids)
                texts[u.seq_id].append(u.text_delta)
                if u.finished:
                    res.finish_reason, res.completion_tokens = u.finish_reason, u.completion_tokens
                    res.text = "".join(texts.pop(u.seq_id))
        return results


def _left_pad(t: torch.Tensor, n: int) -> torch.Tensor:
    """Zeros before the sequence axis (dim 2) of a (batch, heads, seq, dim) tensor."""
    if n == 0:
        return t
    shape = list(t.shape)
    shape[2] = n
    return torch.cat([t.new_zeros(shape), t], dim=2)
