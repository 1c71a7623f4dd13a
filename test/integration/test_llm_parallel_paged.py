"""The paged KV cache on two torchrun ranks (gloo on CPU), tensor parallel (each rank holds its
shard of the heads in every block) and pipeline parallel (each stage its own layer's keys and
values of every block): rank 0 schedules the blocks (admission, preemption, prefix hits) and
rank 1 replays the same steps, so both ranks' block tables stay equal. The tokens equal greedy
``generate`` of the unsplit model with a pool too small for all the requests at once (sequences
are preempted and recomputed) and with a prompt whose prefix is already cached."""

from __future__ import annotations

import re

import pytest
import requests
from llm_support import conversation_texts, generate, greedy_texts, llm_server

from ts.testing.tiny_llm import build_model, build_tokenizer

pytestmark = pytest.mark.slow

PREFIX = "the quick brown fox jumps over the lazy dog and then the model server answered every request"
PROMPTS = ["Once upon a time", "a", "serving large models is", PREFIX]
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
  dtype: float32
  paged_kv_cache: true
  kv_cache_blocks: 12
  block_size: 4
"""


@pytest.mark.parametrize("kind", ["tp", "pp"])
def test_paged_cache_on_two_ranks_gives_greedy_tokens(tmp_path, kind: str) -> None:
    expected = greedy_texts(PROMPTS + [PREFIX + " twice"], NEW_TOKENS)
    name = f"tiny_{kind}_paged"
    with llm_server(tmp_path, name, TP_YAML.replace("parallelType: tp", f"parallelType: {kind}")) as server:
        # the four prompts in one completions request enter the engine in one step, so they are in
        # the pool together whatever the machine's speed (separate requests may not overlap)
        r = requests.post(f"{server.inference_url}/predictions/{name}/v1/completions", timeout=120,
                          json={"prompt": PROMPTS, "max_tokens": NEW_TOKENS, "temperature": 0})
        assert r.status_code == 200, r.text
        choices = sorted(r.json()["choices"], key=lambda c: c["index"])
        results = {prompt: c["text"] for prompt, c in zip(PROMPTS, choices, strict=True)}
        r = generate(server, name, PREFIX + " twice", NEW_TOKENS)  # the prefix's blocks are cached
        assert r.status_code == 200, r.text
        results[PREFIX + " twice"] = r.json()["text"]
        assert results == expected
        log = "".join(p.read_text(errors="replace") for p in server.workdir.rglob("*.log"))
        assert "preempted (recompute)" in log  # 12 blocks of 4 could not hold all four at once
        if kind == "pp":
            assert "stage 2/2 (decoder layers 1-1)" in log
        d = requests.get(f"{server.management_url}/models/{name}", timeout=30).json()[0]
        assert len(d["workers"][0]["ranks"]) == 2



STATEFUL_YAML = TP_YAML.replace("continuousBatching: true\n", "continuousBatching: true\nsequenceBatching: true\n"
                                "sequenceMaxIdleMSec: 60000\n").replace(
    "  kv_cache_blocks: 12\n", "  kv_cache_memory_fraction: 0.001\n  max_context: 256\n")


@pytest.mark.parametrize("kind", ["tp", "pp"])
def test_a_conversation_on_two_ranks_keeps_its_blocks(tmp_path, kind: str) -> None:
    """A stateful conversation with the pool sized by kv_cache_memory_fraction: both ranks agree
    on one block count (the smallest), rank 1 replays rank 0's pins (``converse``, ``end``), and
    each turn's greedy text is ``generate``'s on the whole conversation."""
    tok = build_tokenizer()
    prompts = ["Once upon a time there was a little robot", " and then", " in the end"]
    expected = conversation_texts(tok, build_model(tok), prompts, NEW_TOKENS)
    yaml = STATEFUL_YAML.replace("parallelType: tp", f"parallelType: {kind}")
    with llm_server(tmp_path, "tiny_tp_chat", yaml) as server:
        seq = None
        got = []
        for i, prompt in enumerate(prompts):
            headers = {"ts_request_sequence_id": seq} if seq else {}
            if i == len(prompts) - 1:
                headers["ts_request_sequence_end"] = "true"
            r = requests.post(f"{server.inference_url}/predictions/tiny_tp_chat", headers=headers, timeout=120,
                              json={"prompt": prompt, "max_new_tokens": NEW_TOKENS, "temperature": 0})
            assert r.status_code == 200, r.text
            seq = r.headers["ts_request_sequence_id"]
            got.append(r.json()["text"])
        assert got == expected
        log = "".join(p.read_text(errors="replace") for p in server.workdir.rglob("*.log"))
        budgets = re.findall(r"KV cache: (\d+) blocks of 4 tokens, \d+ bytes per block", log)  # after the MIN
        agreed = re.findall(r"paged KV cache \((\d+) blocks of 4 tokens", log)  # each rank's engine
        assert budgets and len(set(budgets)) == 1 and set(agreed) == set(budgets), (budgets, agreed)
