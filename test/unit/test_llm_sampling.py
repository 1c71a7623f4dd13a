"""The engine's sampling features (ts/llm/engine/sampling.py, the forks of ts/llm/engine/generation.py) against the
model's own logits computed by hand: n forks that prefill once, logprobs, penalties, min_p,
min_tokens, stop_token_ids, logit_bias."""

from __future__ import annotations

import pytest
import torch
from llm_support import (  # noqa: F401 - fixtures
    logits_after,
    model_fixture,
    one_thread_fixture,
    penalised_greedy,
    reference,
    run,
    tok_fixture,
    tokens,
)

from ts.llm.engine.generation import GenerationEngine
from ts.llm.params import SamplingParams

PROMPT = "Once upon a time there was"
LOGPROB_TOLERANCE = 1e-4  # float32 log_softmax of the same logits, batched differently


@pytest.mark.parametrize("fast_path", [None, False])
def test_n_forks_prefill_the_prompt_once_and_each_equals_generate(model, tok, fast_path):
    ids = tok(PROMPT)["input_ids"]
    ref = reference(model, ids, 8)
    other = tok("Hello")["input_ids"]
    engine = GenerationEngine(model, tok, max_batch_size=4, fast_path=fast_path)
    engine.add("a", ids, SamplingParams(max_new_tokens=8), ["a/1", "a/2"])
    assert engine.num_waiting == 0 and not engine.num_running  # 3 of the 4 free slots, none waits
    updates, stats = run(engine, {1: [("b", other, SamplingParams(max_new_tokens=4))]})
    assert stats[0].prefill_tokens == len(ids)  # one prefill for the three sequences
    assert sorted(stats[0].prefilled) == ["a", "a/1", "a/2"]
    for sid in ("a", "a/1", "a/2"):
        assert tokens(updates[sid]) == ref
    assert tokens(updates["b"]) == reference(model, other, 4)


def test_a_group_needs_its_slots_and_a_pending_fork_can_be_cancelled(model, tok):
    ids = tok(PROMPT)["input_ids"]
    engine = GenerationEngine(model, tok, max_batch_size=2)
    with pytest.raises(Exception, match="max_batch_size is 2"):
        engine.add("a", ids, SamplingParams(), ["a/1", "a/2"])
    engine.add("a", ids, SamplingParams(max_new_tokens=3), ["a/1"])
    engine.add("b", ids, SamplingParams(max_new_tokens=3))  # waits: the group takes both slots
    assert engine.num_waiting == 1
    engine.cancel("a/1")
    updates, _ = run(engine, {})
    assert [u.finish_reason for u in updates["a/1"]] == ["cancelled"]
    assert tokens(updates["a"]) == tokens(updates["b"]) == reference(model, ids, 3)


def test_logprobs_equal_log_softmax_of_the_models_logits(model, tok):
    ids = tok(PROMPT)["input_ids"]
    engine = GenerationEngine(model, tok, max_batch_size=2)
    greedy = SamplingParams(max_new_tokens=5, logprobs=3)
    drawn = SamplingParams(max_new_tokens=5, logprobs=0, temperature=0.8, seed=7)
    updates, _ = run(engine, {0: [("g", ids, greedy), ("s", ids, drawn)]})
    for sid, k in (("g", 3), ("s", 0)):
        out = tokens(updates[sid])
        entries = [lp for u in updates[sid] for lp in u.logprobs]
        assert [e.token for e in entries] == out
        for i, e in enumerate(entries):
            want = torch.log_softmax(logits_after(model, ids + out[:i]), dim=-1)
            assert abs(e.logprob - want[out[i]].item()) < LOGPROB_TOLERANCE
            top = want.topk(k)
            assert [t for t, _ in e.top] == top.indices.tolist()
            assert all(abs(v - w) < LOGPROB_TOLERANCE for (_, v), w in zip(e.top, top.values.tolist(), strict=True))


@pytest.mark.parametrize(("presence", "frequency", "repetition"), [(1.5, 0, 1), (0, 1.0, 1), (0, 0, 1.8),
                                                                   (0.5, 0.5, 1.3)])
def test_penalties_change_the_choice_as_computed_penalised_greedy(model, tok, presence, frequency, repetition):
    ids = tok("count: one, two, one, two")["input_ids"]
    want = penalised_greedy(model, ids, 10, presence, frequency, repetition)
    assert want != penalised_greedy(model, ids, 10, 0, 0, 1)  # they change the 10th token here (a repeat)
    engine = GenerationEngine(model, tok, max_batch_size=2)
    params = SamplingParams(max_new_tokens=10, ignore_eos=True, presence_penalty=presence,
                            frequency_penalty=frequency, repetition_penalty=repetition)
    plain = SamplingParams(max_new_tokens=10, ignore_eos=True)
    updates, _ = run(engine, {0: [("p", ids, params), ("plain", ids, plain)]})  # one batch, rows differ
    assert tokens(updates["p"]) == want
    assert tokens(updates["plain"]) == penalised_greedy(model, ids, 10, 0, 0, 1)


def test_logit_bias_min_tokens_and_stop_token_ids(model, tok):
    ids = tok(PROMPT)["input_ids"]
    eos = tok.eos_token_id
    ref = reference(model, ids, 6)
    stop_at = next(i for i, t in enumerate(ref) if t not in ref[:i])
    engine = GenerationEngine(model, tok, max_batch_size=4)
    updates, _ = run(engine, {0: [
        ("bias", ids, SamplingParams(max_new_tokens=8, logit_bias={eos: 100.0})),
        ("min", ids, SamplingParams(max_new_tokens=8, logit_bias={eos: 100.0}, min_tokens=4)),
        ("stop", ids, SamplingParams(max_new_tokens=8, stop_token_ids=[ref[stop_at]])),
        ("ban", ids, SamplingParams(max_new_tokens=3, logit_bias={ref[0]: -100.0})),
    ]})
    assert tokens(updates["bias"]) == [eos] and updates["bias"][-1].finish_reason == "stop"
    got = tokens(updates["min"])
    assert len(got) == 5 and eos not in got[:4] and got[4] == eos
    assert tokens(updates["stop"]) == ref[:stop_at + 1] and updates["stop"][-1].finish_reason == "stop"
    assert tokens(updates["ban"])[0] != ref[0]


def test_min_p_and_top_k_one_keep_only_the_most_likely_token(model, tok):
    ids = tok(PROMPT)["input_ids"]
    engine = GenerationEngine(model, tok, max_batch_size=3)
    updates, _ = run(engine, {0: [
        ("minp", ids, SamplingParams(max_new_tokens=6, temperature=1.5, min_p=1.0, seed=1)),
        ("topk", ids, SamplingParams(max_new_tokens=6, temperature=1.5, top_k=1, seed=2)),
        ("topp", ids, SamplingParams(max_new_tokens=6, temperature=1.5, top_p=1e-6, seed=3)),
    ]})
    ref = reference(model, ids, 6)
    assert tokens(updates["minp"]) == tokens(updates["topk"]) == tokens(updates["topp"]) == ref[:len(
        tokens(updates["minp"]))]


def test_seeded_forks_draw_differently_and_reproducibly(model, tok):
    ids = tok(PROMPT)["input_ids"]
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=11, ignore_eos=True)
    first = GenerationEngine(model, tok, max_batch_size=4)
    first.add("a", ids, params, ["a/1", "a/2"])
    a, _ = run(first, {})
    again = GenerationEngine(model, tok, max_batch_size=4)
    again.add("x", ids, SamplingParams(max_new_tokens=8, temperature=1.0, seed=12, ignore_eos=True))
    b, _ = run(again, {})
    assert tokens(a["a/1"]) == tokens(b["x"])  # fork k draws with seed + k
    assert len({tuple(tokens(a[s])) for s in ("a", "a/1", "a/2")}) > 1


SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "ok": {"type": "boolean"}},
          "required": ["name", "age", "ok"], "additionalProperties": False}


def test_json_schema_output_always_validates_and_unconstrained_would_not(model, tok):
    """50 seeded samples of the random-weight model under the schema's grammar: each parses and
    validates; the same seeds without the grammar give no JSON at all."""
    import json

    import jsonschema

    from ts.llm.api.structured import grammar_from_response_format

    grammar = grammar_from_response_format({"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}})
    ids = tok(PROMPT)["input_ids"]
    engine = GenerationEngine(model, tok, max_batch_size=10)
    batch = [(f"s{i}", ids, SamplingParams(max_new_tokens=64, temperature=1.0, seed=i, grammar=grammar))
             for i in range(50)]
    results = engine.generate_all(batch)
    for res in results.values():
        assert res.finish_reason == "stop"
        jsonschema.validate(json.loads(res.text), SCHEMA)
    plain = engine.generate_all([(f"p{i}", ids, SamplingParams(max_new_tokens=64, temperature=1.0, seed=i))
                                 for i in range(10)])
    assert not any(r.text.startswith("{") for r in plain.values())


def test_json_object_and_bad_response_formats(model, tok):
    import json

    from ts.llm.api.structured import grammar_from_response_format
    from ts.llm.params import LLMRequestError

    assert grammar_from_response_format({"type": "text"}) is None
    grammar = grammar_from_response_format({"type": "json_object"})
    engine = GenerationEngine(model, tok, max_batch_size=2)
    res = engine.generate_all([("o", tok(PROMPT)["input_ids"], SamplingParams(max_new_tokens=200, grammar=grammar))])
    assert isinstance(json.loads(res["o"].text), dict)  # greedy too
    for bad in ({"type": "yaml"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": 3}}):
        with pytest.raises(LLMRequestError, match="response_format"):
            grammar_from_response_format(bad)
    with pytest.raises(LLMRequestError, match="cannot be used"):
        engine.add("x", [1, 5], SamplingParams(grammar='{"grammars": [{"json_schema": {"type": "nonsense"}}]}'))


def test_the_paged_engine_serves_n_and_logprobs_too(model, tok):
    """With the paged KV cache the forks are sequences of their own whose prompt blocks come from
    the prefix cache; greedy tokens and logprobs are the rectangle engine's."""
    from ts.llm.engine.paged.scheduler import paged_engine

    ids = tok(PROMPT)["input_ids"]
    engine = paged_engine(model, tok, max_batch_size=4)
    engine.add("a", ids, SamplingParams(max_new_tokens=6, logprobs=1), ["a/1", "a/2"])
    updates, _ = run(engine, {})
    ref = reference(model, ids, 6)
    for sid in ("a", "a/1", "a/2"):
        assert tokens(updates[sid]) == ref
        entries = [lp for u in updates[sid] for lp in u.logprobs]
        want = torch.log_softmax(logits_after(model, ids), dim=-1)
        assert entries[0].token == ref[0] and abs(entries[0].logprob - want[ref[0]].item()) < LOGPROB_TOLERANCE


def test_auto_tool_choice_reads_hermes_calls_and_leaves_text_alone() -> None:
    from ts.llm.api.tools import tool_policy

    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    policy = tool_policy({"tools": tools})
    assert policy is not None and policy.mode == "auto" and policy.grammar() is None
    calls = policy.calls('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>\n'
                         '<tool_call>{"name": "add", "arguments": "{\\"a\\": 2}"}</tool_call>')
    assert calls is not None and [c["function"]["arguments"] for c in calls] == ['{"a": 1}', '{"a": 2}']
    assert policy.calls('{"name": "add", "arguments": {}}') is not None  # one bare call
    assert policy.calls("The answer is 3.") is None
    assert policy.calls('{"name": "sub", "arguments": {}}') is None  # not a given tool: text
    assert policy.calls('<tool_call>{"name": "add"</tool_call>') is None  # cut short: text
    assert not tool_policy({"tools": tools, "tool_choice": "none"}).parses_calls  # none: the text is the answer
    assert tool_policy({"messages": []}) is None
