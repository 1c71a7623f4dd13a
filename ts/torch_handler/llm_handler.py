"""LLMHandler: serves a Hugging Face causal LM with the continuous-batching engine (ts/llm).

Two ways to be called:

* the worker's engine loop (``continuousBatching: true``) calls ``add_request`` / ``cancel``
  between ``step`` calls; each ``step`` returns ``LLMEvent``s (a streamed chunk, or the final
  answer of a request, or its error);
* TorchServe's batch call ``handle(data, context)`` runs the batch to completion and returns one
  body per request (a streamed answer's chunks concatenated).

Request and answer formats (TorchServe style, OpenAI completions and chat completions, chosen by
the ``x-tserve-openai`` header) are in ``ts/llm/api/request.py``; settings come from the ``handler``
section of model-config.yaml (see docs/llm.md).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import torch

from ts.context import Context
from ts.handler_utils.distributed.config import ModelConfigError, section, validate_section
from ts.handler_utils.distributed.coordinator import RankCoordinator
from ts.handler_utils.distributed.dist_env import device_for, ensure_process_group, rank_info
from ts.llm.api.fields import CHAT, COMPLETIONS, GENERATE, TS
from ts.llm.api.forms import parse_request
from ts.llm.api.request import JSON_TYPE, LLMEvent, LLMRequest, RequestLimits, error_event
from ts.llm.engine.choice import build_engine, wants_engine_process
from ts.llm.engine.contract import Engine, generate_all
from ts.llm.engine.pipeline_parallel import load_stage
from ts.llm.handler.llm_metrics import LLMMetrics
from ts.llm.handler.sessions import COMPLETED, Conversations
from ts.llm.handler.settings import (
    DEFAULT_MAX_NEW_TOKENS,
    OPENAI_COMPLETIONS_MAX_TOKENS,
    SETTINGS,
    engine_limits,
    find_model_dir,
    max_prompt_chars,
)
from ts.llm.params import LLMRequestError, SamplingParams, SequenceUpdate
from ts.llm.process.engine_core import CoreConfig, load_causal_lm, model_dtype
from ts.llm.process.engine_process import EngineProcess, EngineProcessLost, EngineStepFailed
from ts.torch_handler.base_handler import BaseHandler

logger = logging.getLogger(__name__)

__all__ = ["LLMEvent", "LLMHandler", "LLMRequestError"]

class LLMHandler(BaseHandler):
    """A causal LM behind the generation engine; see the module docstring."""

    STEP_STAGES = ("decode", "prefill")  # timed per step by step_stages(), reported in describe

    def __init__(self) -> None:
        super().__init__()
        self.tokenizer: Any = None
        # in this process, or the engine process's stand-in (handler.engine_process, ts/llm/process/engine_process.py)
        self._engine: Engine | None = None
        self.settings: dict[str, Any] = {}
        self.model_name = ""
        self._requests: dict[str, LLMRequest] = {}
        self._owner: dict[str, str] = {}  # engine sequence id -> its request (n, best_of, several prompts)
        # tensor or pipeline parallel (torchrun ranks): rank 0 schedules, the others replay its commands
        self.coordinator: RankCoordinator | None = None
        self.leader = True
        self.rank = 0
        self._commands: list[list[Any]] = []
        self._broken: str | None = None  # why a failed step broke the torchrun job (rank 0)
        self._engine_gone = False  # ... or why the engine process is gone
        # a stateful model's sequences are conversations (ts/llm/handler/sessions.py)
        self.conversations = Conversations(enabled=False)
        self.llm_metrics = LLMMetrics(None, "")
        self._limits = RequestLimits()  # what the engine can ever take, checked while parsing

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("LLMHandler: initialize() first")
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = engine

    # ------------------------------------------------------------------ loading
    def initialize(self, context: Context) -> None:
        from transformers import AutoTokenizer

        info = rank_info(context)
        # torchrun ranks: CUDA local_rank (or the CPU), as the distributed base handlers choose
        rank_device = device_for(info, context.model_settings.deviceType) if info.world_size > 1 else None
        self.setup_common(context, rank_device)
        raw = section(self.model_yaml_config, "handler")
        mine = {k: v for k, v in raw.items() if k in SETTINGS}
        for key in sorted(set(raw) - set(SETTINGS)):
            logger.warning("model-config.yaml: handler.%s is not an LLMHandler setting (%s); ignored",
                           key, ", ".join(SETTINGS))
        self.settings = validate_section("handler", mine, SETTINGS)
        model_dir = context.system_properties.get("model_dir") or "."
        path = find_model_dir(model_dir, self.settings.get("model_path"))
        trust = self.settings.get("trust_remote_code", False)
        dtype_setting = self.settings.get("dtype", "auto")
        assert self.device is not None
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
        parallel = context.model_settings.parallelType or "tp"
        continuous = context.model_settings.continuousBatching
        if info.world_size > 1 and not continuous:
            raise ModelConfigError(f"llm_handler on several ranks (parallelType {parallel}) needs continuousBatching: "
                                   "true: rank 0 schedules every step and the other ranks replay it")
        separate = wants_engine_process(self.settings, continuous, info)
        stage = None
        if info.world_size > 1:
            ensure_process_group(info, self.device)
        if info.world_size > 1 and parallel == "pp":  # each rank keeps its run of layers (ts/llm/engine/pipeline_parallel.py)
            stage = load_stage(path, model_dtype(dtype_setting, self.device), trust, info.rank, info.world_size,
                               self.device)
            self.model = stage.model
        elif info.world_size > 1:  # torchrun ranks: the model sharded by its own tensor-parallel plan
            self.model = load_causal_lm(path, dtype_setting, trust, self.device, tp_plan="auto")
        elif not separate:  # else the engine process loads it
            self.model = load_causal_lm(path, dtype_setting, trust, self.device)
        batch_size = int(context.system_properties.get("batch_size") or 1)
        fast_path = self.settings.get("fast_path")
        if info.world_size > 1:  # the fast forward runs whole weights; sharded or split ones keep the model's own
            if fast_path:
                raise ModelConfigError("handler.fast_path: true needs a single rank: with parallelType tp or pp the "
                                       "model's own (sharded or split) forward runs; remove fast_path")
            fast_path = False
        limits = engine_limits(self.settings, batch_size)
        if separate:
            self.engine = EngineProcess(CoreConfig(context.model_name, path, dtype_setting, trust, str(self.device),
                                                   self.settings, limits, fast_path), self.tokenizer)
        else:
            self.engine = build_engine(self.model, self.tokenizer, self.settings, limits, fast_path, info, stage,
                                       self.device)
        self.model_name = context.model_name
        engine = self.engine
        self._limits = RequestLimits(
            max_prompt_chars(self.tokenizer, engine.max_context), engine.max_batch_size + engine.max_waiting,
            f"max_batch_size + max_waiting = {engine.max_batch_size} + {engine.max_waiting} = "
            f"{engine.max_batch_size + engine.max_waiting}")
        self.llm_metrics = LLMMetrics(context.metrics if info.rank == 0 else None, context.model_name)
        self.conversations = Conversations(enabled=context.model_settings.sequenceBatching)
        if info.world_size > 1:
            self.coordinator = RankCoordinator(context.model_name, info.rank, info.world_size)
            self.leader, self.rank = info.rank == 0, info.rank
            if not self.leader:
                self.coordinator.start_following(self._replay)
        self.initialized = True
        logger.info("LLM %s: %s%s on %s, max_batch_size=%d, max_tokens_per_step=%d, context %d tokens, %s",
                    context.model_name, self.engine.model_class, f" {stage.describe()}" if stage is not None else "",
                    self.device, self.engine.max_batch_size, self.engine.max_tokens_per_step, self.engine.max_context,
                    self.engine.forward_path)

    def _max_new_tokens(self) -> dict[str, int]:
        """``max_tokens`` when a request omits it: OpenAI's documented defaults on the OpenAI forms
        (completions 16; chat none, i.e. up to the context), ``handler.max_new_tokens`` (64) on
        the TorchServe and generate forms."""
        setting = self.settings.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        return {TS: setting, GENERATE: setting, COMPLETIONS: OPENAI_COMPLETIONS_MAX_TOKENS,
                CHAT: self.engine.max_context}

    def _record_cache_metrics(self) -> None:
        """The paged cache's prefix hit ratio (docs/metrics.md), when a request ends; its block use is
        the engine's ``kv_cache_usage`` gauge."""
        hit_rate = self.engine.prefix_hit_rate
        if hit_rate is not None:
            self.llm_metrics.prefix_cache(hit_rate)

    def _parse(self, request_id: str, body: Any, headers: dict[str, str] | None) -> LLMRequest:
        req = parse_request(request_id, body, headers, tokenizer=self.tokenizer, model_name=self.model_name,
                               default_max_new_tokens=self._max_new_tokens(),
                               chat_template=self.settings.get("chat_template"),
                               strict=bool(self.settings.get("strict_fields", False)),
                               ignore_vllm_fields=bool(self.settings.get("ignore_vllm_fields", False)),
                               limits=self._limits)
        if self.conversations.enabled and len(req.choices) > 1:
            exc = LLMRequestError(400, "a stateful sequence (sequenceBatching) takes one prompt and one choice per "
                                  "turn: drop n / best_of / the list of prompts", param="n", code="invalid_value")
            req.error_event(exc)
            raise exc
        return req

    # ------------------------------------------------------------------ continuous batching
    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        """Parse, validate and queue a request; raises LLMRequestError (its ``body`` is the error
        answer in the request's form: ``error_event(request_id, exc)`` makes the final event)."""
        req = self._parse(request_id, body, headers)
        if self.coordinator is not None and not req.params.greedy and req.params.seed is None:
            # every rank seeds its own generator: an unseeded one would sample differently per rank
            req.params.seed = int(torch.randint(0, 2**62, (1,)).item())
        groups = req.groups()
        if len(groups) == 1:  # a stateful sequence's turn: the conversation so far, then this prompt
            groups = [(groups[0][0], self.conversations.prompt(request_id, headers, groups[0][1]), groups[0][2])]
        try:  # all of the request or nothing (an engine process refuses it at the next step instead)
            self.engine.add_all(groups, req.params)
        except LLMRequestError as exc:
            self.conversations.finished(request_id, completed=False)
            req.error_event(exc)  # sets exc.body in the request's form
            raise
        self._requests[request_id] = req
        self._owner.update((seq_id, request_id) for seq_id in req.choices)
        self.llm_metrics.arrived(request_id, sum(len(p) for p in req.prompts))
        if self.coordinator is not None:
            params = dataclasses.asdict(req.params)
            self._commands.extend(["add", seq_id, ids, params, forks] for seq_id, ids, forks in groups)
        conversation = self.conversations.sequence_of(request_id)
        if conversation is not None:  # the paged cache pins its blocks
            self.engine.converse(groups[0][0], conversation)
            if self.coordinator is not None:
                self._commands.append(["converse", groups[0][0], conversation])

    def cancel(self, request_id: str) -> None:
        """Forget a request (its client went away): no more events for it; its slot and KV rows
        are free for the next step."""
        req = self._requests.pop(request_id, None)
        self.conversations.finished(request_id, completed=False)
        seq_ids = list(req.choices) if req is not None else [request_id]
        cancelled = False
        for seq_id in seq_ids:
            self._owner.pop(seq_id, None)
            if self._engine is not None and self._engine.cancel(seq_id):
                cancelled = True
                if self.coordinator is not None:
                    self._commands.append(["cancel", seq_id])
        if req is not None:
            self.llm_metrics.finished(request_id, "cancelled")
        if cancelled:
            logger.info("LLM %s: request %s cancelled (its client went away); its slot is free",
                        self.model_name, request_id)

    def has_work(self) -> bool:
        # other ranks step when rank 0 publishes a step (their coordinator thread), never on their own
        # on rank 0, a job broken by a failed step takes one more step: the one that leaves it
        return self.leader and self._engine is not None and (self._broken is not None or self._engine.has_work())

    def step_fileno(self) -> int | None:
        """The engine process's pipe, which the worker's loop waits on with the frontend's socket
        (``ts/pipeline/continuous.py``); None with the engine in this process."""
        return self.engine.waited_on()

    def _replay(self, payload: dict[str, Any]) -> list[SequenceUpdate]:
        """A follower rank: rank 0's adds and cancels since the last step, then the same step (its
        collectives line up with rank 0's; the same seed keeps sampling identical)."""
        try:
            for command in payload["commands"]:
                if command[0] == "add":
                    self.engine.add(command[1], command[2], SamplingParams(**command[3]), command[4])
                elif command[0] == "converse":
                    self.engine.converse(command[1], command[2])
                elif command[0] == "end":
                    self.engine.end_conversation(command[1])
                else:
                    self.engine.cancel(command[1])
            torch.manual_seed(payload["seed"])
            return self.engine.step()
        except Exception as exc:  # noqa: BLE001 - this rank can no longer follow: leave the job
            self._leave_job(f"{type(exc).__name__}: {exc}")
            raise

    def _leave_job(self, why: str) -> None:
        """A failed step leaves the ranks out of step (a peer may wait for a send or a collective
        that never comes, or take the next step's data for this one's): this rank exits, so that
        torchrun restarts them all and the frontend fails what is still in flight. A worker whose
        engine process died exits too: the frontend starts a new worker."""
        if self._engine_gone:
            logger.error("LLM %s: the worker exits, its engine process is gone (%s); the frontend starts a new one",
                         self.model_name, why)
        else:
            logger.error("LLM %s: rank %d leaves the torchrun job after a failed step (%s); torchrun restarts the "
                         "ranks", self.model_name, self.rank, why)
        for handler in logging.getLogger().handlers:  # os._exit skips the usual flush
            handler.flush()
        os._exit(1)

    def _engine_step(self) -> list[SequenceUpdate]:
        if self.coordinator is None:
            return self.engine.step()  # an engine process's: the steps it took since the last call
        payload = {"commands": self._commands, "seed": int(torch.randint(0, 2**62, (1,)).item())}
        self._commands = []

        def local(p: dict[str, Any]) -> list[SequenceUpdate]:
            torch.manual_seed(p["seed"])
            return self.engine.step()
        updates: list[SequenceUpdate] = self.coordinator.run(payload, local)
        return updates

    def close(self) -> None:
        """The worker is stopping: rank 0 releases the other ranks' step loop."""
        if self.coordinator is not None and self.leader:
            self.coordinator.stop()
        if self._engine is not None:
            self._engine.close()

    def step(self) -> list[LLMEvent]:
        """One engine step; a failing step fails every request in the engine (status 500, or 507
        when out of memory) and leaves the engine empty; on torchrun ranks the next step then
        leaves the job (``_leave_job``)."""
        if self._broken is not None:  # the last step's errors went out: now leave
            self._leave_job(self._broken)
        try:
            updates = self._engine_step()
        except Exception as exc:  # noqa: BLE001 - one broken step must not leave requests hanging
            from ts.service import is_oom

            if isinstance(exc, (EngineStepFailed, EngineProcessLost)):  # the engine process logged its own trace
                logger.error("LLM %s: generation step failed in the engine process: %s", self.model_name, exc)
                err = (f"generation failed: the engine process {exc}" if isinstance(exc, EngineProcessLost)
                       else f"generation failed in the engine process: {exc}")
            else:
                logger.exception("LLM %s: generation step failed", self.model_name)
                err = f"generation failed: {type(exc).__name__}: {exc}"
            self.engine.abort_all()
            status = 507 if (isinstance(exc, EngineStepFailed) and exc.oom) or is_oom(exc) else 500
            if self.coordinator is not None or isinstance(exc, EngineProcessLost):
                self._broken = err  # the ranks are out of step, or the engine is gone: the worker leaves
                self._engine_gone = isinstance(exc, EngineProcessLost)
            events: list[LLMEvent] = [req.error_event(LLMRequestError(status, err, code="engine_error"))
                      for rid, req in self._requests.items()]
            for rid in self._requests:
                self.conversations.finished(rid, completed=False)
                self.llm_metrics.finished(rid, "error")
            self._requests.clear()
            self._owner.clear()
            return events
        events = []
        generated: dict[str, int] = {}
        for u in updates:
            rid = self._owner.get(u.seq_id, "")
            req = self._requests.get(rid)
            if req is None:  # cancelled: the caller already knows
                continue
            if u.error is not None:  # the engine process refused the request
                events.append(self._refused_later(rid, req, u.error))
                continue
            generated[rid] = generated.get(rid, 0) + len(u.new_token_ids)
            done = req.on_update(u)
            events.extend(done)
            self.conversations.generated(rid, u.new_token_ids)
            if u.finished:
                del self._owner[u.seq_id]
            if any(e.final is not None for e in done):
                del self._requests[rid]
                self.conversations.finished(rid, completed=u.finish_reason in COMPLETED)
                self.llm_metrics.tokens(rid, generated.pop(rid, 0))
                self.llm_metrics.finished(rid, u.finish_reason or "stop")
        for rid, count in generated.items():
            self.llm_metrics.tokens(rid, count)
        self.llm_metrics.gauges(self.engine.num_running, self.engine.num_waiting, self.engine.kv_cache_usage,
                                force=not self.engine.has_work())
        if any(u.finished for u in updates):
            self._record_cache_metrics()
        return events

    def _refused_later(self, request_id: str, req: LLMRequest, error: LLMRequestError) -> LLMEvent:
        """A request the engine process refused (``add_all`` queued it): it ends with that error."""
        del self._requests[request_id]
        for seq_id in req.choices:
            self._owner.pop(seq_id, None)
            self.engine.cancel(seq_id)  # the others of a request with several prompts
        self.conversations.finished(request_id, completed=False)
        self.llm_metrics.finished(request_id, "error")
        return req.error_event(error)

    def end_sequence(self, sequence_id: str) -> None:
        """The frontend closed a stateful sequence (SEQUENCE_END): its conversation is forgotten
        (and the paged cache's pin on its blocks dropped)."""
        self.conversations.end(sequence_id)
        if self.leader and self._engine is not None:  # other ranks follow rank 0's command
            self.engine.end_conversation(sequence_id)
            if self.coordinator is not None:
                self._commands.append(["end", sequence_id])

    def step_stages(self) -> dict[str, float]:
        """Seconds the last step spent decoding and prefilling (the worker's ``decode`` and
        ``prefill`` stages in describe: a server's decode throughput without its prefill time)."""
        if self._engine is None:
            return {}
        return {"decode": self.engine.last_step.decode_s, "prefill": self.engine.last_step.prefill_s}

    @staticmethod
    def error_event(request_id: str, exc: LLMRequestError) -> LLMEvent:
        """The final event for a request ``add_request`` refused."""
        return error_event(request_id, exc)

    # ------------------------------------------------------------------ TorchServe's batch call
    def handle(self, data: list[dict[str, Any]], context: Context) -> list[Any]:
        self.context = context
        results: list[Any] = [None] * len(data)
        batch: list[tuple[str, list[int], SamplingParams]] = []
        forks: dict[str, list[str]] = {}
        parsed: dict[str, tuple[int, LLMRequest]] = {}
        for idx, row in enumerate(data):
            key = f"{context.get_request_id(idx) or 'request'}#{idx}"
            body: Any = row
            if isinstance(row, dict) and ("data" in row or "body" in row):
                body = row.get("data") if row.get("data") is not None else row.get("body")
            headers = {}
            if idx < len(context.request_processor):
                headers = {k: v for k, v in context.get_all_request_header(idx).items() if isinstance(v, str)}
            try:
                req = self._parse(key, body, headers)
            except LLMRequestError as exc:
                results[idx] = self._refuse(context, idx, exc)
                continue
            parsed[key] = (idx, req)
            groups = req.groups()
            if len(groups) == 1:
                groups = [(groups[0][0], self.conversations.prompt(key, headers, groups[0][1]), groups[0][2])]
            batch.extend((seq_id, ids, req.params) for seq_id, ids, _ in groups)
            forks.update((seq_id, fork_ids) for seq_id, _, fork_ids in groups)
        outcome = generate_all(self.engine, batch, forks)
        for key, (idx, req) in parsed.items():
            mine = {seq_id: outcome[seq_id] for seq_id in req.choices}
            first = mine[key]
            error = next((r.error for r in mine.values() if r.error is not None), None)
            self.conversations.generated(key, first.token_ids)
            self.conversations.finished(key, completed=error is None and first.finish_reason in COMPLETED)
            if error is not None:
                req.error_event(error)
                results[idx] = self._refuse(context, idx, error)
                continue
            results[idx] = req.whole_answer(mine)
            if idx < len(context.request_processor):
                context.set_response_content_type(idx, req.content_type)
        return results

    @staticmethod
    def _refuse(context: Context, idx: int, exc: LLMRequestError) -> bytes:
        event = error_event("", exc)
        if idx < len(context.request_processor):
            context.set_response_status(exc.status, exc.message, idx)
            context.set_response_content_type(idx, event.content_type or JSON_TYPE)
            for k, v in event.headers.items():
                context.set_response_header(idx, k, v)
        return event.final or b""
