"""The paged KV cache behind Hugging Face's own forward: a ``transformers`` ``Cache`` whose layers
write each new key/value into its slot of the pool (``storage.py``) and hand attention the
sequence's blocks gathered into SDPA's layout.

The engine runs the model's forward this way where its fast forward cannot (tensor-parallel
ranks, whose weights are sharded; pipeline stages, which hold part of the model; or
``fast_path: false``). The cache is set up before each
forward for one layout:

* ``decode``: one new token per row, each row's keys padded to the widest block table;
* ``prefill``: a run of one sequence's tokens after ``start`` cached ones; the keys are its blocks
  up to the run's end.

Each returns the whole 4-D additive attention mask of that layout (each query sees its sequence's
keys up to its own position), which Hugging Face's forward uses as given. A 2-D padding mask
would not do: from it the forward derives the causal part itself and, for a single query or an
empty cache, skips the mask altogether (``is_causal``), since an ordinary cache holds no keys past
the queries -- but a paged row's last block holds slots its earlier owner left behind.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from ts.llm.engine.paged.parts import slots_of, table_tensor
from ts.llm.engine.paged.storage import KVStorage


class _PagedLayer(DynamicLayer):  # type: ignore[no-untyped-call]  # transformers is untyped
    def __init__(self, owner: PagedCache, layer: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.owner, self.layer = owner, layer
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        o = self.owner
        heads, dim = key_states.shape[1], key_states.shape[3]
        # (rows, kv_heads, n, dim) -> (rows * n, kv_heads, dim): the slots' order, row after row
        o.storage.write(self.layer, o.slots, key_states.transpose(1, 2).reshape(-1, heads, dim),
                        value_states.transpose(1, 2).reshape(-1, heads, dim))
        return o.storage.gather(self.layer, o.table, o.rows)

    def get_seq_length(self) -> int:
        return self.owner.past

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.owner.span, 0


def visible(query_positions: torch.Tensor, span: int, dtype: torch.dtype) -> torch.Tensor:
    """``(rows, 1, queries, span)`` additive mask: 0 where key ``j <= query_positions[row, q]``,
    the dtype's lowest value elsewhere (the padding blocks and the rest of the last block)."""
    keys = torch.arange(span, device=query_positions.device)
    hidden = keys.view(1, 1, span) > query_positions.unsqueeze(-1)
    return torch.zeros(hidden.shape, dtype=dtype, device=hidden.device).masked_fill_(
        hidden, torch.finfo(dtype).min).unsqueeze(1)


class PagedCache(Cache):
    """See the module docstring; ``decode`` or ``prefill`` before each forward."""

    def __init__(self, storage: KVStorage, dtype: torch.dtype) -> None:
        super().__init__(layers=[_PagedLayer(self, i) for i in range(storage.num_layers)])
        self.storage, self.dtype = storage, dtype
        self.slots = torch.empty(0, dtype=torch.long)
        self.table = torch.empty(0, dtype=torch.long)
        self.rows = self.span = self.past = 0

    def decode(self, tables: list[list[int]], positions: list[int], device: torch.device) -> torch.Tensor:
        """Row ``r``'s new token at ``positions[r]``: its attention mask."""
        bs = self.storage.block_size
        self.slots = torch.tensor([t[p // bs] * bs + p % bs for t, p in zip(tables, positions, strict=True)],
                                  device=device, dtype=torch.long)
        self.table, widest = table_tensor(tables, device)
        self.rows, self.span = len(tables), widest * bs
        self.past = self.span - 1
        return visible(torch.tensor(positions, device=device).unsqueeze(1), self.span, self.dtype)

    def prefill(self, blocks: list[int], start: int, n: int, device: torch.device) -> torch.Tensor:
        """``n`` tokens of one sequence at ``start`` onwards: their attention mask."""
        bs = self.storage.block_size
        self.slots = torch.tensor(slots_of(blocks, start, n, bs), device=device, dtype=torch.long)
        self.table, widest = table_tensor([blocks[:-(-(start + n) // bs)]], device)
        self.rows, self.span, self.past = 1, widest * bs, start
        return visible(torch.arange(start, start + n, device=device).unsqueeze(0), self.span, self.dtype)
