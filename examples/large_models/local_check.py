"""Build, run and cross-check the large-model examples without the server.

    python examples/large_models/local_check.py tp

builds the example's archive, unpacks it, runs its handler under ``torchrun`` with 2 CPU ranks
(gloo) through ``run_local.py``, and compares the answers with the unsplit model run in this
process. The tests use the same functions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from build_mar import build  # noqa: E402

from ts.utils.free_ports import free_port  # noqa: E402


def build_and_unpack(example: str, workdir: Path, **kwargs: Any) -> Path:
    """Archive ``example`` into ``workdir`` and unpack it as the frontend would; return the dir."""
    mar = build(example, workdir / "store", **kwargs)
    model_dir = workdir / f"{mar.stem}-unpacked"
    with zipfile.ZipFile(mar) as zf:
        zf.extractall(model_dir)
    return model_dir


def env() -> dict[str, str]:
    e = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "model-archiver"), e.get("PYTHONPATH", "")]
    e["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    e["HF_HUB_OFFLINE"] = "1"
    e.setdefault("TS_DIST_TIMEOUT_S", "60")  # a failed rank must not block its peer for 30 min
    e["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    return e


def run_handler(model_dir: Path, requests: list[Any], workdir: Path, nproc: int = 2,
                timeout: float = 240, torchrun: bool | None = None) -> tuple[int, dict[str, Any], str]:
    """Run ``run_local.py`` (under torchrun unless ``torchrun`` is False, or None with nproc 1).

    Returns (exit code, rank 0's result, logs).
    """
    req = workdir / "requests.json"
    out = workdir / "result.json"
    out.unlink(missing_ok=True)
    req.write_text(json.dumps(requests))
    script = [str(HERE / "run_local.py"), "--model-dir", str(model_dir), "--requests", str(req),
              "--output", str(out)]
    code, logs = run_ranks(script, workdir, nproc, timeout, nproc > 1 if torchrun is None else torchrun)
    result = json.loads(out.read_text()) if out.is_file() else {}
    return code, result, logs


def run_ranks(script: list[str], workdir: Path, nproc: int = 2, timeout: float = 240,
              use_torchrun: bool = True) -> tuple[int, str]:
    """Run a Python script (and its arguments) on ``nproc`` torchrun ranks, or alone; returns
    (exit code, the console and every rank's log)."""
    if use_torchrun:
        log_dir = workdir / "torchrun-logs"
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
               "--nnodes=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
               f"--log-dir={log_dir}", "--max-restarts=0", "--redirects=3", *script]
    else:
        cmd = [sys.executable, *script]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        logs, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole torchrun job we started
        logs, _ = proc.communicate()
        logs += f"\n[local_check] killed after {timeout} s"
    if use_torchrun:
        logs += "".join(f"\n--- {p.relative_to(workdir)}\n{p.read_text(errors='replace')}"
                        for p in sorted((workdir / "torchrun-logs").rglob("*.log")))
    return proc.returncode, logs


def reference(model_dir: Path, requests: list[Any]) -> list[dict[str, Any]]:
    """The same requests answered by the unsplit model in this process."""
    import torch

    from ts.handler_utils.distributed.checkpoint import (
        build_model_from_config,
        find_checkpoint,
        load_weights,
    )
    from ts.handler_utils.distributed.generation import greedy_generate
    from ts.handler_utils.distributed.pipelining import LogitsOnly

    model = build_model_from_config(model_dir)
    load_weights(model, find_checkpoint(model_dir))
    forward = LogitsOnly(model.eval())
    out = []
    for r in requests:
        r = {"prompt": r} if isinstance(r, str) else r
        gen = greedy_generate(forward, [list(r["prompt"].encode())], r.get("max_new_tokens", 8))
        out.append({"generated_ids": gen.tokens[0], "logits": gen.first_logits[0].to(torch.float32)})
    return out


def compare(responses: list[dict[str, Any]], expected: list[dict[str, Any]], atol: float = 1e-4) -> list[str]:
    """Differences between handler answers and the reference (empty when they agree)."""
    import torch

    problems = []
    if len(responses) != len(expected):
        return [f"{len(responses)} responses for {len(expected)} requests"]
    for i, (got, want) in enumerate(zip(responses, expected, strict=True)):
        if got["generated_ids"] != want["generated_ids"]:
            problems.append(f"request {i}: tokens {got['generated_ids']} != {want['generated_ids']}")
        if "logits" in got:
            diff = (torch.tensor(got["logits"]) - want["logits"]).abs().max().item()
            if diff > atol:
                problems.append(f"request {i}: logits differ by {diff}")
    return problems


REQUESTS: list[Any] = [
    "Hello",
    {"prompt": "tserve", "max_new_tokens": 5, "return_logits": True},
    {"prompt": "a longer prompt than the others", "max_new_tokens": 3, "return_logits": True},
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example", choices=("pippy", "tp", "deepspeed", "accelerate"))
    parser.add_argument("--workdir", type=Path,
                        help="keep the archive, the unpacked model and torchrun's logs here (default: a temporary folder)")
    args = parser.parse_args()
    if args.workdir is None:
        with tempfile.TemporaryDirectory(prefix="tserve-large-models-") as tmp:
            return check(args.example, Path(tmp))
    args.workdir.mkdir(parents=True, exist_ok=True)
    return check(args.example, args.workdir)


def check(example: str, workdir: Path) -> int:
    model_dir = build_and_unpack(example, workdir)
    nproc = 1 if example == "accelerate" else 2
    code, result, logs = run_handler(model_dir, REQUESTS, workdir, nproc=nproc)
    if code != 0 or "responses" not in result:
        print(logs[-4000:])
        print(result.get("error", f"exit code {code}"))
        return 1
    problems = compare(result["responses"], reference(model_dir, REQUESTS))
    print(json.dumps(result["responses"][0], indent=2))
    print("matches the unsplit model" if not problems else "\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
