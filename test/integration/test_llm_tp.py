"""The LLM handler on two tensor-parallel torchrun ranks (gloo on CPU) with continuous batching:
rank 0 schedules, rank 1 replays each step; the tokens equal greedy ``generate`` of the unsplit
model, for prompts arriving while others run; a cancelled stream leaves both ranks in step."""

from __future__ import annotations

import pytest
import requests
from llm_support import generate as llm_generate
from llm_support import llm_server, texts_at_once

import harness

pytestmark = pytest.mark.slow

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
    with llm_server(tmp_path_factory.mktemp("tp"), "tiny_tp", TP_YAML) as s:
        yield s


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """Each prompt's greedy continuation by Hugging Face's generate, alone (no server)."""
    from llm_support import greedy_texts

    return greedy_texts(PROMPTS, NEW_TOKENS)


def generate(server: harness.Server, prompt: str, **kw) -> requests.Response:
    return llm_generate(server, "tiny_tp", prompt, NEW_TOKENS, **kw)


def test_two_tp_ranks_give_the_unsplit_models_greedy_tokens(server: harness.Server, expected) -> None:
    d = requests.get(f"{server.management_url}/models/tiny_tp", timeout=30).json()[0]
    assert len(d["workers"][0]["ranks"]) == 2
    assert texts_at_once(lambda p: generate(server, p), PROMPTS, pause_after=2) == expected


def test_a_cancelled_stream_keeps_the_ranks_in_step(server: harness.Server, expected) -> None:
    r = generate(server, PROMPTS[0], stream=True, max_new_tokens=200, ignore_eos=True)
    assert next(r.iter_content(chunk_size=None))
    r.close()  # the client goes away: rank 0 cancels it, rank 1 replays the cancel
    again = generate(server, PROMPTS[2])
    assert again.status_code == 200, again.text
    assert again.json()["text"] == expected[PROMPTS[2]]
