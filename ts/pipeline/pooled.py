"""Pipeline with a preprocess pool: decode -> preprocess (pool) -> inference -> postprocess -> encode.

Three threads in the worker process keep batches moving in order:
* the worker's main thread decodes each INFERENCE frame and hands it to the pool at once;
* the inference thread waits for each batch's preprocessed input, in arrival order, and runs
  ``inference`` (plus ``postprocess`` unless that is pooled too);
* the sender thread waits for each batch's final results, in order, and writes RESULT + METRICS.
With N pool processes up to N batches preprocess while one runs inference.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ts.context import Context
from ts.metrics.metric_cache_abstract import MetricCacheAbstract
from ts.metrics.outbox import MetricsOutbox, take_records
from ts.model_loader import HandlerSpec, LoadError, LoadRequest, load_service
from ts.pipeline.pool import ChildConfig, PoolStartError, PreprocessPool
from ts.pipeline.stats import PipelineStats
from ts.protocol import codec
from ts.protocol.codec import Request
from ts.service import PREDICTION_METRIC, BatchError, build_responses, check_results, classify_exception, decode_batch, error_responses
from ts.torch_handler.base_handler import BaseHandler

logger = logging.getLogger("ts.pipeline")
Send = Callable[..., None]  # Worker.send(*frames): written together, in order


@dataclass
class Batch:
    batch_id: int
    requests: list[Request]
    data: list[dict[str, Any]]
    context: Context
    received: float
    kind: str = "run"  # "run" | "describe"
    pre: Future[dict[str, Any]] | None = None
    pre_done: float = 0.0
    post: Future[dict[str, Any]] | None = None
    results: list[Any] | None = None
    error: BatchError | None = None
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    inference_done: float = 0.0


def check_pool_handler(spec: HandlerSpec, req: LoadRequest) -> None:
    """Refuse handlers the pool cannot split into preprocess / inference / postprocess (LOAD status 400)."""
    n = req.settings.preprocessWorkers
    if spec.function is not None:
        raise LoadError(
            f"handler {spec.name!r} is a module-level function, but preprocessWorkers={n} needs a handler class "
            "with preprocess/inference/postprocess methods (e.g. a BaseHandler subclass); set preprocessWorkers: 0 "
            "or write the handler as a class", 400)
    cls = spec.cls
    assert cls is not None
    missing = [m for m in ("preprocess", "inference", "postprocess") if not callable(getattr(cls, m, None))]
    if missing:
        raise LoadError(f"handler class {cls.__name__} has no {', '.join(missing)} method(s), which "
                        f"preprocessWorkers={n} calls separately; subclass BaseHandler or set preprocessWorkers: 0", 400)
    if getattr(cls, "handle", None) is not BaseHandler.handle:
        raise LoadError(f"handler class {cls.__name__} overrides handle(), but with preprocessWorkers={n} the worker "
                        "calls preprocess (in the pool), inference and postprocess itself and would skip it; move "
                        "that logic into those methods or set preprocessWorkers: 0", 400)
    if req.envelope:
        raise LoadError(f"envelope {req.envelope!r} cannot be combined with preprocessWorkers={n} yet; "
                        "set preprocessWorkers: 0 or drop the envelope", 400)


class PooledPipeline:
    def __init__(self, service: Any, pool: PreprocessPool, send: Send, answer: bool, postprocess_in_pool: bool) -> None:
        self.service = service
        self.handler = service.handler
        self.pool = pool
        self.send = send
        self.answer = answer
        self.postprocess_in_pool = postprocess_in_pool
        self.stats = PipelineStats(["preprocess", "inference", "postprocess"])
        self.metrics = MetricsOutbox(service.context.metrics, send, answer)
        # The sender thread records PredictionTime in a cache of its own: draining the handler's
        # shared cache there would take metrics the inference thread recorded for the next batch.
        shared = service.context.metrics
        self._timing_metrics = (MetricCacheAbstract(model_name=shared.model_name)
                                if shared is not None else None)
        self.completed = 0  # batches finished (answered, or dropped on ranks > 0)
        self._count_lock = threading.Lock()
        self._inference_q: queue.Queue[Batch | None] = queue.Queue()
        self._send_q: queue.Queue[Batch | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._inference_loop, name="inference", daemon=True),
                         threading.Thread(target=self._sender_loop, name="sender", daemon=True)]
        for t in self._threads:
            t.start()

    @classmethod
    def create(cls, req: LoadRequest, context: Context, spec: HandlerSpec, metrics_config: str | None,
               send: Send, answer: bool) -> PooledPipeline:
        check_pool_handler(spec, req)
        load = dict(req.extra, handler=req.handler, envelope=req.envelope)
        config = ChildConfig(load, metrics_config, context.rank, context.local_rank, context.world_size)
        chunk_sender = _ChunkForwarder(send, answer)
        pool = PreprocessPool(req.settings.preprocessWorkers, config, chunk_sender)
        pool.start()  # spawn first: the pool imports while the model loads here
        try:
            service = load_service(req, context, spec)
            pool.wait_ready()
        except PoolStartError as exc:
            pool.close()
            raise LoadError(str(exc), exc.status) from None
        except BaseException:
            pool.close()
            raise
        return cls(service, pool, send, answer, req.settings.postprocessInPool)

    # ------------------------------------------------------------------ stage 0 (main thread)
    def submit(self, batch_id: int, requests: list[Request], received_at: float) -> None:
        data, ids, processors = decode_batch(requests)
        ctx = copy.copy(self.service.context)
        ctx.set_batch(ids, processors)
        batch = Batch(batch_id, requests, data, ctx, received_at)
        if processors and processors[0].get_request_property("describe") == "True":
            batch.kind = "describe"
        elif requests:
            batch.pre = self.pool.submit("pre", batch_id, self._payload(batch, data)).future
        self._inference_q.put(batch)

    @staticmethod
    def _payload(batch: Batch, data: Any) -> dict[str, Any]:
        ctx = batch.context
        return {"data": data, "ids": dict(ctx.request_ids or {}),
                "headers": [p.get_request_properties() for p in ctx.request_processor],
                "states": [p.response_state() for p in ctx.request_processor]}

    @staticmethod
    def _apply(batch: Batch, reply: dict[str, Any]) -> Any:
        for proc, state in zip(batch.context.request_processor, reply["states"], strict=False):
            proc.apply_response_state(state)
        batch.records.extend(reply["records"])
        return reply["data"]

    # ------------------------------------------------------------------ stage 2: inference
    def _inference_loop(self) -> None:
        while True:
            batch = self._inference_q.get()
            if batch is None:
                self._send_q.put(None)
                return
            try:
                self._run_inference(batch)
            except Exception as exc:  # noqa: BLE001 - fails only this batch
                batch.error = classify_exception(exc, self.service.model_name)
            self._send_q.put(batch)

    def _run_inference(self, batch: Batch) -> None:
        handler = self.handler
        ctx = batch.context
        ctx.stream_sender = _BatchChunks(self.send, self.answer, batch.batch_id)
        if not batch.requests:
            batch.results = []
            return
        if batch.kind == "describe":
            handler.context = ctx
            batch.results = [handler.describe_handle()]
            return
        assert batch.pre is not None
        wait_start = time.monotonic()
        try:
            reply = batch.pre.result()
        except BatchError as exc:
            batch.error = exc
            return
        got = time.monotonic()
        pre_busy, pre_wait = reply["busy"], reply["wait"]
        self.stats.stages["preprocess"].record(pre_wait, pre_busy)
        batch.timings["preprocess"] = (pre_wait, pre_busy)
        pre = self._apply(batch, reply)
        handler.context = ctx
        start = time.monotonic()
        if ctx.metrics is not None:
            ctx.metrics.request_ids = ctx.request_ids
        if handler._is_explain():
            output = handler.explain_handle(pre, batch.data)
            post_ready = True
        else:
            output = handler.inference(pre)
            post_ready = False
        end = time.monotonic()
        starved = got - wait_start
        self.stats.idle.add(starved, end - start)
        self.stats.stages["inference"].record(start - got, end - start)
        batch.timings["inference"] = (start - got, end - start)
        batch.inference_done = end
        batch.records.extend(self.metrics.take())  # now: the next batch records into the same cache
        if post_ready:
            batch.results = output
        elif self.postprocess_in_pool:
            batch.post = self.pool.submit("post", batch.batch_id, self._payload(batch, output)).future
        else:
            p_start = time.monotonic()
            batch.results = handler.postprocess(output)
            p_end = time.monotonic()
            self.stats.stages["postprocess"].record(p_start - end, p_end - p_start)
            batch.timings["postprocess"] = (p_start - end, p_end - p_start)
            batch.records.extend(self.metrics.take())

    # ------------------------------------------------------------------ stage 3: send
    def _sender_loop(self) -> None:
        while True:
            batch = self._send_q.get()
            if batch is None:
                return
            try:
                self._finish(batch)
            except OSError as exc:
                logger.warning("cannot send batch %d: %s", batch.batch_id, exc)
            finally:
                with self._count_lock:
                    self.completed += 1

    def _finish(self, batch: Batch) -> None:
        if batch.error is None and batch.post is not None:
            try:
                reply = batch.post.result()
                busy, wait_s = reply["busy"], reply["wait"]
                self.stats.stages["postprocess"].record(wait_s, busy)
                batch.timings["postprocess"] = (wait_s, busy)
                batch.results = self._apply(batch, reply)
            except BatchError as exc:
                batch.error = exc
        if batch.error is None:
            try:
                results = check_results(batch.results, len(batch.requests))
                metrics = self._timing_metrics
                if metrics is not None:
                    metrics.request_ids = batch.context.request_ids
                    metrics.add_time(PREDICTION_METRIC, round((time.monotonic() - batch.received) * 1000, 2))
                    batch.records.extend(take_records(metrics))
                responses = build_responses(results, batch.context)
            except Exception as exc:  # noqa: BLE001
                batch.error = classify_exception(exc, self.service.model_name)
        if batch.error is not None:
            responses = error_responses(batch.requests, batch.error.status, batch.error.message)
        if not self.answer:
            return
        records = batch.records + self.stats.batch_records(self.service.model_name, batch.requests, batch.timings)
        self.metrics.send_answer(batch.batch_id, responses, records)

    # ------------------------------------------------------------------ shutdown
    def drain(self) -> None:
        self._inference_q.put(None)
        for t in self._threads:
            t.join()

    def close(self) -> None:
        self.pool.close()


class _BatchChunks:
    """context.stream_sender for one batch: CHUNK frames from the inference process."""

    def __init__(self, send: Send, answer: bool, batch_id: int) -> None:
        self.send, self.answer, self.batch_id = send, answer, batch_id

    def __call__(self, responses: list[codec.Response]) -> None:
        if self.answer:
            self.send(codec.encode_result(self.batch_id, responses, chunk=True))


class _ChunkForwarder:
    """CHUNK frames a pool process streamed (batch id, responses)."""

    def __init__(self, send: Send, answer: bool) -> None:
        self.send, self.answer = send, answer

    def __call__(self, batch_id: int, responses: list[codec.Response]) -> None:
        if self.answer:
            self.send(codec.encode_result(batch_id, responses, chunk=True))

