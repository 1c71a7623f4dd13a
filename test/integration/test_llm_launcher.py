"""ts.llm_launcher: one command serves a local Hugging Face folder with continuous batching on
/predictions and the OpenAI routes, and stops with its server on SIGTERM; a folder that is not a
model is refused naming the fix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import requests

import harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'model-archiver'}", "HF_HUB_OFFLINE": "1",
            "LOG_LOCATION": str(tmp_path / "logs"), "METRICS_LOCATION": str(tmp_path / "logs"),
            "TEMP": str(tmp_path / "tmp"), "TMPDIR": str(tmp_path / "tmp")}


def test_serves_a_local_model_folder_until_sigterm(tmp_path: Path) -> None:
    from ts.testing.tiny_llm import build_model, build_tokenizer

    tok = build_tokenizer()
    build_model(tok).save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    (tmp_path / "tmp").mkdir()
    cfg = harness.server_config(tmp_path / "store")
    harness.write_config(tmp_path / "config.properties", cfg)
    out = open(tmp_path / "launcher.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "ts.llm_launcher", "--model_id", str(tmp_path / "tiny"),
                             "--model_name", "tiny", "--model_store", str(tmp_path / "store"), "--batch_size", "4",
                             "--disable_token_auth", "--ts_config", str(tmp_path / "config.properties")],
                            cwd=tmp_path, env=_env(tmp_path), stdout=out, stderr=subprocess.STDOUT)
    try:
        url = cfg["inference_address"]

        def answers() -> bool:
            try:
                return requests.post(f"{url}/predictions/tiny", json={"prompt": "a", "max_new_tokens": 2},
                                     timeout=30).status_code == 200
            except requests.ConnectionError:
                assert proc.poll() is None, (tmp_path / "launcher.log").read_text()
                return False

        harness.wait_for(answers, timeout=180, what="the launched model")
        r = requests.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": "Once", "max_tokens": 3},
                          timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] <= 3
        d = requests.get(cfg["management_address"] + "/models/tiny", timeout=30).json()[0]
        assert d["continuousBatching"] is True and d["batchSize"] == 4
        tree = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        _, alive = psutil.wait_procs(tree, timeout=15)
        assert not alive
    finally:
        if proc.poll() is None:
            proc.kill()
        out.close()


def test_a_folder_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "ts.llm_launcher", "--model_id", str(tmp_path)],
                       cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "not a local Hugging Face model folder" in p.stderr and "save_pretrained" in p.stderr
