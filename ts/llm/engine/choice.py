"""Which generation engine a worker runs, built from the handler's settings (docs/llm.md): the
rectangle batch cache or the paged KV cache (``paged_kv_cache``), on one process, on
tensor-parallel ranks, or as a pipeline stage; and the paged pool's size, given
(``kv_cache_blocks``) or from a memory budget (``kv_cache_memory_fraction``).

Without ``paged_kv_cache`` the paged cache is the default where it is measured to win
(docs/benchmarks.md): one process on a CPU, the engine's fast forward running the model and the
native decode attention built. Elsewhere the rectangle stays the default: Hugging Face's forward
and tensor-parallel or pipeline ranks gather the pool's blocks on every step, and on a GPU the
paged cache's extra small operations cost more than its padding saved (no fused kernel yet)."""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch

from ts.handler_utils.distributed.config import ModelConfigError
from ts.handler_utils.distributed.dist_env import RankInfo
from ts.llm.engine.fastpath.llama import unsupported_reason
from ts.llm.engine.generation import GenerationEngine
from ts.llm.engine.paged import budget
from ts.llm.engine.paged.native import decode_kernel
from ts.llm.engine.paged.scheduler import DEFAULT_BLOCK_SIZE, PagedKV
from ts.llm.engine.pipeline_parallel import PipelineStage, stage_engine

# the handler's log: these lines are part of its model load
logger = logging.getLogger("ts.torch_handler.llm_handler")

PAGED_KEYS = ("kv_cache_blocks", "kv_cache_memory_fraction", "block_size", "enable_prefix_caching")


def wants_engine_process(settings: dict[str, Any], continuous: bool, info: RankInfo) -> bool:
    """``handler.engine_process``: the engine in a process of its own (``engine_core.py``); by
    default wherever continuous batching runs on one rank."""
    asked = settings.get("engine_process")
    if asked and not continuous:
        raise ModelConfigError("handler.engine_process: true needs continuousBatching: true (TorchServe's batch "
                               "call runs the engine in the worker): set continuousBatching or remove engine_process")
    if asked and info.world_size > 1:
        raise ModelConfigError("handler.engine_process: true needs a single rank (on torchrun ranks rank 0 "
                               "schedules the other ranks' engines): remove engine_process")
    if asked is None:
        return continuous and info.world_size == 1
    return bool(asked)


def build_engine(model: Any, tokenizer: Any, settings: dict[str, Any], limits: dict[str, Any],
                 fast_path: bool | None, info: RankInfo, stage: PipelineStage | None,
                 device: torch.device) -> GenerationEngine:
    """The rectangle-cache engine, or the paged one (``paged_kv_cache``, see the module's
    docstring for its default); on a pipeline stage (``stage``) its pipeline form."""
    given = [k for k in PAGED_KEYS if k in settings]
    if settings.get("paged_kv_cache") is False and given:
        raise ModelConfigError(f"handler.{given[0]} needs the paged KV cache, but handler.paged_kv_cache is false: "
                               f"remove {given[0]} or set paged_kv_cache to true")
    paged = settings.get("paged_kv_cache")
    if paged is None:  # the pool's own keys ask for it; else where it wins
        paged = bool(given) or paged_by_default(model, fast_path, stage, info, device)
    if not paged:
        if stage is not None:
            return stage_engine(stage, tokenizer, **limits)
        return GenerationEngine(model, tokenizer, **limits, fast_path=fast_path)
    return paged_engine(model, tokenizer, settings, limits, fast_path, info, stage, device)


def paged_by_default(model: Any, fast_path: bool | None, stage: PipelineStage | None, info: RankInfo,
                     device: torch.device) -> bool:
    """Whether a model-config without ``paged_kv_cache`` gets the paged cache (module docstring)."""
    if stage is not None or info.world_size > 1 or fast_path is False or device.type != "cpu":
        return False
    dtype = next(model.parameters()).dtype
    if unsupported_reason(model) is not None:
        return False
    if decode_kernel(device, dtype) is None:
        logger.info("KV cache: the rectangle batch cache (the paged one is the default on a CPU only with its "
                    "native decode attention; set handler.paged_kv_cache: true to use it anyway)")
        return False
    return True


def paged_engine(model: Any, tokenizer: Any, settings: dict[str, Any], limits: dict[str, Any],
                 fast_path: bool | None, info: RankInfo, stage: PipelineStage | None,
                 device: torch.device) -> GenerationEngine:
    """The paged engine (or its pipeline form) with its pool sized by the handler's keys."""
    block_size = settings.get("block_size", DEFAULT_BLOCK_SIZE)
    num_blocks = settings.get("kv_cache_blocks")
    fraction = settings.get("kv_cache_memory_fraction")
    if num_blocks is not None and fraction is not None:
        raise ModelConfigError("handler.kv_cache_blocks and handler.kv_cache_memory_fraction both size the KV "
                               "pool: give one of them")
    if fraction is not None:
        num_blocks = blocks_from_memory(model, fraction, block_size, info, stage is not None, device)
    kv = functools.partial(PagedKV, num_blocks=None if num_blocks is None else max(1, num_blocks),
                           block_size=block_size, prefix_caching=settings.get("enable_prefix_caching", True))
    try:  # a budget of no block at all is refused below, naming its key
        engine = (stage_engine(stage, tokenizer, kv_cache=kv, **limits) if stage is not None
                  else GenerationEngine(model, tokenizer, **limits, fast_path=fast_path, kv_cache=kv))
    except ValueError as exc:
        raise ModelConfigError(f"handler.paged_kv_cache: {exc}") from exc
    need = -(-engine.max_context // block_size)
    if fraction is not None and num_blocks is not None and num_blocks < need:
        raise ModelConfigError(
            f"handler.kv_cache_memory_fraction: {fraction} of the free memory gives {num_blocks} KV "
            f"blocks of {block_size} tokens, fewer than the {need} one sequence of the whole context "
            f"({engine.max_context} tokens) needs: raise kv_cache_memory_fraction, lower max_context, or give "
            "kv_cache_blocks")
    return engine


def blocks_from_memory(model: Any, fraction: float, block_size: int, info: RankInfo, pipeline: bool,
                       device: torch.device) -> int:
    """The blocks that fit in ``fraction`` of this device's free memory (the model loaded); on
    several ranks the fewest any rank can hold (rank 0's block ids are every rank's). A
    pipeline stage's blocks hold its own layers, every head; a tensor-parallel rank's every
    layer, its share of the heads."""
    config = model.config
    layers = int(config.get_text_config(decoder=True).num_hidden_layers)
    per_block = budget.bytes_per_block(config, layers, block_size, model.dtype,
                                       tp_size=1 if pipeline else info.world_size)
    free = budget.available_bytes(device)
    if device.type == "cpu":  # the ranks on this host share its memory
        free //= max(1, info.local_world_size)
    blocks = budget.blocks_in_budget(fraction, free, per_block)
    if info.world_size > 1 and torch.distributed.is_initialized():
        agreed = torch.tensor([blocks], device=device)
        torch.distributed.all_reduce(agreed, op=torch.distributed.ReduceOp.MIN)
        blocks = int(agreed.item())
    logger.info("KV cache: %d blocks of %d tokens, %d bytes per block, from kv_cache_memory_fraction %s of %d "
                "bytes free on %s (budget %d bytes)", blocks, block_size, per_block, fraction, free, device,
                int(fraction * free))
    return blocks
