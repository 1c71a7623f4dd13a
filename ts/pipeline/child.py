"""Entry point of a preprocess-pool process (spawned; see pool.py)."""

from __future__ import annotations

import copy
import logging
import multiprocessing.util
import os
import queue
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

LOG_FORMAT = "%(asctime)s [%(levelname)s] %(name)s - %(message)s"
logger = logging.getLogger("ts.pool.child")


def build_handler(config: Any) -> tuple[Any, Any]:
    """Import the handler, build its Context, run the light setup and initialize_preprocess."""
    import torch

    from ts.model_loader import LoadError, LoadRequest, build_context, read_manifest, read_model_yaml, resolve_handler
    from ts.pipeline.probe import missing_attributes
    from ts.torch_handler.base_handler import BaseHandler

    torch.set_num_threads(max(1, config.threads))
    req = LoadRequest.from_json(config.load)
    manifest = read_manifest(req.model_path)
    context = build_context(req, manifest, read_model_yaml(req.model_path, manifest), config.metrics_config,
                            config.rank, config.local_rank, config.world_size, "cpu")
    spec = resolve_handler(req.handler, req.model_path)
    assert spec.cls is not None
    handler = spec.cls()
    if isinstance(handler, BaseHandler):
        handler.setup_common(context, device=torch.device("cpu"))  # pool output stays on CPU
    else:
        handler.context = context
    hook = getattr(handler, "initialize_preprocess", None)
    if hook is not None:
        hook(context)
    methods = ("preprocess", "postprocess") if req.settings.postprocessInPool else ("preprocess",)
    missing = missing_attributes(handler, methods)
    if missing:
        attrs = ", ".join(f"self.{a} (read in {w})" for a, w in sorted(missing.items()))
        raise LoadError(
            f"handler {type(handler).__name__} uses {attrs}, which the preprocess pool never sets: pool "
            "processes call initialize_preprocess(self, context), not initialize(). Create that state in "
            f"initialize_preprocess{' (the handler has none)' if hook is None else ''}, or set preprocessWorkers: 0", 400)
    return handler, context


def _batch_context(context: Any, payload: dict[str, Any]) -> Any:
    from ts.context import RequestProcessor

    ctx = copy.copy(context)
    ctx.set_batch(payload["ids"], [RequestProcessor(h) for h in payload["headers"]])
    for proc, state in zip(ctx.request_processor, payload.get("states") or [], strict=False):
        proc.apply_response_state(state)
    return ctx


def _error_for(exc: BaseException, handler: Any, stage: str, model_name: str) -> tuple[int, str]:
    from ts.service import classify_exception

    if isinstance(exc, AttributeError) and getattr(exc, "obj", None) is handler:
        logger.error("model %s: %s needs self.%s, missing in the pool process", model_name, stage, exc.name)
        return 500, (f"{stage} raised AttributeError: {exc}. The preprocess pool never calls initialize(): "
                     f"create self.{exc.name} in initialize_preprocess(self, context)")
    err = classify_exception(exc, model_name)
    return err.status, err.message


def start_reader(conn: Connection) -> queue.Queue[Any]:
    """Drain the pipe on a thread: the worker may send the next task while this process still
    runs (and answers) the current one, so neither side ever blocks on a full pipe."""
    inbox: queue.Queue[Any] = queue.Queue()  # the worker's messages (tuples), None at the end

    def read() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                inbox.put(None)
                return
            inbox.put(msg)
            if msg[0] == "stop":
                return

    threading.Thread(target=read, name="pool-reader", daemon=True).start()
    return inbox


def child_main(conn: Connection, config: Any, index: int) -> None:
    logging.basicConfig(level=os.environ.get("TS_WORKER_LOG_LEVEL", "INFO"), format=LOG_FORMAT, stream=sys.stdout)
    try:
        handler, context = build_handler(config)
    except BaseException as exc:  # noqa: BLE001 - reported to the worker, which fails LOAD
        from ts.model_loader import LoadError

        message = exc.message if isinstance(exc, LoadError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, LoadError):
            logger.exception("preprocess process %d: initialize_preprocess failed", index)
        status = exc.status if isinstance(exc, LoadError) else 500
        conn.send(("init-error", f"preprocess process {index}: {message}", status))
        return
    # multiprocessing's folder (pymp-*: torch passes a tensor's file descriptor through a listener
    # there), made now so that the pool can remove it if this process is killed
    conn.send(("ready", multiprocessing.util.get_temp_dir()))
    from ts.metrics.outbox import take_records

    model_name = context.model_name
    inbox = start_reader(conn)
    while True:
        msg = inbox.get()
        if msg is None or msg[0] == "stop":
            return
        kind, batch_id, payload = msg
        ctx = _batch_context(context, payload)
        ctx.stream_sender = lambda responses, bid=batch_id: conn.send(("chunk", bid, responses))
        handler.context = ctx
        start = time.monotonic()
        try:
            if kind == "pre":
                out = handler.preprocess(payload["data"])
            else:
                out = handler.postprocess(payload["data"])
        except Exception as exc:  # noqa: BLE001 - fails only this batch
            status, message = _error_for(exc, handler, "preprocess" if kind == "pre" else "postprocess", model_name)
            conn.send(("err", batch_id, status, message))
            continue
        busy = time.monotonic() - start
        states = [p.response_state() for p in ctx.request_processor]
        records = take_records(ctx.metrics)  # the worker sends them with the batch's RESULT
        try:
            conn.send(("ok", batch_id, {"data": out, "states": states, "records": records, "busy": busy}))
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
            conn.send(("err", batch_id, 500, f"{kind}process result cannot be sent to the inference process: "
                                             f"{type(exc).__name__}: {exc}"))
