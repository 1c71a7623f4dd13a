"""The generation engine across pipeline stages (ts/llm/engine/pipeline_parallel.py), without the server.

Three torchrun ranks (gloo) split a 4-layer tiny Llama into stages of 1, 1 and 2 layers and run
continuous batching (2 slots for 3 prompts, so one joins when another leaves; a token budget
that prefills the long prompt in chunks): each prompt's tokens equal Hugging Face's greedy
``generate`` run alone on the unsplit model. The load-time errors are checked in this process.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch
from llm_support import one_thread_fixture, reference, tok_fixture  # noqa: F401 - fixtures
from safetensors import safe_open

from ts.handler_utils.distributed.config import ModelConfigError
from ts.handler_utils.distributed.pipelining import stage_bounds
from ts.llm.engine.pipeline_parallel import PipelineStage, load_stage
from ts.testing.tiny_llm import build_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "large_models"))

import local_check  # noqa: E402

PROMPTS = ["Once upon a time", "a", "the quick brown fox jumps over the lazy dog"]
NEW_TOKENS = 6
LAYERS = 4


def test_stage_bounds_are_contiguous_and_even() -> None:
    assert stage_bounds(4, 3) == [(0, 1), (1, 2), (2, 4)]
    assert stage_bounds(2, 2) == [(0, 1), (1, 2)]
    assert stage_bounds(32, 4) == [(0, 8), (8, 16), (16, 24), (24, 32)]


@pytest.mark.slow
def test_three_stages_give_the_unsplit_models_greedy_tokens(tmp_path: Path, tok) -> None:
    out = tmp_path / "out.json"
    script = [str(ROOT / "test" / "support" / "llm_pipeline_ranks.py"), "--layers", str(LAYERS),
              "--new-tokens", str(NEW_TOKENS), "--max-batch-size", "2", "--max-tokens-per-step", "6",
              "--output", str(out), *PROMPTS]
    code, logs = local_check.run_ranks(script, tmp_path, nproc=3, timeout=240)
    assert code == 0 and out.is_file(), logs[-6000:]
    result = json.loads(out.read_text())
    assert len(tok(PROMPTS[2])["input_ids"]) > 6, "the long prompt is prefilled in chunks"
    whole = build_model(tok, num_layers=LAYERS)
    assert result["tokens"] == {p: reference(whole, tok(p)["input_ids"], NEW_TOKENS) for p in PROMPTS}
    ids = tok(PROMPTS[0])["input_ids"]
    for entries in result["forked"].values():  # n=2 with logprobs=2, from the last stage to rank 0
        assert [e[0] for e in entries] == result["tokens"][PROMPTS[0]]
        for i, (token, logprob, top) in enumerate(entries):
            with torch.inference_mode():
                want = torch.log_softmax(whole(torch.tensor([ids + [e[0] for e in entries[:i]]])).logits[0, -1], -1)
            assert abs(logprob - want[token].item()) < 1e-4
            assert [t for t, _ in top] == want.topk(2).indices.tolist()
    assert sorted(result["forked"]) == ["n", "n/1"]
    stages = result["stages"]
    assert [s["layers"] for s in stages] == [[0, 1], [1, 2], [2, 4]]
    assert [s["cache_layers"] for s in stages] == [1, 1, 2], "each stage caches its own layers only"
    assert sum(s["parameters"] for s in stages) == sum(p.numel() for p in whole.parameters()), \
        "each weight is held by exactly one stage"


@pytest.mark.slow
def test_two_stages_on_the_paged_cache_give_greedy_tokens_with_preemption_and_prefix_hits(tmp_path: Path, tok) -> None:
    """Two stages, each with a 16-block pool of its own layers: three sequences that together
    need more (preemption by recompute on both stages alike) and two prompts sharing a long
    prefix (prefix hits); every prompt's tokens equal the unsplit model's greedy generate."""
    shared = " ".join(["the quick brown fox jumps over the lazy dog"] * 3)
    prompts = [shared + " once", shared + " and then", PROMPTS[0]]
    out = tmp_path / "out.json"
    script = [str(ROOT / "test" / "support" / "llm_pipeline_ranks.py"), "--layers", str(LAYERS),
              "--new-tokens", str(NEW_TOKENS), "--max-batch-size", "3", "--max-tokens-per-step", "64",
              "--paged-blocks", "16", "--block-size", "4", "--output", str(out), *prompts]
    code, logs = local_check.run_ranks(script, tmp_path, nproc=2, timeout=240)
    assert code == 0 and out.is_file(), logs[-6000:]
    result = json.loads(out.read_text())
    whole = build_model(tok, num_layers=LAYERS)
    assert result["tokens"] == {p: reference(whole, tok(p)["input_ids"], NEW_TOKENS) for p in prompts}
    stages = result["stages"]
    assert [s["cache_layers"] for s in stages] == [2, 2], "each stage's pool holds its own layers only"
    assert stages[0]["preemptions"] > 0, "the pool forced sequences out and back"
    assert len({(s["preemptions"], s["prefix_hits"]) for s in stages}) == 1, "every stage ran the same schedule"
    assert stages[0]["prefix_hits"] > 0, "the second prompt found the shared prefix's blocks"


@pytest.mark.parametrize("tied", [False, True], ids=["own-head", "tied-head"])
def test_each_stage_reads_only_its_own_weights_from_the_checkpoint(tmp_path: Path, tok, tied: bool) -> None:
    whole = build_model(tok, num_layers=3)
    if tied:  # the saved checkpoint then has no lm_head.weight: the last stage reads the embeddings
        whole.config.tie_word_embeddings = True
        whole.tie_weights()
    whole.save_pretrained(tmp_path)
    assert ("lm_head.weight" in safe_open(str(tmp_path / "model.safetensors"), "pt").keys()) is not tied
    weights = dict(whole.named_parameters(remove_duplicate=False))
    held: list[str] = []
    for rank, (start, _) in enumerate(stage_bounds(3, 2)):
        stage = load_stage(str(tmp_path), torch.float32, False, rank, 2, torch.device("cpu"))
        for name, param in stage.model.named_parameters():
            # the stage numbers its layers from 0; the checkpoint from the model's first layer
            name = re.sub(r"^model\.layers\.(\d+)\.", lambda m, s=start: f"model.layers.{s + int(m[1])}.", name)
            assert torch.equal(param, weights[name]), name
            held.append(name)
    assert sorted(held) == sorted(weights), "every weight is on exactly one stage"


def test_fewer_layers_than_stages_is_refused_naming_the_fix(tok) -> None:
    with pytest.raises(ModelConfigError, match=r"2 decoder layers into 3 pipeline stages.*parallelLevel to at most 2"):
        PipelineStage(build_model(tok), 0, 3, "cpu")


@pytest.mark.parametrize("kind", ["gpt2", "granite"])
def test_an_architecture_it_does_not_split_is_refused_naming_the_fix(kind: str) -> None:
    # GPT-2 has no .layers; Granite has them but scales the embeddings inside its forward
    from transformers import GPT2Config, GPT2LMHeadModel, GraniteConfig, GraniteForCausalLM

    model = (GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=50, n_positions=32))
             if kind == "gpt2" else
             GraniteForCausalLM(GraniteConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                              num_attention_heads=2, num_key_value_heads=2, vocab_size=50)))
    with pytest.raises(ModelConfigError, match=rf"cannot split \w+ \(model_type {kind}\) into pipeline stages: "
                       r"it splits the decoder layers of llama, .*serve this model with parallelType tp"):
        PipelineStage(model, 0, 2, "cpu")
