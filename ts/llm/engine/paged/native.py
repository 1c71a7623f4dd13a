"""The paged cache's native decode attention (``paged_decode.c``): built once per machine with the C
compiler, loaded with ctypes.

``decode_kernel(device, dtype)`` returns a ``DecodeKernel`` for a CPU float32 or bfloat16 pool, or
None (the engine then gathers blocks into SDPA, ``parts.py``): on another device or dtype, when
``TS_NATIVE_KERNELS=0``, or when no compiler is found or the build fails (these two said once in
the log) -- never an error. The library is cached under ``$XDG_CACHE_HOME/tserve/kernels`` (else
``~/.cache/tserve/kernels``) by a hash of the source, the flags, the compiler's version and the
CPU's flags (``-march=native``: a cache shared by different hosts never hands one a library built
for another's instructions). A build writes a temporary file and renames it, so workers starting
together may each build but never load a half-written library.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("paged_decode.c")
FLAGS = ["-O3", "-march=native", "-shared", "-fPIC"]
# OpenMP shares the rows among torch's threads (the library binds to torch's own libgomp); a
# compiler without it (Apple's clang) builds the same source serially (-fopenmp-simd only)
PARALLEL, SERIAL = ["-fopenmp"], ["-fopenmp-simd"]
BUILD_TIMEOUT_S = 120
SYMBOLS = {torch.float32: "paged_decode_attention_f32", torch.bfloat16: "paged_decode_attention_bf16"}

_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL | None] = {}  # the library, once looked for (None: not available)


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
    if os.environ.get("TS_NATIVE_KERNELS", "1") == "0":
        return None
    with _lock:
        if "library" not in _loaded:
            _loaded["library"] = _load()
        library = _loaded["library"]
    return DecodeKernel(library, dtype) if library is not None else None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tserve" / "kernels"


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _library_path(cc: str) -> Path:
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), " ".join(FLAGS), version, _cpu_flags()]).encode())
    return cache_dir() / f"paged_decode-{key.hexdigest()[:16]}.so"


def _load() -> ctypes.CDLL | None:
    cc = _compiler()
    if cc is None:
        logger.info("paged decode attention: no C compiler (%s) found; the paged cache gathers blocks into SDPA "
                    "(install gcc, or set CC, for the native kernel)", os.environ.get("CC", "cc"))
        return None
    try:
        path = _library_path(cc)
        if not path.exists():
            _build(cc, path)
        library = ctypes.CDLL(str(path))
        for symbol in SYMBOLS.values():
            getattr(library, symbol)  # a library from another source would fail here, not mid-step
        return library
    except (OSError, subprocess.SubprocessError, AttributeError) as e:
        logger.warning("paged decode attention: the native kernel is unavailable (%s); the paged cache gathers "
                       "blocks into SDPA", str(e).strip() or type(e).__name__)
        return None


def _build(cc: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        for threads in (PARALLEL, SERIAL):
            result = subprocess.run([cc, *FLAGS, *threads, "-o", tmp, str(SOURCE), "-lm"], capture_output=True,
                                    text=True, timeout=BUILD_TIMEOUT_S)
            if result.returncode == 0:
                break
        else:
            output = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
            raise OSError(f"{cc} exited with {result.returncode}: {output}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    logger.info("paged decode attention: built the native kernel in %.1f s (%s%s)", time.perf_counter() - started,
                path, "" if threads is PARALLEL else ", one thread: the compiler has no OpenMP")


if __name__ == "__main__":  # `python -m ts.llm.engine.paged.native`: build now (make install does), print where
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    kernel = decode_kernel(torch.device("cpu"), torch.float32)
    print(kernel.path if kernel is not None else "no native kernel: the paged cache gathers blocks into SDPA")
