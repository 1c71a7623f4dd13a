"""The LLM handler on two pipeline-parallel torchrun ranks (gloo on CPU) with continuous batching:
rank 0 embeds and schedules, rank 1 holds the last layer and the head and samples. The tokens
equal greedy ``generate`` of the unsplit model for prompts arriving while others run (streamed
or not); a cancelled stream frees its slot on both stages; a rank that dies fails the requests
in flight with a message naming it, and the restarted ranks serve again."""

from __future__ import annotations

import json
import os
import re
import signal
import threading

import pytest
import requests
from llm_support import generate as llm_generate
from llm_support import llm_series, llm_server, texts_at_once

import harness

pytestmark = pytest.mark.slow

PROMPTS = ["Once upon a time", "a", "serving large models is", "the quick brown fox jumps over the lazy dog"]
NEW_TOKENS = 10
PP_YAML = """\
minWorkers: 1
maxWorkers: 1
batchSize: 2
maxBatchDelay: 5
responseTimeout: 120
continuousBatching: true
parallelType: pp
parallelLevel: 2
torchrun:
  nproc-per-node: 2
  max-restarts: 1
handler:
  max_new_tokens: 16
  max_tokens_per_step: 6
  dtype: float32
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with llm_server(tmp_path_factory.mktemp("pp"), "tiny_pp", PP_YAML, {"metrics_mode": "prometheus"}) as s:
        yield s


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """Each prompt's greedy continuation by Hugging Face's generate, alone (no server)."""
    from llm_support import greedy_texts

    return greedy_texts(PROMPTS, NEW_TOKENS)


def generate(server: harness.Server, prompt: str, **kw) -> requests.Response:
    return llm_generate(server, "tiny_pp", prompt, NEW_TOKENS, **kw)


def ranks(server: harness.Server) -> list[dict]:
    return requests.get(f"{server.management_url}/models/tiny_pp", timeout=30).json()[0]["workers"][0]["ranks"]


def test_two_pp_ranks_give_the_unsplit_models_greedy_tokens(server: harness.Server, expected) -> None:
    assert len(ranks(server)) == 2
    assert "stage 2/2 (decoder layers 1-1)" in server.logs("model_log.log")
    results: dict[str, str] = {}

    def one(prompt: str) -> None:
        r = generate(server, prompt)
        assert r.status_code == 200, r.text
        results[prompt] = r.json()["text"]

    # The first prompt streams; the others arrive once it is generating (two slots: they join
    # as sequences leave, and the longest prompt is prefilled in chunks of the 6-token budget).
    first = generate(server, PROMPTS[0], stream=True)
    assert first.status_code == 200, first.text
    pieces = first.iter_content(chunk_size=None)
    streamed = [next(pieces)]
    threads = [threading.Thread(target=one, args=(p,)) for p in PROMPTS[1:]]
    for t in threads:
        t.start()
    streamed.extend(pieces)
    for t in threads:
        t.join(timeout=120)
    assert len(streamed) > 1, "the answer came in pieces"
    assert b"".join(streamed).decode().startswith(expected[PROMPTS[0]])
    assert results == {p: expected[p] for p in PROMPTS[1:]}


def test_the_llm_metrics_of_rank_0_reach_prometheus(server: harness.Server) -> None:
    """Rank 0 schedules and answers, so its engine's metrics are the worker's: they reach
    /metrics (metrics_mode prometheus) as on one rank, the tokens counted as the answer reports."""
    key = '{model_name="tiny_pp"}'
    before = llm_series(server, "tiny_pp")
    r = generate(server, PROMPTS[2])
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]

    def delta(name: str) -> float:
        return llm_series(server, "tiny_pp").get(name, 0.0) - before.get(name, 0.0)

    harness.wait_for(lambda: delta(f"llm_e2e_request_latency_seconds_count{key}") == 1, 15, what="the LLM metrics")
    assert delta(f"llm_time_to_first_token_seconds_count{key}") == 1
    assert delta(f"llm_prompt_tokens_total{key}") == usage["prompt_tokens"]
    assert delta(f"llm_generation_tokens_total{key}") == usage["completion_tokens"] > 0


def test_cancelled_streams_free_their_slots_on_both_stages(server: harness.Server, expected) -> None:
    endless = [generate(server, p, stream=True, max_new_tokens=200, ignore_eos=True) for p in PROMPTS[:2]]
    for r in endless:  # both slots are taken
        assert next(r.iter_content(chunk_size=None))
    for r in endless:
        r.close()  # the clients go away: rank 0 cancels them and publishes the cancels to rank 1
    harness.wait_for(lambda: server.logs("model_log.log").count("cancelled (its client went away)") >= 2, 60,
                     what="rank 0 to cancel both sequences")
    # Were the rows not dropped on rank 1 too, its next forward would expect other shapes than
    # rank 0 sends, and this request would fail.
    again = generate(server, PROMPTS[2])
    assert again.status_code == 200, again.text
    assert again.json()["text"] == expected[PROMPTS[2]]


def test_a_rank_that_dies_fails_the_requests_in_flight(server: harness.Server, expected) -> None:
    before = ranks(server)
    streams = [generate(server, p, stream=True, max_new_tokens=200, ignore_eos=True) for p in PROMPTS[:2]]
    pieces = [r.iter_content(chunk_size=None) for r in streams]
    heads = [next(p) for p in pieces]  # both sequences are generating
    os.kill(before[1]["pid"], signal.SIGKILL)
    for head, rest in zip(heads, pieces, strict=True):
        body = (head + b"".join(rest)).decode(errors="replace")  # the error is the stream's last piece
        # Whichever notices first: the frontend (rank 1's process ended) or rank 0's step (its link
        # to rank 1 broke), the stream ends with a 500 naming what happened.
        error = json.loads(body[body.rindex('{\n  "code"'):])
        assert error["code"] == 500
        assert (("rank 1 of worker" in error["message"] and "died; torchrun is restarting the ranks" in
                 error["message"]) or "the pipeline broke while rank 0 was" in error["message"]), error
    old = {r["pid"] for r in before}
    harness.wait_for(lambda: all(r["state"] == "READY" and r["pid"] not in old for r in ranks(server)), 180,
                     interval=0.5, what="torchrun to restart both ranks")
    again = generate(server, PROMPTS[3])
    assert again.status_code == 200, again.text
    assert again.json()["text"] == expected[PROMPTS[3]]


PAGED_YAML = PP_YAML + """\
  paged_kv_cache: true
  block_size: 4
  kv_cache_memory_fraction: 0.001
"""


def test_two_pp_stages_on_the_paged_cache(tmp_path_factory: pytest.TempPathFactory, expected) -> None:
    """handler.paged_kv_cache with parallelType pp: each stage runs the paged engine over a pool of
    its own layer sized from the memory budget (the same block count on both stages), and the
    tokens are the unsplit model's, for prompts arriving while others run."""
    with llm_server(tmp_path_factory.mktemp("pp-paged"), "tiny_pp", PAGED_YAML) as paged:
        assert texts_at_once(lambda p: generate(paged, p), PROMPTS) == expected
        log = paged.logs("model_log.log")
        engines = re.findall(r"stage (\d)/2 \(decoder layers [\d-]+\) on cpu.*paged KV cache \((\d+) blocks of 4 tokens",
                             log)
        assert sorted(stage for stage, _ in engines) == ["1", "2"], log[-3000:]
        assert len({blocks for _, blocks in engines}) == 1, engines  # the MIN over the stages
