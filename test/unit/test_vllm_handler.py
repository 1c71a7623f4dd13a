"""vllm_handler: a clear error without vLLM, and — against a stand-in ``vllm`` module with vLLM's
LLMEngine API, backed by tserve's own engine — the same answers as llm_handler, streamed and not,
with cancellation mapped to abort_request."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field

import pytest
from llm_support import model_dir_fixture, model_fixture, one_thread_fixture, tok_fixture  # noqa: F401 - fixtures

from ts.context import Context
from ts.handler_utils.distributed.config import ModelConfigError
from ts.llm.engine.generation import GenerationEngine
from ts.llm.params import LLMRequestError, SamplingParams
from ts.torch_handler.llm_handler import LLMHandler
from ts.torch_handler.vllm_handler import VLLMHandler


def context(model_dir, cfg) -> Context:
    return Context("tiny", str(model_dir), {"model": {}}, 4, None, "test", model_yaml_config={"handler": cfg})


def test_without_vllm_loading_says_how_to_install_it_or_what_to_use(model_dir, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(ModelConfigError, match=r"pip install vllm.*llm_handler"):
        VLLMHandler().initialize(context(model_dir, {}))


@dataclass
class _Completion:
    text: str = ""
    token_ids: list = field(default_factory=list)
    finish_reason: str | None = None
    index: int = 0
    logprobs: list | None = None


@dataclass
class _Logprob:
    logprob: float


@dataclass
class _Output:
    request_id: str
    outputs: list
    finished: bool


def fake_vllm(model, tok) -> types.ModuleType:
    """vLLM's LLMEngine surface (add_request/step/abort_request/has_unfinished_requests), run by
    tserve's GenerationEngine, so the handler's mapping is what is under test."""
    mod = types.ModuleType("vllm")
    seen: dict = {}

    class EngineArgs:
        def __init__(self, model: str, **kw) -> None:
            seen["args"] = {"model": model, **kw}

    class Engine:
        def __init__(self) -> None:
            self.inner = GenerationEngine(model, tok, max_batch_size=seen["args"]["max_num_seqs"])
            self.model_config = types.SimpleNamespace(max_model_len=seen["args"].get("max_model_len", 2048))
            self.done: dict[str, _Completion] = {}

        @classmethod
        def from_engine_args(cls, args):
            return cls()

        def get_tokenizer(self):
            return tok

        def add_request(self, request_id, prompt, params) -> None:
            seen.setdefault("params", []).append(params)
            forks = [f"{request_id}#{k}" for k in range(1, params["n"])]
            for k, sid in enumerate([request_id, *forks]):
                self.done[sid] = _Completion(index=k, logprobs=None if params["logprobs"] is None else [])
            self.inner.add(request_id, prompt["prompt_token_ids"], SamplingParams(
                max_new_tokens=params["max_tokens"], temperature=params["temperature"], stop=params["stop"] or [],
                logprobs=params["logprobs"]), forks)

        def abort_request(self, request_id) -> None:
            seen.setdefault("aborted", []).append(request_id)
            self.inner.cancel(request_id)

        def has_unfinished_requests(self) -> bool:
            return self.inner.has_work()

        def step(self):
            outs = []
            for u in self.inner.step():  # one output per sequence (vLLM's has all of a request's)
                c = self.done[u.seq_id]
                c.text += u.text_delta
                c.token_ids += u.new_token_ids
                c.finish_reason = u.finish_reason
                if c.logprobs is not None:  # vLLM's form: {token id: Logprob} with the chosen token and the top k
                    c.logprobs += [{e.token: _Logprob(e.logprob), **{t: _Logprob(v) for t, v in e.top}}
                                   for e in u.logprobs or []]
                done = _Completion(c.text, list(c.token_ids), c.finish_reason, c.index,
                                   None if c.logprobs is None else list(c.logprobs))
                rid = u.seq_id.split("#")[0]
                over = all(d.finish_reason for k, d in self.done.items() if k.split("#")[0] == rid)
                outs.append(_Output(rid, [done], over))  # finished: all its sequences are
            return outs

    mod.EngineArgs = EngineArgs
    mod.LLMEngine = Engine
    mod.SamplingParams = lambda **kw: kw
    mod.seen = seen
    return mod


def run(h, bodies: dict[str, dict], headers=None) -> dict[str, bytes]:
    out: dict[str, bytes] = {rid: b"" for rid in bodies}
    for rid, body in bodies.items():
        h.add_request(rid, json.dumps(body).encode(), headers or {})
    while h.has_work():
        for ev in h.step():
            out[ev.request_id] += (ev.chunk or b"") + (ev.final or b"")
    return out


def test_answers_equal_llm_handlers_streamed_and_not(model_dir, model, tok, monkeypatch) -> None:
    vllm = fake_vllm(model, tok)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    v = VLLMHandler()
    v.initialize(context(model_dir, {"vllm_engine_config": {"max_model_len": 256}}))
    assert vllm.seen["args"]["max_num_seqs"] == 4 and vllm.seen["args"]["max_model_len"] == 256
    ref = LLMHandler()
    ref.initialize(context(model_dir, {}))
    bodies = {"a": {"prompt": "Once upon a time", "max_new_tokens": 8},
              "b": {"prompt": "the quick brown fox", "max_new_tokens": 5, "stream": True}}
    got, want = run(v, bodies), run(ref, bodies)
    assert json.loads(got["a"])["text"] == json.loads(want["a"])["text"]
    assert got["b"] == want["b"]
    chat = {"c": {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True}}
    raw = run(v, chat, {"x-tserve-openai": "chat.completions"})["c"].decode()
    assert raw.endswith("data: [DONE]\n\n") and '"role":"assistant"' in raw


def test_cancel_aborts_the_request_in_vllm(model_dir, model, tok, monkeypatch) -> None:
    vllm = fake_vllm(model, tok)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    v = VLLMHandler()
    v.initialize(context(model_dir, {}))
    v.add_request("x", json.dumps({"prompt": "a", "max_new_tokens": 50}).encode(), {})
    v.step()
    v.cancel("x")
    assert vllm.seen["aborted"] == ["x"]
    while v.has_work():
        assert all(ev.request_id != "x" for ev in v.step())


def test_n_logprobs_and_sampling_options_map_onto_vllm(model_dir, model, tok, monkeypatch) -> None:
    vllm = fake_vllm(model, tok)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    v = VLLMHandler()
    v.initialize(context(model_dir, {}))
    ref = LLMHandler()  # the fake vLLM runs the rectangle's numerics: its logprobs compare bit for bit
    ref.initialize(context(model_dir, {"paged_kv_cache": False}))
    body = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "n": 2, "logprobs": 1,
            "presence_penalty": 0.5, "min_p": 0.1, "stop_token_ids": [2], "logit_bias": {"5": 1.0}}
    headers = {"x-tserve-openai": "completions"}
    got = json.loads(run(v, {"a": body}, headers)["a"])
    want = json.loads(run(ref, {"a": {**body, "presence_penalty": 0, "min_p": 0, "stop_token_ids": [],
                                      "logit_bias": {}}}, headers)["a"])
    assert got["choices"] == want["choices"] and len(got["choices"]) == 2
    params = vllm.seen["params"][-1]
    assert params["n"] == 2 and params["logprobs"] == 1 and params["presence_penalty"] == 0.5
    assert params["min_p"] == 0.1 and params["stop_token_ids"] == [2] and params["logit_bias"] == {5: 1.0}


@pytest.mark.parametrize("field, value", [("n", 5), ("best_of", 1000), ("n", 2**64)])
def test_more_sequences_of_a_prompt_than_vllm_ever_schedules_is_a_400_naming_the_limit(
        model_dir, model, tok, monkeypatch, field, value) -> None:
    """max_num_seqs 4 (the batch size): vLLM schedules a prompt's n sequences together, so n = 5 would wait
    forever and n = 2**64 made the handler loop making choices; both are refused while parsing, as by llm_handler."""
    vllm = fake_vllm(model, tok)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    v = VLLMHandler()
    v.initialize(context(model_dir, {}))
    with pytest.raises(LLMRequestError) as err:
        v.add_request("bad", json.dumps({"prompt": "Hello", "max_tokens": 2, field: value}).encode(),
                      {"x-tserve-openai": "completions"})
    assert err.value.status == 400 and err.value.param == "n", err.value.message
    assert "max_num_seqs = 4" in err.value.message and "never be scheduled" in err.value.message
    assert "params" not in vllm.seen  # nothing reached vLLM
    # several prompts of n <= max_num_seqs each are queued apart by vLLM: served
    got = json.loads(run(v, {"ok": {"prompt": ["Hello"] * 3, "max_tokens": 2, "n": 4}},
                         {"x-tserve-openai": "completions"})["ok"])
    assert len(got["choices"]) == 12


def test_a_prompt_text_too_long_for_max_model_len_is_refused_before_tokenizing(model_dir, model, tok,
                                                                               monkeypatch) -> None:
    vllm = fake_vllm(model, tok)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    v = VLLMHandler()
    v.initialize(context(model_dir, {"vllm_engine_config": {"max_model_len": 64}}))
    longest = max(len(t) for t in tok.get_vocab())
    with pytest.raises(LLMRequestError) as err:
        v.add_request("bad", json.dumps({"prompt": "a" * (64 * longest + 1), "max_new_tokens": 2}).encode(), {})
    assert err.value.status == 400 and err.value.param == "prompt", err.value.message
    assert err.value.code == "context_length_exceeded" and f"at most {64 * longest}" in err.value.message
    assert "params" not in vllm.seen  # nothing reached vLLM
