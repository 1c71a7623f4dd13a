"""Decode attention over a paged KV cache, several ways, in-process on this machine's CPU.

Each row's keys/values live in ``block_size``-token blocks of one pool (``ts/llm/engine/paged``); a
decode step's one query per row must attend to that row's real tokens only. Compared:

* ``gather tokens+sdpa``: each row's slots gathered token by token into a right-padded
  ``(rows, kv_heads, longest, dim)`` tensor, SDPA with a per-row length mask;
* ``engine decode``: the engine's ``PagedDecode`` (``ts/llm/engine/paged/parts.py``), its rows in one
  padded gather, in groups of similar table width, and through the native kernel that reads
  each row's blocks in place (``ts/llm/engine/paged/native.py``: what the engine runs on a CPU
  float32 or bfloat16 pool), timed alternately;
* ``gather blocks+sdpa``: the same with whole blocks (``index_select`` of the block table, the
  row padded to the widest table) -- the engine's single-group case;
* ``flex``: ``torch.nn.attention.flex_attention`` over the pool laid out as one long key
  sequence, a ``BlockMask`` letting each row see only its own blocks' slots (eager: no
  ``torch.compile`` on this 2-core machine's budget);
* ``rectangle``: the left-padded rectangle the engine used before (SDPA over a preallocated
  ``(rows, kv_heads, capacity, dim)`` buffer, no gather): the reference.

    python -m benchmarks.paged_attention [--rows 8 32] [--iters 200]

Prints microseconds per layer-call (median of 5 repeats); lengths are drawn as in the LLM
benchmark (prompts 2-84 tokens plus up to 64 generated).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

HEADS, KV_HEADS, DIM, BLOCK = 4, 2, 64, 16


def _time(fn: Callable[[], object], iters: int) -> float:
    fn()
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(iters):
            fn()
        runs.append((time.perf_counter() - started) / iters * 1e6)
    return statistics.median(runs)


def measure(rows: int, iters: int, seed: int = 0) -> dict[str, float]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 149, (rows,), generator=g)
    blocks_per_row = (lengths + BLOCK - 1) // BLOCK
    num_blocks = int(blocks_per_row.sum())
    pool_k = torch.randn(num_blocks * BLOCK, KV_HEADS, DIM, generator=g)
    pool_v = torch.randn(num_blocks * BLOCK, KV_HEADS, DIM, generator=g)
    perm = torch.randperm(num_blocks, generator=g)  # blocks scattered through the pool
    tables, start = [], 0
    for n in blocks_per_row.tolist():
        tables.append(perm[start:start + n])
        start += n
    q = torch.randn(rows, HEADS, 1, DIM, generator=g)
    longest = int(lengths.max())
    cols = torch.arange(longest)
    slots = torch.zeros(rows, longest, dtype=torch.long)
    for r, t in enumerate(tables):
        n = int(lengths[r])
        slots[r, :n] = t[cols[:n] // BLOCK] * BLOCK + cols[:n] % BLOCK
    mask = (cols < lengths.unsqueeze(1)).view(rows, 1, 1, longest)
    groups = HEADS // KV_HEADS

    def gather() -> torch.Tensor:  # one index per token
        k = pool_k[slots].permute(0, 2, 1, 3)
        v = pool_v[slots].permute(0, 2, 1, 3)
        return F.scaled_dot_product_attention(q.view(rows, KV_HEADS, groups, DIM), k, v, attn_mask=mask)

    widest = int(blocks_per_row.max())
    table = torch.zeros(rows, widest, dtype=torch.long)
    for r, t in enumerate(tables):
        table[r, :t.numel()] = t
    by_block_k, by_block_v = pool_k.view(num_blocks, BLOCK, KV_HEADS, DIM), pool_v.view(num_blocks, BLOCK, KV_HEADS, DIM)
    span = widest * BLOCK
    block_mask_rows = (torch.arange(span) < lengths.unsqueeze(1)).view(rows, 1, 1, span)

    def gather_blocks() -> torch.Tensor:  # one index per block: whole blocks copied
        k = torch.index_select(by_block_k, 0, table.view(-1)).view(rows, span, KV_HEADS, DIM).transpose(1, 2)
        v = torch.index_select(by_block_v, 0, table.view(-1)).view(rows, span, KV_HEADS, DIM).transpose(1, 2)
        return F.scaled_dot_product_attention(q.view(rows, KV_HEADS, groups, DIM), k, v, attn_mask=block_mask_rows)

    rect_k = torch.randn(rows, KV_HEADS, 256, DIM, generator=g)
    rect_v = torch.randn(rows, KV_HEADS, 256, DIM, generator=g)

    def rectangle() -> torch.Tensor:
        return F.scaled_dot_product_attention(q.view(rows, KV_HEADS, groups, DIM), rect_k[:, :, :longest],
                                              rect_v[:, :, :longest], attn_mask=mask)

    out = {"gather tokens+sdpa": _time(gather, iters), "gather blocks+sdpa": _time(gather_blocks, iters),
           "rectangle": _time(rectangle, iters)}
    out.update(engine_decode(rows, iters, num_blocks, by_block_k, by_block_v, tables, lengths, q, g))
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:  # pragma: no cover - older torch
        return out
    owner = torch.full((num_blocks * BLOCK,), -1, dtype=torch.long)
    position = torch.zeros(num_blocks * BLOCK, dtype=torch.long)
    for r, t in enumerate(tables):
        n = int(lengths[r])
        s = t[cols[:n] // BLOCK] * BLOCK + cols[:n] % BLOCK
        owner[s] = r
        position[s] = cols[:n]

    def own(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return owner[kv_idx] == q_idx

    qf = q.view(rows, HEADS, DIM).transpose(0, 1).unsqueeze(0)  # (1, heads, rows, dim): rows as queries
    kf = pool_k.transpose(0, 1).unsqueeze(0)
    vf = pool_v.transpose(0, 1).unsqueeze(0)
    block_mask = create_block_mask(own, 1, None, rows, num_blocks * BLOCK, device="cpu", BLOCK_SIZE=BLOCK)

    def flex() -> torch.Tensor:
        return flex_attention(qf, kf, vf, block_mask=block_mask, enable_gqa=True)

    out["flex"] = _time(flex, max(1, iters // 10))
    return out


def engine_decode(rows: int, iters: int, num_blocks: int, keys: torch.Tensor, values: torch.Tensor,
                  tables: list[torch.Tensor], lengths: torch.Tensor, q: torch.Tensor,
                  g: torch.Generator) -> dict[str, float]:
    """The engine's own decode part (``PagedDecode``) with its rows in one padded gather, in
    width groups and through the native kernel, timed alternately 15 times each (medians): this
    machine drifts more between separate runs than the gather's two forms differ."""
    from ts.llm.engine.paged import native, parts
    from ts.llm.engine.paged.storage import KVStorage

    storage = KVStorage(1, num_blocks, BLOCK)
    storage.keys, storage.values = [keys], [values]
    new_k, new_v = torch.randn(1, KV_HEADS, rows, DIM, generator=g), torch.randn(1, KV_HEADS, rows, DIM, generator=g)
    q_rows = q.view(rows, HEADS, DIM).transpose(0, 1).unsqueeze(0)  # the fast forward's (1, heads, rows, dim)

    class _Sdpa:  # the fast forward's one-query GQA call (ts/llm/engine/fastpath/llama.py)
        q_size = HEADS * DIM
        scale = DIM ** -0.5

        def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q.reshape(q.shape[0], KV_HEADS, HEADS // KV_HEADS, DIM), k, v,
                                                  attn_mask=mask)

    saved = parts.GROUP_COST_BLOCKS
    kernel = native.decode_kernel(torch.device("cpu"), torch.float32)
    # (name, the width groups' cost, the storage's kernel)
    variants = [("one", 1 << 40, None), ("grouped", saved, None)]
    if kernel is not None:
        variants.append(("native", saved, kernel))
    times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    groups = 1
    try:
        for _ in range(15):
            for name, cost, variant_kernel in variants:
                parts.GROUP_COST_BLOCKS, storage.kernel = cost, variant_kernel
                part = parts.PagedDecode(storage, [0] * rows, (lengths - 1).tolist(), [t.tolist() for t in tables],
                                         torch.device("cpu"))
                groups = max(groups, len(part.groups))
                started = time.perf_counter()
                for _ in range(iters):
                    part.attend(_Sdpa(), 0, q_rows, new_k, new_v)  # type: ignore[arg-type]
                times[name].append((time.perf_counter() - started) / iters * 1e6)
    finally:
        parts.GROUP_COST_BLOCKS = saved
    out = {"engine decode, one gather": statistics.median(times["one"]),
           f"engine decode, {groups} width groups": statistics.median(times["grouped"])}
    if kernel is not None:
        out["engine decode, native kernel"] = statistics.median(times["native"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with torch.inference_mode():
        for rows in args.rows:
            res = measure(rows, args.iters)
            print(f"rows {rows}: " + ", ".join(f"{k} {v:.1f} us" for k, v in res.items()))


if __name__ == "__main__":
    main()
