"""test/gpu/run_all.sh in its CPU dry mode, as CI runs it: every check passes on CPU (the LLM
engine's attention paths on the CPU, each GPU script's syntax and its "needs a GPU" refusal, the
paged-cache benchmark), one summary table, and a failing check makes the script fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("cuda", "llm-f32", "llm-bf16", "llm-serving", "torchrun-nccl", "tp-pp-nccl", "multinode",
          "preprocess-pool", "llm-bench")


def run_all(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "RUN_ALL_LOGS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    return subprocess.run(["bash", str(ROOT / "test" / "gpu" / "run_all.sh"), "--dry", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def table(out: str) -> dict[str, str]:
    rows = out[out.index("\ncheck "):].splitlines()[2:]
    return {line.split()[0]: line.split()[1] for line in rows if line.strip() and not line.startswith("---")}


def test_dry_mode_runs_every_check_on_cpu(tmp_path: Path) -> None:
    done = run_all(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = table(done.stdout)
    assert {name: rows.get(name) for name in CHECKS} == {name: "pass" for name in CHECKS}, done.stdout
    assert rows["total"] == "pass"
    assert "paged cache, HF forward, toy model on cpu float32: 100.0%" in (tmp_path / "llm-f32.log").read_text()


def test_a_failing_check_fails_the_run_and_shows_its_log(tmp_path: Path) -> None:
    done = run_all(tmp_path, "--only", "multinode,broken", "--check", "broken=echo the reason; exit 3")
    assert done.returncode == 1, done.stdout + done.stderr
    rows = table(done.stdout)
    assert rows["multinode"] == "pass" and rows["broken"] == "FAIL" and rows["total"] == "FAIL"
    assert "--- broken" in done.stdout and "the reason" in done.stdout
