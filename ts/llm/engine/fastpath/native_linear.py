"""bfloat16 linear layers on a CPU without a bfloat16 GEMM, through ``linear_bf16.c``: the weights
stay bfloat16 (the model's own tensor, nothing copied) and are widened in registers as they are read.

``bfloat16_linear(weight, bias)`` returns a ``NativeLinear`` or None when the kernel is unavailable
(``ts/llm/engine/native.py``: no compiler, a failed build, ``TS_NATIVE_KERNELS=0``); ``prepack.py``
then multiplies a float32 copy of the weight instead.

The kernel takes less CPU than MKL's float32 GEMM on a float32 copy at the row counts of decode
steps (a one-row step reads half the bytes: 1.5x at 1 row, 2x at 8, 1.3x at 32) and more on long
prompt steps, where MKL's blocking pays (1.1x at 128 rows, 1.2x at 256-544;
``benchmarks/linear_prepack.py``): a call of more than ``TS_NATIVE_LINEAR_MAX_ROWS`` rows
(default ``MAX_ROWS``) widens the weight for that call and MKL multiplies it (no float32 copy is
kept).

It computes each output in one fixed order whatever the row count (its header), so with
``TS_NATIVE_LINEAR_MAX_ROWS=all`` (every call native) a sequence's logits are the same bits alone
and in a batch: greedy answers do not change with the load (the realistic model's 8 probe prompts
alone and all at once: 8 of 8 identical, against 1-3 of 8 with MKL in the long prompt steps,
``benchmarks/llm_vllm.py``), for 5-18 % fewer tokens/s where long prompts are prefilled.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from ts.llm.engine import native

KERNEL = native.Kernel(Path(__file__).with_name("linear_bf16.c"), ("linear_bf16",), "bfloat16 linear layers",
                       "they multiply a float32 copy of each weight (twice the weights' memory)")
# above: MKL on the widened weight (benchmarks/linear_prepack.py, AVX2 EPYC: the native kernel took
# less CPU up to 64 rows, 1.05x more at 96, 1.1x at 128)
MAX_ROWS = 96


def native_max_rows() -> int | None:
    """``TS_NATIVE_LINEAR_MAX_ROWS``: the most rows a call sends through the kernel (default
    ``MAX_ROWS``), or None for ``all``."""
    value = os.environ.get("TS_NATIVE_LINEAR_MAX_ROWS", str(MAX_ROWS))
    if value == "all":
        return None
    try:
        rows = int(value)
    except ValueError:
        rows = -1
    if rows < 0:
        raise ValueError(f"TS_NATIVE_LINEAR_MAX_ROWS={value!r}: use a whole number of rows (above it MKL multiplies "
                         f"the widened weight; default {MAX_ROWS}) or all (every call native: batch-invariant)")
    return rows


class NativeLinear:
    """``x -> F.linear(x, weight, bias)`` for a bfloat16 CPU ``weight`` (``(out, in)``, contiguous) and
    bfloat16 rows, float32 arithmetic, one rounding of each output."""

    __slots__ = ("weight", "bias", "max_rows", "_fn")

    def __init__(self, library: ctypes.CDLL, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        if not weight.is_contiguous():
            raise ValueError("the native bfloat16 linear reads a contiguous (out, in) weight")
        self.weight, self.bias = weight, (bias.contiguous() if bias is not None else None)
        self.max_rows = native_max_rows()
        self._fn = library.linear_bf16
        self._fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3
        self._fn.restype = ctypes.c_int

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out_features, in_features = self.weight.shape
        rows = x.numel() // in_features if in_features else 0
        if (self.max_rows is not None and rows > self.max_rows) or x.dtype != torch.bfloat16:
            bias = self.bias.float() if self.bias is not None else None
            return F.linear(x.float(), self.weight.float(), bias).to(x.dtype)
        flat = x.reshape(rows, in_features).contiguous()
        y = torch.empty(rows, out_features, dtype=torch.bfloat16, device=x.device)
        rc = self._fn(flat.data_ptr(), self.weight.data_ptr(), self.bias.data_ptr() if self.bias is not None else None,
                      y.data_ptr(), rows, out_features, in_features)
        if rc != 0:
            raise MemoryError(f"the bfloat16 linear could not allocate {rows} widened rows of {in_features}")
        return y.reshape(*x.shape[:-1], out_features)


def bfloat16_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> NativeLinear | None:
    """The native form of a CPU bfloat16 linear, or None when its kernel is unavailable."""
    if weight.device.type != "cpu" or weight.dtype != torch.bfloat16 or weight.dim() != 2:
        return None
    library = native.library(KERNEL)
    return NativeLinear(library, weight.contiguous(), bias) if library is not None else None
