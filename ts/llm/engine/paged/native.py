"""The paged cache's native decode attention (``paged_decode.c``), built and loaded by
``ts/llm/engine/native.py``.

``decode_kernel(device, dtype)`` returns a ``DecodeKernel`` for a CPU float32 or bfloat16 pool, or
None (the engine then gathers blocks into SDPA, ``parts.py``): on another device or dtype, when
``TS_NATIVE_KERNELS=0``, or when no compiler is found or the build fails (these two said once in
the log) -- never an error.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from ts.llm.engine import native

SYMBOLS = {torch.float32: "paged_decode_attention_f32", torch.bfloat16: "paged_decode_attention_bf16"}
KERNEL = native.Kernel(Path(__file__).with_name("paged_decode.c"), tuple(SYMBOLS.values()),
                       "paged decode attention", "the paged cache gathers blocks into SDPA")


class DecodeKernel:
    """``(q, keys, values, table, lengths, scale) -> out``: ``q`` ``(rows, heads, dim)``, the pool's
    ``keys``/``values`` ``(blocks, block_size, kv_heads, dim)`` (contiguous, the kernel's dtype),
    ``table`` ``(rows, width)`` block ids and ``lengths`` ``(rows,)`` tokens each row sees (int64,
    contiguous, at most ``width * block_size``); ``out`` ``(rows, heads, dim)`` in ``q``'s dtype,
    computed in float32."""

    def __init__(self, library: ctypes.CDLL, dtype: torch.dtype) -> None:
        self.path, self.dtype = Path(library._name), dtype
        self._fn = getattr(library, SYMBOLS[dtype])
        self._fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 6 + [ctypes.c_float]
        self._fn.restype = ctypes.c_int

    def __call__(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, table: torch.Tensor,
                 lengths: torch.Tensor, scale: float) -> torch.Tensor:
        rows, heads, dim = q.shape
        q32 = q.to(torch.float32).contiguous()
        out = torch.empty_like(q32)
        rc = self._fn(q32.data_ptr(), keys.data_ptr(), values.data_ptr(), table.data_ptr(), lengths.data_ptr(),
                      out.data_ptr(), rows, heads, keys.shape[2], dim, keys.shape[1], table.shape[1], scale)
        if rc != 0:
            raise MemoryError(f"paged decode attention could not allocate scores for {rows} rows")
        return out.to(q.dtype)


def decode_kernel(device: torch.device, dtype: torch.dtype) -> DecodeKernel | None:
    """The kernel for a pool on ``device`` in ``dtype``, or None (see the module's docstring)."""
    if device.type != "cpu" or dtype not in SYMBOLS:
        return None
    library = native.library(KERNEL)
    return DecodeKernel(library, dtype) if library is not None else None


if __name__ == "__main__":  # `python -m ts.llm.engine.paged.native`: build now (make install does), print where
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    kernel = decode_kernel(torch.device("cpu"), torch.float32)
    print(kernel.path if kernel is not None else "no native kernel: the paged cache gathers blocks into SDPA")
