"""The fast forward's token groups (``ts/llm/engine/fastpath/parts.py``'s ``Part``) over the paged KV
cache: each token's key/value is written to its slot in the pool, and attention reads each
sequence's own blocks.

Attention is a gather into SDPA: a sequence's keys/values are its blocks taken whole from the pool
(``index_select`` of its block table: one index per block, contiguous copies), right-padded to the
widest table of the group, masked to its real tokens. Measured against ``flex_attention`` with a
block mask and against the rectangle the engine used before (``benchmarks/paged_attention.py``,
docs/benchmarks.md): on CPU, eager ``flex_attention`` was 14-30x slower than the gather, and the
block gather about 1.3-1.5x the rectangle's SDPA alone (attention is a sixth of a decode step).
Where the storage has the native kernel (a CPU float32 or bfloat16 pool, ``native.py``), decode rows read
their blocks in place instead: no copy, no padding.

* ``PagedDecode``: one token per running sequence (the engine's decode rows, the forward's first part);
* ``PagedPrefill``: a run of tokens per sequence (a whole prompt, or the next chunk after the
  cached/computed ones), each attending causally to its earlier tokens.
"""

from __future__ import annotations

import torch

from ts.llm.engine.fastpath.parts import Attention
from ts.llm.engine.paged.storage import KVStorage


def slots_of(blocks: list[int], start: int, n: int, block_size: int) -> list[int]:
    return [blocks[t // block_size] * block_size + t % block_size for t in range(start, start + n)]


def padded_tables(tables: list[list[int]]) -> tuple[list[int], int]:
    """The block tables flattened, each padded to the widest (with block 0, masked out), and ``widest``."""
    widest = max(len(t) for t in tables)
    return [b for t in tables for b in (t + [0] * (widest - len(t)))], widest


def table_tensor(tables: list[list[int]], device: torch.device) -> tuple[torch.Tensor, int]:
    """``(rows * widest,)`` block ids (``padded_tables``) and ``widest``."""
    flat, widest = padded_tables(tables)
    return torch.tensor(flat, device=device, dtype=torch.long), widest


class _Paged:
    ids: torch.Tensor
    positions: torch.Tensor
    sampled: torch.Tensor

    def __init__(self, storage: KVStorage, ids: list[int], positions: list[int], slots: list[int],
                 device: torch.device, more: list[int] | None = None) -> None:
        """``ids``, ``positions``, ``slots`` (and ``more``, kept as ``self.more``) as views of one
        tensor: one host-to-device copy, and one ``torch.tensor`` call a step instead of four
        (each a few microseconds of the step's Python time)."""
        self.storage = storage
        n = len(ids)
        packed = torch.tensor([*ids, *positions, *slots, *(more or ())], device=device, dtype=torch.long)
        self.ids, self.positions, self.slots, self.more = packed[:n], packed[n:2 * n], packed[2 * n:3 * n], packed[3 * n:]

    def _write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """This part's new keys/values ``(1, kv_heads, n, dim)`` into their slots."""
        self.storage.write(layer, self.slots, k[0].transpose(0, 1), v[0].transpose(0, 1))


# A width group costs a gather and an SDPA call more: worth it when it saves this many padding
# blocks (rows x blocks) of copying and attention (about two calls' fixed cost on CPU).
GROUP_COST_BLOCKS = 24


def width_groups(widths: list[int], cost: int = GROUP_COST_BLOCKS) -> list[list[int]]:
    """Row indices in groups of similar block-table width, so each group's gather pads to its own
    widest table rather than the step's: the split of the rows sorted by width that minimises the
    blocks read (rows x widest, per group) plus ``cost`` per group."""
    order = sorted(range(len(widths)), key=widths.__getitem__)
    w = [widths[i] for i in order]
    n = len(w)
    # A cut inside a run of equal widths never pays (the run's rows cost the same in the narrower
    # group and pad the wider one), so cuts are tried only where the width changes: a few
    # distinct widths per step, however many rows.
    ends = [j for j in range(1, n + 1) if j == n or w[j] != w[j - 1]]
    best, cut = {0: 0}, {0: 0}  # best[j]: cheapest split of the j narrowest rows
    for k, j in enumerate(ends):
        best[j], cut[j] = min((best[i] + (j - i) * w[j - 1] + cost, i) for i in (0, *ends[:k]))
    groups, j = [], n
    while j:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


class PagedDecode(_Paged):
    """Sequence ``r``'s next token ``ids[r]`` at position ``positions[r]`` (its block table
    ``tables[r]`` already has the block for it). Rows are attended in groups of similar table
    width (``width_groups``): a decode batch mixes short and long sequences, and one gather padded
    to the longest table copied about twice the blocks the rows hold."""

    def __init__(self, storage: KVStorage, ids: list[int], positions: list[int], tables: list[list[int]],
                 device: torch.device) -> None:
        bs = storage.block_size
        slots = [t[p // bs] * bs + p % bs for t, p in zip(tables, positions, strict=True)]
        self.rows = len(ids)
        self.groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        if storage.kernel is not None:  # each row reads its own blocks in place
            flat, widest = padded_tables(tables)
            super().__init__(storage, ids, positions, slots, device, flat)
            self.table, self.lengths = self.more.view(self.rows, widest), self.positions + 1
            self.sampled = torch.arange(self.rows, device=device)
            return
        super().__init__(storage, ids, positions, slots, device)
        self.sampled = torch.arange(self.rows, device=device)
        groups = width_groups([len(t) for t in tables], GROUP_COST_BLOCKS)
        if len(groups) == 1:  # one gather over the rows in their own order
            table, widest = table_tensor(tables, device)
            self.table, self.span = table, widest * bs
            self.mask = (torch.arange(self.span, device=device) <= self.positions.unsqueeze(1)).view(
                self.rows, 1, 1, self.span)
        for rows in groups if len(groups) > 1 else []:
            table, widest = table_tensor([tables[r] for r in rows], device)
            index = torch.tensor(rows, device=device, dtype=torch.long)
            mask = torch.arange(widest * bs, device=device) <= self.positions[index].unsqueeze(1)
            self.groups.append((index, table, mask.view(len(rows), 1, 1, widest * bs)))

    def attend(self, fwd: Attention, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._write(layer, k, v)
        storage = self.storage
        if storage.kernel is not None:
            out = storage.kernel(q[0].transpose(0, 1), storage.keys[layer], storage.values[layer], self.table,
                                 self.lengths, fwd.scale)
            return out.reshape(self.rows, fwd.q_size)
        q = q[0].transpose(0, 1).unsqueeze(2)  # (rows, heads, 1, dim)
        if not self.groups:
            keys, values = self.storage.gather(layer, self.table, self.rows)
            return fwd.attention(q, keys, values, self.mask).reshape(self.rows, fwd.q_size)
        out = q.new_empty(self.rows, fwd.q_size)
        for index, table, mask in self.groups:
            keys, values = self.storage.gather(layer, table, len(index))
            part = fwd.attention(q.index_select(0, index), keys, values, mask)
            out.index_copy_(0, index, part.reshape(len(index), fwd.q_size))
        return out


class PagedPrefill(_Paged):
    """Runs of tokens: entry ``i`` is ``tokens[i]`` at positions ``starts[i]`` onwards of a
    sequence whose block table is ``tables[i]``; ``sample[i]`` says whether its last token's
    logits are wanted (the run ends the sequence's prompt)."""

    def __init__(self, storage: KVStorage, tokens: list[list[int]], starts: list[int], tables: list[list[int]],
                 sample: list[bool], device: torch.device) -> None:
        bs = storage.block_size
        ids = [t for run in tokens for t in run]
        positions = [p for run, s in zip(tokens, starts, strict=True) for p in range(s, s + len(run))]
        slots = [x for run, s, t in zip(tokens, starts, tables, strict=True) for x in slots_of(t, s, len(run), bs)]
        super().__init__(storage, ids, positions, slots, device)
        self.entries = []
        end = 0
        sampled = []
        for run, s, t, want in zip(tokens, starts, tables, sample, strict=True):
            n = len(run)
            table, widest = table_tensor([t[:(s + n + bs - 1) // bs]], device)
            span = widest * bs
            mask = (torch.arange(span, device=device) <= torch.arange(s, s + n, device=device).unsqueeze(1))
            self.entries.append((end, end + n, table, mask.view(1, 1, n, span)))
            end += n
            if want:
                sampled.append(end - 1)
        self.sampled = torch.tensor(sampled, device=device, dtype=torch.long)

    def attend(self, fwd: Attention, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._write(layer, k, v)
        outs = []
        for a, b, table, mask in self.entries:
            keys, values = self.storage.gather(layer, table, 1)
            out = fwd.attention(q[:, :, a:b], keys, values, mask)
            outs.append(out[0].transpose(0, 1).reshape(b - a, fwd.q_size))
        return torch.cat(outs) if len(outs) > 1 else outs[0]
