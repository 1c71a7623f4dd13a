"""The ``Engine`` contract: what the LLM handler (``ts/torch_handler/llm_handler.py``) and the
engine core (``ts/llm/process/engine_core.py``) call, whichever engine runs.

Implemented by ``GenerationEngine`` (``generation.py``: in this process, over the rectangle or
the paged KV cache, on the whole model or a pipeline stage) and by ``EngineProcess``
(``ts/llm/process/engine_process.py``: the same engine in a process of its own). mypy checks
both against this Protocol (``ENGINES`` at the end of ``ts/llm/engine/choice.py``).

Differences the contract allows: an in-process engine refuses a request by raising
``LLMRequestError`` from ``add`` / ``add_all``; an engine process accepts it and reports the
refusal at a later step, as an update carrying ``error``. A failed ``step`` raises; the handler
then calls ``abort_all``.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from ts.llm.engine.sequence import StepStats
from ts.llm.params import GenerationResult, LLMRequestError, SamplingParams, SequenceUpdate


class Engine(Protocol):
    """Continuous batching behind add / cancel / step; see the module docstring."""

    # ---- sizes and description (set when the engine is built)
    @property
    def max_batch_size(self) -> int: ...

    @property
    def max_tokens_per_step(self) -> int: ...

    @property
    def max_waiting(self) -> int: ...

    @property
    def max_context(self) -> int: ...

    @property
    def forward_path(self) -> str: ...

    @property
    def model_class(self) -> str: ...

    # ---- requests
    def add(self, seq_id: str, prompt_ids: list[int], params: SamplingParams,
            fork_ids: list[str] | None = None) -> None:
        """Queue one prompt's sequence and its forks (``n`` / ``best_of``)."""
        ...

    def add_all(self, groups: list[tuple[str, list[int], list[str]]], params: SamplingParams) -> None:
        """One request's prompts ``(seq_id, prompt_ids, fork_ids)``: all queued, or none."""
        ...

    def cancel(self, seq_id: str) -> bool:
        """Drop a sequence; False when the engine does not know it (finished or never added)."""
        ...

    # ---- stepping and draining
    def has_work(self) -> bool: ...

    def step(self) -> list[SequenceUpdate]:
        """The updates of the next step (an engine process: of every step since the last call)."""
        ...

    def abort_all(self) -> list[str]:
        """Drop every sequence (after a failed step); their ids."""
        ...

    def waited_on(self) -> int | None:
        """A file descriptor the caller may wait on for the next step's updates (then ``step``
        does not wait itself); None when ``step`` computes in the caller's process."""
        ...

    def close(self) -> None:
        """The worker stops: release what the engine holds outside this process."""
        ...

    # ---- stats (after the last step)
    @property
    def last_step(self) -> StepStats: ...

    @property
    def num_running(self) -> int: ...

    @property
    def num_waiting(self) -> int: ...

    @property
    def kv_cache_usage(self) -> float: ...

    @property
    def prefix_hit_rate(self) -> float | None: ...

    # ---- stateful conversations (sequenceBatching)
    def converse(self, seq_id: str, conversation: str) -> None:
        """``seq_id`` is a turn of ``conversation``: its KV may be kept for the next turn."""
        ...

    def end_conversation(self, conversation: str) -> None: ...


def generate_all(engine: Engine, batch: list[tuple[str, list[int], SamplingParams]],
                 forks: dict[str, list[str]] | None = None) -> dict[str, GenerationResult]:
    """Run a batch to completion on an idle engine; a request the engine refuses gets a result
    with ``error`` set (so do its ``forks``: ``{seq id: fork ids}``, each with its own result)."""
    forks = forks or {}
    if engine.has_work():
        raise RuntimeError("generate_all needs an idle engine: it would swallow the updates of the "
                           "sequences already running")
    results: dict[str, GenerationResult] = {}
    groups: dict[str, list[str]] = {}
    pending = deque(batch)
    texts: dict[str, list[str]] = {}

    def refuse(group: list[str], exc: LLMRequestError) -> None:
        for sid in group:
            results[sid] = GenerationResult(sid, error=exc)
            texts.pop(sid, None)

    while pending or engine.has_work():
        while pending and engine.num_waiting < engine.max_waiting:
            seq_id, ids, params = pending.popleft()
            group = [seq_id, *forks.get(seq_id, [])]
            try:
                engine.add(seq_id, ids, params, group[1:])
            except LLMRequestError as exc:
                refuse(group, exc)
                continue
            for sid in group:
                groups[sid] = group
                results[sid] = GenerationResult(sid, prompt_tokens=len(ids))
                texts[sid] = []
        for u in engine.step():
            if u.error is not None:  # refused a step later (an engine process)
                refuse(groups[u.seq_id], u.error)
                continue
            res = results[u.seq_id]
            res.token_ids.extend(u.new_token_ids)
            res.logprobs.extend(u.logprobs or [])
            texts[u.seq_id].append(u.text_delta)
            if u.finished:
                res.finish_reason, res.completion_tokens = u.finish_reason, u.completion_tokens
                res.text = "".join(texts.pop(u.seq_id))
    return results
