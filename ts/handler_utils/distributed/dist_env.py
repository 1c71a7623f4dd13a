"""Rank information and the process group of a torchrun worker."""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch
import torch.distributed as dist

from ts.utils.ranks import RankInfo

__all__ = ["RankInfo", "device_for", "ensure_process_group", "pg_timeout", "rank_info"]

DEFAULT_PG_TIMEOUT_S = 1800.0


def _int_attr(ctx: Any, name: str, env: str, default: int) -> int:
    value = getattr(ctx, name, None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(os.environ.get(env, default))


def rank_info(ctx: Any = None) -> RankInfo:
    """Ranks from the Context (tserve sets rank/local_rank/world_size) or torchrun's env."""
    world = _int_attr(ctx, "world_size", "WORLD_SIZE", 1)
    return RankInfo(
        rank=_int_attr(ctx, "rank", "RANK", 0),
        local_rank=_int_attr(ctx, "local_rank", "LOCAL_RANK", 0),
        world_size=world,
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", world)),
    )


def pg_timeout() -> datetime.timedelta:
    """Process-group timeout: ``TS_DIST_TIMEOUT_S`` seconds (tests use a short one)."""
    return datetime.timedelta(seconds=float(os.environ.get("TS_DIST_TIMEOUT_S", DEFAULT_PG_TIMEOUT_S)))


def device_for(info: RankInfo, device_type: str | None = None) -> torch.device:
    """CUDA device ``local_rank`` when CUDA is usable and wanted, else CPU."""
    want_gpu = device_type in (None, "gpu", "cuda")
    if want_gpu and torch.cuda.is_available():
        return torch.device("cuda", info.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def ensure_process_group(info: RankInfo, device: torch.device) -> None:
    """Join the default process group unless the worker already did (it normally has)."""
    if info.world_size <= 1 or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, timeout=pg_timeout())
