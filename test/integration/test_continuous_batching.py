"""Continuous batching through the server (docs/protocol.md, docs/llm.md): requests join a
running batch, stream one token per step, and a client that disconnects frees its slot.
The handler is a model-free counter (handlers/counting_stream_handler.py)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
from grpc_support import compile_stubs

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
COUNTER = HANDLERS / "counting_stream_handler.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "cb4", COUNTER, config_yaml="continuousBatching: true\nbatchSize: 4\n")
    harness.build_mar(store, "cb1", COUNTER, config_yaml="continuousBatching: true\nbatchSize: 1\n")
    harness.build_mar(store, "partial", HANDLERS / "partial_hooks_handler.py",
                      config_yaml="continuousBatching: true\n")
    with harness.Server(store) as s:
        for name in ("cb4", "cb1"):
            r = s.register(f"{name}.mar", initial_workers=1, synchronous="true")
            assert r.status_code == 200, r.text
        yield s


def stream(server: harness.Server, model: str, body: dict, timeout: float = 60) -> requests.Response:
    return requests.post(f"{server.inference_url}/predictions/{model}", data=json.dumps(body),
                         headers={"Content-Type": "application/json"}, stream=True, timeout=timeout)


def test_streams_every_token_then_the_final_answer(server: harness.Server) -> None:
    r = stream(server, "cb4", {"n": 5})
    assert r.status_code == 200
    pieces = [p.decode() for p in r.iter_content(chunk_size=None)]
    assert "".join(pieces) == 't0 t1 t2 t3 t4 {"tokens": 5, "sharedSteps": 0}'
    assert len(pieces) >= 2, "tokens come as separate chunks, not one body"


@contextlib.contextmanager
def long_request_running(server: harness.Server, model: str, body: dict) -> Iterator[threading.Event]:
    """Starts a streaming request and waits for its first chunk (it is running), then reads the
    rest on a thread; yields an Event set once its whole answer has arrived. On exit the reading
    stops and the connection closes."""
    long = stream(server, model, body)
    chunks = long.iter_content(chunk_size=None)
    assert next(chunks).startswith(b"t0")
    done = threading.Event()
    stop = threading.Event()

    def read_rest() -> None:
        for _ in chunks:
            if stop.is_set():
                break
        else:
            done.set()
        long.close()

    reader = threading.Thread(target=read_rest, daemon=True)
    reader.start()
    try:
        yield done
    finally:
        stop.set()
        reader.join(timeout=60)


def test_a_request_joins_the_running_batch_and_leaves_before_it(server: harness.Server) -> None:
    with long_request_running(server, "cb4", {"n": 150, "step_ms": 20}) as long_done:
        short = stream(server, "cb4", {"n": 3, "step_ms": 20})
        body = b"".join(short.iter_content(chunk_size=None)).decode()
        assert not long_done.is_set(), "the short request waited for the long one to finish"
    assert body.startswith("t0 t1 t2 ")
    assert json.loads(body[len("t0 t1 t2 "):]) == {"tokens": 3, "sharedSteps": 3}


def test_a_client_that_disconnects_frees_its_slot(server: harness.Server) -> None:
    # cb1 runs one sequence at a time: without cancellation the follow-up would wait forever
    endless = stream(server, "cb1", {"n": 10**9, "step_ms": 5})
    assert next(endless.iter_content(chunk_size=None)).startswith(b"t0")
    endless.close()
    follow = stream(server, "cb1", {"n": 2}, timeout=30)
    assert follow.status_code == 200
    assert b"".join(follow.iter_content(chunk_size=None)).startswith(b"t0 t1 ")


def test_a_refused_request_gets_the_handlers_status(server: harness.Server) -> None:
    r = stream(server, "cb4", {"n": 0})
    assert r.status_code == 400
    assert "'n' must be a positive integer" in r.text


def test_describe_shows_continuous_batching_and_its_slots(server: harness.Server) -> None:
    d = requests.get(f"{server.management_url}/models/cb4", timeout=30).json()[0]
    assert d["continuousBatching"] is True
    assert d["maxBatchesInFlight"] == 8


def test_a_handler_with_only_some_hooks_is_refused_naming_the_rest(server: harness.Server) -> None:
    # none of the hooks is TorchServe's way (test_torchserve_continuous.py); some of them is a mistake
    r = server.register("partial.mar", initial_workers=1, synchronous="true")
    assert r.status_code == 400, r.text
    msg = r.json()["message"]
    assert "continuousBatching" in msg and "lacks has_work(), cancel()" in msg


def test_many_concurrent_sequences_each_get_their_own_answer(server: harness.Server) -> None:
    out: dict[int, str] = {}

    def one(i: int) -> None:
        out[i] = b"".join(stream(server, "cb4", {"n": 2 + i % 4}).iter_content(chunk_size=None)).decode()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120 - (time.monotonic() - started))
    for i in range(12):
        n = 2 + i % 4
        want = "".join(f"t{k} " for k in range(n))
        assert out[i].startswith(want), out[i]
        assert json.loads(out[i][len(want):])["tokens"] == n


# ---------------------------------------------------------------------------- gRPC


@pytest.fixture(scope="module")
def inference(server: harness.Server, tmp_path_factory: pytest.TempPathFactory):
    stubs = compile_stubs(tmp_path_factory.mktemp("stubs"))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_inference_port}") as ch:
        yield stubs, stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)


def grpc_request(stubs, model: str, body: dict):
    return stubs.inference_pb2.PredictionsRequest(model_name=model, input={"data": json.dumps(body).encode()})


def test_grpc_stream_predictions_streams_each_token_as_it_is_made(inference) -> None:
    stubs, stub = inference
    pieces = [r.prediction.decode() for r in stub.StreamPredictions(grpc_request(stubs, "cb4", {"n": 4}), timeout=60)]
    assert pieces[:4] == ["t0 ", "t1 ", "t2 ", "t3 "]
    assert json.loads("".join(pieces[4:])) == {"tokens": 4, "sharedSteps": 0}


@pytest.mark.parametrize("rpc", ["StreamPredictions", "StreamPredictions2"])
def test_grpc_client_cancel_frees_the_slot(inference, server: harness.Server, rpc: str) -> None:
    # cb1 runs one sequence at a time: unless the cancel reaches the worker, the follow-up waits forever
    stubs, stub = inference
    endless = grpc_request(stubs, "cb1", {"n": 10**9, "step_ms": 5})
    call = (stub.StreamPredictions(endless, timeout=60) if rpc == "StreamPredictions"
            else stub.StreamPredictions2(iter([endless]), timeout=60))
    assert next(call).prediction.startswith(b"t0")
    call.cancel()
    follow = stream(server, "cb1", {"n": 2}, timeout=30)
    assert follow.status_code == 200
    assert b"".join(follow.iter_content(chunk_size=None)).startswith(b"t0 t1 ")
