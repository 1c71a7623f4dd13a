"""Hostile and vLLM-specific request fields through LLMHandler (in process, the tiny Llama): each
refusal is a 400 naming the field and leaves the engine serving; vLLM's own fields that tserve
implements give vLLM's answers, the others are refused unless handler.ignore_vllm_fields."""

from __future__ import annotations

import json

import pytest
from llm_support import drain, model_dir_fixture, model_fixture, one_thread_fixture, tok_fixture  # noqa: F401 - fixtures

from ts.context import Context
from ts.llm.handler.llm_metrics import PROMPT_TOKENS, LLMMetrics
from ts.torch_handler.llm_handler import LLMHandler, LLMRequestError

OAI = "x-tserve-openai"
COMPLETIONS = {OAI: "completions"}
CHAT = {OAI: "chat.completions"}


def make_handler(model_dir, handler_cfg=None, batch_size=4) -> LLMHandler:
    ctx = Context("tiny", str(model_dir), {"model": {}}, batch_size, None, "test",
                  model_yaml_config={"handler": {"max_new_tokens": 6, "max_context": 128, "max_waiting": 8,
                                                 **(handler_cfg or {})}})
    h = LLMHandler()
    h.initialize(ctx)
    return h


@pytest.fixture(scope="module", params=[False, True], ids=["rectangle", "paged"])
def handler(model_dir, request):
    return make_handler(model_dir, {"paged_kv_cache": request.param})


def refused(h: LLMHandler, body: dict, headers: dict[str, str] = COMPLETIONS) -> LLMRequestError:
    with pytest.raises(LLMRequestError) as err:
        h.add_request("bad", json.dumps(body).encode(), headers)
    return err.value


def answer(h: LLMHandler, body: dict, headers: dict[str, str] = COMPLETIONS) -> dict:
    h.add_request("ok", json.dumps(body).encode(), headers)
    final = drain(h)["ok"][-1]
    assert final.status == 200, final.final
    return json.loads(final.final)


def still_serves(h: LLMHandler) -> None:
    assert answer(h, {"prompt": "Hello", "max_tokens": 2, "temperature": 0})["choices"][0]["finish_reason"]


@pytest.mark.parametrize("seed", [2**64, 2**63, -2**63 - 1, 10**30])
def test_a_seed_past_64_bits_is_a_400_naming_seed(handler, seed):
    err = refused(handler, {"prompt": "Hello", "max_tokens": 2, "seed": seed})
    assert err.status == 400 and err.param == "seed" and "64 bits" in err.message
    still_serves(handler)


def test_the_widest_seeds_are_served(handler):
    for seed in (2**63 - 1, -2**63):
        assert answer(handler, {"prompt": "Hello", "max_tokens": 2, "seed": seed, "n": 2})["choices"]


@pytest.mark.parametrize("field, value", [("n", 1000), ("n", 13), ("best_of", 1000)])
def test_more_sequences_than_can_ever_be_scheduled_is_a_400_naming_the_limit(handler, field, value):
    """max_batch_size 4, max_waiting 8: the paged cache serves n up to 12 in turns, the rectangle
    up to 4 together; more can never be scheduled, on an idle engine too (not a 503 forever)."""
    body = {"prompt": "Hello", "max_tokens": 2, field: value}
    err = refused(handler, body)
    assert err.status == 400 and err.param == "n" and "max_batch_size" in err.message, err.message
    still_serves(handler)


def test_more_prompts_than_can_ever_be_scheduled_is_a_400(handler):
    err = refused(handler, {"prompt": ["Hello"] * 13, "max_tokens": 2})
    assert err.status == 400 and err.param == "prompt" and "max_waiting" in err.message, err.message


@pytest.mark.parametrize("body, headers, param", [
    ({"prompt": "abc \ud800"}, COMPLETIONS, "prompt"),
    ({"prompt": ["ok", "x\udfff"]}, COMPLETIONS, "prompt"),
    ({"prompt": "abc", "stop": ["\ud800"]}, COMPLETIONS, "stop"),
    ({"messages": [{"role": "user", "content": "hi \udc00"}]}, CHAT, "messages"),
    ({"prompt": "abc \ud800"}, {}, "prompt"),
])
def test_a_lone_surrogate_is_a_400_naming_its_field(handler, body, headers, param):
    err = refused(handler, body, headers)
    assert err.status == 400 and err.param == param and "surrogate" in err.message
    still_serves(handler)


def test_a_surrogate_pair_is_text(handler):
    assert answer(handler, {"prompt": "smile \ud83d\ude00", "max_tokens": 2})["choices"]


def test_refused_prompts_are_not_counted_as_prompt_tokens():
    metrics = LLMMetrics(None, "tiny")
    metrics.arrived("refused", 1_000_001)
    metrics.finished("refused", "error")
    metrics.arrived("served", 7)
    metrics.tokens("served", 1)
    assert metrics.pending(PROMPT_TOKENS) == 7


def test_an_unsatisfiable_schema_ends_with_an_error_not_a_stop(handler):
    """A schema whose every object needs another one inside it has no finite JSON text: the grammar
    fails after "{", which must not be answered as a complete answer with finish_reason stop."""
    schema = {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
            "response_format": {"type": "json_schema", "json_schema": {"name": "loop", "schema": schema}}}
    handler.add_request("loop", json.dumps(body).encode(), CHAT)
    final = drain(handler)["loop"][-1]
    assert final.status == 400, final.final
    error = json.loads(final.final)["error"]
    assert error["param"] == "response_format" and "schema" in error["message"]
    still_serves(handler)


# ---------------------------------------------------------------------- vLLM's own fields
def test_stop_token_ids_leave_the_stop_tokens_text_out(handler):
    free = answer(handler, {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    ids = handler.tokenizer(free["choices"][0]["text"], add_special_tokens=False)["input_ids"]
    stop_id = ids[2]
    text_before = handler.tokenizer.decode(ids[:2])
    got = answer(handler, {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True,
                           "stop_token_ids": [stop_id]})["choices"][0]
    assert got["finish_reason"] == "stop" and got["text"] == text_before
    kept = answer(handler, {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True,
                            "stop_token_ids": [stop_id], "include_stop_str_in_output": True})["choices"][0]
    assert kept["text"] == handler.tokenizer.decode(ids[:3])


def test_include_stop_str_in_output_keeps_the_stop_string(handler):
    free = answer(handler, {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    text = free["choices"][0]["text"]
    stop = text[2:4]
    cut = answer(handler, {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True,
                           "stop": [stop]})["choices"][0]["text"]
    kept = answer(handler, {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True,
                            "stop": [stop], "include_stop_str_in_output": True})["choices"][0]["text"]
    assert cut == text[:text.index(stop)] and kept == cut + stop


def test_truncate_prompt_tokens_keeps_the_last_tokens(handler):
    long = "one two three four five six seven eight nine ten"
    n = len(handler.tokenizer(long)["input_ids"])
    got = answer(handler, {"prompt": long, "max_tokens": 2, "truncate_prompt_tokens": 3})
    assert got["usage"]["prompt_tokens"] == 3 < n
    err = refused(handler, {"prompt": long, "truncate_prompt_tokens": 0})
    assert err.param == "truncate_prompt_tokens"


def test_skip_special_tokens_false_shows_them(handler):
    eos = handler.tokenizer.eos_token
    body = {"prompt": "Hello", "max_tokens": 4, "temperature": 0, "logit_bias": {
        str(handler.tokenizer.convert_tokens_to_ids(eos)): 100}, "min_tokens": 0}
    shown = answer(handler, {**body, "skip_special_tokens": False, "ignore_eos": True})["choices"][0]["text"]
    hidden = answer(handler, {**body, "ignore_eos": True})["choices"][0]["text"]
    assert eos in shown and eos not in hidden


def test_guided_fields_constrain_the_output(handler):
    choice = answer(handler, {"prompt": "Hello", "max_tokens": 8, "guided_choice": ["yes", "no"]})
    assert choice["choices"][0]["text"] in ("yes", "no")
    regex = answer(handler, {"prompt": "Hello", "max_tokens": 8, "guided_regex": "[0-9]{3}"})
    assert len(regex["choices"][0]["text"]) == 3 and regex["choices"][0]["text"].isdigit()
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    got = answer(handler, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "guided_json": schema},
                 CHAT)
    message = got["choices"][0]["message"]["content"]
    if got["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(message)["x"], int)
    err = refused(handler, {"prompt": "Hello", "guided_regex": "[0-9]", "guided_choice": ["a"]})
    assert err.status == 400 and err.param in ("guided_regex", "guided_choice")


@pytest.mark.parametrize("field, value", [("use_beam_search", True), ("guided_grammar", "root ::= \"a\""),
                                          ("prompt_logprobs", 1), ("spaces_between_special_tokens", False)])
def test_vllm_fields_tserve_does_not_implement_are_refused_naming_them(handler, field, value):
    err = refused(handler, {"prompt": "Hello", "max_tokens": 2, field: value})
    assert err.status == 400 and err.param == field and "ignore_vllm_fields" in err.message


def test_ignore_vllm_fields_lets_them_pass(model_dir):
    h = make_handler(model_dir, {"ignore_vllm_fields": True})
    assert answer(h, {"prompt": "Hello", "max_tokens": 2, "use_beam_search": False, "prompt_logprobs": 1})["choices"]


@pytest.mark.parametrize("field", ["tool_choice", "response_format", "stop_token_ids", "messages"])
def test_an_error_quoting_a_giant_value_keeps_its_reason_phrase_short(handler, field):
    """The message is also the HTTP reason phrase: one line the client can read, however long the
    value it quotes (a 200 000-character status line is refused by HTTP clients)."""
    err = refused(handler, {"messages": [{"role": "user", "content": "hi"}], field: "x" * 200_000}, CHAT)
    event = handler.error_event("e", err)
    assert err.status == 400 and err.param == field
    assert len(event.message) <= 512 and "\n" not in event.message
