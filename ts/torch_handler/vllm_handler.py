"""TorchServe's ``vllm_handler``: vLLM's engine behind tserve's continuous batching.

Archives made for TorchServe's vLLM example (``--handler vllm_handler``, model-config.yaml
``handler: {model_path: ..., vllm_engine_config: {...}}``) run unchanged. vLLM's ``LLMEngine``
already schedules sequences step by step, so this handler only maps tserve's hooks onto it:
``add_request`` → ``engine.add_request``, ``step`` → ``engine.step``, ``cancel`` →
``engine.abort_request``. Requests and answers use the same three forms as ``llm_handler``
(TorchServe style, OpenAI completions and chat completions: ``ts/llm/api.py``).

vLLM needs a CUDA GPU and is not a tserve dependency: without it, loading fails with a message
saying how to install it, or to use ``llm_handler`` (Hugging Face models on any device).
"""

from __future__ import annotations

import logging
from typing import Any

from ts.context import Context
from ts.handler_utils.distributed.config import ModelConfigError, section
from ts.llm.api import LLMEvent, LLMRequest, error_event
from ts.llm.engine import LLMRequestError
from ts.torch_handler.base_handler import BaseHandler
from ts.torch_handler.llm_handler import DEFAULT_MAX_NEW_TOKENS, find_model_dir

logger = logging.getLogger(__name__)

MISSING_VLLM = ("vllm_handler needs vLLM, which is not installed in this worker's Python: `pip install vllm` "
                "on a machine with a CUDA GPU, or serve the model with handler llm_handler (tserve's own "
                "continuous-batching engine for Hugging Face models, CPU or GPU)")


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
        self._requests: dict[str, tuple[LLMRequest, int]] = {}  # id -> (request, characters sent)

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
        self.model_name = context.model_name
        self.initialized = True
        logger.info("vLLM %s: %s with %s", context.model_name, path, engine_cfg)

    # ------------------------------------------------------------------ continuous batching
    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        req = LLMRequest.parse(request_id, body, headers, tokenizer=self.tokenizer, model_name=self.model_name,
                               default_max_new_tokens=self.max_new_tokens)
        p = req.params
        params = self._vllm.SamplingParams(
            max_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
            top_k=p.top_k if p.top_k > 0 else -1, seed=p.seed, stop=list(p.stop) or None, ignore_eos=p.ignore_eos)
        try:
            self.engine.add_request(request_id, {"prompt_token_ids": req.prompt_ids}, params)
        except ValueError as exc:  # vLLM's refusals (prompt too long for max_model_len, ...)
            err = LLMRequestError(400, str(exc), param="prompt", code="invalid_value")
            error_event(request_id, err, req.kind)
            raise err from None
        self._requests[request_id] = (req, 0)

    def cancel(self, request_id: str) -> None:
        if self._requests.pop(request_id, None) is not None:
            self.engine.abort_request(request_id)

    def has_work(self) -> bool:
        return self.engine is not None and self.engine.has_unfinished_requests()

    def step(self) -> list[LLMEvent]:
        events: list[LLMEvent] = []
        for out in self.engine.step():
            entry = self._requests.get(out.request_id)
            if entry is None:
                continue
            req, sent = entry
            completion = out.outputs[0]
            delta = completion.text[sent:]
            events.extend(req.on_update(delta, out.finished, completion.finish_reason, len(completion.token_ids)))
            if out.finished:
                del self._requests[out.request_id]
            else:
                self._requests[out.request_id] = (req, len(completion.text))
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
                answers[rid] = exc.body
                context.set_response_status(exc.status, exc.message, idx)
        pieces: dict[str, list[bytes]] = {rid: [] for rid in ids}
        while self.has_work():
            for ev in self.step():
                pieces[ev.request_id].append(ev.chunk or b"")
                if ev.final is not None:
                    answers[ev.request_id] = b"".join(pieces[ev.request_id]) + ev.final
                    context.set_response_content_type(ids.index(ev.request_id), ev.content_type)
        return [answers.get(rid, b"") for rid in ids]
