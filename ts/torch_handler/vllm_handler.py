"""TorchServe's ``vllm_handler``: vLLM's engine behind tserve's continuous batching.

Archives made for TorchServe's vLLM example (``--handler vllm_handler``, model-config.yaml
``handler: {model_path: ..., vllm_engine_config: {...}}``) run unchanged. vLLM's ``LLMEngine``
already schedules sequences step by step, so this handler only maps tserve's hooks onto it:
``add_request`` → ``engine.add_request``, ``step`` → ``engine.step``, ``cancel`` →
``engine.abort_request``. Requests and answers use the same three forms as ``llm_handler``
(TorchServe style, OpenAI completions and chat completions: ``ts/llm/api/request.py``).

vLLM needs a CUDA GPU and is not a tserve dependency: without it, loading fails with a message
saying how to install it, or to use ``llm_handler`` (Hugging Face models on any device).
"""

from __future__ import annotations

import logging
from typing import Any

from ts.context import Context
from ts.handler_utils.distributed.config import ModelConfigError, section
from ts.llm.api.forms import parse_request
from ts.llm.api.request import LLMEvent, LLMRequest, RequestLimits
from ts.llm.handler.settings import DEFAULT_MAX_NEW_TOKENS, find_model_dir, max_prompt_chars
from ts.llm.params import VLLM_SETTINGS, LLMRequestError, SequenceUpdate, TokenLogprob
from ts.torch_handler.base_handler import BaseHandler

logger = logging.getLogger(__name__)

MISSING_VLLM = ("vllm_handler needs vLLM, which is not installed in this worker's Python: `pip install vllm` "
                "on a machine with a CUDA GPU, or serve the model with handler llm_handler (tserve's own "
                "continuous-batching engine for Hugging Face models, CPU or GPU)")


def request_limits(engine: Any, tokenizer: Any, max_num_seqs: int) -> RequestLimits:
    """What vLLM can ever schedule, checked while a request is parsed as llm_handler does
    (``RequestLimits``): a prompt text too long for ``max_model_len`` tokens, and more sequences
    of one prompt (n / best_of) than ``max_num_seqs``, which vLLM schedules together and would
    otherwise wait for forever. vLLM queues a request's prompts apart: the limit is per prompt."""
    max_len = getattr(getattr(engine, "model_config", None), "max_model_len", None)
    return RequestLimits(max_prompt_chars(tokenizer, int(max_len)) if max_len else None, max_num_seqs,
                         f"vllm_engine_config.max_num_seqs = {max_num_seqs} sequences per prompt", per_prompt=True)


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ModelConfigError(f"{MISSING_VLLM} ({exc})") from None
    return vllm


class VLLMHandler(BaseHandler):
    def __init__(self) -> None:
        super().__init__()
        self.engine: Any = None
        self.tokenizer: Any = None
        self.model_name = ""
        self.max_new_tokens = DEFAULT_MAX_NEW_TOKENS
        self._vllm: Any = None
        self._requests: dict[str, LLMRequest] = {}
        self._groups: dict[str, tuple[str, list[str]]] = {}  # vLLM request id -> (our request, its sequences)
        self._sent: dict[str, tuple[int, int]] = {}  # sequence -> (characters, tokens) already reported
        self._limits = RequestLimits()  # what vLLM can ever schedule, checked while parsing

    def initialize(self, context: Context) -> None:
        vllm = self._vllm = import_vllm()
        self.setup_common(context)
        cfg = section(self.model_yaml_config, "handler")
        engine_cfg = dict(cfg.get("vllm_engine_config") or {})
        path = find_model_dir(context.system_properties.get("model_dir") or ".", cfg.get("model_path"))
        self.max_new_tokens = int(cfg.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
        engine_cfg.setdefault("max_num_seqs", int(context.system_properties.get("batch_size") or 1))
        self.engine = vllm.LLMEngine.from_engine_args(vllm.EngineArgs(model=path, **engine_cfg))
        self.tokenizer = self.engine.get_tokenizer()
        self._limits = request_limits(self.engine, self.tokenizer, int(engine_cfg["max_num_seqs"]))
        self.model_name = context.model_name
        self.initialized = True
        logger.info("vLLM %s: %s with %s", context.model_name, path, engine_cfg)

    # ------------------------------------------------------------------ continuous batching
    def vllm_params(self, req: LLMRequest, n: int) -> Any:
        """The request's settings as vLLM's ``SamplingParams`` (``n`` sequences per prompt)."""
        p = req.params
        same = {name: getattr(p, name) for name in VLLM_SETTINGS}  # the settings vLLM names as we do
        return self._vllm.SamplingParams(
            n=n, max_tokens=p.max_new_tokens, top_k=p.top_k if p.top_k > 0 else -1, stop=list(p.stop) or None,
            stop_token_ids=list(p.stop_token_ids) or None, logit_bias=dict(p.logit_bias) or None, logprobs=p.logprobs,
            **same)

    def add_request(self, request_id: str, body: bytes | str | dict[str, Any] | None, headers: dict[str, str]) -> None:
        req = parse_request(request_id, body, headers, tokenizer=self.tokenizer, model_name=self.model_name,
                               default_max_new_tokens=self.max_new_tokens, limits=self._limits)
        added: list[str] = []
        try:
            for seq_id, ids, forks in req.groups():  # one vLLM request per prompt, its n sequences in it
                self.engine.add_request(seq_id, {"prompt_token_ids": ids}, self.vllm_params(req, 1 + len(forks)))
                added.append(seq_id)
                self._groups[seq_id] = (request_id, [seq_id, *forks])
        except ValueError as exc:  # vLLM's refusals (prompt too long for max_model_len, ...)
            for seq_id in added:
                self._groups.pop(seq_id, None)
                self.engine.abort_request(seq_id)
            err = LLMRequestError(400, str(exc), param="prompt", code="invalid_value")
            req.error_event(err)
            raise err from None
        self._requests[request_id] = req

    def cancel(self, request_id: str) -> None:
        req = self._requests.pop(request_id, None)
        if req is not None:
            for seq_id in req.choices:
                self._sent.pop(seq_id, None)
            for seq_id, _, _ in req.groups():
                self._groups.pop(seq_id, None)
                self.engine.abort_request(seq_id)

    def has_work(self) -> bool:
        return self.engine is not None and self.engine.has_unfinished_requests()

    def _update(self, seq_id: str, completion: Any, prompt_tokens: int, top: int) -> SequenceUpdate:
        """vLLM's cumulative output of one sequence as the new part (text, tokens, logprobs)."""
        choice_text, tokens = self._sent.pop(seq_id, (0, 0))
        ids = list(completion.token_ids)
        if completion.finish_reason is None:
            self._sent[seq_id] = (len(completion.text), len(ids))
        logprobs = None
        if getattr(completion, "logprobs", None) is not None:  # one {token id: Logprob} per token
            logprobs = [TokenLogprob(ids[i], float(step[ids[i]].logprob),
                                     sorted(((int(t), float(lp.logprob)) for t, lp in step.items()),
                                            key=lambda item: -item[1])[:top])
                        for i, step in enumerate(completion.logprobs[tokens:], start=tokens)]
        reason = completion.finish_reason
        return SequenceUpdate(seq_id, ids[tokens:], completion.text[choice_text:], reason is not None, reason,
                              prompt_tokens, len(ids), logprobs)

    def step(self) -> list[LLMEvent]:
        events: list[LLMEvent] = []
        for out in self.engine.step():
            group = self._groups.get(out.request_id)
            req = self._requests.get(group[0]) if group is not None else None
            if group is None or req is None:
                continue
            for completion in out.outputs:
                seq_id = group[1][getattr(completion, "index", 0)]
                if req.choices[seq_id].finish_reason is not None:
                    continue  # vLLM repeats a finished sequence while its siblings run
                update = self._update(seq_id, completion, len(getattr(out, "prompt_token_ids", None) or []),
                                      req.params.logprobs or 0)
                if out.finished and not update.finished:
                    update.finished, update.finish_reason = True, "stop"
                done = req.on_update(update)
                events.extend(done)
                if any(e.final is not None for e in done):
                    self._requests.pop(group[0], None)
            if out.finished:
                self._groups.pop(out.request_id, None)
        return events

    # ------------------------------------------------------------------ TorchServe's batch call
    def handle(self, data: list[dict[str, Any]], context: Context) -> list[Any]:
        """Runs the batch to completion (without continuousBatching): one answer per request."""
        answers: dict[str, bytes] = {}
        ids = []
        for idx, row in enumerate(data):
            rid = f"{context.get_request_id(idx) or 'request'}#{idx}"
            ids.append(rid)
            body = row.get("data") if row.get("data") is not None else row.get("body")
            headers = {k: v for k, v in context.get_all_request_header(idx).items() if isinstance(v, str)}
            try:
                self.add_request(rid, body, headers)
            except LLMRequestError as exc:
                answers[rid] = exc.body or b""
                context.set_response_status(exc.status, exc.message, idx)
        pieces: dict[str, list[bytes]] = {rid: [] for rid in ids}
        while self.has_work():
            for ev in self.step():
                pieces[ev.request_id].append(ev.chunk or b"")
                if ev.final is not None:
                    answers[ev.request_id] = b"".join(pieces[ev.request_id]) + ev.final
                    context.set_response_content_type(ids.index(ev.request_id), ev.content_type)
        return [answers.get(rid, b"") for rid in ids]
