"""The paged KV cache served for real: examples/llm's tiny Llama with ``paged_kv_cache: true``
answers exactly ``generate``'s greedy text, a second request sharing the first one's long
prefix is served from the prefix cache, and the hit rate reaches ``/metrics``. The pool is sized
from a memory budget (``kv_cache_memory_fraction``); the worker's decode rows read it through the
native kernel (ts/llm/engine/paged/native.py), as its log says."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PREFIX = ("Continuous batching lets new requests join a running batch between decoding steps, so short "
          "requests do not wait behind long ones. Streaming sends every token to the client as soon as it "
          "is produced. ")
PROMPTS = [PREFIX + "Hello world!", PREFIX + "Once upon a time"]
CONFIG = """\
minWorkers: 1
maxWorkers: 1
batchSize: 4
maxBatchDelay: 5
responseTimeout: 120
continuousBatching: true
handler:
  max_context: 256
  dtype: float32
  paged_kv_cache: true
  kv_cache_memory_fraction: 0.001   # ~1000 blocks of 2 KiB per GiB available; 64 make the context
  block_size: 4
"""


def test_paged_cache_serves_greedy_text_and_reports_prefix_hits(tmp_path: Path) -> None:
    from llm_support import greedy_texts

    expected = greedy_texts(PROMPTS, 10)
    (tmp_path / "model-config.yaml").write_text(CONFIG)
    spec = importlib.util.spec_from_file_location("llm_build_mar", ROOT / "examples" / "llm" / "build_mar.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(tmp_path / "store", model_name="paged", config_file=tmp_path / "model-config.yaml")
    with harness.Server(tmp_path / "store", {"metrics_mode": "prometheus"}, env={"HF_HUB_OFFLINE": "1"}) as s:
        r = s.register("paged.mar", synchronous="true", timeout=300)
        assert r.status_code == 200, r.text
        for prompt in PROMPTS:  # one after the other: the second finds the first's prefix blocks
            r = requests.post(f"{s.inference_url}/predictions/paged", timeout=120,
                              json={"prompt": prompt, "max_new_tokens": 10, "temperature": 0})
            assert r.status_code == 200, r.text
            assert r.json()["text"] == expected[prompt]

        def hit_rate() -> tuple[float, str] | None:  # the records travel beside the answers: poll
            body = requests.get(f"{s.metrics_url}/metrics", timeout=10).text
            m = re.search(r'^llm_prefix_cache_hit_ratio\{[^}]*model_name="paged"[^}]*\} ([0-9.]+)', body, re.M)
            return (float(m.group(1)), body) if m and float(m.group(1)) > 0 else None

        hit, body = harness.wait_for(hit_rate, 30, what="llm_prefix_cache_hit_ratio on /metrics")
        assert 0 < hit < 1, body
        assert re.search(r'^llm_kv_cache_usage_ratio\{[^}]*model_name="paged"', body, re.M), body
        log = s.logs("model_log.log")
        assert "prefix caching on, decode attention native)" in log, log[-3000:]
