"""LLMHandler: loading from a save_pretrained folder, the continuous-batching interface
(add_request / cancel / has_work / step) and the plain batch path, in the three request forms."""

from __future__ import annotations

import json
import sys

import pytest
from llm_support import (  # noqa: F401 - fixtures
    drain,
    model_dir_fixture,
    model_fixture,
    one_thread_fixture,
    reference,
    tok_fixture,
)

from ts.context import Context, RequestProcessor
from ts.handler_utils.distributed.config import ModelConfigError
from ts.llm.engine.generation import GenerationEngine
from ts.model_settings import ModelSettings
from ts.torch_handler.llm_handler import LLMHandler, LLMRequestError

OAI = "x-tserve-openai"


def make_handler(model_dir, handler_cfg=None, batch_size=4) -> LLMHandler:
    ctx = Context("tiny", str(model_dir), {"model": {}}, batch_size, None, "test",
                  model_yaml_config={"handler": handler_cfg or {}})
    h = LLMHandler()
    h.initialize(ctx)
    return h


@pytest.fixture(scope="module")
def handler(model_dir):
    # the rectangle cache, pinned: these tests' engine behaviour (n's batch slots) is its own; the paged
    # cache, this model's default on a CPU, has test_llm_paged.py
    return make_handler(model_dir, {"max_new_tokens": 6, "max_context": 128, "paged_kv_cache": False})


def sse(raw: bytes) -> list:
    text = raw.decode("utf-8")
    assert text.endswith("data: [DONE]\n\n")
    parts = text.split("\n\n")[:-1]
    assert all(p.startswith("data: ") and "\n" not in p for p in parts)
    return [json.loads(p[6:]) for p in parts[:-1]]


def greedy_text(h: LLMHandler, ids: list[int], n: int) -> tuple[str, list[int]]:
    out = reference(h.model, ids, n)
    return h.tokenizer.decode(out, skip_special_tokens=True), out


def test_initialize_finds_the_folder_and_validates(model_dir, handler):
    assert handler.engine.max_batch_size == 4  # batchSize
    assert handler.engine.max_context == 128
    assert handler.engine.max_tokens_per_step == 512
    h = make_handler(model_dir, {"model_path": "tiny-llama", "max_batch_size": 2, "max_tokens_per_step": 16})
    assert (h.engine.max_batch_size, h.engine.max_tokens_per_step) == (2, 16)
    with pytest.raises(ModelConfigError, match="handler.max_batch_size"):
        make_handler(model_dir, {"max_batch_size": 0})
    with pytest.raises(ModelConfigError, match="handler.dtype"):
        make_handler(model_dir, {"dtype": "int3"})
    with pytest.raises(ModelConfigError, match="model_path"):
        make_handler(model_dir, {"model_path": "nowhere"})
    with pytest.raises(ModelConfigError, match="handler.fast_path"):
        make_handler(model_dir, {"fast_path": "sometimes"})
    assert "fast forward" in handler.engine.forward_path  # the tiny Llama: the fast path by default
    assert make_handler(model_dir, {"fast_path": False}).engine.forward_path.startswith("Hugging Face's")


def test_torchserve_form(handler):
    h = handler
    ids = h.tokenizer("Hello world")["input_ids"]
    text, out = greedy_text(h, ids, 8)
    h.add_request("a", json.dumps({"prompt": "Hello world", "max_new_tokens": 8}).encode(), {})
    h.add_request("b", json.dumps({"prompt": "Hello world", "max_new_tokens": 8, "stream": True}).encode(), {})
    h.add_request("c", b"Hello world", {})  # a plain-text prompt, handler.max_new_tokens
    events = drain(h)
    (final,) = events["a"]
    assert final.chunk is None and final.status == 200 and final.content_type == "application/json"
    assert json.loads(final.final) == {"text": text, "finish_reason": "length",
                                       "usage": {"prompt_tokens": len(ids), "completion_tokens": 8,
                                                 "total_tokens": len(ids) + 8}}
    stream = events["b"]
    assert all(e.chunk for e in stream[:-1]) and stream[-1].final is not None and len(stream) > 2
    assert b"".join(e.chunk or e.final for e in stream).decode() == text
    assert {e.content_type for e in stream} == {"text/plain; charset=utf-8"}
    assert json.loads(events["c"][0].final)["text"] == greedy_text(h, ids, 6)[0]


def test_stream_hint_header_makes_stream_the_default(handler):
    h = handler
    body = json.dumps({"prompt": "Hello world", "max_new_tokens": 5}).encode()
    h.add_request("hinted", body, {"x-tserve-stream": "true"})
    h.add_request("asked-not", json.dumps({"prompt": "Hello world", "max_new_tokens": 5, "stream": False}).encode(),
                  {"x-tserve-stream": "true"})
    events = drain(h)
    assert len(events["hinted"]) > 1 and events["hinted"][0].chunk is not None
    (whole,) = events["asked-not"]
    assert json.loads(whole.final)["text"] == b"".join(e.chunk or e.final for e in events["hinted"]).decode()


def test_oip_generate_form(handler):
    h = handler
    ids = h.tokenizer("Once upon a time")["input_ids"]
    text, _ = greedy_text(h, ids, 7)
    body = json.dumps({"text_input": "Once upon a time", "parameters": {"max_tokens": 7, "temperature": 0}}).encode()
    h.add_request("g", body, {OAI: "generate"})
    h.add_request("gs", body, {OAI: "generate", "x-tserve-stream": "true"})
    events = drain(h)
    (final,) = events["g"]
    assert json.loads(final.final) == {"text_output": text, "model_name": h.model_name, "details": {
        "finish_reason": "length", "prompt_tokens": len(ids), "completion_tokens": 7, "total_tokens": len(ids) + 7}}
    raw = b"".join(e.chunk or e.final for e in events["gs"]).decode()
    assert {e.content_type for e in events["gs"]} == {"text/event-stream"}
    parts = [json.loads(p[len("data: "):]) for p in raw.split("\n\n")[:-1]]
    assert "".join(p["text_output"] for p in parts) == text
    assert [p["done"] for p in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1]["details"] == {"finish_reason": "length"}


@pytest.mark.parametrize(("body", "fragment"), [
    ({"text_input": "hi", "parameters": {"beams": 2}}, "'beams'"),
    ({"text_input": "hi", "prompt": "x"}, "'prompt'"),
    ({"parameters": {}}, "text_input is required"),
    ({"text_input": "hi", "parameters": {"best_of": 3}}, "best_of=3"),
    ({"text_input": "hi", "parameters": {"max_tokens": 0}}, "max_tokens must be at least 1"),
])
def test_oip_generate_errors_are_422_with_an_error_field(handler, body, fragment):
    with pytest.raises(LLMRequestError) as err:
        handler.add_request("e", json.dumps(body).encode(), {OAI: "generate"})
    event = handler.error_event("e", err.value)
    assert event.status == 422 and json.loads(event.final) == {"error": err.value.message}
    assert fragment in err.value.message
    assert not handler.has_work()


def test_openai_completions(handler):
    h = handler
    ids = h.tokenizer("Once upon a time")["input_ids"]
    text, _ = greedy_text(h, ids, 7)
    req = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 7, "temperature": 0, "user": "u1"}
    h.add_request("x", json.dumps(req).encode(), {OAI: "completions"})
    h.add_request("y", json.dumps({**req, "stream": True, "stream_options": {"include_usage": True}}).encode(),
                  {"X-Tserve-OpenAI": "completions"})
    events = drain(h)
    body = json.loads(events["x"][0].final)
    assert body["object"] == "text_completion" and body["id"] == "cmpl-x" and body["model"] == "tiny"
    assert body["choices"] == [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}]
    assert body["usage"] == {"prompt_tokens": len(ids), "completion_tokens": 7, "total_tokens": len(ids) + 7}
    stream = events["y"]
    assert {e.content_type for e in stream} == {"text/event-stream"}
    chunks = sse(b"".join(e.chunk or e.final for e in stream))
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == text
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 7
    assert all(c["object"] == "text_completion" and c["id"] == "cmpl-y" for c in chunks)
    # token-id prompts are accepted too
    h.add_request("z", json.dumps({"prompt": ids, "max_tokens": 7, "temperature": 0}).encode(), {OAI: "completions"})
    assert json.loads(drain(h)["z"][0].final)["choices"][0]["text"] == text


def test_openai_chat(handler):
    h = handler
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    rendered = h.tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hi"}],
                                               tokenize=False, add_generation_prompt=True)
    ids = h.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert ids[0] == h.tokenizer.bos_token_id and ids.count(h.tokenizer.bos_token_id) == 1
    text, _ = greedy_text(h, ids, 5)
    req = {"model": "tiny", "messages": messages, "max_completion_tokens": 5, "temperature": 0}
    h.add_request("c1", json.dumps(req).encode(), {OAI: "chat.completions"})
    h.add_request("c2", json.dumps({**req, "stream": True}).encode(), {OAI: "chat.completions"})
    events = drain(h)
    body = json.loads(events["c1"][0].final)
    assert body["object"] == "chat.completion" and body["id"] == "chatcmpl-c1"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": text}
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["prompt_tokens"] == len(ids)
    chunks = sse(b"".join(e.chunk or e.final for e in events["c2"]))
    assert events["c2"][0].chunk.startswith(b"data: ")  # streamed before the end
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == text
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}


@pytest.mark.parametrize("kind, body, status, param, fragment", [
    ("completions", {"prompt": "hi", "n": 3, "best_of": 2}, 400, "best_of", "at least n"),
    ("completions", {"prompt": "hi", "best_of": 2, "stream": True}, 400, "best_of", "cannot be streamed"),
    ("completions", {"prompt": "hi", "n": 0}, 400, "n", "at least 1"),
    ("completions", {"prompt": "hi", "n": 5}, 400, "n", "max_batch_size is 4"),
    ("completions", {"prompt": "hi", "logprobs": 21}, 400, "logprobs", "between 0 and 20"),
    ("completions", {"prompt": "hi", "echo": True, "logprobs": 1}, 400, "echo", "echo with logprobs"),
    ("completions", {"prompt": "hi", "logit_bias": {"100000": 5}}, 400, "logit_bias", "outside the vocabulary"),
    ("completions", {"prompt": "hi", "logit_bias": {"5": 101}}, 400, "logit_bias", "between -100 and 100"),
    ("completions", {"prompt": "hi", "presence_penalty": 3}, 400, "presence_penalty", "between -2 and 2"),
    ("completions", {"prompt": "hi", "repetition_penalty": 0}, 400, "repetition_penalty", "> 0"),
    ("completions", {"prompt": "hi", "min_p": 2}, 400, "min_p", "[0, 1]"),
    ("completions", {"prompt": "hi", "min_tokens": 9, "max_tokens": 4}, 400, "min_tokens", "between 0 and max_tokens"),
    ("completions", {"prompt": "hi", "stop_token_ids": ["x"]}, 400, "stop_token_ids", "list of token ids"),
    ("chat.completions", {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, 400, "top_logprobs",
     "logprobs: true"),
    ("chat.completions", {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, 400,
     "tools", "tools[0] must be"),
    ("chat.completions", {"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, 400,
     "tool_choice", "needs tools"),
    ("chat.completions", {"messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {
            "name": "g"}}}, 400, "tool_choice", "not in tools"),
    ("chat.completions", {"messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "f"}}], "tool_choice": "required",
        "response_format": {"type": "json_object"}}, 400, "tool_choice", "cannot be combined"),
    ("chat.completions", {"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]}]}, 400,
     "messages", "tool_calls[0]"),
    ("completions", {"prompt": "hi", "max_tokens": 0}, 400, "max_tokens", "max_tokens must be at least 1"),
    ("completions", {"prompt": "hi", "temperature": 3}, 400, "temperature", "between 0 and 2"),
    ("completions", {"prompt": ["a", ""]}, 400, "prompt", "prompt[1] is empty"),
    ("completions", {"prompt": "word " * 200}, 400, "prompt", "max_context=128"),
    ("completions", {"prompt": "hi", "stream_options": {"include_usage": True}}, 400, "stream_options", "stream: true"),
    ("chat.completions", {"messages": [{"role": "robot", "content": "x"}]}, 400, "messages", "role"),
    ("chat.completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "messages", "text parts"),
    ("chat.completions", {"messages": []}, 400, "messages", "non-empty"),
])
def test_openai_errors(handler, kind, body, status, param, fragment):
    with pytest.raises(LLMRequestError) as err:
        handler.add_request("e", json.dumps(body).encode(), {OAI: kind})
    assert err.value.status == status and fragment in err.value.message
    event = handler.error_event("e", err.value)
    assert event.status == status and event.final is not None and event.message == err.value.message
    assert json.loads(event.final) == {"error": {"message": err.value.message, "type": "invalid_request_error",
                                                 "param": param, "code": err.value.code}}
    assert not handler.has_work()


def test_a_forced_tool_call_with_response_format_is_refused_for_the_combination(handler, monkeypatch):
    """The combination is what the client must change, so it is named even where llguidance is
    missing (the grammar would be compiled first, and the client told to install a library)."""
    monkeypatch.setitem(sys.modules, "llguidance", None)  # import llguidance raises ImportError
    messages = [{"role": "user", "content": "x"}]
    tools = [{"type": "function", "function": {"name": "f"}}]
    with pytest.raises(LLMRequestError) as err:
        handler.add_request("e", json.dumps({"messages": messages, "tools": tools, "tool_choice": "required",
                                             "response_format": {"type": "json_object"}}).encode(),
                            {OAI: "chat.completions"})
    assert err.value.param == "tool_choice" and "cannot be combined" in err.value.message
    with pytest.raises(LLMRequestError) as err:  # response_format alone: the missing library
        handler.add_request("e", json.dumps({"messages": messages, "response_format": {"type": "json_object"}}).encode(),
                            {OAI: "chat.completions"})
    assert err.value.param == "response_format" and "pip install llguidance" in err.value.message
    assert not handler.has_work()


def test_torchserve_errors(handler):
    with pytest.raises(LLMRequestError) as err:
        handler.add_request("e", b'{"prompt": "hi", "beams": 4}', {})
    event = handler.error_event("e", err.value)
    assert json.loads(event.final) == {"code": 400, "type": "BadRequestException", "message": err.value.message}
    assert "'beams'" in err.value.message
    with pytest.raises(LLMRequestError, match="is none of"):
        handler.add_request("e", b"{}", {OAI: "embeddings"})
    with pytest.raises(LLMRequestError, match="not valid JSON"):
        handler.add_request("e", b"{nope", {OAI: "completions"})


def test_queue_full_and_cancel(model_dir, handler):
    h = handler
    saved = h.engine
    h.engine = GenerationEngine(h.model, h.tokenizer, max_batch_size=1, max_waiting=1)
    try:
        body = json.dumps({"prompt": "Hello", "max_tokens": 20, "stream": True}).encode()
        h.add_request("r1", body, {OAI: "completions"})
        h.step()  # r1 running
        h.add_request("r2", body, {OAI: "completions"})
        with pytest.raises(LLMRequestError) as err:
            h.add_request("r3", body, {OAI: "completions"})
        event = h.error_event("r3", err.value)
        assert event.status == 503 and event.headers == {"Retry-After": "1"}
        assert json.loads(event.final)["error"]["type"] == "server_error" and "max_waiting=1" in event.message
        h.cancel("r1")
        events = h.step()
        assert "r1" not in {e.request_id for e in events}  # no event for a cancelled request
        assert h.engine.last_step.prefilled == ["r2"]  # r2 got the freed slot at once
        h.cancel("r2")
        h.cancel("unknown")
        assert [e for e in drain(h)] == [] and not h.has_work()
    finally:
        h.engine = saved


def test_failed_step_fails_every_request(handler, monkeypatch):
    h = handler
    h.add_request("f1", b'{"prompt": "a"}', {})
    h.add_request("f2", b'{"prompt": "b"}', {OAI: "completions"})

    def boom(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(h.engine.runner, "forward", boom)  # Hugging Face's forward
    if h.engine.runner.fast_forward is not None:  # the engine's own (its steps run decode and prefill in one)
        monkeypatch.setattr(h.engine.runner.fast_forward, "forward", boom)
    events = {e.request_id: e for e in h.step()}
    assert events["f1"].status == 500 and "device lost" in events["f1"].message
    assert json.loads(events["f2"].final)["error"]["type"] == "server_error"
    assert not h.has_work()


def test_plain_batch_path(handler):
    h = handler
    rows = [
        {"body": {"prompt": "Hello world", "max_new_tokens": 8}},
        {"data": b'{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "stream": true}'},
        {"body": "Hello world"},
        {"body": {"prompt": "x", "n": 0}},
        {"body": {"prompt": ["Hello", "world"], "n": 2, "max_tokens": 3, "temperature": 0}},
    ]
    headers = [{}, {OAI: "completions"}, {}, {OAI: "completions"}, {OAI: "completions"}]
    ctx = h.context
    ctx.set_batch({i: f"id{i}" for i in range(5)}, [RequestProcessor(hd) for hd in headers])
    out = h.handle(rows, ctx)
    text, _ = greedy_text(h, h.tokenizer("Hello world")["input_ids"], 8)
    assert json.loads(out[0])["text"] == text
    chunks = sse(out[1])
    assert "".join(c["choices"][0]["text"] for c in chunks) == greedy_text(h, h.tokenizer("Once upon a time")["input_ids"], 4)[0]
    assert ctx.get_response_content_type(1) == "text/event-stream"
    assert json.loads(out[2])["usage"]["completion_tokens"] == 6
    assert ctx.get_response_status(3)[0] == 400 and json.loads(out[3])["error"]["param"] == "n"
    assert ctx.get_response_status(0)[0] == 200
    many = json.loads(out[4])  # two prompts, two choices each: index = prompt * n + choice
    want = [greedy_text(h, h.tokenizer(p)["input_ids"], 3)[0] for p in ("Hello", "Hello", "world", "world")]
    assert [(c["index"], c["text"]) for c in many["choices"]] == list(enumerate(want))
    assert many["usage"]["completion_tokens"] == 12


@pytest.mark.slow   # builds the example archive and serves it from a worker
def test_example_mar_loads_and_answers(tmp_path):
    """examples/llm/build_mar.py: the archive holds the HF folder flat; its handler serves it."""
    import importlib.util
    import sys
    import zipfile
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2] / "examples" / "llm"
    spec = importlib.util.spec_from_file_location("llm_example_build_mar", root / "build_mar.py")
    build_mar = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_mar)
    mar = build_mar.build(tmp_path / "store")
    model_dir = tmp_path / "model"
    zipfile.ZipFile(mar).extractall(model_dir)
    manifest = json.loads((model_dir / "MAR-INF" / "MANIFEST.json").read_text())
    cfg = yaml.safe_load((model_dir / manifest["model"]["configFile"]).read_text())
    assert cfg["continuousBatching"] is True and cfg["batchSize"] == 8
    spec = importlib.util.spec_from_file_location("llm_example_handler", model_dir / manifest["model"]["handler"])
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("llm_example_handler", None)
    spec.loader.exec_module(module)
    h = module.TinyLLMHandler()
    settings = ModelSettings(batchSize=cfg["batchSize"], continuousBatching=cfg["continuousBatching"])  # as LOAD says
    h.initialize(Context("tiny_llm", str(model_dir), manifest, cfg["batchSize"], None, "test", model_yaml_config=cfg,
                         model_settings=settings))
    assert (h.engine.max_batch_size, h.engine.max_tokens_per_step, h.engine.max_context) == (8, 256, 256)
    h.add_request("r", json.dumps({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}).encode(),
                  {OAI: "chat.completions"})
    (event,) = drain(h)["r"]
    assert json.loads(event.final)["usage"]["completion_tokens"] == 4


class _BrokenLink:
    """A coordinator whose step fails as a lost peer makes it fail (rank 0 of a torchrun job)."""

    rank = 0

    def run(self, payload, fn):
        raise RuntimeError("Connection reset by peer")

    def stop(self) -> None:
        pass


def _exits(monkeypatch) -> list[int]:
    from ts.torch_handler import llm_handler

    codes: list[int] = []

    def leave(code: int) -> None:
        codes.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(llm_handler.os, "_exit", leave)
    return codes


def test_on_ranks_a_failed_step_fails_the_requests_then_leaves_the_job(model_dir, monkeypatch) -> None:
    h = make_handler(model_dir)
    h.coordinator = _BrokenLink()
    codes = _exits(monkeypatch)
    h.add_request("r1", json.dumps({"prompt": "Hello"}).encode(), {})
    events = h.step()
    assert [(e.request_id, e.status) for e in events] == [("r1", 500)]
    assert "generation failed: RuntimeError: Connection reset by peer" in events[0].final.decode()
    assert h.has_work(), "one more step: the one that leaves"
    with pytest.raises(SystemExit):
        h.step()
    assert codes == [1]


def test_a_follower_rank_whose_step_fails_leaves_the_job(model_dir, monkeypatch, caplog) -> None:
    h = make_handler(model_dir)
    codes = _exits(monkeypatch)
    with pytest.raises(SystemExit):  # rank 0 never publishes an empty prompt: this rank is out of step
        h._replay({"commands": [["add", "r1", [], {}, []]], "seed": 1})
    assert codes == [1]
    assert "rank 0 leaves the torchrun job after a failed step (LLMRequestError" in caplog.text


def test_on_ranks_a_sampled_request_without_a_seed_gets_one_every_rank_uses(model_dir) -> None:
    h = make_handler(model_dir)
    h.coordinator = _BrokenLink()  # only its presence matters here: rank 0 of a torchrun job
    h.add_request("r1", json.dumps({"prompt": "Hello", "temperature": 0.9}).encode(), {})
    h.add_request("r2", json.dumps({"prompt": "Hello"}).encode(), {})  # greedy: no generator, no seed
    published = {c[1]: c[3]["seed"] for c in h._commands}
    assert isinstance(published["r1"], int) and published["r2"] is None
    assert h.engine.state.waiting[0].generator.initial_seed() == published["r1"], "rank 0 samples with the published seed"
