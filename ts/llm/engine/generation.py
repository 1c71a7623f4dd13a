"""The in-process generation engine: continuous batching over one Hugging Face causal LM.

``GenerationEngine`` implements the ``Engine`` contract (``contract.py``) by composition: it
checks and queues requests in its ``SchedulerState`` (``state.py``), and a KV-cache scheduler
(``kv_cache``: the rectangle batch cache, ``rectangle.py``, or the paged cache,
``paged/scheduler.py``) steps them through a runner (``runner``: the whole model,
``runner.ModelRunner``, or one pipeline stage, ``pipeline_parallel.StageRunner``). Any cache
works with any runner; ``paged_engine`` and ``pipeline_parallel.stage_engine`` name the usual
pairs.

Single-threaded: the caller (the worker's engine loop) calls ``add`` and ``cancel`` between
``step`` calls. ``generate_all`` runs a batch to completion.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from ts.llm.engine.contract import Engine, generate_all
from ts.llm.engine.grammar import Grammars
from ts.llm.engine.rectangle import RectangleKV
from ts.llm.engine.runner import ModelRunner, Runner
from ts.llm.engine.scheduler import KVFactory, KVScheduler
from ts.llm.engine.sequence import Sequence, StepStats
from ts.llm.engine.state import Limits, Sampler, SchedulerState
from ts.llm.params import GenerationResult, LLMRequestError, SamplingParams, SequenceUpdate

__all__ = ["GenerationEngine"]

logger = logging.getLogger(__name__)


def find_eos(model: Any, tokenizer: Any) -> list[int]:
    """Every EOS token id the generation config, the model config and the tokenizer name."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return sorted(ids)


def kv_layers(model: Any) -> int:
    """The model's KV layers; a ValueError for a cache the engine cannot batch."""
    config = model.config
    probe = DynamicCache(config=config)
    odd = {type(layer).__name__ for layer in getattr(probe, "layers", []) if type(layer) is not DynamicLayer}
    if odd:
        raise ValueError(f"{type(model).__name__} uses {', '.join(sorted(odd))} cache layers (sliding-window "
                         "or recurrent attention); the engine batches full-attention caches only")
    return len(probe.layers) or int(config.get_text_config(decoder=True).num_hidden_layers)


class GenerationEngine:
    """Continuous batching over one model; see the module docstring."""

    def __init__(self, model: Any, tokenizer: Any, max_batch_size: int = 8, max_tokens_per_step: int = 512,
                 max_waiting: int = 256, max_context: int | None = None,
                 eos_token_ids: list[int] | None = None, fast_path: bool | None = None, *,
                 runner: Runner | None = None, kv_cache: KVFactory = RectangleKV) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if max_tokens_per_step < max_batch_size:
            raise ValueError(f"max_tokens_per_step ({max_tokens_per_step}) must be at least max_batch_size "
                             f"({max_batch_size}): every running sequence decodes one token per step")
        if max_waiting < 1:
            raise ValueError(f"max_waiting must be at least 1, got {max_waiting}")
        self.model = model
        self.tokenizer = tokenizer
        config = model.config
        model_ctx = getattr(config, "max_position_embeddings", None)
        if max_context is not None and model_ctx is not None and max_context > model_ctx:
            raise ValueError(f"max_context={max_context} is more than the model's "
                             f"max_position_embeddings={model_ctx}")
        context = max_context or model_ctx
        if not context:
            raise ValueError("the model config has no max_position_embeddings: give max_context")
        self.limits = Limits(max_batch_size, max_tokens_per_step, max_waiting, int(context),
                             "max_context" if max_context else "max_position_embeddings")
        self.vocab_size = int(getattr(config, "vocab_size", 0) or 0)
        eos = set(eos_token_ids if eos_token_ids is not None else find_eos(model, tokenizer))
        num_layers = kv_layers(model)
        # the forward every step runs: the engine's own for known families, else the model's (fastpath/)
        self.runner: Runner = runner if runner is not None else ModelRunner(model, fast_path)
        self.state = SchedulerState(self.limits, self.runner,
                                    Sampler(eos, Grammars(tokenizer, self.vocab_size, eos)), num_layers)
        self.kv: KVScheduler = kv_cache(self.state)
        self.forward_path = self.runner.forward_path + self.kv.description
        self.device = self.runner.device
        self.last_step = StepStats()
        # False: updates carry no text unless a stop string needs it (an engine process's worker
        # detokenizes the rest beside the forward: ts/llm/process/engine_process.py)
        self.detokenize = True

    # the Engine contract's sizes
    @property
    def max_batch_size(self) -> int:
        return self.limits.max_batch_size

    @property
    def max_tokens_per_step(self) -> int:
        return self.limits.max_tokens_per_step

    @property
    def max_waiting(self) -> int:
        return self.limits.max_waiting

    @property
    def max_context(self) -> int:
        return self.limits.max_context

    @property
    def eos_token_ids(self) -> set[int]:
        return self.state.sampler.eos_token_ids

    @property
    def model_class(self) -> str:
        return type(self.model).__name__

    # ------------------------------------------------------------------ requests
    def add(self, seq_id: str, prompt_ids: list[int], params: SamplingParams,
            fork_ids: list[str] | None = None) -> None:
        """Queue a sequence; raises LLMRequestError (400 bad prompt, 409 id in use, 503 queue full).

        ``fork_ids`` (``n`` / ``best_of``): more sequences of the same prompt and settings (the
        cache decides how they share the prompt's KV). A seeded request's fork ``k`` draws with
        seed ``seed + k``."""
        st, limits = self.state, self.limits
        fork_ids = list(fork_ids or [])
        for sid in (seq_id, *fork_ids):
            if sid in st.ids or fork_ids.count(sid) + (sid == seq_id) > 1:
                raise LLMRequestError(409, f"request id {sid!r} is already in the engine", code="duplicate_id")
        if not prompt_ids:
            raise LLMRequestError(400, "the prompt is empty: give at least one token", param="prompt",
                                  code="empty_prompt")
        if self.vocab_size and any(not 0 <= int(t) < self.vocab_size for t in prompt_ids):
            raise LLMRequestError(400, f"the prompt has token ids outside the vocabulary [0, {self.vocab_size})",
                                  param="prompt", code="invalid_token")
        if len(prompt_ids) >= limits.max_context:
            raise LLMRequestError(
                400, f"the prompt has {len(prompt_ids)} tokens, but the model's context is {limits.max_context} "
                f"tokens ({limits.context_limit_name}={limits.max_context}) and needs room for at least one new "
                "token: shorten the prompt", param="prompt", code="context_length_exceeded")
        self._check_fits(1 + len(fork_ids), "n")
        self.kv.check(prompt_ids, 1 + len(fork_ids))
        if st.waiting_with(1 + len(fork_ids)) > limits.max_waiting:
            raise LLMRequestError(
                503, f"the engine queue is full: {self.num_waiting} requests are waiting "
                f"(max_waiting={limits.max_waiting}) behind {self.num_running} running "
                f"(max_batch_size={limits.max_batch_size}); retry after 1 second",
                code="queue_full", retry_after=1)
        params.validate()
        outside = params.token_ids_in(self.vocab_size) if self.vocab_size else []
        if outside:
            raise LLMRequestError(400, f"token ids {outside} (stop_token_ids / logit_bias) are outside the "
                                  f"vocabulary [0, {self.vocab_size})", param="logit_bias" if set(outside) & set(
                                      params.logit_bias) else "stop_token_ids", code="invalid_token")
        seqs = [Sequence(sid, [int(t) for t in prompt_ids], params, self.tokenizer, self.detokenize,
                         self.eos_token_ids) for sid in (seq_id, *fork_ids)]
        for k, seq in enumerate(seqs):
            if params.grammar is not None:
                seq.matcher = self.state.sampler.grammars.matcher(params.grammar)
            if not params.greedy:
                seq.generator = torch.Generator(device=self.device)
                if params.seed is None:
                    seq.generator.seed()
                else:
                    seq.generator.manual_seed(int(params.seed) + k)
        self.kv.enqueue(seqs)
        st.ids.update(s.seq_id for s in seqs)

    def _check_fits(self, sequences: int, param: str) -> None:
        """A request of more sequences than the engine ever holds (running and waiting) can never
        be scheduled: a 400 naming the limits, not a 503 the client would retry forever."""
        limits = self.limits
        most = limits.max_batch_size + limits.max_waiting
        if sequences > most:
            raise LLMRequestError(
                400, f"{sequences} sequences ({param}) can never be scheduled: the engine holds at most "
                f"max_batch_size + max_waiting = {limits.max_batch_size} + {limits.max_waiting} = {most}: ask for "
                "fewer", param=param, code="invalid_value")

    def add_all(self, groups: list[tuple[str, list[int], list[str]]], params: SamplingParams) -> None:
        """One request's prompts ``(seq_id, prompt_ids, fork_ids)``: all of them queued, or none
        (the first refusal's LLMRequestError is raised after the ones queued are cancelled)."""
        self._check_fits(sum(1 + len(forks) for _, _, forks in groups), "prompt" if len(groups) > 1 else "n")
        added: list[str] = []
        try:
            for seq_id, ids, forks in groups:
                self.add(seq_id, ids, params, forks)
                added.extend([seq_id, *forks])
        except LLMRequestError:
            for seq_id in added:
                self.cancel(seq_id)
            raise

    def cancel(self, seq_id: str) -> bool:
        """Drop a sequence now (its KV too); the next step reports it as 'cancelled'."""
        if seq_id not in self.state.ids:
            return False
        for gone in self.kv.remove(seq_id):
            self.state.cancelled_update(gone)
        return True

    def converse(self, seq_id: str, conversation: str) -> None:
        self.kv.converse(seq_id, conversation)

    def end_conversation(self, conversation: str) -> None:
        self.kv.end_conversation(conversation)

    def has_work(self) -> bool:
        return self.state.has_work()

    @property
    def num_running(self) -> int:
        return self.state.num_running

    @property
    def num_waiting(self) -> int:
        return self.state.num_waiting

    @property
    def kv_cache_usage(self) -> float:
        return self.kv.kv_cache_usage

    @property
    def prefix_hit_rate(self) -> float | None:
        """The prefix cache's hit ratio (prompt tokens found of those looked up); None without one."""
        return self.kv.prefix_hit_rate

    def abort_all(self) -> list[str]:
        """Forget every sequence (after a failed step); returns their ids."""
        st = self.state
        ids = [s.seq_id for s in st.every_sequence()]
        self.kv.forget_all()
        st.waiting.clear()
        st.prefilling.clear()
        st.running.clear()
        st.cancelled.clear()
        st.ids.clear()
        return ids

    def waited_on(self) -> int | None:
        """Nothing to wait on: ``step`` computes in this process."""
        return None

    def close(self) -> None:
        """Nothing to stop: the engine lives in the caller's process."""

    # ------------------------------------------------------------------ stepping
    def step(self) -> list[SequenceUpdate]:
        """One step: the cache's scheduler decodes the running batch and prefills with the budget
        left; the updates include the sequences cancelled since the last step."""
        updates, self.state.cancelled = self.state.cancelled, []
        stats = StepStats()
        with torch.inference_mode():
            self.kv.step(stats, updates)
        stats.running, stats.waiting = self.num_running, self.num_waiting
        self.last_step = stats
        return updates

    # ------------------------------------------------------------------ run to completion
    def generate_all(self, batch: list[tuple[str, list[int], SamplingParams]],
                     forks: dict[str, list[str]] | None = None) -> dict[str, GenerationResult]:
        """``contract.generate_all`` on this engine."""
        return generate_all(self, batch, forks)


def _is_an_engine(engine: GenerationEngine) -> Engine:
    return engine  # mypy checks GenerationEngine against the Engine contract here
