"""The paged KV pool sized from a memory budget (``handler.kv_cache_memory_fraction``): as many
blocks as fit in a fraction of the memory the model's device has free once the model is loaded.

A block holds, for every layer on this rank, keys and values of ``block_size`` tokens over this
rank's share of the KV heads: the same arithmetic as ``storage.py``'s tensors
(``(num_blocks, block_size, kv_heads, head_dim)`` per layer, keys and values).
"""

from __future__ import annotations

from typing import Any

import torch


def bytes_per_block(config: Any, num_layers: int, block_size: int, dtype: torch.dtype, tp_size: int = 1) -> int:
    """Bytes one block takes on this rank: ``num_layers`` layers x 2 (k and v) x this rank's KV
    heads (``tp_size`` ranks share them) x head_dim x ``block_size`` tokens x the dtype's size."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    per_rank = max(1, kv_heads // tp_size)
    return num_layers * 2 * per_rank * head_dim * block_size * torch.empty((), dtype=dtype).element_size()


def available_bytes(device: torch.device) -> int:
    """Free memory on ``device``: CUDA's free bytes, else the system's available memory (psutil,
    or /proc/meminfo's MemAvailable)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no psutil and no MemAvailable in /proc/meminfo: give kv_cache_blocks") from None
    return int(psutil.virtual_memory().available)


def blocks_in_budget(fraction: float, available: int, per_block: int) -> int:
    return int(fraction * available) // per_block
