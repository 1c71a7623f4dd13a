"""The paged KV cache with automatic prefix caching, and its scheduler (a ``KVScheduler``,
``ts/llm/engine/scheduler.py``; ``paged_engine`` builds a ``GenerationEngine`` with it).

Instead of one right-padded rectangle row per running sequence, every sequence holds a block
table into one pool (``pool.py``), and a step is one fast forward (``fastpath/``) of two parts
(``parts.py``): the running sequences' decode tokens, then prompt tokens (on Hugging Face's
forward or a pipeline stage: the decode rows in one forward, then each prompt in its own).
A sequence's tokens are its prompt and outputs; ``computed`` of them have keys/values in the
pool, and a step computes the next ones: one for a running sequence, a chunk (or the rest) for
one being prefilled. When the last token is computed its logits give the
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
* ``n`` / ``best_of``: each fork is a sequence of its own, whose prompt shares the prefix
  cache's blocks.
* A stateful conversation's turn (``converse``) leaves its full blocks pinned for the next turn
  (``pins.py``) until ``end_conversation``; an idle conversation's pin is given up before anyone
  is preempted or kept waiting for blocks.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import torch

from ts.llm.engine.fastpath.parts import Part
from ts.llm.engine.generation import GenerationEngine
from ts.llm.engine.paged.hf_cache import PagedCache
from ts.llm.engine.paged.native import decode_kernel
from ts.llm.engine.paged.parts import PagedDecode, PagedPrefill
from ts.llm.engine.paged.pins import ConversationPins
from ts.llm.engine.paged.pool import BlockPool, BlockTable, PrefixStats
from ts.llm.engine.paged.storage import KVStorage
from ts.llm.engine.sequence import Sequence, StepStats
from ts.llm.engine.state import SchedulerState
from ts.llm.params import LLMRequestError, SequenceUpdate

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 16


def paged_engine(model: Any, tokenizer: Any, *, num_blocks: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 prefix_caching: bool = True, **kwargs: Any) -> GenerationEngine:
    """A ``GenerationEngine`` over a paged KV cache (``kwargs``: its other arguments)."""
    kv = functools.partial(PagedKV, num_blocks=num_blocks, block_size=block_size, prefix_caching=prefix_caching)
    return GenerationEngine(model, tokenizer, kv_cache=kv, **kwargs)


class PagedKV:
    """The paged cache's scheduler; ``num_blocks`` None: enough for ``max_batch_size`` sequences
    of the whole context (preemption then never happens)."""

    def __init__(self, state: SchedulerState, *, num_blocks: int | None = None,
                 block_size: int = DEFAULT_BLOCK_SIZE, prefix_caching: bool = True) -> None:
        self.state = state
        limits = state.limits
        if num_blocks is None:
            num_blocks = limits.max_batch_size * -(-limits.max_context // block_size)
        self.pool = BlockPool(num_blocks, block_size, prefix_caching)
        runner = state.runner
        dtype = next(runner.model.parameters()).dtype
        # the native decode attention serves the fast forward's decode rows (parts.py)
        kernel = decode_kernel(runner.device, dtype) if runner.fast_forward is not None else None
        self.storage = KVStorage(state.num_layers, num_blocks, block_size, kernel)
        self._hf_cache = PagedCache(self.storage, dtype) if runner.fast_forward is None else None
        self.description = f", paged KV cache ({num_blocks} blocks of {block_size} tokens, prefix caching " \
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
    def check(self, prompt_ids: list[int], sequences: int) -> None:
        """The prompt must fit the pool; forks beyond the free slots are served in turns."""
        if self.pool.blocks_for(len(prompt_ids) + 1) > self.pool.num_blocks:
            raise LLMRequestError(
                400, f"the prompt has {len(prompt_ids)} tokens, more than the KV cache holds ({self.pool.num_blocks} "
                f"blocks of {self.pool.block_size} tokens, kv_cache_blocks): shorten the prompt or raise "
                "kv_cache_blocks", param="prompt", code="context_length_exceeded")

    def enqueue(self, seqs: list[Sequence]) -> None:
        """Each fork is a sequence of its own (its prompt's blocks come from the prefix cache)."""
        for seq in seqs:
            self.state.waiting.append(seq)
            self._tables[seq.seq_id] = BlockTable()
            self._computed[seq.seq_id] = 0

    def remove(self, seq_id: str) -> list[Sequence]:
        st = self.state
        seq = next(s for s in (*st.waiting, *st.prefilling, *st.running) if s.seq_id == seq_id)
        for queue in (st.waiting, st.prefilling, st.running):
            if seq in queue:
                queue.remove(seq)
        self._forget(seq)
        return [seq]

    def forget_all(self) -> None:
        st = self.state
        for seq in (*st.running, *st.prefilling, *st.waiting):
            self._forget(seq)

    def converse(self, seq_id: str, conversation: str) -> None:
        """``seq_id`` is a turn of ``conversation``: when it completes, its full blocks stay pinned."""
        self._conversation[seq_id] = conversation
        self.pins.touch(conversation)

    def end_conversation(self, conversation: str) -> None:
        self.pins.end(conversation)

    def live_tables(self) -> list[BlockTable]:
        """Every holder of block references: the running sequences' tables and the pins."""
        st = self.state
        return [self._tables[s.seq_id] for s in (*st.prefilling, *st.running)] + self.pins.tables()

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
        seqs = (keep, *self.state.prefilling, *self.state.running)
        return {c for s in seqs if (c := self._conversation.get(s.seq_id)) is not None}

    # ------------------------------------------------------------------ blocks
    def _make_room(self, blocks: int, keep: Sequence) -> bool:
        """Unpin idle conversations, then preempt the newest sequences (not ``keep``), until
        ``blocks`` are available."""
        while self.pool.available < blocks:
            if self.pins.unpin_one(self._busy(keep)):
                continue
            victims = [s for s in (*self.state.running, *self.state.prefilling) if s is not keep]
            if not victims:
                return False
            victim = self.state.prefilling[-1] if self.state.prefilling and self.state.prefilling[-1] is not keep else victims[-1]
            self._preempt(victim)
        return True

    def _preempt(self, seq: Sequence) -> None:
        """Recompute: the sequence gives its blocks back and waits at the front with its outputs."""
        (self.state.prefilling if seq in self.state.prefilling else self.state.running).remove(seq)
        self.pool.release(self._tables[seq.seq_id])
        self._computed[seq.seq_id] = 0
        self.state.waiting.appendleft(seq)
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
    def step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        if self.state.runner.fast_forward is not None:
            self._mixed_step(stats, updates)
        else:
            self._separate_step(stats, updates)

    def _separate_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Hugging Face's forward (``hf_cache.py``): the decode rows in one forward, then each
        scheduled prompt run in its own."""
        assert self._hf_cache is not None
        started = time.perf_counter()
        cache = self._hf_cache
        runner = self.state.runner
        device = runner.device
        decode = self._schedule_decode(updates)
        chunks = self._schedule_prefill(self.state.limits.max_tokens_per_step - len(decode))
        stats.decode_tokens = len(decode)
        stats.prefill_tokens = sum(n for _, n in chunks)
        if decode:
            positions = [self._computed[s.seq_id] for s in decode]
            mask = cache.decode([self._tables[s.seq_id].blocks for s in decode], positions, device)
            logits = runner.forward(torch.tensor([[s.output_ids[-1]] for s in decode], device=device),
                                    torch.tensor(positions, device=device).unsqueeze(1), cache, mask)
            for seq in decode:
                self._computed_more(seq, 1)
            updates.extend(self._finish_tokens(decode, logits))
        decoded = time.perf_counter()
        for seq, n in chunks:
            start = self._computed[seq.seq_id]
            mask = cache.prefill(self._tables[seq.seq_id].blocks, start, n, device)
            logits = runner.forward(torch.tensor([self._tokens(seq)[start:start + n]], device=device),
                                    torch.arange(start, start + n, device=device).unsqueeze(0), cache, mask)
            self._computed_more(seq, n)
            if self._computed[seq.seq_id] == len(self._tokens(seq)):
                self.state.prefilling.remove(seq)
                self.state.running.append(seq)
                stats.prefilled.append(seq.seq_id)
                updates.extend(self._finish_tokens([seq], logits))
        stats.decode_s, stats.prefill_s = decoded - started, time.perf_counter() - decoded

    def _mixed_step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """The decode rows and the prompt chunks in one fast forward (time split as the rectangle's)."""
        fast = self.state.runner.fast_forward
        assert fast is not None
        device = self.state.runner.device
        started = time.perf_counter()
        decode = self._schedule_decode(updates)
        chunks = self._schedule_prefill(self.state.limits.max_tokens_per_step - len(decode))
        stats.decode_tokens = len(decode)
        stats.prefill_tokens = sum(n for _, n in chunks)
        parts: list[Part] = []
        if decode:
            parts.append(PagedDecode(self.storage, [s.output_ids[-1] for s in decode],
                                     [self._computed[s.seq_id] for s in decode],
                                     [self._tables[s.seq_id].blocks for s in decode], device))
        if chunks:
            runs, starts, sample = [], [], []
            for seq, n in chunks:
                start = self._computed[seq.seq_id]
                runs.append(self._tokens(seq)[start:start + n])
                starts.append(start)
                sample.append(start + n == len(self._tokens(seq)))
            parts.append(PagedPrefill(self.storage, runs, starts, [self._tables[s.seq_id].blocks for s, _ in chunks],
                                      sample, device))
        if not parts:
            return
        logits = fast.forward(parts)
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
                self.state.prefilling.remove(seq)
                self.state.running.append(seq)
                stats.prefilled.append(seq.seq_id)
            updates.extend(self._finish_tokens(done, logits[len(decode):]))
        if decode:
            prompts_s = fast.rest_s
            stats.decode_s = decoded - started - prompts_s
            stats.prefill_s = time.perf_counter() - decoded + prompts_s
        else:
            stats.prefill_s = time.perf_counter() - started

    def _schedule_decode(self, updates: list[SequenceUpdate]) -> list[Sequence]:
        """The running sequences that decode this step, each with the block for its new token
        (preempting the newest when the pool is empty)."""
        bs = self.pool.block_size
        for seq in list(self.state.running):
            if seq not in self.state.running:  # preempted for an older one this step
                continue
            table = self._tables[seq.seq_id]
            if self._computed[seq.seq_id] // bs < len(table.blocks):
                continue
            if not self._make_room(1, seq):  # alone and the pool is full: it ends here
                self.state.running.remove(seq)
                seq.finish_reason = "length"
                delta = seq.text.finish() if seq.text is not None else ""
                self.state.ids.discard(seq.seq_id)
                self._forget(seq, completed=True)
                logger.warning("sequence %s used the whole KV pool (%d blocks): ended by length", seq.seq_id,
                               self.pool.num_blocks)
                updates.append(SequenceUpdate(seq.seq_id, [], delta, True, "length", len(seq.prompt_ids),
                                              len(seq.output_ids)))
                continue
            table.blocks.append(self.pool.allocate())
        return list(self.state.running)

    def _schedule_prefill(self, budget: int) -> list[tuple[Sequence, int]]:
        """Prompt tokens within ``budget``: sequences being prefilled first, then waiting ones
        admitted oldest first while a slot and their blocks are free."""
        chunks: list[tuple[Sequence, int]] = []
        for seq in self.state.prefilling:
            if budget <= 0:
                break
            n = min(budget, len(self._tokens(seq)) - self._computed[seq.seq_id])
            chunks.append((seq, n))
            budget -= n
        inflight = self._inflight_hashes()
        while budget > 0 and self.state.waiting and self.state.num_running < self.state.limits.max_batch_size:
            seq = self.state.waiting[0]
            if self._waits_for_prefix(seq, inflight) or not self._admit(seq):
                break
            self.state.waiting.popleft()
            self.state.prefilling.append(seq)
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
        return set().union(*(self._future_hashes(s) for s in self.state.prefilling))

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

    def _finish_tokens(self, seqs: list[Sequence], logits: torch.Tensor | None) -> list[SequenceUpdate]:
        """Sample each sequence's next token; the finished leave and give their blocks back."""
        sampled = self.state.sample(logits, seqs)
        updates = [self.state.accept(seq, tok, lp) for seq, tok, lp in zip(seqs, sampled.tokens, sampled.logprobs,
                                                                       strict=True)]
        for seq, update in zip(seqs, updates, strict=True):
            if update.finished:
                self.state.running.remove(seq)
                self._forget(seq, completed=update.finish_reason in ("stop", "length"))
        return updates
