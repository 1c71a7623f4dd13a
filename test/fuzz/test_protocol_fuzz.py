"""Bounded, seeded runs of the atheris fuzzers in test/fuzz: fuzz_protocol.py (the worker's protocol
decoders raise only ProtocolError / ConnectionClosed, size no buffer from an untrusted length, and
never hang) and fuzz_nesting.py (request JSON nested up to 20 000 levels never breaks body decoding).

TSERVE_FUZZ_RUNS sets the number of inputs (default 10000, a few seconds); see docs/reliability.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")  # the dev extra; without it the decoders are still covered by test_codec.py

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def test_protocol_decoders_survive_coverage_guided_fuzzing(tmp_path: Path) -> None:
    run_fuzzer(HERE / "fuzz_protocol.py", int(os.environ.get("TSERVE_FUZZ_RUNS", "10000")), tmp_path)


def test_request_json_decoding_survives_nesting_depth_fuzzing(tmp_path: Path) -> None:
    # inputs of up to 20 000 levels cost more than a protocol frame: a third of the runs
    run_fuzzer(HERE / "fuzz_nesting.py", max(1, int(os.environ.get("TSERVE_FUZZ_RUNS", "10000")) // 3), tmp_path)


def run_fuzzer(fuzzer: Path, runs: int, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # atheris.Fuzz() exits the process: it runs in a child; a crashing input is written to tmp_path
    proc = subprocess.run(
        [sys.executable, str(fuzzer), f"-runs={runs}", "-seed=1", "-timeout=10", "-rss_limit_mb=2048",
         f"-artifact_prefix={tmp_path}/"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=max(120, runs // 100))
    tail = proc.stderr[-4000:]
    assert proc.returncode == 0, f"{fuzzer.name} found an input that breaks a decoder:\n{tail}"
    assert f"Done {runs} runs" in proc.stderr, tail
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))
