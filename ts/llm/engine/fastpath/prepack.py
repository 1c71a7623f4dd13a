"""Linear weights prepared once, at load, for the CPU's GEMM (as vLLM's CPU backend prepacks its
weights for oneDNN); the fast forward (``llama.py``) calls ``PackedLinear`` where it called
``F.linear``.

* float32: ``F.linear`` (MKL's GEMM) unless ``TS_PREPACK_LINEAR=all``: then MKL's packed GEMM
  (the weight packed once with ``_mkl_reorder_linear_weight``, ``_mkl_linear`` per call; the
  same bits as ``F.linear`` at any row count, tested). On an AVX2 EPYC it took 1.31x less CPU at
  32 rows (a c32 decode step) and the same at 1, 8 and 544 (``benchmarks/linear_prepack.py``),
  for 1.7x the weight's memory beside the model's own parameters (kept for Hugging Face's
  forward): not a default. (oneDNN's float32 reorder was slower at a prompt step's rows.)
* bfloat16 on a CPU where oneDNN has a bfloat16 GEMM (AVX512-BW, AVX512-BF16, AMX or
  AVX-NE-CONVERT: ``torch.ops.mkldnn._is_mkldnn_bf16_supported()``): the weight reordered once
  for oneDNN (``torch.ops.mkldnn._reorder_linear_weight``) and ``_linear_pointwise``.
* bfloat16 on a CPU without one (AVX2 only): torch emulates the bfloat16 GEMM there, about 3.3x
  the CPU of float32 at 32 rows and 7x at 544. The native kernel (``native_linear.py``) reads the
  bfloat16 weight in place and widens it in registers, float32 arithmetic and one rounding per
  output (bfloat16's own GEMM accumulates in float32 too: the same within bfloat16's rounding).
  Without a C compiler: the rows are widened to float32 and multiplied by a float32 copy of the
  weight made here (twice the weights' memory), the output rounded to bfloat16 once.
* anything else (a GPU, float16, ``TS_PREPACK_LINEAR=0``): ``F.linear``.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from ts.llm.engine.fastpath.native_linear import bfloat16_linear

PACK_ROWS = 32  # MKL's and oneDNN's packing hint: the rows a call usually has (any row count works)


def native_bfloat16() -> bool:
    """oneDNN has a bfloat16 GEMM on this CPU (else torch emulates it)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def mode() -> str:
    """``TS_PREPACK_LINEAR``: ``0`` (off), ``1`` (the default: bfloat16), ``all`` (float32 too)."""
    value = os.environ.get("TS_PREPACK_LINEAR", "1")
    if value not in ("0", "1", "all"):
        raise ValueError(f"TS_PREPACK_LINEAR={value!r}: use 0 (off), 1 (bfloat16 weights, the default) or all "
                         "(float32 weights packed for MKL too)")
    return value


class PackedLinear:
    """``x -> F.linear(x, weight, bias)`` through the fastest prepared form of ``weight`` for its
    device and dtype (the module's docstring); ``how`` names it."""

    __slots__ = ("weight", "bias", "how", "_packed", "_bias32", "_call")

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, pack_float32: bool | None = None) -> None:
        """``pack_float32``: MKL's packed GEMM for a float32 weight (default: ``TS_PREPACK_LINEAR=all``)."""
        self.weight, self.bias = weight, bias
        self._packed: torch.Tensor | None = None
        self._bias32: torch.Tensor | None = None
        self._call = self._plain
        self.how = "F.linear"
        setting = mode()
        if setting == "0" or weight.device.type != "cpu":
            return
        if pack_float32 is None:
            pack_float32 = setting == "all"
        with torch.inference_mode():
            if weight.dtype == torch.float32 and pack_float32 and torch._C.has_mkl:
                self._packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, PACK_ROWS)
                self._call, self.how = self._mkl, "MKL packed float32"
            elif weight.dtype == torch.bfloat16 and native_bfloat16():
                self._packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS)
                self._call, self.how = self._onednn, "oneDNN reordered bfloat16"
            elif weight.dtype == torch.bfloat16 and (kernel := bfloat16_linear(weight, bias)) is not None:
                self._call, self.how = kernel, "bfloat16 in place, widened in registers (native kernel)"
            elif weight.dtype == torch.bfloat16:
                self._packed = weight.float()
                self._bias32 = bias.float() if bias is not None else None
                self._call = self._widened
                self.how = "bfloat16 widened to float32 (no bfloat16 GEMM on this CPU)"

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._call(x)

    def _plain(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def _mkl(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.ops.mkl._mkl_linear(x, self._packed, self.weight, self.bias, PACK_ROWS)
        return out

    def _onednn(self, x: torch.Tensor) -> torch.Tensor:
        assert self._packed is not None
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, self._packed, self.bias, "none", [], "")
        return out

    def _widened(self, x: torch.Tensor) -> torch.Tensor:
        assert self._packed is not None
        return F.linear(x.float(), self._packed, self._bias32).to(torch.bfloat16)
