"""Builds the pipeline a LOAD asks for: inline, or with a preprocess pool."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ts.model_loader import LoadError, LoadRequest, build_context, load_service, read_manifest, read_model_yaml, resolve_handler

logger = logging.getLogger("ts.worker")


def device_name(req: LoadRequest, local_rank: int, distributed: bool) -> str:
    if req.settings.deviceType != "gpu":
        return "cpu"  # decided without importing torch: a handler that never uses it starts ~2 s sooner
    import torch

    if torch.cuda.is_available():
        index = local_rank if distributed else max(req.gpu_id, 0)
        return f"cuda:{index}"
    return "cpu"


def load_pipeline(req: LoadRequest, metrics_config: str | None, ranks: Any,
                  send: Callable[[bytes], None], marks: dict[str, float] | None = None) -> Any:
    """``marks["imported"]`` (when given) gets the monotonic time at which the handler's module was
    imported: the rest of the load is its initialize (the worker's startup steps, docs/performance.md)."""
    manifest = read_manifest(req.model_path)
    yaml_cfg = read_model_yaml(req.model_path, manifest)
    if not req.handler:
        req.handler = manifest.get("model", {}).get("handler", "") or "base_handler"
    if not req.envelope:
        req.envelope = manifest.get("model", {}).get("envelope", "") or ""
    device = device_name(req, ranks.local_rank, ranks.distributed)
    context = build_context(req, manifest, yaml_cfg, metrics_config, ranks.rank, ranks.local_rank,
                            ranks.world_size, device)
    spec = resolve_handler(req.handler, req.model_path)
    if marks is not None:
        marks["imported"] = time.monotonic()
    logger.info("model %s: handler %s%s, batch size %d, preprocess workers %d", req.model_name, req.handler,
                f", envelope {req.envelope}" if req.envelope else "", req.settings.batchSize, req.settings.preprocessWorkers)
    answer = ranks.local_rank == 0  # TorchServe: only LOCAL_RANK 0 answers inference
    if req.settings.preprocessWorkers < 0:
        raise LoadError(f"preprocessWorkers must be >= 0, got {req.settings.preprocessWorkers}", 400)
    if req.settings.continuousBatching:
        pipeline: Any = _continuous_pipeline(req, context, spec, ranks, send, answer)
    elif req.settings.preprocessWorkers == 0:
        from ts.pipeline.sync import SyncPipeline

        pipeline = SyncPipeline(load_service(req, context, spec), send, answer)
    else:
        from ts.pipeline.pooled import PooledPipeline

        pipeline = PooledPipeline.create(req, context, spec, metrics_config, send, answer)
    pipeline.stats.worker_name = req.worker_name
    return pipeline


def _continuous_pipeline(req: LoadRequest, context: Any, spec: Any, ranks: Any,
                         send: Callable[[bytes], None], answer: bool) -> Any:
    """The handler's own hooks when it has them all; none of them: TorchServe's mode (the frontend
    re-sends running requests each step, ts/pipeline/step_handler.py); some: refused naming the rest."""
    from ts.pipeline.continuous import HOOKS, ContinuousPipeline, missing_hooks

    if req.settings.preprocessWorkers:
        raise LoadError("continuousBatching and preprocessWorkers cannot be combined: the handler's "
                        "steps run the whole request; set preprocessWorkers: 0", 400)
    service = load_service(req, context, spec)
    missing = missing_hooks(service.handler)
    if not missing:
        logger.info("model %s: continuous batching through the handler's add_request/step hooks", req.model_name)
        return ContinuousPipeline(service, send, answer)
    if len(missing) < len(HOOKS):
        raise LoadError(f"continuousBatching: true needs a handler class with all of add_request(), step(), "
                        f"has_work() and cancel(), or none of them (TorchServe's way: handle() runs each "
                        f"step); handler {req.handler!r} lacks {', '.join(h + '()' for h in missing)} "
                        f"(see docs/llm.md)", 400)
    if ranks.world_size > 1:  # the frontend feeds rank 0 only: the other ranks would never step
        raise LoadError(f"continuousBatching with a handler that has none of add_request(), step(), "
                        f"has_work(), cancel() runs on one rank only, but this worker has "
                        f"{ranks.world_size} ranks; give handler {req.handler!r} the hooks (rank 0's "
                        f"step drives the other ranks, see docs/llm.md) or serve it on one rank", 400)
    from ts.pipeline.step_handler import StepPipeline

    logger.info("model %s: continuous batching TorchServe's way: handle() runs each step with the running "
                "requests re-sent as cached entries (batchSize %d)", req.model_name, req.settings.batchSize)
    return StepPipeline(service, send, answer, req.settings.batchSize)
