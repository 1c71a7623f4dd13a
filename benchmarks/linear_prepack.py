"""The realistic model's linear layers (hidden 1024, 16 heads of 64 with 8 KV heads, intermediate
2816) several ways, at a decode step's rows (1, 32) and a mixed step's (544: 32 decode rows and 512
prompt tokens), one thread:

* ``F.linear`` on the model's weights (what the fast forward ran);
* float32: MKL's packed GEMM (``torch.ops.mkl._mkl_linear`` on a weight packed once with
  ``_mkl_reorder_linear_weight``; the same bits as ``F.linear``), what ``ts/llm/fastpath/prepack.py``
  uses with ``TS_PREPACK_LINEAR=all``;
* bfloat16: torch's bfloat16 GEMM, against ``prepack.py``'s form for this CPU -- on one without
  AVX512-BF16/AMX/AVX-NE-CONVERT oneDNN has no bfloat16 kernel and the bfloat16 GEMM is emulated;
  there, the rows widened to float32 and multiplied by a float32 copy of the weights (the output
  rounded to bfloat16 once; the form without a C compiler) and the native kernel reading the
  bfloat16 weights in place (``native_linear.py``, at every row count, whatever its limit).

    .venv/bin/python -m benchmarks.linear_prepack [--rounds 3] [--repeats 5]

Ways alternate within each round (A B B A); each line is the median over rounds of per-round
medians, in ms of this thread's CPU time for the four matmuls of one layer (on a shared machine
the wall time moved up to 20x with the load, the CPU time a few percent).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F

from benchmarks.procstat import median_thread_cpu_ms
from ts.llm.engine.fastpath.native_linear import bfloat16_linear
from ts.llm.engine.fastpath.prepack import PackedLinear, native_bfloat16

# (out, in) of one layer's fused q/k/v, o, fused gate/up, down
SHAPES = ((2048, 1024), (1024, 1024), (5632, 1024), (1024, 2816))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", default="1,8,32,64,128,544")
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(o, i, generator=gen) * 0.02 for o, i in SHAPES]
    print(f"one layer's matmuls, 1 thread, native bfloat16 GEMM: {native_bfloat16()}; ms, medians of "
          f"{args.rounds} rounds")
    for dtype in (torch.float32, torch.bfloat16):
        ws = [w.to(dtype) for w in weights]
        packed = [PackedLinear(w, None, pack_float32=True) for w in ws]
        forms: dict[str, list[Callable[[torch.Tensor], torch.Tensor]]] = {
            "F.linear": [lambda x, w=w: F.linear(x, w) for w in ws], "prepacked": list(packed)}
        if dtype == torch.bfloat16 and not native_bfloat16():
            forms = {"F.linear": forms["F.linear"], "float32 copy": [widened(w) for w in ws]}
            natives = [bfloat16_linear(w, None) for w in ws]
            if all(n is not None for n in natives):
                for n in natives:
                    n.max_rows = None
                forms["native"] = natives
        for rows in (int(r) for r in args.rows.split(",")):
            xs = [torch.randn(rows, w.shape[1], generator=gen).to(dtype) for w in ws]
            tol = {} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 1.6e-2}
            for fs in forms.values():  # the same answer, within bfloat16's rounding
                for f, w, x in zip(fs, ws, xs, strict=True):
                    torch.testing.assert_close(f(x), F.linear(x, w), **tol)
            ways = {name: (lambda fs=fs, xs=xs: [f(x) for f, x in zip(fs, xs, strict=True)])
                    for name, fs in forms.items()}
            cells: dict[str, list[float]] = {k: [] for k in ways}
            for r in range(args.rounds):
                order = list(ways) if r % 2 == 0 else list(ways)[::-1]
                for name in order + order[::-1]:
                    cells[name].append(median_thread_cpu_ms(ways[name], args.repeats))
            base = statistics.median(cells["F.linear"])
            line = "  ".join(f"{name} {statistics.median(c):8.2f} ({base / statistics.median(c):.2f}x)"
                             for name, c in cells.items())
            print(f"  {str(dtype).removeprefix('torch.'):9s} rows {rows:4d}: {line}", flush=True)
        if dtype == torch.float32:
            print(f"  (float32 prepacked: {packed[0].how})")


def widened(w: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The rows widened to float32 against a float32 copy of ``w``, rounded once."""
    w32 = w.float()
    return lambda x: F.linear(x.float(), w32).to(torch.bfloat16)

if __name__ == "__main__":
    main()
