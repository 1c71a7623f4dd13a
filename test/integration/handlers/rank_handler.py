"""Test handler for torchrun workers: every rank takes part in an all-reduce, rank 0 answers."""

from __future__ import annotations

import os
from typing import Any


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[Any]:
    if data is None:
        return []
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    t = torch.tensor([float(rank)])
    if dist.is_initialized():
        dist.all_reduce(t)
    out = []
    for row in data:
        value = row.get("data") or row.get("body") or b""
        text = value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
        out.append({"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                    "sum_of_ranks": int(t.item()), "text": text})
    return out
