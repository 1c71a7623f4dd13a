"""The paged KV cache's tensors: per layer, keys and values of ``num_blocks`` blocks of
``block_size`` tokens, ``(num_blocks, block_size, kv_heads, head_dim)`` each; block ids and
reference counts are ``pool.py``'s. A block's tokens are contiguous, so a sequence's keys are
gathered block by block (``parts.py``, ``hf_cache.py``), or read in place by the native decode
attention (``kernel``: ``native.py``'s, None where the engine gathers).

The tensors are made at the first write, shaped like the keys written: on a tensor-parallel rank
those are the rank's own share of the heads, so every rank holds only its shard of each block.
"""

from __future__ import annotations

import torch

from ts.llm.engine.paged.native import DecodeKernel


class KVStorage:
    def __init__(self, num_layers: int, num_blocks: int, block_size: int,
                 kernel: DecodeKernel | None = None) -> None:
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.kernel = kernel
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def _ensure(self, like: torch.Tensor) -> None:
        """``like``: keys ``(kv_heads, head_dim)`` per token (its last two dimensions)."""
        if self.keys:
            return
        shape = (self.num_blocks, self.block_size, like.shape[-2], like.shape[-1])
        self.keys = [like.new_zeros(shape) for _ in range(self.num_layers)]
        self.values = [like.new_zeros(shape) for _ in range(self.num_layers)]

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Keys/values ``(tokens, kv_heads, head_dim)`` into slots ``block * block_size + offset``."""
        self._ensure(k)
        keys, values = self.keys[layer], self.values[layer]
        keys.view(-1, keys.shape[2], keys.shape[3]).index_copy_(0, slots, k)
        values.view(-1, values.shape[2], values.shape[3]).index_copy_(0, slots, v)

    def gather(self, layer: int, table: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rows, kv_heads, span, dim)`` keys and values of ``rows`` block tables flattened into
        ``table`` (``rows * blocks`` ids; ``span = blocks * block_size``)."""
        keys, values = self.keys[layer], self.values[layer]
        span = table.numel() // rows * self.block_size
        shape = (rows, span, keys.shape[2], keys.shape[3])
        return (torch.index_select(keys, 0, table).view(shape).transpose(1, 2),
                torch.index_select(values, 0, table).view(shape).transpose(1, 2))
