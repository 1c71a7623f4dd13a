"""The continuous-batching engine (ts/llm/engine/generation.py) against Hugging Face's own generate.

The model is a 2-layer Llama built from a config with seeded random weights and the tokenizer a
byte-level BPE trained locally (ts/testing/tiny_llm.py): no downloads. The weights use init std 0.2
instead of Hugging Face's 0.02 so the logits are spread out: with near-flat logits a greedy argmax
could be decided by float rounding, which differs between batch layouts. The comparison itself
is exact (equality of token ids), never a tolerance.
"""

from __future__ import annotations

import pytest
import torch
from llm_support import model_fixture, one_thread_fixture, reference, run, tok_fixture, tokens  # noqa: F401 - fixtures

from ts.llm.engine.generation import GenerationEngine
from ts.llm.engine.text import IncrementalText
from ts.llm.params import LLMRequestError, SamplingParams

PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog and then",
    "a",
    "Once upon a time there was a little robot who loved to count stars",
    "count: one, two",
    "Les modèles de langue",
    "Streaming sends every token to the client as soon as it is produced. The cache keeps",
]


def test_greedy_continuous_batching_equals_generate_alone(model, tok):
    """Mixed prompt lengths, arrivals while others run, early finishes, more requests than slots."""
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    lengths = [5, 20, 8, 3, 16, 12, 6]
    refs = [reference(model, x, n) for x, n in zip(ids, lengths, strict=True)]
    engine = GenerationEngine(model, tok, max_batch_size=3, max_tokens_per_step=128)
    arrivals: dict[int, list] = {}
    for i, (x, n) in enumerate(zip(ids, lengths, strict=True)):
        arrivals.setdefault(2 * i, []).append((f"s{i}", x, SamplingParams(max_new_tokens=n)))
    updates, stats = run(engine, arrivals)
    for i, ref in enumerate(refs):
        got = updates[f"s{i}"]
        assert tokens(got) == ref, f"prompt {i}"
        assert got[-1].finished and got[-1].finish_reason == "length"
        assert got[-1].completion_tokens == len(ref) and got[-1].prompt_tokens == len(ids[i])
        assert "".join(u.text_delta for u in got) == tok.decode(ref, skip_special_tokens=True)
        assert not any(u.finished for u in got[:-1])
    assert max(s.running for s in stats) == 3
    assert max(s.waiting for s in stats) > 0  # some waited for a slot


def test_chunked_prefill_and_token_budget(model, tok):
    """A prompt longer than the budget is prefilled over several steps; no step exceeds the budget."""
    ids = [tok(p)["input_ids"] for p in PROMPTS[-3:]]
    long_ids = tok(" ".join(PROMPTS))["input_ids"]
    assert len(long_ids) > 40
    prompts = ids + [long_ids]
    refs = [reference(model, x, 8) for x in prompts]
    engine = GenerationEngine(model, tok, max_batch_size=4, max_tokens_per_step=10)
    arrivals = {0: [(f"s{i}", x, SamplingParams(max_new_tokens=8)) for i, x in enumerate(prompts)]}
    updates, stats = run(engine, arrivals)
    for i, ref in enumerate(refs):
        assert tokens(updates[f"s{i}"]) == ref, f"prompt {i}"
    for s in stats:
        assert s.decode_tokens + s.prefill_tokens <= 10
    assert sum(s.prefill_tokens for s in stats) == sum(len(x) for x in prompts)
    long_steps = [s for s in stats if s.prefill_tokens and "s3" not in s.prefilled]
    assert len(long_steps) >= 4  # the long prompt took several chunks


def test_cancel_frees_slot_and_rows(model, tok):
    ids = [tok(p)["input_ids"] for p in PROMPTS[:4]]
    engine = GenerationEngine(model, tok, max_batch_size=2, max_tokens_per_step=64)
    for i, x in enumerate(ids[:3]):
        engine.add(f"s{i}", x, SamplingParams(max_new_tokens=12))
    collected: dict[str, list[int]] = {"s1": [], "s2": []}

    def step():
        ups = engine.step()
        for u in ups:
            if u.seq_id in collected:
                collected[u.seq_id] += u.new_token_ids
        return ups

    step()
    assert engine.num_running == 2 and engine.num_waiting == 1
    step()
    assert engine.cancel("s0") is True  # a running one, in the first row
    assert engine.cancel("s0") is False and engine.cancel("nope") is False
    ups = step()
    assert ("s0", "cancelled") in [(u.seq_id, u.finish_reason) for u in ups]
    assert engine.last_step.prefilled == ["s2"]  # the waiting one got the slot in this step
    engine.add("s3", ids[3], SamplingParams(max_new_tokens=5))
    assert engine.cancel("s3") is True  # a waiting one
    while engine.has_work():
        step()
    # the rows left after the cancel still decode exactly
    assert collected["s1"] == reference(model, ids[1], 12)
    assert collected["s2"] == reference(model, ids[2], 12)


def test_eos_and_max_new_tokens(model, tok):
    ids = tok(PROMPTS[1])["input_ids"]
    ref = reference(model, ids, 12)
    eos = ref[4]
    engine = GenerationEngine(model, tok, max_batch_size=2, eos_token_ids=[eos])
    res = engine.generate_all([("a", ids, SamplingParams(max_new_tokens=12)),
                               ("b", ids, SamplingParams(max_new_tokens=12, ignore_eos=True)),
                               ("c", ids, SamplingParams(max_new_tokens=3))])
    first = ref.index(eos)
    assert res["a"].token_ids == reference(model, ids, 12, eos=eos) == ref[:first + 1]
    assert res["a"].finish_reason == "stop" and res["a"].completion_tokens == first + 1
    assert res["b"].token_ids == ref and res["b"].finish_reason == "length"
    assert res["c"].token_ids == ref[:3] and res["c"].finish_reason == "length"
    assert res["c"].completion_tokens == 3 and res["c"].prompt_tokens == len(ids)


def test_stop_string_is_trimmed_and_never_streamed(model, tok):
    ids = tok(PROMPTS[3])["input_ids"]
    full = tok.decode(reference(model, ids, 30), skip_special_tokens=True)
    stop = full[len(full) // 2: len(full) // 2 + 3]
    engine = GenerationEngine(model, tok)
    engine.add("s", ids, SamplingParams(max_new_tokens=30, stop=["\x00never", stop]))
    ups = []
    while engine.has_work():
        ups += engine.step()
    text = "".join(u.text_delta for u in ups)
    assert text == full[:full.index(stop)]
    assert ups[-1].finish_reason == "stop" and ups[-1].finished
    assert ups[-1].completion_tokens < 30


def test_incremental_text_holds_back_partial_stop_and_utf8(tok):
    ids = tok("naïve 言語 model! stop here")["input_ids"][1:]
    inc = IncrementalText(tok, [tok.bos_token_id], stop=["stop"])
    pieces = [inc.push(t) for t in ids]
    assert "".join(pieces) == "naïve 言語 model! " and inc.stopped
    assert all("\ufffd" not in p for p in pieces)
    inc = IncrementalText(tok, [], stop=["xyz"])
    out = "".join(inc.push(t) for t in tok("abc xy")["input_ids"][1:])
    assert out + inc.finish() == "abc xy" and not inc.stopped


def test_incremental_text_calls_the_rust_decode_only_when_it_is_the_same_call(tok):
    """A fast tokenizer's decode is its Rust tokenizer's; a class that changes decode keeps its own."""
    import copy

    from ts.llm.engine.text import backend_decode

    def stream(tokenizer, ids: list[int]) -> str:
        inc = IncrementalText(tokenizer, [], None)
        return "".join(inc.push(t) for t in ids) + inc.finish()

    assert backend_decode(tok) is not None
    ids = tok("naïve model")["input_ids"][1:]
    assert stream(tok, ids) == tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    class Shouting(type(tok)):
        def decode(self, token_ids, **kwargs):
            return super().decode(token_ids, **kwargs).upper()

    loud = copy.copy(tok)
    loud.__class__ = Shouting
    assert backend_decode(loud) is None
    assert stream(loud, ids) == "NAÏVE MODEL"


def test_context_limit(model, tok):
    ids = tok(" ".join(PROMPTS))["input_ids"]
    engine = GenerationEngine(model, tok, max_context=32)
    with pytest.raises(LLMRequestError) as err:
        engine.add("a", ids[:32], SamplingParams())
    assert err.value.status == 400 and "max_context=32" in err.value.message and "32 tokens" in err.value.message
    assert err.value.param == "prompt" and err.value.code == "context_length_exceeded"
    engine.add("b", ids[:29], SamplingParams(max_new_tokens=10))
    ups = []
    while engine.has_work():
        ups += engine.step()
    assert ups[-1].finish_reason == "length" and ups[-1].completion_tokens == 3
    with pytest.raises(LLMRequestError, match="max_position_embeddings=256"):
        GenerationEngine(model, tok).add("c", (ids * 10)[:300], SamplingParams())
    with pytest.raises(ValueError, match="max_position_embeddings=256"):
        GenerationEngine(model, tok, max_context=1000)


def test_queue_full_is_503_with_retry(model, tok):
    engine = GenerationEngine(model, tok, max_batch_size=1, max_waiting=2)
    for i in range(3):  # the first takes the free slot at the next step: it does not wait
        engine.add(f"s{i}", [1, 5], SamplingParams())
    with pytest.raises(LLMRequestError) as err:
        engine.add("s3", [1, 5], SamplingParams())
    assert err.value.status == 503 and err.value.retry_after == 1 and str(err.value) == err.value.message
    assert "max_waiting=2" in err.value.message and "retry" in err.value.message
    assert err.value.to_openai()["error"]["type"] == "server_error"
    engine.step()  # one moves to running: still two wait
    with pytest.raises(LLMRequestError):
        engine.add("s3", [1, 5], SamplingParams())
    with pytest.raises(LLMRequestError) as err:
        engine.add("s2", [1, 5], SamplingParams())
    assert err.value.status == 409


@pytest.mark.parametrize(("clients", "refused"), [(5, 0), (40, 30)])
def test_requests_added_since_the_last_step_take_the_free_slots_before_counting_as_waiting(
        model, tok, clients, refused):
    """Issue 28: max_waiting 2 and 8 slots refused 2 of 5 (35 of 40) simultaneous requests; only
    those beyond the free slots wait, so 8 + 2 are taken."""
    engine = GenerationEngine(model, tok, max_batch_size=8, max_waiting=2)
    statuses = []
    for i in range(clients):
        try:
            engine.add(f"s{i}", [1, 5], SamplingParams(max_new_tokens=2))
            statuses.append(200)
        except LLMRequestError as exc:
            statuses.append(exc.status)
    assert statuses.count(503) == refused and len(statuses) - refused == min(clients, 10)
    engine.step()
    assert engine.num_running == min(clients, 8) and engine.num_waiting == min(max(clients - 8, 0), 2)


@pytest.mark.parametrize("values, param", [
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"max_new_tokens": 2.5}, "max_new_tokens"),
    ({"temperature": -1}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -2}, "top_k"),
    ({"seed": "x"}, "seed"),
    ({"stop": [""]}, "stop"),
    ({"stop": 3}, "stop"),
    ({"beam_width": 3}, "beam_width"),
])
def test_bad_parameters_are_400_naming_them(values, param):
    with pytest.raises(LLMRequestError) as err:
        SamplingParams.from_dict(values)
    assert err.value.status == 400 and err.value.param == param and param in err.value.message
    body = err.value.to_openai()["error"]
    assert body["type"] == "invalid_request_error" and body["param"] == param


def test_bad_prompts(model, tok):
    engine = GenerationEngine(model, tok)
    with pytest.raises(LLMRequestError, match="empty"):
        engine.add("a", [], SamplingParams())
    with pytest.raises(LLMRequestError, match="vocabulary"):
        engine.add("a", [1, 10**6], SamplingParams())
    with pytest.raises(ValueError, match="max_tokens_per_step"):
        GenerationEngine(model, tok, max_batch_size=8, max_tokens_per_step=4)


def test_sampling_is_seeded_per_request(model, tok):
    ids = tok(PROMPTS[0])["input_ids"]
    engine = GenerationEngine(model, tok, max_batch_size=4)
    p = {"max_new_tokens": 15, "temperature": 1.0, "top_p": 0.9, "top_k": 50}
    res = engine.generate_all([
        ("a", ids, SamplingParams(seed=7, **p)), ("b", ids, SamplingParams(seed=7, **p)),
        ("c", ids, SamplingParams(seed=8, **p)), ("g", ids, SamplingParams(max_new_tokens=15, top_k=1, temperature=0.7)),
        ("h", ids, SamplingParams(max_new_tokens=15, top_p=1e-6, temperature=1.5)),
    ])
    assert res["a"].token_ids == res["b"].token_ids != res["c"].token_ids
    alone = engine.generate_all([("a", ids, SamplingParams(seed=7, **p))])
    assert alone["a"].token_ids == res["a"].token_ids  # batch neighbours do not change a seeded stream
    assert res["g"].token_ids == res["h"].token_ids == reference(model, ids, 15)  # top_k=1, tiny top_p: greedy


def test_generate_all_reports_refusals(model, tok):
    engine = GenerationEngine(model, tok, max_batch_size=2, max_waiting=1)
    batch = [(f"s{i}", tok(p)["input_ids"], SamplingParams(max_new_tokens=4)) for i, p in enumerate(PROMPTS[:4])]
    batch.append(("bad", [], SamplingParams()))
    res = engine.generate_all(batch)
    assert res["bad"].error is not None and res["bad"].error.status == 400
    for i in range(4):  # more than max_waiting: generate_all feeds the queue as it drains
        assert res[f"s{i}"].error is None and len(res[f"s{i}"].token_ids) == 4
    assert not engine.has_work()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_greedy_equals_generate_on_cuda(tok):
    from ts.testing.tiny_llm import build_model

    model = build_model(tok).to("cuda")
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    refs = [reference(model, x, 12) for x in ids]
    engine = GenerationEngine(model, tok, max_batch_size=4, max_tokens_per_step=32)
    arrivals = {i: [(f"s{i}", x, SamplingParams(max_new_tokens=12))] for i, x in enumerate(ids)}
    arrivals[0].append(("sampled", ids[0], SamplingParams(max_new_tokens=12, temperature=1.0, seed=3)))
    updates, _ = run(engine, arrivals)
    for i, ref in enumerate(refs):
        assert tokens(updates[f"s{i}"]) == ref, f"prompt {i}"
    assert len(tokens(updates["sampled"])) == 12


def test_batch_cache_grows_past_its_first_capacity_and_rows_move(model, tok):
    """Sequences longer than the cache's first 64 columns, finishing out of order (the last row
    moves into each freed one), still decode exactly."""
    from ts.llm.engine.kvcache import INITIAL_COLUMNS

    long_ids = tok(" ".join(PROMPTS))["input_ids"]
    assert len(long_ids) + 30 > INITIAL_COLUMNS
    prompts = [tok(p)["input_ids"] for p in PROMPTS[:3]] + [long_ids]
    lengths = [30, 4, 9, 30]
    refs = [reference(model, x, n) for x, n in zip(prompts, lengths, strict=True)]
    engine = GenerationEngine(model, tok, max_batch_size=4, max_tokens_per_step=256)
    arrivals = {0: [(f"s{i}", x, SamplingParams(max_new_tokens=n))
                    for i, (x, n) in enumerate(zip(prompts, lengths, strict=True))]}
    updates, _ = run(engine, arrivals)
    for i, ref in enumerate(refs):
        assert tokens(updates[f"s{i}"]) == ref, f"prompt {i}"
