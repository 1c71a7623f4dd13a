"""The engine's fast forward (ts/llm/engine/fastpath) against Hugging Face's own generate, per family.

Each supported family (Llama, Mistral without a sliding window, Qwen2 with its q/k/v biases) is
built tiny from a config with seeded random weights (init std 0.2, as ts/testing/tiny_llm.py explains);
greedy tokens through the engine on the fast path must equal ``generate`` run alone for each
prompt, exactly, with mixed prompt lengths, sequences joining and leaving, a prompt prefilled in
chunks, a cache that grows past its first columns, and a cancel.
"""

from __future__ import annotations

import pytest
import torch
from llm_support import model_fixture, one_thread_fixture, reference, run, tok_fixture, tokens  # noqa: F401 - fixtures
from test_llm_engine import PROMPTS as ENGINE_PROMPTS

from ts.llm.engine.fastpath import choose_forward
from ts.llm.engine.fastpath.prepack import PackedLinear
from ts.llm.engine.generation import GenerationEngine
from ts.llm.params import SamplingParams

PROMPTS = ENGINE_PROMPTS[:5]  # the engine tests' mixed lengths, without the non-ASCII ones
LONG = ("Streaming sends every token to the client as soon as it is produced. The cache keeps the keys "
        "and values of earlier tokens, so that each step computes attention for the newest token only.")


def build(family: str, tok):
    """A 2-layer model of ``family`` with grouped-query attention and seeded std-0.2 weights."""
    import transformers

    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  initializer_range=0.2, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    config, cls = {
        "llama": (lambda: transformers.LlamaConfig(**common), transformers.LlamaForCausalLM),
        "mistral": (lambda: transformers.MistralConfig(sliding_window=None, **common), transformers.MistralForCausalLM),
        "qwen2": (lambda: transformers.Qwen2Config(use_sliding_window=False, **common), transformers.Qwen2ForCausalLM),
    }[family]
    torch.manual_seed(1)
    model = cls(config()).to(torch.float32).eval()
    with torch.no_grad():  # Hugging Face initialises biases to zero: make Qwen2's count
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0.0, 0.2)
    return model


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2"])
def test_fast_path_gives_generates_greedy_tokens(family, tok):
    model = build(family, tok)
    ids = [tok(p)["input_ids"] for p in PROMPTS] + [tok(LONG)["input_ids"]]
    lengths = [6, 20, 9, 4, 14, 40]
    refs = [reference(model, x, n) for x, n in zip(ids, lengths, strict=True)]
    engine = GenerationEngine(model, tok, max_batch_size=3, max_tokens_per_step=16)
    assert "fast forward" in engine.forward_path
    # three at once (the long one is prefilled in chunks of the 16-token budget), the rest join
    # while those run; "gone" is cancelled while it decodes
    arrivals = {0: [(f"s{i}", ids[i], SamplingParams(max_new_tokens=lengths[i])) for i in (5, 0, 1)],
                1: [("gone", ids[3], SamplingParams(max_new_tokens=30))],
                3: [(f"s{i}", ids[i], SamplingParams(max_new_tokens=lengths[i])) for i in (2, 3, 4)]}
    updates, stats = run(engine, arrivals, cancels={8: ["gone"]})
    for i, ref in enumerate(refs):
        assert tokens(updates[f"s{i}"]) == ref, f"{family} prompt {i}"
    assert updates["gone"][-1].finish_reason == "cancelled" and len(tokens(updates["gone"])) < 30
    assert len(ids[5]) + lengths[5] > 64  # the batch cache grew past its first 64 columns
    assert sum(1 for s in stats if s.prefill_tokens and "s5" not in s.prefilled) >= 3  # chunked
    assert max(s.running for s in stats) == 3
    # the model itself still generates the same on its re-pointed (shared) weights
    assert reference(model, ids[1], lengths[1]) == refs[1]


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_prompts_prefilled_together_run_packed_and_exact(family, tok):
    """Prompts of 1 to 40-odd tokens prefilled in one forward (packed into one row, padding left
    out), then decoded together, give generate's tokens; the cache rows hold each prompt's keys."""
    model = build(family, tok)
    ids = [tok(p)["input_ids"] for p in [PROMPTS[2], LONG, PROMPTS[0], PROMPTS[3]]]
    refs = [reference(model, x, 10) for x in ids]
    engine = GenerationEngine(model, tok, max_batch_size=4, max_tokens_per_step=256)
    updates, stats = run(engine, {0: [(f"s{i}", x, SamplingParams(max_new_tokens=10)) for i, x in enumerate(ids)]})
    assert stats[0].prefilled == ["s0", "s1", "s2", "s3"]  # one group, one forward
    for i, ref in enumerate(refs):
        assert tokens(updates[f"s{i}"]) == ref, f"{family} prompt {i}"


def test_fused_weights_are_views_of_one_tensor(model, tok):
    """q/k/v (and gate/up) become views of one concatenation: the weights are not held twice."""
    GenerationEngine(model, tok, max_batch_size=2)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    ptr = attn.q_proj.weight.untyped_storage().data_ptr()
    assert attn.k_proj.weight.untyped_storage().data_ptr() == ptr
    assert attn.v_proj.weight.untyped_storage().data_ptr() == ptr
    assert mlp.up_proj.weight.untyped_storage().data_ptr() == mlp.gate_proj.weight.untyped_storage().data_ptr()


def test_fast_forward_logits_match_the_models_forward(tok):
    """Prefill logits of every position and the cached keys agree with Hugging Face's forward to
    float rounding (the greedy tests above check the tokens exactly)."""
    from transformers import DynamicCache

    model = build("qwen2", tok)
    fast, _ = choose_forward(model, None)
    ids = torch.tensor([tok(LONG)["input_ids"]])
    with torch.inference_mode():
        theirs, ours = DynamicCache(config=model.config), DynamicCache(config=model.config)
        want = model(input_ids=ids, cache=theirs, use_cache=True).logits[0]
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        got = fast(ids, positions, ours, last=[3])
        assert torch.allclose(got[0], want[3], atol=1e-4, rtol=1e-4)
        for a, b in zip(theirs.layers, ours.layers, strict=True):
            assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)


def test_the_switch_and_unsupported_models(model, tok):
    from transformers import GPT2Config, GPT2LMHeadModel

    off = GenerationEngine(model, tok, max_batch_size=2, fast_path=False)
    assert off.forward_path == "Hugging Face's forward (fast_path: false)"
    ids = tok(PROMPTS[1])["input_ids"]
    updates, _ = run(off, {0: [("a", ids, SamplingParams(max_new_tokens=8))]})
    assert tokens(updates["a"]) == reference(model, ids, 8)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2)).eval()
    auto = GenerationEngine(gpt2, tok, max_batch_size=2)
    assert auto.forward_path.startswith("Hugging Face's forward (no fast path: GPT2LMHeadModel (transformers.models")
    with pytest.raises(ValueError, match="fast_path is true, but .* GPT2LMHeadModel .* is not one of transformers"):
        GenerationEngine(gpt2, tok, max_batch_size=2, fast_path=True)


def test_models_the_fast_forward_cannot_run_exactly_are_named(tok):
    from ts.llm.engine.fastpath.llama import unsupported_reason

    model = build("llama", tok)
    assert unsupported_reason(model) is None
    model.model.layers[1].self_attn.q_norm = torch.nn.Identity()  # a part it would not compute
    assert unsupported_reason(model) == "decoder layer 1 is not the plain Llama layout (self_attn.q_norm)"
    del model.model.layers[1].self_attn.q_norm
    model.model.rotary_emb.rope_type = "dynamic"
    assert unsupported_reason(model) == "rope_type 'dynamic' rescales with the sequence length"


def recording_forwards(engine) -> list[list[str]]:
    """Each fast forward's parts by kind, in the order the engine's steps ran them."""
    calls: list[list[str]] = []
    forward = engine.runner.fast_forward.forward

    def record(parts):
        calls.append([type(p).__name__ for p in parts])
        return forward(parts)

    engine.runner.fast_forward.forward = record
    return calls


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_step_is_one_forward_over_decode_rows_and_new_prompts(family, tok):
    """Prompts that arrive while others decode, a long prompt chunked beside them and a cancel:
    every step is one forward carrying the decode rows and the step's prompt tokens together,
    and every sequence still gets generate's tokens."""
    model = build(family, tok)
    ids = [tok(p)["input_ids"] for p in PROMPTS] + [tok(LONG)["input_ids"]]
    lengths = [12, 20, 9, 6, 14, 10]
    refs = [reference(model, x, n) for x, n in zip(ids, lengths, strict=True)]
    engine = GenerationEngine(model, tok, max_batch_size=4, max_tokens_per_step=20)
    forwards = recording_forwards(engine)
    arrivals = {0: [("s0", ids[0], SamplingParams(max_new_tokens=lengths[0])),
                    ("gone", ids[3], SamplingParams(max_new_tokens=30))],
                2: [("s5", ids[5], SamplingParams(max_new_tokens=lengths[5])),   # chunked: longer than 20 - 2
                    ("s1", ids[1], SamplingParams(max_new_tokens=lengths[1]))],
                4: [(f"s{i}", ids[i], SamplingParams(max_new_tokens=lengths[i])) for i in (2, 3, 4)]}
    updates, stats = run(engine, arrivals, cancels={6: ["gone"]})
    for i, ref in enumerate(refs):
        assert tokens(updates[f"s{i}"]) == ref, f"{family} prompt {i}"
    assert updates["gone"][-1].finish_reason == "cancelled"
    assert len(forwards) == sum(1 for s in stats if s.decode_tokens or s.prefill_tokens)  # one per step
    kinds = {tuple(f) for f in forwards}
    assert ("DecodeRows", "PromptChunk") in kinds  # the long prompt's chunks beside the decode rows
    assert ("DecodeRows", "PackedPrompts") in kinds or ("DecodeRows", "PromptChunk", "PackedPrompts") in kinds
    assert sum(1 for s in stats if s.prefill_tokens and "s5" not in s.prefilled and s.decode_tokens) >= 2
    for s in stats:
        assert s.decode_tokens + s.prefill_tokens <= 20


def test_a_row_ending_by_length_gives_its_slot_to_a_prompt_in_the_same_step(model, tok):
    """A sequence whose next token is its last (max_new_tokens) leaves in the step that samples
    it; a waiting prompt is prefilled in that same step, in the same forward."""
    ids = [tok(p)["input_ids"] for p in PROMPTS[:2]]
    engine = GenerationEngine(model, tok, max_batch_size=1, max_tokens_per_step=64)
    forwards = recording_forwards(engine)
    updates, stats = run(engine, {0: [("a", ids[0], SamplingParams(max_new_tokens=3)),
                                      ("b", ids[1], SamplingParams(max_new_tokens=4))]})
    # step 0 prefills a (first token), step 1 decodes its 2nd, step 2 its 3rd (last) with b's prompt
    assert [s.prefilled for s in stats[:3]] == [["a"], [], ["b"]]
    assert forwards[2] == ["DecodeRows", "PackedPrompts"] and stats[2].running == 1
    assert tokens(updates["a"]) == reference(model, ids[0], 3)
    assert tokens(updates["b"]) == reference(model, ids[1], 4)


def test_a_mixed_steps_time_splits_into_decode_and_the_prompts_own_work(model, tok):
    """The prompt tokens' matmuls and attention (timed inside the shared forward) and their first
    tokens count as prefill, the rest of the step as decode; the two add up to no more than the
    step; the step's rows go through each linear layer as one matmul (``F.linear``'s bits), the
    prompt rows' share of its time counted as theirs."""
    import time

    ids = [tok(p)["input_ids"] for p in PROMPTS[:2]]
    engine = GenerationEngine(model, tok, max_batch_size=2, max_tokens_per_step=64)
    engine.add("a", ids[0], SamplingParams(max_new_tokens=8))
    engine.step()
    engine.add("b", ids[1], SamplingParams(max_new_tokens=8))
    started = time.perf_counter()
    engine.step()
    took = time.perf_counter() - started
    stats = engine.last_step
    assert stats.decode_tokens == 1 and stats.prefilled == ["b"]
    prompts_s = engine.runner.fast_forward.rest_s
    assert prompts_s > 0
    assert stats.prefill_s > prompts_s and stats.decode_s > 0
    assert stats.decode_s + stats.prefill_s <= took
    fast = engine.runner.fast_forward
    x, w, b = torch.randn(9, 64), torch.randn(96, 64), torch.randn(96)
    for bias in (None, b):
        fast.rest_s = 0.0
        assert torch.equal(fast._linear(x, PackedLinear(w, bias), 1), torch.nn.functional.linear(x, w, bias))
        assert fast.rest_s > 0  # the 8 prompt rows' share of the matmul
