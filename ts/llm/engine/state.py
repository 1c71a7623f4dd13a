"""What the engine's parts share: its limits, its sequences in their queues, and the rules every
KV cache applies the same way (sampling a step's rows, accepting a sampled token).

``GenerationEngine`` (``generation.py``) adds and cancels sequences here; its KV-cache
scheduler (``rectangle.py`` or ``paged/scheduler.py``) moves them from ``waiting`` through
``prefilling`` to ``running`` and back out, and reports what each step produced.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from ts.llm.engine.grammar import Grammars
from ts.llm.engine.runner import Runner
from ts.llm.engine.sampling import Sampled, sample
from ts.llm.engine.sequence import Sequence
from ts.llm.params import SequenceUpdate, TokenLogprob


@dataclass(frozen=True)
class Limits:
    """The engine's size: ``max_batch_size`` sequences running (or prefilling), at most
    ``max_tokens_per_step`` tokens computed per step, ``max_waiting`` queued beyond the free
    slots, ``max_context`` tokens per sequence (named ``context_limit_name`` in errors)."""

    max_batch_size: int
    max_tokens_per_step: int
    max_waiting: int
    max_context: int
    context_limit_name: str


@dataclass
class Sampler:
    """A step's sampling over its rows: the processors, the grammar masks, the draw."""

    eos_token_ids: set[int]
    grammars: Grammars

    def __call__(self, logits: torch.Tensor, seqs: list[Sequence]) -> Sampled:
        return sample(logits, seqs, self.eos_token_ids, self.grammars)


@dataclass
class SchedulerState:
    """The engine's sequences (``ids``: every live one) and the parts a scheduler steps them with."""

    limits: Limits
    runner: Runner
    sampler: Sampler
    num_layers: int  # the model's (or the pipeline stage's) decoder layers: one KV pair each
    waiting: deque[Sequence] = field(default_factory=deque)
    prefilling: list[Sequence] = field(default_factory=list)
    running: list[Sequence] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    cancelled: list[SequenceUpdate] = field(default_factory=list)  # reported by the next step

    @property
    def num_running(self) -> int:
        """Batch slots taken: running rows and the sequences (with their forks) being prefilled."""
        return len(self.running) + sum(s.slots for s in self.prefilling)

    @property
    def num_waiting(self) -> int:
        """Queued sequences the next step cannot start: those beyond the free batch slots (requests
        added since the last step move into free slots at the next step, they do not wait)."""
        queued = sum(s.slots for s in self.waiting)
        return max(0, queued - max(0, self.limits.max_batch_size - self.num_running))

    def waiting_with(self, sequences: int) -> int:
        """``num_waiting`` once ``sequences`` more are queued."""
        queued = sum(s.slots for s in self.waiting) + sequences
        return max(0, queued - max(0, self.limits.max_batch_size - self.num_running))

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or self.running or self.cancelled)

    def sample(self, logits: torch.Tensor | None, seqs: list[Sequence]) -> Sampled:
        return self.runner.sample(logits, seqs, self.sampler)

    def accept(self, seq: Sequence, token: int, logprob: TokenLogprob | None = None) -> SequenceUpdate:
        """``seq`` takes its sampled token; a finished sequence is no longer live."""
        update = seq.accept(token, self.sampler.eos_token_ids, self.limits.max_context, logprob)
        if update.finished:
            self.ids.discard(seq.seq_id)
        return update

    def cancelled_update(self, seq: Sequence) -> SequenceUpdate:
        """Forget a cancelled sequence; the next step reports it."""
        self.ids.discard(seq.seq_id)
        update = SequenceUpdate(seq.seq_id, [], "", True, "cancelled", len(seq.prompt_ids), len(seq.output_ids))
        self.cancelled.append(update)
        return update

    def every_sequence(self) -> list[Sequence]:
        """Every live sequence, forks not yet prefilled included."""
        return [s for p in (*self.running, *self.prefilling, *self.waiting) for s in (p, *p.forks)]
