"""The built-in LLM handler served for real (examples/llm): continuous batching through the
server gives exactly the tokens greedy ``model.generate`` gives each prompt alone, with requests
of mixed lengths arriving while others run; streaming (REST, gRPC StreamPredictions, the OIP
generate_stream) delivers the first piece before the end; the official ``openai`` client and the
OIP generate extension work unchanged."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import grpc
import pytest
import requests
from grpc_support import compile_stubs
from llm_support import texts_at_once

import harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [
    "Once upon a time",
    "a",
    "the model server answered every request that it was given, one token at a time, and then",
    "In the beginning there was",
    "tokens",
    "serving large models is",
]
NEW_TOKENS = 12


def _build_mar(store: Path, **kw) -> Path:
    spec = importlib.util.spec_from_file_location("llm_build_mar", ROOT / "examples" / "llm" / "build_mar.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(store, **kw)


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """Each prompt's greedy continuation by Hugging Face's generate, alone (no server)."""
    from llm_support import greedy_texts

    return greedy_texts(PROMPTS, NEW_TOKENS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    _build_mar(store)
    with harness.Server(store, env={"HF_HUB_OFFLINE": "1"}) as s:
        r = s.register("tiny_llm.mar", initial_workers=1, synchronous="true")
        assert r.status_code == 200, r.text
        yield s


def generate(server: harness.Server, prompt: str, stream: bool = False) -> requests.Response:
    body = {"prompt": prompt, "max_new_tokens": NEW_TOKENS, "temperature": 0, "stream": stream}
    return requests.post(f"{server.inference_url}/predictions/tiny_llm", json=body, stream=stream, timeout=120)


def test_continuous_batching_gives_each_prompt_its_greedy_tokens(server: harness.Server, expected) -> None:
    # the first prompts start together; the others arrive while those are generating
    assert texts_at_once(lambda p: generate(server, p), PROMPTS, pause_after=3) == expected


def test_streaming_sends_the_first_piece_before_the_end(server: harness.Server, expected) -> None:
    prompt = PROMPTS[0]
    started = time.monotonic()
    r = generate(server, prompt, stream=True)
    assert r.status_code == 200
    pieces, arrivals = [], []
    for piece in r.iter_content(chunk_size=None):
        pieces.append(piece)
        arrivals.append(time.monotonic() - started)
    assert len(pieces) > 1
    assert arrivals[0] < arrivals[-1]
    assert b"".join(pieces).decode().startswith(expected[prompt])


def test_the_openai_client_works_unchanged(server: harness.Server, expected) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server.inference_url}/v1", api_key="unused", max_retries=0)
    prompt = PROMPTS[3]
    done = client.completions.create(model="tiny_llm", prompt=prompt, max_tokens=NEW_TOKENS, temperature=0)
    assert done.choices[0].text == expected[prompt]
    assert done.usage.completion_tokens <= NEW_TOKENS
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="tiny_llm", prompt=prompt, max_tokens=NEW_TOKENS, temperature=0, stream=True) if c.choices)
    assert streamed == expected[prompt]
    chat = client.chat.completions.create(model="tiny_llm", messages=[{"role": "user", "content": "Hello"}],
                                          max_tokens=4)
    assert chat.choices[0].message.role == "assistant"
    assert chat.usage.completion_tokens <= 4
    assert [m.id for m in client.models.list()] == ["tiny_llm"]


def test_a_prompt_longer_than_the_context_names_the_limit(server: harness.Server) -> None:
    r = requests.post(f"{server.inference_url}/predictions/tiny_llm",
                      json={"prompt": "word " * 400, "max_new_tokens": 4}, timeout=60)
    assert r.status_code == 400
    assert "context" in json.dumps(r.json()).lower()


def test_grpc_stream_predictions_streams_the_tokens(server: harness.Server, expected,
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    """StreamPredictions streams without "stream": true in the body (the call asks for a stream);
    "stream": false still gets one whole answer."""
    stubs = compile_stubs(tmp_path_factory.mktemp("stubs"))
    prompt = PROMPTS[2]
    body = {"prompt": prompt, "max_new_tokens": NEW_TOKENS, "temperature": 0}
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_inference_port}") as ch:
        stub = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)

        def call(b: dict):
            req = stubs.inference_pb2.PredictionsRequest(model_name="tiny_llm", input={"data": json.dumps(b).encode()})
            return stub.StreamPredictions(req, timeout=120)

        started = time.monotonic()
        pieces, arrivals = [], []
        for r in call(body):
            pieces.append(r.prediction)
            arrivals.append(time.monotonic() - started)
        whole = [r.prediction for r in call({**body, "stream": False})]
    assert len(pieces) > 1 and arrivals[0] < arrivals[-1]
    assert b"".join(pieces).decode() == expected[prompt]
    assert len(whole) == 1 and json.loads(whole[0])["text"] == expected[prompt]


def test_oip_generate(server: harness.Server, expected) -> None:
    prompt = PROMPTS[0]
    url = f"{server.inference_url}/v2/models/tiny_llm/generate"
    r = requests.post(url, json={"text_input": prompt, "parameters": {"max_tokens": NEW_TOKENS, "temperature": 0}},
                      timeout=120)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["text_output"] == expected[prompt] and doc["model_name"] == "tiny_llm"
    assert doc["details"]["completion_tokens"] <= NEW_TOKENS
    versioned = requests.post(f"{server.inference_url}/v2/models/tiny_llm/versions/1.0/generate",
                              json={"text_input": prompt, "parameters": {"max_tokens": 2}}, timeout=120)
    assert versioned.status_code == 200 and versioned.json()["details"]["completion_tokens"] <= 2
    bad = requests.post(url, json={"text_input": prompt, "parameters": {"beams": 2}}, timeout=60)
    assert bad.status_code == 422 and "'beams'" in bad.json()["error"]
    missing = requests.post(url, json={"parameters": {}}, timeout=60)
    assert missing.status_code == 422 and "text_input" in missing.json()["error"]
    unknown = requests.post(f"{server.inference_url}/v2/models/nosuch/generate", json={"text_input": "a"}, timeout=60)
    assert unknown.status_code == 404 and "nosuch" in unknown.json()["error"]


def test_oip_generate_stream_sends_events_as_tokens_come(server: harness.Server, expected) -> None:
    prompt = PROMPTS[3]
    started = time.monotonic()
    r = requests.post(f"{server.inference_url}/v2/models/tiny_llm/generate_stream", stream=True, timeout=120,
                      json={"text_input": prompt, "parameters": {"max_tokens": NEW_TOKENS, "temperature": 0}})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events, arrivals = [], []
    for line in r.iter_lines():
        if line.startswith(b"data: "):
            events.append(json.loads(line[len(b"data: "):]))
            arrivals.append(time.monotonic() - started)
    assert len(events) > 2 and arrivals[0] < arrivals[-1]
    assert [e["done"] for e in events] == [False] * (len(events) - 1) + [True]
    assert "".join(e["text_output"] for e in events) == expected[prompt]
    assert all(e["model_name"] == "tiny_llm" for e in events)


def test_describe_shows_the_decode_and_prefill_time(server: harness.Server) -> None:
    def stages() -> dict:
        (model,) = requests.get(f"{server.management_url}/models/tiny_llm", timeout=60).json()
        return model["workers"][0]["stages"]

    assert generate(server, PROMPTS[0]).status_code == 200
    before = stages()
    started = time.monotonic()
    assert generate(server, PROMPTS[1]).status_code == 200
    elapsed_ms = (time.monotonic() - started) * 1000
    after = stages()
    for name in ("step", "decode", "prefill"):
        assert after[name]["batches"] > before[name]["batches"] and after[name]["busyMs"] > 0, after
    # the engine process's own time (its steps run beside the worker's): within the request's wall time
    engine_ms = sum(after[n]["busyMs"] - before[n]["busyMs"] for n in ("decode", "prefill"))
    assert 0 < engine_ms <= elapsed_ms + 1, (engine_ms, elapsed_ms)


def test_fast_path_off_gives_the_same_tokens_and_the_log_says_which_forward(server: harness.Server, expected,
                                                                            tmp_path: Path) -> None:
    """The example (the tiny Llama) runs the engine's fast forward; the same model with
    ``handler.fast_path: false`` runs Hugging Face's; both give generate's greedy tokens."""
    config = tmp_path / "model-config.yaml"
    config.write_text((ROOT / "examples" / "llm" / "model-config.yaml").read_text() + "  fast_path: false\n")
    _build_mar(server.model_store, model_name="tiny_llm_hf", config_file=config)
    r = server.register("tiny_llm_hf.mar", initial_workers=1, synchronous="true")
    assert r.status_code == 200, r.text
    try:
        for prompt in PROMPTS[:3]:
            body = {"prompt": prompt, "max_new_tokens": NEW_TOKENS, "temperature": 0}
            r = requests.post(f"{server.inference_url}/predictions/tiny_llm_hf", json=body, timeout=120)
            assert r.status_code == 200, r.text
            assert r.json()["text"] == expected[prompt]

        def load_lines() -> str | None:
            text = server.logs("model_log.log") + server.logs()
            return text if "LLM tiny_llm_hf:" in text else None

        logs = harness.wait_for(load_lines, timeout=30, what="the worker's load line")
        assert "LLM tiny_llm: LlamaForCausalLM" in logs and "the engine's fast forward (ts/llm/engine/fastpath)" in logs
        assert "Hugging Face's forward (fast_path: false)" in logs
    finally:
        requests.delete(f"{server.management_url}/models/tiny_llm_hf", timeout=60)


def test_curl_d_plain_text_is_the_prompt(server: harness.Server) -> None:
    # `curl -d 'Once upon a time'` labels the text application/x-www-form-urlencoded; with no "=" and no "&"
    # it is the body itself (was a form field named by the text: 400 "prompt is empty")
    r = requests.post(f"{server.inference_url}/predictions/tiny_llm", data=b"Once upon a time",
                      headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["text"]
