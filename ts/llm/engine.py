"""A continuous-batching generation engine for Hugging Face causal language models.

The running sequences share one preallocated KV cache (``ts/llm/kvcache.py``), one row each,
right-padded: every row gets its own position ids and a 2-D attention mask hides the padding, so
each sequence sees exactly its own tokens. A step schedules, within ``max_tokens_per_step``:

* **decode**: every running sequence's next token (written in place into the cache); those that
  finish leave the batch (the last row moves into their place);
* **prefill** with the budget left, while a slot is free (``max_batch_size`` running or
  prefilling): first a long prompt already being prefilled in chunks, then waiting prompts,
  oldest first; those that fit the budget whole go together, the first that does not is
  prefilled alone over several steps. A fully prefilled sequence samples its first token and
  its keys/values are copied into a free row of the batch cache: it decodes from the next step.

On the fast path (``fastpath/``) a step is ONE forward over the decode and prompt tokens
(``_mixed_step``); on Hugging Face's forward the decode forward runs first, then the prefill's
(``_separate_step``).

Single-threaded: the caller (the worker's engine loop) calls ``add`` and ``cancel`` between
``step`` calls. ``generate_all`` runs a batch to completion. (Past 400 lines: the scheduler and
its two kinds of step share the queues' state; a sequence's own rules are in ``sequence.py``.)
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import deque
from typing import Any

import torch

from ts.llm.fastpath import choose_forward
from ts.llm.fastpath.parts import DecodeRows, PackedPrompts, Part, PromptChunk
from ts.llm.kvcache import BatchCache
from ts.llm.params import GenerationResult, LLMRequestError, SamplingParams, SequenceUpdate, TokenLogprob
from ts.llm.sampling import Sampled, sample
from ts.llm.sequence import Sequence, StepStats
from ts.llm.structured import Grammars

__all__ = ["GenerationEngine", "GenerationResult", "LLMRequestError", "SamplingParams", "SequenceUpdate",
           "StepStats"]

logger = logging.getLogger(__name__)


class GenerationEngine:
    """Continuous batching over one model; see the module docstring."""

    def __init__(self, model: Any, tokenizer: Any, max_batch_size: int = 8, max_tokens_per_step: int = 512,
                 max_waiting: int = 256, max_context: int | None = None,
                 eos_token_ids: list[int] | None = None, fast_path: bool | None = None) -> None:
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
        self.grammars = Grammars(tokenizer, self.vocab_size, self.eos_token_ids)  # response_format
        self._cache_cls = DynamicCache
        probe = DynamicCache(config=config)
        odd = {type(layer).__name__ for layer in getattr(probe, "layers", []) if type(layer) is not DynamicLayer}
        if odd:
            raise ValueError(f"{type(model).__name__} uses {', '.join(sorted(odd))} cache layers (sliding-window "
                             "or recurrent attention); the engine batches full-attention caches only")
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._logits_to_keep = "logits_to_keep" in params
        # the forward every step runs: the engine's own for known families, else the model's (fastpath/)
        self._fast_forward, self.forward_path = choose_forward(model, fast_path)
        self.device = next(model.parameters()).device
        self._waiting: deque[Sequence] = deque()
        self._prefilling: list[Sequence] = []
        self._running: list[Sequence] = []   # row i of the batch cache is _running[i]
        self._batch: BatchCache | None = None  # row i is _running[i]; made at the first join
        self._num_layers = len(probe.layers) or int(config.get_text_config(decoder=True).num_hidden_layers)
        self._cancelled: list[SequenceUpdate] = []
        self._ids: set[str] = set()
        self.last_step = StepStats()
        # False: updates carry no text unless a stop string needs it (an engine process's worker
        # detokenizes the rest beside the forward: engine_process.py)
        self.detokenize = True

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
    def add(self, seq_id: str, prompt_ids: list[int], params: SamplingParams,
            fork_ids: list[str] | None = None) -> None:
        """Queue a sequence; raises LLMRequestError (400 bad prompt, 409 id in use, 503 queue full).

        ``fork_ids`` (``n`` / ``best_of``): more sequences of the same prompt and settings; the
        prompt is prefilled once and each fork starts from a copy of its KV (``_fork``). A
        seeded request's fork ``k`` draws with seed ``seed + k``."""
        fork_ids = list(fork_ids or [])
        for sid in (seq_id, *fork_ids):
            if sid in self._ids or fork_ids.count(sid) + (sid == seq_id) > 1:
                raise LLMRequestError(409, f"request id {sid!r} is already in the engine", code="duplicate_id")
        if 1 + len(fork_ids) > self.max_batch_size:
            raise LLMRequestError(400, f"{1 + len(fork_ids)} sequences for one prompt (n / best_of) need as many "
                                  f"batch slots, but max_batch_size is {self.max_batch_size}: ask for fewer",
                                  param="n", code="invalid_value")
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
        if self.num_waiting >= self.max_waiting:
            raise LLMRequestError(
                503, f"the engine queue is full: {self.num_waiting} requests are waiting "
                f"(max_waiting={self.max_waiting}) behind {len(self._running) + len(self._prefilling)} running "
                "(max_batch_size={}); retry after 1 second".format(self.max_batch_size),
                code="queue_full", retry_after=1)
        params.validate()
        outside = params.token_ids_in(self.vocab_size) if self.vocab_size else []
        if outside:
            raise LLMRequestError(400, f"token ids {outside} (stop_token_ids / logit_bias) are outside the "
                                  f"vocabulary [0, {self.vocab_size})", param="logit_bias" if set(outside) & set(
                                      params.logit_bias) else "stop_token_ids", code="invalid_token")
        seqs = [Sequence(sid, [int(t) for t in prompt_ids], params, self.tokenizer, self.detokenize)
                for sid in (seq_id, *fork_ids)]
        for k, seq in enumerate(seqs):
            if params.grammar is not None:
                seq.matcher = self.grammars.matcher(params.grammar)
            if not params.greedy:
                seq.generator = torch.Generator(device=self.device)
                if params.seed is None:
                    seq.generator.seed()
                else:
                    seq.generator.manual_seed(int(params.seed) + k)
        seqs[0].forks = seqs[1:]
        self._waiting.append(seqs[0])
        self._ids.update(s.seq_id for s in seqs)

    def add_all(self, groups: list[tuple[str, list[int], list[str]]], params: SamplingParams) -> None:
        """One request's prompts ``(seq_id, prompt_ids, fork_ids)``: all of them queued, or none
        (the first refusal's LLMRequestError is raised after the ones queued are cancelled)."""
        added: list[str] = []
        try:
            for seq_id, ids, forks in groups:
                self.add(seq_id, ids, params, forks)
                added.append(seq_id)
        except LLMRequestError:
            for seq_id in added:
                self.cancel(seq_id)
            raise

    def cancel(self, seq_id: str) -> bool:
        """Drop a sequence now (its KV rows too); the next step reports it as 'cancelled'."""
        if seq_id not in self._ids:
            return False
        pending = [*self._waiting, *self._prefilling]
        fork = next((f for s in pending for f in s.forks if f.seq_id == seq_id), None)
        if fork is not None:  # not prefilled yet: it just will not take the prompt's KV
            parent = next(s for s in pending if fork in s.forks)
            parent.forks.remove(fork)
            self._ids.discard(seq_id)
            self._cancelled.append(SequenceUpdate(seq_id, [], "", True, "cancelled", len(fork.prompt_ids), 0))
            return True
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
                self._remove_row(row)
        self._ids.discard(seq_id)
        for gone in (seq, *seq.forks):  # a parent not yet prefilled takes its forks with it
            self._ids.discard(gone.seq_id)
            self._cancelled.append(SequenceUpdate(gone.seq_id, [], "", True, "cancelled", len(gone.prompt_ids),
                                                  len(gone.output_ids)))
        return True

    def has_work(self) -> bool:
        return bool(self._waiting or self._prefilling or self._running or self._cancelled)

    @property
    def num_running(self) -> int:
        """Batch slots taken: running rows and the sequences (with their forks) being prefilled."""
        return len(self._running) + sum(s.slots for s in self._prefilling)

    @property
    def num_waiting(self) -> int:
        """Queued sequences the next step cannot start: those beyond the free batch slots (requests
        added since the last step move into free slots at the next step, they do not wait)."""
        queued = sum(s.slots for s in self._waiting)
        return max(0, queued - max(0, self.max_batch_size - self.num_running))

    @property
    def kv_cache_usage(self) -> float:
        """The share of the batch cache's token capacity (every slot at the full context) that
        the running sequences hold."""
        return sum(s.cached_len for s in self._running) / (self.max_batch_size * self.max_context)

    @property
    def model_class(self) -> str:
        return type(self.model).__name__

    @property
    def prefix_hit_rate(self) -> float | None:
        """The prefix cache's hit ratio (prompt tokens found of those looked up); None without one."""
        return None

    def abort_all(self) -> list[str]:
        """Forget every sequence (after a failed step); returns their ids."""
        ids = [s.seq_id for p in (*self._running, *self._prefilling, *self._waiting) for s in (p, *p.forks)]
        self._waiting.clear()
        self._prefilling.clear()
        self._running.clear()
        if self._batch is not None:
            self._batch.clear()
        self._cancelled.clear()
        self._ids.clear()
        return ids

    # ------------------------------------------------------------------ stepping
    def step(self) -> list[SequenceUpdate]:
        """Decode the running batch and prefill with the budget left: in one forward on the fast
        path (``_mixed_step``), else a decode forward, then the prefill's."""
        updates, self._cancelled = self._cancelled, []
        stats = StepStats()
        with torch.inference_mode():
            if self._fast_forward is not None:
                self._mixed_step(stats, updates)
            else:
                self._separate_step(stats, updates)
        stats.running, stats.waiting = self.num_running, self.num_waiting
        self.last_step = stats
        return updates

    def _separate_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Hugging Face's forward (and a pipeline stage's): the decode forward, then the prefill's."""
        started = time.perf_counter()
        if self._running:
            stats.decode_tokens = len(self._running)
            updates.extend(self._decode())
        decoded = time.perf_counter()
        chunk, group = self._plan_prefill(self.max_tokens_per_step - stats.decode_tokens, stats, 0)
        if chunk is not None:
            self._prefill_chunk(*chunk, stats, updates)
        if group:
            self._prefill_group(group, stats, updates)
        stats.decode_s, stats.prefill_s = decoded - started, time.perf_counter() - decoded

    def _mixed_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """The running batch's decode tokens and the scheduled prompt tokens in ONE fast forward
        (one forward's costs per step instead of two: ``fastpath/parts.py``), then the decode
        rows sample and the prefilled prompts their first tokens. Time is split by what is
        measured to be one side's alone: the prompt tokens' matmuls and attention (timed in the
        forward, which runs them right after the decode rows' on the same weights) and the
        prefilled sequences' first tokens (sampling, joining the batch cache) count as prefill,
        and so does a step with no decode rows; the rest -- the decode rows' matmuls and
        attention, the norms and rotary over all the step's tokens, the mask -- counts as
        decode (conservative for the decode rate)."""
        started = time.perf_counter()
        running = len(self._running)
        # rows that end by length this step free their slots for this step's prompts
        ending = sum(1 for seq in self._running if seq.ends_by_length(self.max_context))
        chunk, group = self._plan_prefill(self.max_tokens_per_step - running, stats, ending)
        parts: list[Part] = []
        batch = self._batch
        if running:
            assert batch is not None
            stats.decode_tokens = running
            batch.begin_step()
            parts.append(DecodeRows(torch.tensor([s.output_ids[-1] for s in self._running], device=self.device),
                                    batch))
        if chunk is not None:
            seq, n = chunk
            parts.append(PromptChunk(torch.tensor(seq.prompt_ids[seq.prefilled:seq.prefilled + n], device=self.device),
                                     seq.prefilled, seq.cache))
        own = self._cache_cls(config=self.model.config) if group else None
        if group:
            parts.append(PackedPrompts([s.prompt_ids for s in group], own, self.device))
        if not parts:
            return
        assert self._fast_forward is not None
        logits = self._fast_forward.forward(parts)
        if running:
            assert batch is not None
            batch.end_step()
            updates.extend(self._decoded(logits[:running]))
        decoded = time.perf_counter()
        if chunk is not None:
            self._chunk_done(chunk[0], chunk[1], logits[running:running + 1], stats, updates)
        if group:
            self._first_tokens(group, logits[running + (chunk is not None):], own, stats, updates)
        if running:  # the prompts' own matmuls and attention were timed inside the forward
            prompts_s = self._fast_forward.rest_s
            stats.decode_s = decoded - started - prompts_s
            stats.prefill_s = time.perf_counter() - decoded + prompts_s
        else:
            stats.prefill_s = time.perf_counter() - started

    def _plan_prefill(self, budget: int, stats: StepStats,
                      ending: int) -> tuple[tuple[Sequence, int] | None, list[Sequence]]:
        """This step's prompt tokens: ``(chunk, group)``. A long prompt already being prefilled in
        chunks goes on first (it is the oldest); then waiting prompts, oldest first, while a slot
        is free (``ending`` running rows leave before the prompts join): those that fit the budget
        whole form the group prefilled together, the first that does not starts its own chunks
        when no chunk runs this step."""
        chunk: tuple[Sequence, int] | None = None
        if self._prefilling and budget > 0:
            seq = self._prefilling[0]
            n = min(budget, len(seq.prompt_ids) - seq.prefilled)
            budget -= n
            chunk = (seq, n)
        group: list[Sequence] = []
        in_use = self.num_running - ending
        while (budget > 0 and self._waiting
               and in_use + sum(s.slots for s in group) + self._waiting[0].slots <= self.max_batch_size):
            n = len(self._waiting[0].prompt_ids)
            if n > budget and (group or chunk is not None):
                break
            seq = self._waiting.popleft()
            if n > budget:  # alone and too long for this step: prefilled in chunks
                seq.cache = self._cache_cls(config=self.model.config)
                self._prefilling.append(seq)
                chunk = (seq, budget)
                budget = 0
                break
            group.append(seq)
            budget -= n
        stats.prefill_tokens = sum(len(s.prompt_ids) for s in group) + (chunk[1] if chunk else 0)
        return chunk, group

    # PipelineEngine (ts/llm/pipeline_parallel.py) overrides _forward and _sample to run one pipeline stage:
    # keep their signatures (a forward may return None on a stage without the LM head)
    def _forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                 attention_mask: torch.Tensor | None, last: list[int] | None = None) -> torch.Tensor:
        """Logits ``(rows, vocab)`` of each row's position ``last[row]`` (default: the last one)."""
        if self._fast_forward is not None:
            return self._fast_forward(input_ids, position_ids, cache, last)
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = (1 if last is None else
                                        torch.tensor([[i] for i in last], device=self.device))
        out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, **kwargs)
        logits = out.logits
        if last is None or self._logits_to_keep:
            return logits[:, -1, :].float()
        return logits[torch.arange(len(last), device=self.device), torch.tensor(last, device=self.device)].float()

    def _prefill_chunk(self, seq: Sequence, n: int, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """The next ``n`` prompt tokens of a long prompt, in the sequence's own cache."""
        start = seq.prefilled
        ids = torch.tensor([seq.prompt_ids[start:start + n]], device=self.device)
        positions = torch.arange(start, start + n, device=self.device).unsqueeze(0)
        self._chunk_done(seq, n, self._forward(ids, positions, seq.cache, None), stats, updates)

    def _chunk_done(self, seq: Sequence, n: int, logits: torch.Tensor, stats: StepStats,
                    updates: list[SequenceUpdate]) -> None:
        """After a chunk's forward: the prompt's last chunk samples the first token (``logits``)."""
        seq.prefilled += n
        if seq.prefilled < len(seq.prompt_ids):
            return
        self._prefilling.remove(seq)
        own = seq.cache
        seq.cache = None
        self._first_tokens([seq], logits, own, stats, updates)

    def _prefill_group(self, group: list[Sequence], stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Whole prompts in one forward, right-padded (a causal model's real tokens never see the
        padding after them, so no mask is needed)."""
        lengths = [len(s.prompt_ids) for s in group]
        width = max(lengths)
        ids = torch.tensor([s.prompt_ids + [0] * (width - len(s.prompt_ids)) for s in group], device=self.device)
        positions = torch.arange(width, device=self.device).unsqueeze(0).expand(len(group), width)
        own = self._cache_cls(config=self.model.config)
        logits = self._forward(ids, positions, own, None, last=[n - 1 for n in lengths])
        for seq in group:
            seq.prefilled = len(seq.prompt_ids)
        self._first_tokens(group, logits, own, stats, updates)

    def _first_tokens(self, seqs: list[Sequence], logits: torch.Tensor | None, own: Any, stats: StepStats,
                      updates: list[SequenceUpdate]) -> None:
        """Prefilled sequences sample their first token; those not finished join the batch cache
        (row i of ``own`` is ``seqs[i]``'s keys/values). A sequence's forks (``n``) sample from
        the same logits row and join with a copy of the same KV row."""
        rows = [i for i, seq in enumerate(seqs) for _ in range(seq.slots)]
        every = [s for seq in seqs for s in (seq, *seq.forks)]
        if logits is not None and len(rows) != len(seqs):
            logits = logits.index_select(0, torch.tensor(rows, device=logits.device))
        sampled = self._sample(logits, every)
        for row, seq, token, logprob in zip(rows, every, sampled.tokens, sampled.logprobs, strict=True):
            seq.forks = []
            update = self._accept(seq, token, logprob)
            stats.prefilled.append(seq.seq_id)
            updates.append(update)
            if not update.finished:
                self._fork(own, row, seq)

    def _fork(self, own: Any, row: int, seq: Sequence) -> None:
        """``seq`` joins the batch with a copy of row ``row`` of ``own`` (the prefilled prompt's
        keys/values): one prompt's forks each copy the same row (a paged cache would share it)."""
        if self._batch is None:
            self._batch = BatchCache(self._num_layers, self.max_batch_size, self.max_context, self.device)
        self._batch.add_row([(layer.keys[row:row + 1], layer.values[row:row + 1]) for layer in own.layers],
                            seq.cached_len)
        self._running.append(seq)

    def _decode(self) -> list[SequenceUpdate]:
        batch = self._batch
        assert batch is not None
        ids = torch.tensor([[s.output_ids[-1]] for s in self._running], device=self.device)
        positions, mask = batch.begin_step()
        logits = self._forward(ids, positions, batch, mask)
        batch.end_step()
        return self._decoded(logits)

    def _decoded(self, logits: torch.Tensor) -> list[SequenceUpdate]:
        """The running rows sample their next tokens; the finished leave the batch."""
        sampled = self._sample(logits, self._running)
        updates = [self._accept(seq, tok, lp)
                   for seq, tok, lp in zip(self._running, sampled.tokens, sampled.logprobs, strict=True)]
        for row in reversed([i for i, u in enumerate(updates) if u.finished]):
            self._remove_row(row)
        return updates

    def _remove_row(self, row: int) -> None:
        """The batch cache moves its last row into ``row``: the running list mirrors that."""
        assert self._batch is not None
        with torch.inference_mode():  # the buffers are inference tensors; cancel comes between steps
            self._batch.remove_row(row)
        last = self._running.pop()
        if row < len(self._running):
            self._running[row] = last

    def _sample(self, logits: torch.Tensor | None, seqs: list[Sequence]) -> Sampled:
        assert logits is not None
        return sample(logits, seqs, self.eos_token_ids, self.grammars)

    def _accept(self, seq: Sequence, token: int, logprob: TokenLogprob | None = None) -> SequenceUpdate:
        update = seq.accept(token, self.eos_token_ids, self.max_context, logprob)
        if update.finished:
            self._ids.discard(seq.seq_id)
        return update

    # ------------------------------------------------------------------ run to completion
    def generate_all(self, batch: list[tuple[str, list[int], SamplingParams]],
                     forks: dict[str, list[str]] | None = None) -> dict[str, GenerationResult]:
        """Run a batch to completion; a request ``add`` refuses gets a result with ``error`` set
        (so do its ``forks``: ``{seq id: fork ids}``, each fork with its own result)."""
        forks = forks or {}
        if self.has_work():
            raise RuntimeError("generate_all needs an idle engine: it would swallow the updates of the "
                               "sequences already running")
        results: dict[str, GenerationResult] = {}
        pending = deque(batch)
        texts: dict[str, list[str]] = {}
        while pending or self.has_work():
            while pending and self.num_waiting < self.max_waiting:
                seq_id, ids, params = pending.popleft()
                group = [seq_id, *forks.get(seq_id, [])]
                try:
                    self.add(seq_id, ids, params, group[1:])
                except LLMRequestError as exc:
                    results.update((sid, GenerationResult(sid, error=exc)) for sid in group)
                    continue
                for sid in group:
                    results[sid] = GenerationResult(sid, prompt_tokens=len(ids))
                    texts[sid] = []
            for u in self.step():
                res = results[u.seq_id]
                res.token_ids.extend(u.new_token_ids)
                res.logprobs.extend(u.logprobs or [])
                texts[u.seq_id].append(u.text_delta)
                if u.finished:
                    res.finish_reason, res.completion_tokens = u.finish_reason, u.completion_tokens
                    res.text = "".join(texts.pop(u.seq_id))
        return results

