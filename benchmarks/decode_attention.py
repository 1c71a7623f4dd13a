"""The native paged decode attention (``ts/llm/paged/paged_decode.c``) on flat and peaked scores,
in float32 and bfloat16, at the realistic model's shape (16 heads, 8 KV heads, head dim 64,
blocks of 32).

    .venv/bin/python -m benchmarks.decode_attention [--rows 32] [--context 512] [--repeats 15]

Flat: queries and keys of one scale, so every weight of a row's softmax is near 1/n. Peaked: the
queries scaled so a row's scores lie hundreds apart -- one token takes nearly all the weight and
the others' weights fall to or below float's smallest normal (2^-126), as in trained models'
attention; on an AVX-512 Xeon, before the kernel flushed those to zero, each product with a
subnormal weight cost a microcode assist and peaked attention ran about 8x slower than flat
(issue 42). Cells alternate (flat, peaked, flat, ...) and each prints the median of ``--repeats``
calls, in ms of this thread's CPU time per call (one layer, one thread): on a shared machine the
wall time of a call moved up to 20x with the load, its CPU time a few percent.
"""

from __future__ import annotations

import argparse
import functools
import statistics

import torch

from benchmarks.procstat import median_thread_cpu_ms
from ts.llm.engine.paged import native

HEADS, KV_HEADS, DIM, BLOCK = 16, 8, 64, 32


def pool(rows: int, context: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Keys, values (``(blocks, BLOCK, KV_HEADS, DIM)``, blocks shuffled), tables and lengths."""
    gen = torch.Generator().manual_seed(seed)
    width = -(-context // BLOCK)
    blocks = rows * width
    keys = (torch.randn(blocks, BLOCK, KV_HEADS, DIM, generator=gen) * 0.5).to(dtype)
    values = (torch.randn(blocks, BLOCK, KV_HEADS, DIM, generator=gen) * 0.02).to(dtype)
    table = torch.randperm(blocks, generator=gen).view(rows, width)
    lengths = torch.full((rows,), context, dtype=torch.long)
    return keys, values, table, lengths


def queries(rows: int, peaked: bool, dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    q = torch.randn(rows, HEADS, DIM, generator=torch.Generator().manual_seed(seed))
    return (q * (40.0 if peaked else 0.05)).to(dtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of flat and peaked per dtype")
    args = ap.parse_args()
    torch.set_num_threads(1)  # the kernel on this thread: its CPU time is the call's
    print(f"decode attention, {args.rows} rows x {args.context} tokens, {HEADS} heads ({KV_HEADS} KV), "
          f"dim {DIM}, blocks of {BLOCK}, one thread; ms of CPU per layer, medians")
    for dtype in (torch.float32, torch.bfloat16):
        kernel = native.decode_kernel(torch.device("cpu"), dtype)
        if kernel is None:
            raise SystemExit("no native kernel on this machine (see the log): nothing to measure")
        keys, values, table, lengths = pool(args.rows, args.context, dtype)
        cells: dict[str, list[float]] = {"flat": [], "peaked": []}
        for r in range(args.rounds):
            for shape in ("flat", "peaked") if r % 2 == 0 else ("peaked", "flat"):
                q = queries(args.rows, shape == "peaked", dtype)
                call = functools.partial(kernel, q, keys, values, table, lengths, DIM ** -0.5)
                cells[shape].append(median_thread_cpu_ms(call, args.repeats))
        flat, peaked = statistics.median(cells["flat"]), statistics.median(cells["peaked"])
        print(f"  {str(dtype).removeprefix('torch.'):9s} flat {flat:7.2f} ms   peaked {peaked:7.2f} ms   "
              f"peaked / flat {peaked / flat:.2f}   (rounds: flat {[round(x, 2) for x in cells['flat']]}, "
              f"peaked {[round(x, 2) for x in cells['peaked']]})", flush=True)


if __name__ == "__main__":
    main()
