"""The contract between the engine and its KV cache: a ``KVScheduler`` owns where the running
sequences' keys and values live and, from that, which tokens each step computes.

Two implement it: the rectangle batch cache (``rectangle.py``: one right-padded row per running
sequence) and the paged cache (``paged/scheduler.py``: block tables into one pool, prefix
caching, preemption). Both work on the engine's ``SchedulerState`` (``state.py``) and run their
forwards through its runner, so either runs the whole model or a pipeline stage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ts.llm.engine.sequence import Sequence, StepStats
from ts.llm.engine.state import SchedulerState
from ts.llm.params import SequenceUpdate


class KVScheduler(Protocol):
    """A KV cache and the step scheduling that follows from it."""

    description: str  # for the worker's log, after the forward's

    def check(self, prompt_ids: list[int], sequences: int) -> None:
        """Raise LLMRequestError (400) for a prompt (with ``sequences`` - 1 forks) this cache can
        never hold."""
        ...

    def enqueue(self, seqs: list[Sequence]) -> None:
        """Queue one prompt's sequences (``seqs[1:]``: forks, ``n`` / ``best_of``)."""
        ...

    def remove(self, seq_id: str) -> list[Sequence]:
        """Drop a live sequence (and its KV) now; the sequences dropped with it (forks not yet
        prefilled go with their parent)."""
        ...

    def forget_all(self) -> None:
        """Give back every sequence's KV (the engine then empties its queues)."""
        ...

    def step(self, stats: StepStats, updates: list[SequenceUpdate]) -> None:
        """Compute one step's tokens; append what each sequence produced to ``updates``."""
        ...

    @property
    def kv_cache_usage(self) -> float:
        """The share of the cache the live sequences hold."""
        ...

    @property
    def prefix_hit_rate(self) -> float | None:
        """The prefix cache's hit ratio; None without one."""
        ...

    def converse(self, seq_id: str, conversation: str) -> None:
        """``seq_id`` is a turn of a stateful conversation: keep its KV for the next turn if the
        cache can."""
        ...

    def end_conversation(self, conversation: str) -> None:
        """The conversation ended: its kept KV may go."""
        ...


# builds a scheduler over the engine's state once the engine has checked its limits
KVFactory = Callable[[SchedulerState], KVScheduler]
