"""The running batch's KV cache: preallocated, written in place, rows that join and leave cheaply.

Hugging Face's ``DynamicCache`` concatenates every step (a copy of the whole cache per step), and
a batch built from it must be re-padded and re-concatenated whenever a sequence joins or leaves.
Here each layer owns one buffer of ``(max_rows, heads, capacity, head_dim)`` for keys and one for
values. Row ``r`` holds its sequence's tokens in columns ``[0, length_r)`` (right padding), so:

* a decode step writes each row's new key/value at its own column (one indexed write per layer)
  and attention reads a view of the first ``max(length) + 1`` columns, masked per row;
* a sequence joins by copying its prefilled keys/values into the next free row;
* a sequence leaves by moving the last row into its place (rows stay dense, one row copied);
* the capacity doubles when the longest row reaches it (amortised; never past the context).

``BatchCache`` is the ``Cache`` the model's forward is given; the engine calls ``begin_step``
before each decode forward and ``end_step`` after it.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

INITIAL_COLUMNS = 64


class _BatchLayer(DynamicLayer):  # type: ignore[no-untyped-call]  # transformers' layer is unannotated
    """One layer's keys/values in the shared buffer layout; see the module docstring."""

    def __init__(self, owner: BatchCache) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # transformers' layer is unannotated
        self.owner = owner
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        o = self.owner
        assert self.k is not None and self.v is not None and o.rows_index is not None
        # (rows, heads, 1, dim) -> each row's own next column
        self.k[o.rows_index, :, o.columns] = key_states[:, :, 0]
        self.v[o.rows_index, :, o.columns] = value_states[:, :, 0]
        span = o.width + 1
        self.keys, self.values = self.k[:o.rows, :, :span], self.v[:o.rows, :, :span]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.owner.width

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.owner.width + query_length, 0


class BatchCache(Cache):
    """The batch cache of up to ``max_rows`` sequences; ``lengths[r]`` tokens cached in row r."""

    def __init__(self, num_layers: int, max_rows: int, max_columns: int, device: torch.device) -> None:
        self.owner_layers = [_BatchLayer(self) for _ in range(num_layers)]
        super().__init__(layers=list(self.owner_layers))
        self.max_rows = max_rows
        self.max_columns = max_columns
        self.device = device
        self.lengths: list[int] = []
        self.capacity = 0
        self.width = 0  # columns before this step's new one: max(lengths)
        self.rows_index: torch.Tensor | None = None
        self.columns: torch.Tensor | None = None

    @property
    def rows(self) -> int:
        return len(self.lengths)

    # ------------------------------------------------------------------ rows in and out
    def add_row(self, source: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> int:
        """Copy a sequence's prefilled keys/values (per layer, ``(1, heads, >= length, dim)``, its
        tokens in the first ``length`` columns) into a new last row; returns the row."""
        if self.rows >= self.max_rows:
            raise RuntimeError(f"the batch cache is full ({self.max_rows} rows)")
        if len(source) != len(self.owner_layers):
            raise ValueError(f"{len(source)} layers of keys/values for a {len(self.owner_layers)}-layer cache")
        self._ensure_columns(length + 1, [k for k, _ in source])
        row = self.rows
        for layer, (k, v) in zip(self.owner_layers, source, strict=True):
            assert layer.k is not None and layer.v is not None
            layer.k[row, :, :length] = k[0, :, :length]
            layer.v[row, :, :length] = v[0, :, :length]
        self.lengths.append(length)
        return row

    def remove_row(self, row: int) -> None:
        """Forget row ``row``; the last row moves into its place (callers mirror that move)."""
        last = self.rows - 1
        if row != last:
            n = self.lengths[last]
            for layer in self.owner_layers:
                assert layer.k is not None and layer.v is not None
                layer.k[row, :, :n] = layer.k[last, :, :n]
                layer.v[row, :, :n] = layer.v[last, :, :n]
            self.lengths[row] = n
        self.lengths.pop()

    def clear(self) -> None:
        self.lengths.clear()

    # ------------------------------------------------------------------ a decode step
    def begin_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Before a decode forward: (position ids ``(rows, 1)``, attention mask ``(rows, width + 1)``)."""
        self.width = max(self.lengths)
        self._ensure_columns(self.width + 1, None)
        columns = torch.tensor(self.lengths, device=self.device)
        self.columns = columns
        self.rows_index = torch.arange(self.rows, device=self.device)
        mask = (torch.arange(self.width + 1, device=self.device).unsqueeze(0) <= columns.unsqueeze(1)).long()
        return columns.unsqueeze(1), mask

    def end_step(self) -> None:
        self.lengths = [n + 1 for n in self.lengths]

    def _ensure_columns(self, needed: int, like: list[torch.Tensor] | None) -> None:
        if needed <= self.capacity:
            return
        if needed > self.max_columns:
            raise RuntimeError(f"{needed} cached tokens are more than the context ({self.max_columns})")
        capacity = min(self.max_columns, max(needed, INITIAL_COLUMNS, 2 * self.capacity))
        for i, layer in enumerate(self.owner_layers):
            ref = layer.k if layer.k is not None else like[i] if like else None
            assert ref is not None, "the first row brings the buffers' shapes"
            shape = (self.max_rows, ref.shape[1], capacity, ref.shape[3])
            k, v = ref.new_zeros(shape), ref.new_zeros(shape)
            if layer.k is not None and layer.v is not None:
                k[:, :, :self.capacity] = layer.k
                v[:, :, :self.capacity] = layer.v
            layer.k, layer.v = k, v
        self.capacity = capacity
