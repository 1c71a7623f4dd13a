"""The generation engine over a paged KV cache with automatic prefix caching.

``PagedEngine`` keeps ``GenerationEngine``'s requests, queues, sampling and updates
(``ts/llm/engine.py``) and replaces its cache: instead of one right-padded rectangle row per
running sequence, every sequence holds a block table into one pool (``pool.py``), and a step is
one fast forward (``fastpath/``) of two parts (``parts.py``): the running sequences' decode
tokens, then prompt tokens. A sequence's tokens are its prompt and outputs; ``computed`` of them
have keys/values in the pool, and a step computes the next ones: one for a running sequence, a
chunk (or the rest) for one being prefilled. When the last token is computed its logits give the
next token -- the same rule for a new prompt, a prompt found partly in the prefix cache, and a
preempted sequence coming back.

* **Admission by free blocks**: a waiting sequence first takes every cached block of its
  prompt's prefix, then joins when the pool can give the blocks for the rest of its tokens
  (oldest first: one that does not fit holds the others back).
* **Preemption by recompute**: when a running sequence needs a new block and the pool has none,
  the newest sequence (prefilling first, then running) gives its blocks back and returns to the
  front of the queue with its outputs; it is prefilled again later (its full blocks are usually
  still in the prefix cache). A sequence alone that outgrows the whole pool ends with
  ``finish_reason`` "length" -- never an out-of-memory error.
* Blocks go back the step a sequence ends, or when it is cancelled or aborted; full blocks keep
  their prefix hash and stay in the cache until evicted (least recently used first).
* A stateful conversation's turn (``converse``) leaves its full blocks pinned for the next turn
  (``pins.py``) until ``end_conversation``; an idle conversation's pin is given up before anyone
  is preempted or kept waiting for blocks.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import torch

from ts.llm.engine import GenerationEngine, LLMRequestError
from ts.llm.fastpath.parts import Part
from ts.llm.paged.hf_cache import PagedCache
from ts.llm.paged.native import decode_kernel
from ts.llm.paged.parts import PagedDecode, PagedPrefill
from ts.llm.paged.pins import ConversationPins
from ts.llm.paged.pool import BlockPool, BlockTable, PrefixStats
from ts.llm.paged.storage import KVStorage
from ts.llm.params import SamplingParams, SequenceUpdate
from ts.llm.sequence import Sequence, StepStats

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 16


class PagedEngine(GenerationEngine):
    """``GenerationEngine`` with a paged KV cache; ``num_blocks`` None: enough for
    ``max_batch_size`` sequences of the whole context (preemption then never happens)."""

    def __init__(self, model: Any, tokenizer: Any, *, num_blocks: int | None = None,
                 block_size: int = DEFAULT_BLOCK_SIZE, prefix_caching: bool = True, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if num_blocks is None:
            context = self.max_context
            assert context is not None  # GenerationEngine refuses a model without one
            num_blocks = self.max_batch_size * -(-context // block_size)
        self.pool = BlockPool(num_blocks, block_size, prefix_caching)
        dtype = next(model.parameters()).dtype
        # the native decode attention serves the fast forward's decode rows (parts.py)
        kernel = decode_kernel(self.device, dtype) if self._fast_forward is not None else None
        self.storage = KVStorage(self._num_layers, num_blocks, block_size, kernel)
        self._hf_cache = PagedCache(self.storage, dtype) if self._fast_forward is None else None
        self.forward_path += f", paged KV cache ({num_blocks} blocks of {block_size} tokens, prefix caching " \
                             f"{'on' if prefix_caching else 'off'}, decode attention " \
                             f"{'native' if kernel is not None else 'gather + SDPA'})"
        self._tables: dict[str, BlockTable] = {}
        self._computed: dict[str, int] = {}
        self.preemptions = 0
        self.pins = ConversationPins(self.pool)
        self._conversation: dict[str, str] = {}  # live sequence -> its stateful conversation

    @property
    def prefix_stats(self) -> PrefixStats:
        return self.pool.stats

    @property
    def prefix_hit_rate(self) -> float | None:
        return self.pool.stats.hit_rate

    @property
    def kv_cache_usage(self) -> float:
        """The share of the pool's blocks that live sequences and conversation pins hold (cached
        unreferenced blocks count as free)."""
        return 1 - self.pool.available / self.pool.num_blocks

    # ------------------------------------------------------------------ requests
    def add(self, seq_id: str, prompt_ids: list[int], params: SamplingParams,
            fork_ids: list[str] | None = None) -> None:
        """``fork_ids`` (``n``): separate sequences here, whose prompts share the prefix cache's
        blocks (fork k of a seeded request draws with ``seed + k``, as the rectangle engine's)."""
        added: list[str] = []
        try:
            for k, sid in enumerate([seq_id, *(fork_ids or [])]):
                self._add_one(sid, prompt_ids, params if params.seed is None or k == 0
                              else dataclasses.replace(params, seed=params.seed + k))
                added.append(sid)
        except LLMRequestError:
            for sid in added:  # all of the group or none
                self.cancel(sid)
            raise

    def _add_one(self, seq_id: str, prompt_ids: list[int], params: SamplingParams) -> None:
        need = self.pool.blocks_for(len(prompt_ids) + 1)
        # a prompt past max_context gets that error (GenerationEngine.add): the tighter, named limit
        fits_context = self.max_context is None or len(prompt_ids) < self.max_context
        if prompt_ids and need > self.pool.num_blocks and fits_context:
            raise LLMRequestError(
                400, f"the prompt has {len(prompt_ids)} tokens, more than the KV cache holds ({self.pool.num_blocks} "
                f"blocks of {self.pool.block_size} tokens, kv_cache_blocks): shorten the prompt or raise "
                "kv_cache_blocks", param="prompt", code="context_length_exceeded")
        super().add(seq_id, prompt_ids, params)
        self._tables[seq_id] = BlockTable()
        self._computed[seq_id] = 0

    def cancel(self, seq_id: str) -> bool:
        if seq_id not in self._ids:
            return False
        seq = next(s for s in (*self._waiting, *self._prefilling, *self._running) if s.seq_id == seq_id)
        for queue in (self._waiting, self._prefilling, self._running):
            if seq in queue:
                queue.remove(seq)
        self._forget(seq)
        self._ids.discard(seq_id)
        self._cancelled.append(SequenceUpdate(seq_id, [], "", True, "cancelled", len(seq.prompt_ids),
                                              len(seq.output_ids)))
        return True

    def abort_all(self) -> list[str]:
        for seq in (*self._running, *self._prefilling, *self._waiting):
            self._forget(seq)
        return super().abort_all()

    def converse(self, seq_id: str, conversation: str) -> None:
        """``seq_id`` is a turn of ``conversation``: when it completes, its full blocks stay pinned."""
        self._conversation[seq_id] = conversation
        self.pins.touch(conversation)

    def end_conversation(self, conversation: str) -> None:
        self.pins.end(conversation)

    def live_tables(self) -> list[BlockTable]:
        """Every holder of block references: the running sequences' tables and the pins."""
        return [self._tables[s.seq_id] for s in (*self._prefilling, *self._running)] + self.pins.tables()

    def _forget(self, seq: Sequence, completed: bool = False) -> None:
        table = self._tables.pop(seq.seq_id, None)
        conversation = self._conversation.pop(seq.seq_id, None)
        if table is not None:
            if completed and conversation is not None:
                self.pins.keep(conversation, table)
            self.pool.release(table)
        self._computed.pop(seq.seq_id, None)

    def _busy(self, keep: Sequence) -> set[str]:
        """Conversations whose pins stay under pressure: ``keep``'s and those computing now."""
        seqs = (keep, *self._prefilling, *self._running)
        return {c for s in seqs if (c := self._conversation.get(s.seq_id)) is not None}

    # ------------------------------------------------------------------ blocks
    def _make_room(self, blocks: int, keep: Sequence) -> bool:
        """Unpin idle conversations, then preempt the newest sequences (not ``keep``), until
        ``blocks`` are available."""
        while self.pool.available < blocks:
            if self.pins.unpin_one(self._busy(keep)):
                continue
            victims = [s for s in (*self._running, *self._prefilling) if s is not keep]
            if not victims:
                return False
            victim = self._prefilling[-1] if self._prefilling and self._prefilling[-1] is not keep else victims[-1]
            self._preempt(victim)
        return True

    def _preempt(self, seq: Sequence) -> None:
        """Recompute: the sequence gives its blocks back and waits at the front with its outputs."""
        (self._prefilling if seq in self._prefilling else self._running).remove(seq)
        self.pool.release(self._tables[seq.seq_id])
        self._computed[seq.seq_id] = 0
        self._waiting.appendleft(seq)
        self.preemptions += 1
        logger.info("KV pool full: sequence %s preempted (recompute) after %d tokens", seq.seq_id,
                    len(seq.output_ids))

    def _tokens(self, seq: Sequence) -> list[int]:
        return seq.prompt_ids + seq.output_ids if seq.output_ids else seq.prompt_ids

    def _admit(self, seq: Sequence) -> bool:
        """A waiting sequence's cached prefix and the blocks for the rest, or False (nothing kept)."""
        tokens = self._tokens(seq)
        table = self._tables[seq.seq_id]
        queried, hit = self.pool.stats.queried, self.pool.stats.hit
        covered = self.pool.match_prefix(tokens, table)
        need = self.pool.blocks_for(len(tokens)) - len(table.blocks)
        if self.pool.available < need <= self.pool.available + self.pins.freeable(self._busy(seq)):
            while self.pool.available < need and self.pins.unpin_one(self._busy(seq)):
                pass
        if need > self.pool.available:
            self.pool.release(table)
            self.pool.stats.queried, self.pool.stats.hit = queried, hit  # looked up again when it joins
            return False
        table.blocks.extend(self.pool.allocate() for _ in range(need))
        self._computed[seq.seq_id] = covered
        return True

    # ------------------------------------------------------------------ a step
    def _separate_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Hugging Face's forward (``hf_cache.py``): the decode rows in one forward, then each
        scheduled prompt run in its own."""
        assert self._hf_cache is not None
        started = time.perf_counter()
        cache = self._hf_cache
        decode = self._schedule_decode(updates)
        chunks = self._schedule_prefill(self.max_tokens_per_step - len(decode))
        stats.decode_tokens = len(decode)
        stats.prefill_tokens = sum(n for _, n in chunks)
        if decode:
            positions = [self._computed[s.seq_id] for s in decode]
            mask = cache.decode([self._tables[s.seq_id].blocks for s in decode], positions, self.device)
            logits = self._forward(torch.tensor([[s.output_ids[-1]] for s in decode], device=self.device),
                                   torch.tensor(positions, device=self.device).unsqueeze(1), cache, mask)
            for seq in decode:
                self._computed_more(seq, 1)
            updates.extend(self._finish_tokens(decode, logits))
        decoded = time.perf_counter()
        for seq, n in chunks:
            start = self._computed[seq.seq_id]
            mask = cache.prefill(self._tables[seq.seq_id].blocks, start, n, self.device)
            logits = self._forward(torch.tensor([self._tokens(seq)[start:start + n]], device=self.device),
                                   torch.arange(start, start + n, device=self.device).unsqueeze(0), cache, mask)
            self._computed_more(seq, n)
            if self._computed[seq.seq_id] == len(self._tokens(seq)):
                self._prefilling.remove(seq)
                self._running.append(seq)
                stats.prefilled.append(seq.seq_id)
                updates.extend(self._finish_tokens([seq], logits))
        stats.decode_s, stats.prefill_s = decoded - started, time.perf_counter() - decoded

    def _mixed_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        started = time.perf_counter()
        decode = self._schedule_decode(updates)
        chunks = self._schedule_prefill(self.max_tokens_per_step - len(decode))
        stats.decode_tokens = len(decode)
        stats.prefill_tokens = sum(n for _, n in chunks)
        parts: list[Part] = []
        if decode:
            parts.append(PagedDecode(self.storage, [s.output_ids[-1] for s in decode],
                                     [self._computed[s.seq_id] for s in decode],
                                     [self._tables[s.seq_id].blocks for s in decode], self.device))
        if chunks:
            runs, starts, sample = [], [], []
            for seq, n in chunks:
                start = self._computed[seq.seq_id]
                runs.append(self._tokens(seq)[start:start + n])
                starts.append(start)
                sample.append(start + n == len(self._tokens(seq)))
            parts.append(PagedPrefill(self.storage, runs, starts, [self._tables[s.seq_id].blocks for s, _ in chunks],
                                      sample, self.device))
        if not parts:
            return
        assert self._fast_forward is not None
        logits = self._fast_forward.forward(parts)
        if decode:
            for seq in decode:
                self._computed_more(seq, 1)
            updates.extend(self._finish_tokens(decode, logits[:len(decode)]))
        decoded = time.perf_counter()
        done = []
        for seq, n in chunks:
            self._computed_more(seq, n)
            if self._computed[seq.seq_id] == len(self._tokens(seq)):
                done.append(seq)
        if done:
            for seq in done:
                self._prefilling.remove(seq)
                self._running.append(seq)
                stats.prefilled.append(seq.seq_id)
            updates.extend(self._finish_tokens(done, logits[len(decode):]))
        if decode:
            prompts_s = self._fast_forward.rest_s
            stats.decode_s = decoded - started - prompts_s
            stats.prefill_s = time.perf_counter() - decoded + prompts_s
        else:
            stats.prefill_s = time.perf_counter() - started

    def _schedule_decode(self, updates: list[SequenceUpdate]) -> list[Sequence]:
        """The running sequences that decode this step, each with the block for its new token
        (preempting the newest when the pool is empty)."""
        bs = self.pool.block_size
        for seq in list(self._running):
            if seq not in self._running:  # preempted for an older one this step
                continue
            table = self._tables[seq.seq_id]
            if self._computed[seq.seq_id] // bs < len(table.blocks):
                continue
            if not self._make_room(1, seq):  # alone and the pool is full: it ends here
                self._running.remove(seq)
                seq.finish_reason = "length"
                delta = seq.text.finish() if seq.text is not None else ""
                self._ids.discard(seq.seq_id)
                self._forget(seq, completed=True)
                logger.warning("sequence %s used the whole KV pool (%d blocks): ended by length", seq.seq_id,
                               self.pool.num_blocks)
                updates.append(SequenceUpdate(seq.seq_id, [], delta, True, "length", len(seq.prompt_ids),
                                              len(seq.output_ids)))
                continue
            table.blocks.append(self.pool.allocate())
        return list(self._running)

    def _schedule_prefill(self, budget: int) -> list[tuple[Sequence, int]]:
        """Prompt tokens within ``budget``: sequences being prefilled first, then waiting ones
        admitted oldest first while a slot and their blocks are free."""
        chunks: list[tuple[Sequence, int]] = []
        for seq in self._prefilling:
            if budget <= 0:
                break
            n = min(budget, len(self._tokens(seq)) - self._computed[seq.seq_id])
            chunks.append((seq, n))
            budget -= n
        inflight = self._inflight_hashes()
        while budget > 0 and self._waiting and self.num_running < self.max_batch_size:
            seq = self._waiting[0]
            if self._waits_for_prefix(seq, inflight) or not self._admit(seq):
                break
            self._waiting.popleft()
            self._prefilling.append(seq)
            n = min(budget, len(self._tokens(seq)) - self._computed[seq.seq_id])
            chunks.append((seq, n))
            budget -= n
            inflight |= self._future_hashes(seq)
        return chunks

    # a prompt whose next uncached block another sequence is computing now waits for it: prompts
    # sharing a system prompt that arrive together compute it once, not once each
    def _future_hashes(self, seq: Sequence) -> set[int]:
        """The prefix hashes of the full blocks ``seq``'s prefill will seal (not sealed yet)."""
        tokens = self._tokens(seq)
        sealed = len(self._tables[seq.seq_id].hashes)
        return set(self.pool.chain(tokens, len(tokens) // self.pool.block_size)[sealed:])

    def _inflight_hashes(self) -> set[int]:
        if not self.pool.prefix_caching:
            return set()
        return set().union(*(self._future_hashes(s) for s in self._prefilling))

    def _waits_for_prefix(self, seq: Sequence, inflight: set[int]) -> bool:
        if not inflight:
            return False
        tokens = self._tokens(seq)
        for h in self.pool.chain(tokens, (len(tokens) - 1) // self.pool.block_size):
            if not self.pool.cached(h):
                return h in inflight
        return False

    def _computed_more(self, seq: Sequence, n: int) -> None:
        computed = self._computed[seq.seq_id] + n
        self._computed[seq.seq_id] = computed
        table = self._tables[seq.seq_id]
        if len(table.hashes) < computed // self.pool.block_size:  # a block filled (one step in block_size): name it
            self.pool.seal_full_blocks(self._tokens(seq), computed, table)

    def _finish_tokens(self, seqs: list[Sequence], logits: torch.Tensor) -> list[SequenceUpdate]:
        """Sample each sequence's next token; the finished leave and give their blocks back."""
        sampled = self._sample(logits, seqs)
        updates = [self._accept(seq, tok, lp) for seq, tok, lp in zip(seqs, sampled.tokens, sampled.logprobs,
                                                                       strict=True)]
        for seq, update in zip(seqs, updates, strict=True):
            if update.finished:
                self._running.remove(seq)
                self._forget(seq, completed=update.finish_reason in ("stop", "length"))
        return updates
