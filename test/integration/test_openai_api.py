"""The OpenAI-compatible API end to end: the real server, the official `openai` client unchanged.

A continuous-batching test handler (handlers/openai_echo_handler.py) "generates" its prompt's
words one per step, so answers are known in advance and independent of any language model.
Covers completions and chat completions with and without `stream=True`, the model list, the
frontend's own errors (unknown model, no worker with Retry-After, bad JSON) and the handler's
errors passing through in OpenAI's shape, TorchServe's /predictions/{model}[/{version}]/v1 forms,
the SSE stream's headers and that its first event arrives before the stream ends, cancellation
when the client goes away, the request counter, and the inference token.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import openai
import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
PROMPT = "the quick brown fox jumps over the lazy dog"
WORDS = PROMPT.split()
CONFIG = "continuousBatching: true\nbatchSize: 4\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "llm", HANDLERS / "openai_echo_handler.py", config_yaml=CONFIG)
    harness.build_mar(store, "llm2", HANDLERS / "openai_echo_handler.py", version="2.0", config_yaml=CONFIG)
    return store


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store, config={"metrics_mode": "prometheus"}) as s:
        for url, params in [("llm.mar", {"initial_workers": 1}), ("llm2.mar", {"initial_workers": 1}),
                            ("llm2.mar", {"model_name": "idle", "initial_workers": 0})]:
            r = s.register(url, **params)
            assert r.status_code == 200, r.text
        yield s


@pytest.fixture
def client(server: harness.Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.inference_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _sse_events(r: requests.Response) -> list[str]:
    return [line[len("data: "):] for line in r.iter_lines(decode_unicode=True) if line.startswith("data: ")]


def test_completion(client: openai.OpenAI) -> None:
    out = client.completions.create(model="llm", prompt=PROMPT)
    assert out.object == "text_completion"
    assert out.model == "llm"
    assert out.choices[0].text == PROMPT
    assert out.choices[0].finish_reason == "stop"
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.total_tokens) == (9, 9, 18)
    short = client.completions.create(model="llm", prompt=PROMPT, max_tokens=3)
    assert short.choices[0].text == "the quick brown"
    assert short.choices[0].finish_reason == "length"


def test_chat_completion(client: openai.OpenAI) -> None:
    out = client.chat.completions.create(model="llm", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there world"}])
    assert out.object == "chat.completion"
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == "hello there world"
    assert out.usage.completion_tokens == 3


def test_completion_stream(client: openai.OpenAI) -> None:
    pieces = []
    reasons = []
    for chunk in client.completions.create(model="llm", prompt=PROMPT, stream=True):
        assert chunk.object == "text_completion"
        pieces.append(chunk.choices[0].text)
        reasons.append(chunk.choices[0].finish_reason)
    assert "".join(pieces) == PROMPT
    assert len(pieces) == len(WORDS) + 1  # one word per event, then the finish_reason
    assert reasons[-1] == "stop" and set(reasons[:-1]) == {None}


def test_chat_completion_stream_with_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="llm", messages=[{"role": "user", "content": PROMPT}],
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == PROMPT
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(WORDS)


def test_models_list(client: openai.OpenAI, server: harness.Server) -> None:
    models = {m.id: m for m in client.models.list()}
    assert set(models) == {"llm", "llm2", "idle"}
    now = time.time()
    for m in models.values():
        assert m.object == "model" and m.owned_by == "tserve"
        assert now - 600 < m.created <= now
    one = requests.get(server.inference_url + "/predictions/llm2/2.0/v1/models", timeout=10).json()
    assert one["object"] == "list" and [m["id"] for m in one["data"]] == ["llm2"]


def test_models_retrieve(client: openai.OpenAI, server: harness.Server) -> None:
    m = client.models.retrieve("llm2")
    assert (m.id, m.object, m.owned_by) == ("llm2", "model", "tserve") and m.created > 0
    with pytest.raises(openai.NotFoundError) as err:
        client.models.retrieve("nope")
    assert err.value.code == "model_not_found" and "`nope`" in err.value.body["message"]
    # the same path is KServe v1's model readiness: its client reads "ready" (503 while no worker is ready)
    r = requests.get(server.inference_url + "/v1/models/llm", timeout=10)
    assert r.status_code == 200 and r.json()["ready"] is True and r.json()["name"] == "llm"
    r = requests.get(server.inference_url + "/v1/models/idle", timeout=10)
    assert r.status_code == 503 and r.json()["ready"] is False and r.json()["object"] == "model"


def test_unknown_v1_path_and_bad_json_are_openai_shaped(server: harness.Server) -> None:
    r = requests.get(server.inference_url + "/v1/embeddings", timeout=10)
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error", r.text
    assert r.json()["error"]["message"].startswith("Invalid URL (GET /v1/embeddings)")
    for body in (b"not json", b"{\"model\": "):
        r = requests.post(server.inference_url + "/v1/completions", data=body,
                          headers={"Content-Type": "application/json"}, timeout=10)
        message = r.json()["error"]["message"]
        assert r.status_code == 400 and "JSON" in message, r.text
        assert "setLenient" not in message and "JsonReader" not in message and "http" not in message, message


def test_unknown_model_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        client.completions.create(model="nope", prompt="hi")
    assert err.value.status_code == 404
    assert err.value.code == "model_not_found"
    assert err.value.body["param"] == "model" and "`nope`" in err.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}], stream=True)


def test_model_without_worker_is_503_with_retry_after(server: harness.Server, client: openai.OpenAI) -> None:
    r = requests.post(server.inference_url + "/v1/completions", json={"model": "idle", "prompt": "hi"}, timeout=10)
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"]["type"] == "server_error" and r.json()["error"]["code"] == "service_unavailable"
    with pytest.raises(openai.InternalServerError):
        client.completions.create(model="idle", prompt="hi")


def test_frontend_refusals_are_openai_shaped(server: harness.Server) -> None:
    url = server.inference_url + "/v1/chat/completions"
    for body, param in [(b"{oops", None), (b"[]", None), (b"{}", "model")]:
        r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == param and err["message"]


def test_handler_errors_pass_through(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="llm", prompt="hi", extra_body={"bogus": 1})
    assert err.value.body == {"message": "Unrecognized request argument supplied: bogus",
                              "type": "invalid_request_error", "param": "bogus", "code": None}
    with pytest.raises(openai.BadRequestError, match="prompt is empty"):
        client.chat.completions.create(model="llm", messages=[{"role": "user", "content": " "}], stream=True)


def test_failure_after_the_stream_started_is_an_sse_error_event(client: openai.OpenAI, server: harness.Server) -> None:
    pieces = []
    with pytest.raises(openai.APIError, match="generation failed at __fail__"):
        for chunk in client.completions.create(model="llm", prompt="one two __fail__ three", stream=True):
            pieces.append(chunk.choices[0].text)
    assert pieces == ["one ", "two "]
    with requests.post(server.inference_url + "/v1/completions", stream=True, timeout=60,
                       json={"model": "llm", "prompt": "one __fail__", "stream": True}) as r:
        events = _sse_events(r)
    assert json.loads(events[-1]) == {"error": {"message": "generation failed at __fail__", "type": "server_error",
                                                "param": None, "code": None}}
    with pytest.raises(openai.InternalServerError, match="generation failed"):  # before any chunk: a plain 500
        client.completions.create(model="llm", prompt="__fail__")


def test_torchserve_path_forms(server: harness.Server) -> None:
    # the path names the model (and version); the body's model is ignored
    for path in ["/predictions/llm/v1/completions", "/predictions/llm2/2.0/v1/completions"]:
        r = requests.post(server.inference_url + path, json={"model": "nope", "prompt": "a b c"}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == "a b c"
        assert r.json()["model"] == path.split("/")[2]
    base = openai.OpenAI(base_url=server.inference_url + "/predictions/llm/v1", api_key="x", max_retries=0)
    assert base.chat.completions.create(model="ignored", messages=[{"role": "user", "content": "x y"}]) \
        .choices[0].message.content == "x y"
    r = requests.post(server.inference_url + "/predictions/llm2/9.9/v1/completions", json={"prompt": "a"}, timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    # a TorchServe-style call reaches the same handler without the x-tserve-openai header
    r = requests.post(server.inference_url + "/predictions/llm", json={"prompt": "a b"}, timeout=30)
    assert r.status_code == 200 and r.json() == {"text": "a b", "openai": None}


def test_sse_headers_and_first_event_before_the_end(server: harness.Server) -> None:
    start = time.monotonic()
    with requests.post(server.inference_url + "/v1/completions", stream=True, timeout=60,
                       json={"model": "llm", "prompt": PROMPT, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        assert r.headers["Cache-Control"] == "no-cache"
        assert r.headers["Transfer-Encoding"] == "chunked"
        arrivals = []
        events = []
        for line in r.iter_lines(chunk_size=1, decode_unicode=True):
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - start)
                events.append(line[len("data: "):])
        end = time.monotonic() - start
    assert events[-1] == "[DONE]"
    assert "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == PROMPT
    assert arrivals[0] < arrivals[-1] <= end  # streamed as generated, not in one piece at the end


def test_client_disconnect_cancels_the_sequence(server: harness.Server) -> None:
    body = json.dumps({"model": "llm", "prompt": "w " * 400, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", server.inference_port), timeout=30) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b"data: " not in got:
            got += s.recv(4096)
        request_id = next(line.split(b":", 1)[1].strip().decode() for line in got.split(b"\r\n")
                          if line.lower().startswith(b"x-request-id:"))
    harness.wait_for(lambda: f"openai-echo cancelled {request_id}" in server.logs("model_log.log"), 20,
                     what="the handler's cancel")
    # the worker is free for the next request
    r = requests.post(server.inference_url + "/v1/completions", json={"model": "llm", "prompt": "ok"}, timeout=30)
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "ok"


def test_requests_are_counted(server: harness.Server) -> None:
    def counted() -> float:
        text = requests.get(f"{server.metrics_url}/metrics", params={"name[]": "ts_inference_requests_total"},
                            timeout=30).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("ts_inference_requests_total{") and 'model_name="llm"' in line)

    before = counted()
    r = requests.post(server.inference_url + "/v1/completions", json={"model": "llm", "prompt": "one"}, timeout=30)
    assert r.status_code == 200
    assert counted() == before + 1


def test_inference_token_is_required(store: Path) -> None:
    with harness.Server(store, token_auth=True) as s:
        key = s.keys()["inference"]["key"]
        assert openai.OpenAI(base_url=s.inference_url + "/v1", api_key=key, max_retries=0).models.list().data == []
        with pytest.raises(openai.AuthenticationError) as err:
            openai.OpenAI(base_url=s.inference_url + "/v1", api_key="wrong", max_retries=0).models.list()
        assert err.value.code == "invalid_api_key"
