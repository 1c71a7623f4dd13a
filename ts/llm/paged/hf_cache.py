"""The paged KV cache behind Hugging Face's own forward: a ``transformers`` ``Cache`` whose layers
write each new key/value into its slot of the pool (``storage.py``) and hand attention the
sequence's blocks gathered into SDPA's layout.

The engine runs the model's forward this way where its fast forward cannot (tensor-parallel
ranks, whose weights are sharded, or ``fast_path: false``). The cache is set up before each
forward for one layout:

* ``decode``: one new token per row, each row's keys padded to the widest block table; the 2-D
  attention mask the forward is given marks each row's real tokens (its length reported as the
  cache's, so the causal part hides nothing);
* ``prefill``: a run of one sequence's tokens after ``start`` cached ones; the keys are its blocks
  up to the run's end, and the causal mask from the cache position ``start`` hides the rest of
  the last block.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from ts.llm.paged.parts import slots_of, table_tensor
from ts.llm.paged.storage import KVStorage


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


class PagedCache(Cache):
    """See the module docstring; ``decode`` or ``prefill`` before each forward."""

    def __init__(self, storage: KVStorage) -> None:
        super().__init__(layers=[_PagedLayer(self, i) for i in range(storage.num_layers)])
        self.storage = storage
        self.slots = torch.empty(0, dtype=torch.long)
        self.table = torch.empty(0, dtype=torch.long)
        self.rows = self.span = self.past = 0

    def decode(self, tables: list[list[int]], positions: list[int], device: torch.device) -> torch.Tensor:
        """Row ``r``'s new token at ``positions[r]``: the ``(rows, span)`` attention mask."""
        bs = self.storage.block_size
        self.slots = torch.tensor([t[p // bs] * bs + p % bs for t, p in zip(tables, positions, strict=True)],
                                  device=device, dtype=torch.long)
        self.table, widest = table_tensor(tables, device)
        self.rows, self.span = len(tables), widest * bs
        self.past = self.span - 1
        return (torch.arange(self.span, device=device).unsqueeze(0)
                <= torch.tensor(positions, device=device).unsqueeze(1)).long()

    def prefill(self, blocks: list[int], start: int, n: int, device: torch.device) -> None:
        """``n`` tokens of one sequence at ``start`` onwards (no attention mask: causal only)."""
        bs = self.storage.block_size
        self.slots = torch.tensor(slots_of(blocks, start, n, bs), device=device, dtype=torch.long)
        self.table, widest = table_tensor([blocks[:-(-(start + n) // bs)]], device)
        self.rows, self.span, self.past = 1, widest * bs, start
