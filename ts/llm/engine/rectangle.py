"""The rectangle batch cache's scheduler: the running sequences share one preallocated KV cache
(``kvcache.py``), one row each, right-padded: every row gets its own position ids and a 2-D
attention mask hides the padding, so each sequence sees exactly its own tokens. A step schedules,
within ``max_tokens_per_step``:

* **decode**: every running sequence's next token (written in place into the cache); those that
  finish leave the batch (the last row moves into their place);
* **prefill** with the budget left, while a slot is free (``max_batch_size`` running or
  prefilling): first a long prompt already being prefilled in chunks, then waiting prompts,
  oldest first; those that fit the budget whole go together, the first that does not is
  prefilled alone over several steps. A fully prefilled sequence samples its first token and
  its keys/values are copied into a free row of the batch cache: it decodes from the next step.

On the fast path (``fastpath/``) a step is ONE forward over the decode and prompt tokens
(``_mixed_step``); otherwise (Hugging Face's forward, a pipeline stage) the decode forward runs
first, then the prefill's (``_separate_step``). ``n`` / ``best_of``: a prompt is prefilled once
and each fork joins the batch with a copy of its KV row.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from transformers import DynamicCache

from ts.llm.engine.fastpath.parts import DecodeRows, PackedPrompts, Part, PromptChunk
from ts.llm.engine.kvcache import BatchCache
from ts.llm.engine.sequence import Sequence, StepStats
from ts.llm.engine.state import SchedulerState
from ts.llm.params import LLMRequestError, SequenceUpdate


class RectangleKV:
    """One right-padded row per running sequence; see the module docstring."""

    description = ""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self._batch: BatchCache | None = None  # row i is state.running[i]; made at the first join

    # ------------------------------------------------------------------ requests
    def check(self, prompt_ids: list[int], sequences: int) -> None:
        """Any prompt within the context fits a row; its forks join the batch with it."""
        max_batch_size = self.state.limits.max_batch_size
        if sequences > max_batch_size:
            raise LLMRequestError(400, f"{sequences} sequences for one prompt (n / best_of) need as many batch slots, "
                                  f"but max_batch_size is {max_batch_size}: ask for fewer", param="n",
                                  code="invalid_value")

    def enqueue(self, seqs: list[Sequence]) -> None:
        seqs[0].forks = seqs[1:]
        self.state.waiting.append(seqs[0])

    def remove(self, seq_id: str) -> list[Sequence]:
        st = self.state
        pending = [*st.waiting, *st.prefilling]
        fork = next((f for s in pending for f in s.forks if f.seq_id == seq_id), None)
        if fork is not None:  # not prefilled yet: it just will not take the prompt's KV
            parent = next(s for s in pending if fork in s.forks)
            parent.forks.remove(fork)
            return [fork]
        seq = next((s for s in st.waiting if s.seq_id == seq_id), None)
        if seq is not None:
            st.waiting.remove(seq)
        else:
            seq = next((s for s in st.prefilling if s.seq_id == seq_id), None)
            if seq is not None:
                st.prefilling.remove(seq)
                seq.cache = None
            else:
                row = next(i for i, s in enumerate(st.running) if s.seq_id == seq_id)
                seq = st.running[row]
                self._remove_row(row)
        return [seq, *seq.forks]  # a parent not yet prefilled takes its forks with it

    def forget_all(self) -> None:
        if self._batch is not None:
            self._batch.clear()

    def converse(self, seq_id: str, conversation: str) -> None:
        """The rectangle keeps no KV between turns: each turn prefills the conversation again."""

    def end_conversation(self, conversation: str) -> None:
        """Nothing kept (``converse``)."""

    @property
    def kv_cache_usage(self) -> float:
        """The share of the batch cache's token capacity (every slot at the full context) that
        the running sequences hold."""
        limits = self.state.limits
        return sum(s.cached_len for s in self.state.running) / (limits.max_batch_size * limits.max_context)

    @property
    def prefix_hit_rate(self) -> float | None:
        return None  # no prefix cache

    # ------------------------------------------------------------------ stepping
    def step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        if self.state.runner.fast_forward is not None:
            self._mixed_step(stats, updates)
        else:
            self._separate_step(stats, updates)

    def _new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.state.runner.model.config)

    def _separate_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Hugging Face's forward (and a pipeline stage's): the decode forward, then the prefill's."""
        started = time.perf_counter()
        if self.state.running:
            stats.decode_tokens = len(self.state.running)
            updates.extend(self._decode())
        decoded = time.perf_counter()
        chunk, group = self._plan_prefill(self.state.limits.max_tokens_per_step - stats.decode_tokens, stats, 0)
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
        st = self.state
        fast = st.runner.fast_forward
        assert fast is not None
        device = st.runner.device
        started = time.perf_counter()
        running = len(st.running)
        # rows that end by length this step free their slots for this step's prompts
        ending = sum(1 for seq in st.running if seq.ends_by_length(st.limits.max_context))
        chunk, group = self._plan_prefill(st.limits.max_tokens_per_step - running, stats, ending)
        parts: list[Part] = []
        batch = self._batch
        if running:
            assert batch is not None
            stats.decode_tokens = running
            batch.begin_step()
            parts.append(DecodeRows(torch.tensor([s.output_ids[-1] for s in st.running], device=device), batch))
        if chunk is not None:
            seq, n = chunk
            parts.append(PromptChunk(torch.tensor(seq.prompt_ids[seq.prefilled:seq.prefilled + n], device=device),
                                     seq.prefilled, seq.cache))
        own = self._new_cache() if group else None
        if group:
            parts.append(PackedPrompts([s.prompt_ids for s in group], own, device))
        if not parts:
            return
        logits = fast.forward(parts)
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
            prompts_s = fast.rest_s
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
        st = self.state
        chunk: tuple[Sequence, int] | None = None
        if st.prefilling and budget > 0:
            seq = st.prefilling[0]
            n = min(budget, len(seq.prompt_ids) - seq.prefilled)
            budget -= n
            chunk = (seq, n)
        group: list[Sequence] = []
        in_use = st.num_running - ending
        while (budget > 0 and st.waiting
               and in_use + sum(s.slots for s in group) + st.waiting[0].slots <= st.limits.max_batch_size):
            n = len(st.waiting[0].prompt_ids)
            if n > budget and (group or chunk is not None):
                break
            seq = st.waiting.popleft()
            if n > budget:  # alone and too long for this step: prefilled in chunks
                seq.cache = self._new_cache()
                st.prefilling.append(seq)
                chunk = (seq, budget)
                budget = 0
                break
            group.append(seq)
            budget -= n
        stats.prefill_tokens = sum(len(s.prompt_ids) for s in group) + (chunk[1] if chunk else 0)
        return chunk, group

    def _prefill_chunk(self, seq: Sequence, n: int, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """The next ``n`` prompt tokens of a long prompt, in the sequence's own cache."""
        device = self.state.runner.device
        start = seq.prefilled
        ids = torch.tensor([seq.prompt_ids[start:start + n]], device=device)
        positions = torch.arange(start, start + n, device=device).unsqueeze(0)
        self._chunk_done(seq, n, self.state.runner.forward(ids, positions, seq.cache, None), stats, updates)

    def _chunk_done(self, seq: Sequence, n: int, logits: torch.Tensor | None, stats: StepStats,
                    updates: list[SequenceUpdate]) -> None:
        """After a chunk's forward: the prompt's last chunk samples the first token (``logits``)."""
        seq.prefilled += n
        if seq.prefilled < len(seq.prompt_ids):
            return
        self.state.prefilling.remove(seq)
        own = seq.cache
        seq.cache = None
        self._first_tokens([seq], logits, own, stats, updates)

    def _prefill_group(self, group: list[Sequence], stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Whole prompts in one forward, right-padded (a causal model's real tokens never see the
        padding after them, so no mask is needed)."""
        device = self.state.runner.device
        lengths = [len(s.prompt_ids) for s in group]
        width = max(lengths)
        ids = torch.tensor([s.prompt_ids + [0] * (width - len(s.prompt_ids)) for s in group], device=device)
        positions = torch.arange(width, device=device).unsqueeze(0).expand(len(group), width)
        own = self._new_cache()
        logits = self.state.runner.forward(ids, positions, own, None, last=[n - 1 for n in lengths])
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
        sampled = self.state.sample(logits, every)
        for row, seq, token, logprob in zip(rows, every, sampled.tokens, sampled.logprobs, strict=True):
            seq.forks = []
            update = self.state.accept(seq, token, logprob)
            stats.prefilled.append(seq.seq_id)
            updates.append(update)
            if not update.finished:
                self._join(own, row, seq)

    def _join(self, own: Any, row: int, seq: Sequence) -> None:
        """``seq`` joins the batch with a copy of row ``row`` of ``own`` (the prefilled prompt's
        keys/values): one prompt's forks each copy the same row (a paged cache would share it)."""
        st = self.state
        if self._batch is None:
            self._batch = BatchCache(st.num_layers, st.limits.max_batch_size, st.limits.max_context,
                                     st.runner.device)
        self._batch.add_row([(layer.keys[row:row + 1], layer.values[row:row + 1]) for layer in own.layers],
                            seq.cached_len)
        st.running.append(seq)

    def _decode(self) -> list[SequenceUpdate]:
        batch = self._batch
        assert batch is not None
        ids = torch.tensor([[s.output_ids[-1]] for s in self.state.running], device=self.state.runner.device)
        positions, mask = batch.begin_step()
        logits = self.state.runner.forward(ids, positions, batch, mask)
        batch.end_step()
        return self._decoded(logits)

    def _decoded(self, logits: torch.Tensor | None) -> list[SequenceUpdate]:
        """The running rows sample their next tokens; the finished leave the batch."""
        running = self.state.running
        sampled = self.state.sample(logits, running)
        updates = [self.state.accept(seq, tok, lp)
                   for seq, tok, lp in zip(running, sampled.tokens, sampled.logprobs, strict=True)]
        for row in reversed([i for i, u in enumerate(updates) if u.finished]):
            self._remove_row(row)
        return updates

    def _remove_row(self, row: int) -> None:
        """The batch cache moves its last row into ``row``: the running list mirrors that."""
        assert self._batch is not None
        with torch.inference_mode():  # the buffers are inference tensors; cancel comes between steps
            self._batch.remove_row(row)
        running = self.state.running
        last = running.pop()
        if row < len(running):
            running[row] = last
