"""The LLM handler on two tensor-parallel torchrun ranks (gloo on CPU) with continuous batching:
rank 0 schedules, rank 1 replays each step; the tokens equal greedy ``generate`` of the unsplit
model, for prompts arriving while others run; a cancelled stream leaves both ranks in step."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["Once upon a time", "a", "serving large models is", "the quick brown fox jumps over"]
NEW_TOKENS = 10
TP_YAML = """\
minWorkers: 1
maxWorkers: 1
batchSize: 4
maxBatchDelay: 5
responseTimeout: 120
continuousBatching: true
parallelType: tp
parallelLevel: 2
torchrun:
  nproc-per-node: 2
handler:
  max_new_tokens: 16
  dtype: float32
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("tp")
    (tmp / "model-config.yaml").write_text(TP_YAML)
    spec = importlib.util.spec_from_file_location("llm_build_mar", ROOT / "examples" / "llm" / "build_mar.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(tmp / "store", model_name="tiny_tp", config_file=tmp / "model-config.yaml")
    with harness.Server(tmp / "store", env={"HF_HUB_OFFLINE": "1", "TS_DIST_TIMEOUT_S": "60"}) as s:
        r = s.register("tiny_tp.mar", synchronous="true", timeout=300)
        assert r.status_code == 200, r.text
        yield s


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """Each prompt's greedy continuation by Hugging Face's generate, alone (no server)."""
    from llm_support import greedy_texts

    return greedy_texts(PROMPTS, NEW_TOKENS)


def generate(server: harness.Server, prompt: str, **kw) -> requests.Response:
    return requests.post(f"{server.inference_url}/predictions/tiny_tp", timeout=120,
                         json={"prompt": prompt, "max_new_tokens": NEW_TOKENS, "temperature": 0, **kw}, **(
                             {"stream": True} if kw.get("stream") else {}))


def test_two_tp_ranks_give_the_unsplit_models_greedy_tokens(server: harness.Server, expected) -> None:
    d = requests.get(f"{server.management_url}/models/tiny_tp", timeout=30).json()[0]
    assert len(d["workers"][0]["ranks"]) == 2
    results: dict[str, str] = {}

    def one(prompt: str) -> None:
        r = generate(server, prompt)
        assert r.status_code == 200, r.text
        results[prompt] = r.json()["text"]

    threads = [threading.Thread(target=one, args=(p,)) for p in PROMPTS]
    for i, t in enumerate(threads):
        t.start()
        if i == 1:
            time.sleep(0.05)
    for t in threads:
        t.join(timeout=120)
    assert results == expected


def test_a_cancelled_stream_keeps_the_ranks_in_step(server: harness.Server, expected) -> None:
    r = generate(server, PROMPTS[0], stream=True, max_new_tokens=200, ignore_eos=True)
    assert next(r.iter_content(chunk_size=None))
    r.close()  # the client goes away: rank 0 cancels it, rank 1 replays the cancel
    again = generate(server, PROMPTS[2])
    assert again.status_code == 200, again.text
    assert again.json()["text"] == expected[PROMPTS[2]]
