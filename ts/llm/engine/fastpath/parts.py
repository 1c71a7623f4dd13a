"""The token groups one fast forward can carry together, each with its own attention.

A decode forward followed by a prefill forward pays every per-forward cost twice (the Python
and framework work of each op, the weights read from memory); the fast forward (``llama.py``)
runs the embedding, norms and rotary over every part's tokens as one packed row, each linear
layer's matmuls for the first part's rows and then the others' back to back on the same weights,
and hands each part its slice of the queries/keys/values for attention:

* ``DecodeRows``: one token per ``BatchCache`` row, written in place at the row's own column,
  attending to that row's cached tokens;
* ``PromptChunk``: the next tokens of one long prompt, appended to its own prompt cache after
  its earlier chunks;
* ``PackedPrompts``: whole prompts, packed with no padding (prompts of 2 and 80 tokens cost 82),
  each token seeing only its own prompt's earlier ones; the prompt cache gets the right-padded
  ``(prompts, heads, longest, dim)`` layout the engine copies rows from.

Each part says which of its tokens' logits are wanted (``sampled``). ``attend`` gets
``(1, heads, n, dim)`` queries and ``(1, kv_heads, n, dim)`` keys/values of the part's ``n``
tokens and returns ``(n, heads * dim)``.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from ts.llm.engine.kvcache import BatchCache


class Attention(Protocol):
    """What a part needs of the forward: its sizes and scaled-dot-product attention."""

    kv_heads: int
    head_dim: int
    q_size: int
    scale: float

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor: ...


class Part(Protocol):
    ids: torch.Tensor        # (n,) token ids
    positions: torch.Tensor  # (n,) their positions in their sequences
    sampled: torch.Tensor    # indices (into the n tokens) whose logits the forward returns

    def attend(self, fwd: Attention, layer: int, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> torch.Tensor: ...


class DecodeRows:
    """The running batch's next tokens: ``ids[r]`` is row ``r``'s, at column ``batch.columns[r]``
    (the engine calls ``batch.begin_step()`` before the forward and ``end_step()`` after)."""

    def __init__(self, ids: torch.Tensor, batch: BatchCache) -> None:
        assert batch.columns is not None
        self.ids, self.batch = ids, batch
        self.positions = batch.columns
        self.sampled = torch.arange(ids.shape[0], device=ids.device)
        span = batch.width + 1
        # (rows, 1, 1, span): column j of row r is visible when j <= r's position
        self.mask = (torch.arange(span, device=ids.device) <= self.positions.unsqueeze(-1)).view(-1, 1, 1, span)

    def attend(self, fwd: Attention, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        batch, rows = self.batch, self.ids.shape[0]
        own = batch.owner_layers[layer]
        assert own.k is not None and own.v is not None
        own.k[batch.rows_index, :, batch.columns] = k[0].transpose(0, 1)
        own.v[batch.rows_index, :, batch.columns] = v[0].transpose(0, 1)
        span = batch.width + 1
        # each row's one query as its own batch entry: (rows, heads, 1, dim)
        out = fwd.attention(q[0].transpose(0, 1).unsqueeze(2), own.k[:rows, :, :span], own.v[:rows, :, :span],
                            self.mask)
        return out.reshape(rows, fwd.q_size)


class PromptChunk:
    """Prompt tokens ``ids`` at ``start`` onwards of one sequence whose earlier tokens are in
    ``cache`` (a ``DynamicCache``; empty for a first chunk)."""

    def __init__(self, ids: torch.Tensor, start: int, cache: Any) -> None:
        n = ids.shape[0]
        self.ids, self.cache = ids, cache
        self.positions = torch.arange(start, start + n, device=ids.device)
        self.sampled = torch.tensor([n - 1], device=ids.device)
        keys = torch.arange(start + n, device=ids.device)
        self.mask = (keys <= self.positions.unsqueeze(-1)).view(1, 1, n, start + n)

    def attend(self, fwd: Attention, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        keys, values = self.cache.update(k, v, layer)
        return fwd.attention(q, keys, values, self.mask)[0].transpose(0, 1).reshape(-1, fwd.q_size)


class PackedPrompts:
    """Whole prompts (``prompts[i]`` a list of ids) prefilled together into a new ``cache``."""

    def __init__(self, prompts: list[list[int]], cache: Any, device: torch.device) -> None:
        lengths = torch.tensor([len(p) for p in prompts], device=device)
        self.rows, self.width = len(prompts), int(lengths.max())
        self.cache = cache
        self.ids = torch.tensor([t for p in prompts for t in p], device=device)
        self.positions = torch.cat([torch.arange(len(p), device=device) for p in prompts])
        self.sampled = lengths.cumsum(0) - 1
        # where each packed token sits in the padded (rows * width) layout
        self.real = (torch.arange(self.width, device=device) < lengths.unsqueeze(1)).reshape(-1).nonzero().squeeze(1)
        segment = torch.repeat_interleave(torch.arange(self.rows, device=device), lengths)
        n = self.ids.shape[0]
        self.mask = ((segment.unsqueeze(1) == segment.unsqueeze(0))
                     & (self.positions.unsqueeze(0) <= self.positions.unsqueeze(1))).view(1, 1, n, n)

    def attend(self, fwd: Attention, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        padded = []
        for t in (k, v):  # (1, kv_heads, n, dim) -> (rows, kv_heads, width, dim), zeros never read
            flat = t.new_zeros(self.rows * self.width, fwd.kv_heads, fwd.head_dim)
            flat[self.real] = t[0].transpose(0, 1)
            padded.append(flat.view(self.rows, self.width, fwd.kv_heads, fwd.head_dim).transpose(1, 2))
        self.cache.update(padded[0], padded[1], layer)
        return fwd.attention(q, k, v, self.mask)[0].transpose(0, 1).reshape(-1, fwd.q_size)
