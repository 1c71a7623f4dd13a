"""The engine's native CPU kernels (C sources beside the Python that calls them), each built once per
machine with the C compiler and loaded with ctypes.

``library(kernel)`` returns the loaded library, or None -- when ``TS_NATIVE_KERNELS=0``, when no
compiler is found or the build fails (these two said once in the log, with what the engine does
instead) -- never an error. A library is cached under ``$XDG_CACHE_HOME/tserve/kernels`` (else
``~/.cache/tserve/kernels``) by a hash of its source, the flags, the compiler's version and the
CPU's flags (``-march=native``: a cache shared by different hosts never hands one a library built
for another's instructions). A build writes a temporary file and renames it, so workers starting
together may each build but never load a half-written library.

OpenMP: loaded into a process that has imported torch, a library binds to torch's own libgomp (the
same soname), so its parallel loops run on torch's thread pool with ``torch.get_num_threads()``
threads; a compiler without OpenMP (Apple's clang) builds the same source serially.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

FLAGS = ["-O3", "-march=native", "-shared", "-fPIC"]
PARALLEL, SERIAL = ["-fopenmp"], ["-fopenmp-simd"]
BUILD_TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A C source, the symbols the caller needs from it, what it is (for the log) and what the
    engine does without it."""

    source: Path
    symbols: tuple[str, ...]
    what: str
    otherwise: str


_lock = threading.Lock()
_loaded: dict[Path, ctypes.CDLL | None] = {}  # by source: the library, once looked for (None: not available)


def enabled() -> bool:
    return os.environ.get("TS_NATIVE_KERNELS", "1") != "0"


def library(kernel: Kernel) -> ctypes.CDLL | None:
    """``kernel``'s library, built if needed (see the module's docstring); None when unavailable."""
    if not enabled():
        return None
    with _lock:
        if kernel.source not in _loaded:
            _loaded[kernel.source] = _load(kernel)
        return _loaded[kernel.source]


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


def _library_path(cc: str, source: Path) -> Path:
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    key = hashlib.sha256("\0".join([source.read_text(), " ".join(FLAGS), version, _cpu_flags()]).encode())
    return cache_dir() / f"{source.stem}-{key.hexdigest()[:16]}.so"


def _load(kernel: Kernel) -> ctypes.CDLL | None:
    cc = _compiler()
    if cc is None:
        logger.info("%s: no C compiler (%s) found; %s (install gcc, or set CC, for the native kernel)",
                    kernel.what, os.environ.get("CC", "cc"), kernel.otherwise)
        return None
    try:
        path = _library_path(cc, kernel.source)
        if not path.exists():
            _build(cc, kernel, path)
        loaded = ctypes.CDLL(str(path))
        for symbol in kernel.symbols:
            getattr(loaded, symbol)  # a library from another source would fail here, not mid-step
        return loaded
    except (OSError, subprocess.SubprocessError, AttributeError) as e:
        logger.warning("%s: the native kernel is unavailable (%s); %s", kernel.what,
                       str(e).strip() or type(e).__name__, kernel.otherwise)
        return None


def _build(cc: str, kernel: Kernel, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        for threads in (PARALLEL, SERIAL):
            result = subprocess.run([cc, *FLAGS, *threads, "-o", tmp, str(kernel.source), "-lm"], capture_output=True,
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
    logger.info("%s: built the native kernel in %.1f s (%s%s)", kernel.what, time.perf_counter() - started,
                path, "" if threads is PARALLEL else ", one thread: the compiler has no OpenMP")
