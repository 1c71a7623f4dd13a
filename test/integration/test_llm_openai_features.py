"""The OpenAI request features of llm_handler through a real server with the official ``openai``
client (examples/llm's tiny random-weight Llama): n, best_of, logprobs, penalties, min_tokens,
stop_token_ids, logit_bias, echo, lists of prompts, unknown fields, the served model's name, the
max_tokens defaults, and tool calls in the chat history -- streamed and not."""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from pathlib import Path

import pytest
import requests
import torch
from llm_support import llm_series

import harness

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Once upon a time"
LOGPROB_TOLERANCE = 1e-4  # float32 log_softmax of the same logits in another batch layout


@pytest.fixture(scope="module")
def local():
    """The served model and tokenizer, rebuilt here (same seed) to compute what the server must give."""
    from ts.testing.tiny_llm import build_model, build_tokenizer

    tok = build_tokenizer()
    return build_model(tok), tok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    spec = importlib.util.spec_from_file_location("llm_build_mar", ROOT / "examples" / "llm" / "build_mar.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(store)
    with harness.Server(store, {"metrics_mode": "prometheus"}, env={"HF_HUB_OFFLINE": "1"}) as s:
        r = s.register("tiny_llm.mar", initial_workers=1, synchronous="true")
        assert r.status_code == 200, r.text
        yield s


@pytest.fixture(scope="module")
def client(server: harness.Server):
    return openai.OpenAI(base_url=f"{server.inference_url}/v1", api_key="unused", max_retries=0)


def greedy(local, ids: list[int], n: int) -> list[int]:
    from llm_support import reference

    return reference(local[0], ids, n)


def text_of(local, ids: list[int]) -> str:
    return local[1].decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


def test_n_three_greedy_choices_equal_generate_streamed_and_not(client, local) -> None:
    want = text_of(local, greedy(local, local[1](PROMPT)["input_ids"], 10))
    done = client.completions.create(model="tiny_llm", prompt=PROMPT, max_tokens=10, temperature=0, n=3)
    assert [(c.index, c.text) for c in done.choices] == [(i, want) for i in range(3)]
    assert done.usage.completion_tokens == 3 * len(greedy(local, local[1](PROMPT)["input_ids"], 10))
    texts = {0: "", 1: "", 2: ""}
    for chunk in client.chat.completions.create(model="tiny_llm", messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=6, temperature=0, n=3, stream=True):
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
    chat_ids = local[1](local[1].apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                                     add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    assert set(texts.values()) == {text_of(local, greedy(local, chat_ids, 6))}


def test_logprobs_equal_log_softmax_of_the_models_logits(client, local) -> None:
    from llm_support import logits_after

    model, tok = local
    ids = tok(PROMPT)["input_ids"]
    done = client.completions.create(model="tiny_llm", prompt=PROMPT, max_tokens=5, temperature=0, logprobs=2)
    lp = done.choices[0].logprobs
    out = greedy(local, ids, 5)
    assert lp.tokens == [tok.decode([t]) for t in out]
    for i, token in enumerate(out):
        want = torch.log_softmax(logits_after(model, ids + out[:i]), dim=-1)
        assert abs(lp.token_logprobs[i] - want[token].item()) < LOGPROB_TOLERANCE
        top = want.topk(2)
        assert set(lp.top_logprobs[i]) >= {tok.decode([t]) for t in top.indices.tolist()}
    chat = [{"role": "user", "content": "Hello"}]
    chat_ids = tok(tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"]
    content = []
    for chunk in client.chat.completions.create(model="tiny_llm", messages=chat, max_tokens=4, temperature=0,
                                                logprobs=True, top_logprobs=3, stream=True):
        for c in chunk.choices:
            content += (c.logprobs.content if c.logprobs else None) or []
    out = greedy(local, chat_ids, 4)
    assert len(content) == len(out)
    for i, entry in enumerate(content):
        want = torch.log_softmax(logits_after(model, chat_ids + out[:i]), dim=-1)
        assert entry.token == tok.decode([out[i]]) and abs(entry.logprob - want[out[i]].item()) < LOGPROB_TOLERANCE
        assert [t.logprob for t in entry.top_logprobs] == pytest.approx(want.topk(3).values.tolist(),
                                                                        abs=LOGPROB_TOLERANCE)


def test_penalties_and_token_controls(client, local) -> None:
    from llm_support import penalised_greedy

    model, tok = local
    prompt = "count: one, two, one, two"
    ids = tok(prompt)["input_ids"]
    want = penalised_greedy(model, ids, 10, presence=0.5, frequency=0.5, repetition=1.3)
    plain = penalised_greedy(model, ids, 10, presence=0, frequency=0, repetition=1)
    assert want != plain  # the 10th token would repeat one: the penalties change it
    done = client.completions.create(model="tiny_llm", prompt=prompt, max_tokens=10, temperature=0,
                                     presence_penalty=0.5, frequency_penalty=0.5,
                                     extra_body={"repetition_penalty": 1.3, "ignore_eos": True})
    assert done.choices[0].text == text_of(local, want)
    eos = tok.eos_token_id
    forced = client.completions.create(model="tiny_llm", prompt=prompt, max_tokens=8, temperature=0,
                                       logit_bias={str(eos): 100}, extra_body={"min_tokens": 3})
    assert forced.usage.completion_tokens == 4 and forced.choices[0].finish_reason == "stop"
    ref = greedy(local, ids, 6)
    stop_at = next(i for i, t in enumerate(ref) if t not in ref[:i] and i > 0)
    stopped = client.completions.create(model="tiny_llm", prompt=prompt, max_tokens=8, temperature=0,
                                        extra_body={"stop_token_ids": [ref[stop_at]], "min_p": 0.1})
    assert stopped.usage.completion_tokens == stop_at + 1 and stopped.choices[0].finish_reason == "stop"


def test_a_list_of_prompts_with_echo_and_best_of(client, local) -> None:
    tok = local[1]
    prompts = [PROMPT, "the quick brown fox"]
    done = client.completions.create(model="tiny_llm", prompt=prompts, max_tokens=4, temperature=0, echo=True)
    assert [c.text for c in done.choices] == [p + text_of(local, greedy(local, tok(p)["input_ids"], 4)) for p in prompts]
    assert done.usage.prompt_tokens == sum(len(tok(p)["input_ids"]) for p in prompts)
    # best_of: the n=3 sequences with the same seed, the one with the highest cumulative logprob wins
    three = client.completions.create(model="tiny_llm", prompt=PROMPT, max_tokens=6, temperature=1, seed=5, n=3,
                                      logprobs=0)
    best = max(three.choices, key=lambda c: sum(c.logprobs.token_logprobs))
    one = client.completions.create(model="tiny_llm", prompt=PROMPT, max_tokens=6, temperature=1, seed=5,
                                    best_of=3)
    assert len(one.choices) == 1 and one.choices[0].text == best.text and one.choices[0].logprobs is None


def test_unknown_fields_are_ignored_with_a_warning(client, server: harness.Server) -> None:
    done = client.completions.create(model="tiny_llm", prompt=PROMPT, max_tokens=2, extra_body={"frobnicate": 1})
    assert done.choices[0].text is not None
    logs = harness.wait_for(lambda: "frobnicate" in server.logs("model_log.log") and server.logs("model_log.log"),
                            10, what="the warning line")
    assert "ignored unknown fields frobnicate" in logs


def test_answers_name_the_model_that_served_them(server: harness.Server) -> None:
    path = openai.OpenAI(base_url=f"{server.inference_url}/predictions/tiny_llm/v1", api_key="unused",
                         max_retries=0)
    done = path.completions.create(model="not-this-one", prompt=PROMPT, max_tokens=2)
    assert done.model == "tiny_llm"
    chunks = list(path.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}],
                                               max_tokens=2, stream=True))
    assert {c.model for c in chunks} == {"tiny_llm"}


def test_max_tokens_omitted_follows_openai(client, local) -> None:
    done = client.completions.create(model="tiny_llm", prompt=PROMPT, extra_body={"ignore_eos": True})
    assert done.usage.completion_tokens == 16  # OpenAI's completions default
    chat = client.chat.completions.create(model="tiny_llm", messages=[{"role": "user", "content": "Hi"}],
                                          extra_body={"ignore_eos": True})
    assert chat.choices[0].finish_reason == "length"
    assert chat.usage.prompt_tokens + chat.usage.completion_tokens == 256  # chat: up to the context


def test_tool_calls_and_results_in_the_history_reach_the_prompt(client, local) -> None:
    tok = local[1]
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 2})}}
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "1+2?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "3"}]
    done = client.chat.completions.create(model="tiny_llm", messages=messages, tools=tools, tool_choice="none",
                                          max_tokens=3, temperature=0)
    rendered = tok.apply_chat_template(
        [messages[0], {"role": "assistant", "content": "", "tool_calls": [
            {**call, "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]}, messages[2]],
        tools=tools, tokenize=False, add_generation_prompt=True)
    assert '<call>add {"a": 1, "b": 2}</call>' in rendered and "[call_1] 3" in rendered
    ids = tok(rendered, add_special_tokens=False)["input_ids"]
    assert done.usage.prompt_tokens == len(ids)
    assert done.choices[0].message.content == text_of(local, greedy(local, ids, 3))
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        client.chat.completions.create(model="tiny_llm", messages=messages, tools=tools, max_tokens=3,
                                       tool_choice={"type": "function", "function": {"name": "nosuch"}})


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}}


def test_a_named_tool_choice_gives_a_call_whose_arguments_follow_the_schema(client) -> None:
    """A random-weight model never writes a call by itself: the grammar makes every answer one."""
    jsonschema = pytest.importorskip("jsonschema")
    for seed in range(3):
        done = client.chat.completions.create(
            model="tiny_llm", messages=[{"role": "user", "content": "Weather in Paris for 2 days?"}],
            tools=[WEATHER, TIME], tool_choice={"type": "function", "function": {"name": "get_weather"}},
            max_tokens=120, seed=seed, temperature=1.0)
        choice = done.choices[0]
        assert choice.finish_reason == "stop" and choice.message.content is None, choice
        (call,) = choice.message.tool_calls
        assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


def test_required_tool_choice_streams_one_call_and_the_result_goes_back(client) -> None:
    messages = [{"role": "user", "content": "What time is it?"}]
    stream = client.chat.completions.create(model="tiny_llm", messages=messages, tools=[WEATHER, TIME],
                                            tool_choice="required", max_tokens=120, seed=7, stream=True)
    calls: dict[int, dict] = {}
    finish = None
    for chunk in stream:
        delta = chunk.choices[0].delta
        assert not delta.content  # a call is held back until it is whole
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": tc.id, "name": tc.function.name, "arguments": ""})
            slot["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and len(calls) == 1
    call = calls[0]
    assert call["name"] in ("get_weather", "get_time")
    json.loads(call["arguments"])
    # the round trip: the call and its result in the history reach the chat template
    history = [*messages, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "12:00"}]
    done = client.chat.completions.create(model="tiny_llm", messages=history, tools=[WEATHER, TIME],
                                          tool_choice="none", max_tokens=3, temperature=0)
    assert done.choices[0].message.content is not None and not done.choices[0].message.tool_calls


def test_llm_metrics_on_prometheus_match_the_usage_answers_reported(client, server: harness.Server) -> None:
    key = '{model_name="tiny_llm"}'
    before = llm_series(server, "tiny_llm")
    usages: list = []

    def one(i: int) -> None:
        body = dict(model="tiny_llm", prompt=PROMPT * (1 + i % 3), max_tokens=3 + i, temperature=0)
        if i % 2:
            chunks = list(client.completions.create(**body, stream=True, stream_options={"include_usage": True}))
            usages.append(chunks[-1].usage)
        else:
            usages.append(client.completions.create(**body).usage)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(usages) == 6
    want_prompt = sum(u.prompt_tokens for u in usages)
    want_generated = sum(u.completion_tokens for u in usages)

    def delta(name: str) -> float:
        return llm_series(server, "tiny_llm").get(name, 0.0) - before.get(name, 0.0)

    harness.wait_for(lambda: delta(f"llm_time_to_first_token_seconds_count{key}") == 6
                     and delta(f"llm_e2e_request_latency_seconds_count{key}") == 6, 15, what="the LLM metrics")
    assert delta(f"llm_prompt_tokens_total{key}") == want_prompt
    assert delta(f"llm_generation_tokens_total{key}") == want_generated
    finished = sum(delta(k) for k in llm_series(server, "tiny_llm") if k.startswith("llm_requests_finished_total"))
    assert finished == 6
    now = llm_series(server, "tiny_llm")
    assert f"llm_num_requests_running{key}" in now and f"llm_kv_cache_usage_ratio{key}" in now
    # Prometheus naming: promtool check metrics finds nothing in the llm_* series (snake_case names
    # and labels, counters end in _total, durations in base units with their suffix)
    text = requests.get(f"{server.metrics_url}/metrics", timeout=10).text
    assert [p for p in harness.promtool_problems(text) if p.startswith("llm_")] == []
    types = dict(re.findall(r"^# TYPE (llm_\w+) (\w+)$", text, re.M))
    assert len(types) == 10
    for name, kind in types.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert name.endswith("_total") == (kind == "counter")
        assert kind != "histogram" or name.endswith("_seconds")


SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "ok": {"type": "boolean"}},
          "required": ["name", "age", "ok"], "additionalProperties": False}


def test_json_schema_answers_always_validate_streamed_and_not(client) -> None:
    """50 seeded samples (10 requests, n=5) of a random-weight model that never writes JSON alone."""
    jsonschema = pytest.importorskip("jsonschema")
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    messages = [{"role": "user", "content": "Who?"}]
    texts = []
    for seed in range(10):
        if seed % 2:
            done = client.chat.completions.create(model="tiny_llm", messages=messages, response_format=fmt, n=5,
                                                  seed=seed, temperature=1, max_tokens=64)
            texts += [c.message.content for c in done.choices]
        else:
            parts = {i: "" for i in range(5)}
            for chunk in client.chat.completions.create(model="tiny_llm", messages=messages, response_format=fmt,
                                                        n=5, seed=seed, temperature=1, max_tokens=64, stream=True):
                for c in chunk.choices:
                    parts[c.index] += c.delta.content or ""
            texts += parts.values()
    assert len(texts) == 50
    for text in texts:
        jsonschema.validate(json.loads(text), SCHEMA)
    plain = client.chat.completions.create(model="tiny_llm", messages=messages, n=5, seed=1, temperature=1,
                                           max_tokens=64)
    assert not any((c.message.content or "").startswith("{") for c in plain.choices)
    obj = client.completions.create(model="tiny_llm", prompt=PROMPT, max_tokens=100, temperature=0,
                                    extra_body={"response_format": {"type": "json_object"}})
    assert isinstance(json.loads(obj.choices[0].text), dict)
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.chat.completions.create(model="tiny_llm", messages=messages, response_format={"type": "yaml"})
