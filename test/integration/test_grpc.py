"""gRPC APIs end to end: a Python grpcio client whose stubs are generated at test time from the
project's protos (TorchServe 0.12's layout) calls every rpc of the real server.

Covers status codes (NOT_FOUND, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED,
UNAUTHENTICATED, PERMISSION_DENIED), trailing metadata carrying the handler's status and
headers, server-streaming and bidirectional streaming, and token authorization.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
import requests
from grpc_support import compile_stubs

import harness

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "frontend" / "src" / "main" / "proto"

HANDLER = textwrap.dedent('''
    """Test handler: the `mode` input picks echo, fail, sleep or stream."""
    import json
    import time

    from ts.handler_utils.utils import send_intermediate_predict_response
    from ts.utils.util import PredictionException


    def _text(row, key):
        v = row.get(key)
        if v is None:
            return None
        if isinstance(v, (bytes, bytearray)):
            return v.decode()
        return v if isinstance(v, str) else json.dumps(v)


    def handle(data, context):
        if data is None:
            return None
        out = []
        for idx, row in enumerate(data):
            mode = _text(row, "mode") or "echo"
            if mode == "fail":
                raise PredictionException("bad input: field 'x' must be a number", 400)
            if mode == "sleep":
                time.sleep(float(_text(row, "seconds") or "5"))
            if mode == "stream":
                for i in range(3):
                    send_intermediate_predict_response([f"piece{i}"], context.request_ids, "OK", 200, context)
                out.append("last")
                continue
            if mode == "header":
                out.append(str(context.get_request_header(idx, "x-client")) + "," + str(context.get_request_header(idx, "authorization")))
                continue
            context.set_response_header(idx, "x-handler", "multi")
            context.set_response_status(202, "Accepted", idx)
            seq = context.get_request_header(idx, "ts_request_sequence_id")
            out.append((_text(row, "data") or "") + (f"|{seq}" if seq and mode == "seq" else ""))
        return out
''')

DEADLINE = 60


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """inference/management stubs compiled from the project's protos with grpcio-tools."""
    return compile_stubs(tmp_path_factory.mktemp("stubs"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("grpc")
    handler = root / "multi.py"
    handler.write_text(HANDLER)
    store = root / "store"
    harness.build_mar(store, "multi", handler)
    harness.build_mar(store, "tiny", handler, config_yaml="minWorkers: 1\nmaxWorkers: 1\njobQueueSize: 1\n")
    harness.build_mar(store, "slow", handler, version="2.0")
    return store


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store, config={"load_models": "multi.mar,tiny.mar", "max_request_size": 100000}) as s:
        yield s


def channel(port: int) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{port}")


@pytest.fixture(scope="module")
def inference(server, stubs):
    with channel(server.grpc_inference_port) as ch:
        yield stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)


@pytest.fixture(scope="module")
def management(server, stubs):
    with channel(server.grpc_management_port) as ch:
        yield stubs.management_pb2_grpc.ManagementAPIsServiceStub(ch)


def req(stubs, model: str, version: str = "", **inputs: str):
    return stubs.inference_pb2.PredictionsRequest(
        model_name=model, model_version=version, input={k: v.encode() for k, v in inputs.items()})


def expect_error(code: grpc.StatusCode, call, *fragments: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        result = call()
        if hasattr(result, "__iter__") and not isinstance(result, (bytes, str)):
            list(result)
    err = info.value
    assert err.code() == code, (err.code(), err.details())
    for f in fragments:
        assert f in err.details(), err.details()
    return err


# ---------------------------------------------------------------- inference service


def test_ping_reports_health(inference, stubs) -> None:
    health = inference.Ping(stubs.empty(), timeout=DEADLINE).health
    assert json.loads(health) == {"status": "Healthy"}


def test_predictions_returns_body_and_handler_status_and_headers_as_trailers(inference, stubs) -> None:
    resp, call = inference.Predictions.with_call(req(stubs, "multi", data="hello"), timeout=DEADLINE)
    assert resp.prediction == b"hello"
    trailers = dict(call.trailing_metadata())
    assert trailers["ts-status"] == "202"
    assert trailers["x-handler"] == "multi"


def test_call_metadata_reaches_the_handler_as_headers(inference, stubs) -> None:
    r = inference.Predictions(req(stubs, "multi", mode="header"), timeout=DEADLINE,
                              metadata=[("x-client", "abc"), ("authorization", "Bearer secret")])
    assert r.prediction == b"abc,None"      # the token is not passed on


def test_message_larger_than_max_request_size_is_refused(inference, stubs, server) -> None:
    big = "x" * (int(server.config["max_request_size"]) + 1024)
    with pytest.raises(grpc.RpcError) as info:
        inference.Predictions(req(stubs, "multi", data=big), timeout=DEADLINE)
    # grpc-java 1.41's transport refuses it; depending on timing the client reads RESOURCE_EXHAUSTED, or the
    # stream reset that follows it (CANCELLED / INTERNAL "Half-closed without a request")
    assert info.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.CANCELLED,
                                 grpc.StatusCode.INTERNAL), info.value
    assert inference.Predictions(req(stubs, "multi", data="small"), timeout=DEADLINE).prediction == b"small"


def test_predictions_by_version(inference, stubs) -> None:
    assert inference.Predictions(req(stubs, "multi", "1.0", data="v"), timeout=DEADLINE).prediction == b"v"
    expect_error(grpc.StatusCode.NOT_FOUND, lambda: inference.Predictions(req(stubs, "multi", "9.9"), timeout=DEADLINE),
                 "9.9", "multi")


def test_unknown_model_is_not_found(inference, stubs) -> None:
    expect_error(grpc.StatusCode.NOT_FOUND, lambda: inference.Predictions(req(stubs, "nosuch"), timeout=DEADLINE),
                 "Model not found: nosuch")
    expect_error(grpc.StatusCode.NOT_FOUND, lambda: inference.StreamPredictions(req(stubs, "nosuch"), timeout=DEADLINE),
                 "nosuch")


def test_missing_model_name_is_invalid_argument(inference, stubs) -> None:
    expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: inference.Predictions(stubs.inference_pb2.PredictionsRequest(), timeout=DEADLINE), "model_name")


def test_handler_error_keeps_its_code_and_message(inference, stubs) -> None:
    err = expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                       lambda: inference.Predictions(req(stubs, "multi", mode="fail"), timeout=DEADLINE),
                       "field 'x' must be a number")
    assert dict(err.trailing_metadata())["ts-status"] == "400"


def test_stream_predictions_streams_every_piece(inference, stubs) -> None:
    pieces = [r.prediction for r in inference.StreamPredictions(req(stubs, "multi", mode="stream"), timeout=DEADLINE)]
    assert pieces == [b"piece0", b"piece1", b"piece2", b"last"]


def test_stream_predictions_with_non_streaming_handler_answers_once(inference, stubs) -> None:
    pieces = [r.prediction for r in inference.StreamPredictions(req(stubs, "multi", data="once"), timeout=DEADLINE)]
    assert pieces == [b"once"]
    # the worker survived (TorchServe's worker thread crashes here)
    assert inference.Predictions(req(stubs, "multi", data="after"), timeout=DEADLINE).prediction == b"after"


def test_stream_predictions2_answers_each_request_and_reports_errors_in_band(inference, stubs) -> None:
    requests_ = [
        req(stubs, "multi", mode="seq", data="a"),
        req(stubs, "multi", mode="fail"),
        req(stubs, "multi", mode="seq", data="b"),
        req(stubs, "nosuch"),
    ]
    got = list(inference.StreamPredictions2(iter(requests_), timeout=DEADLINE))
    assert len(got) == 4
    seq = got[0].sequenceId
    assert seq.startswith("ts-seq-")
    assert all(r.sequenceId == seq for r in got)
    assert got[0].prediction == f"a|{seq}".encode() and not got[0].HasField("status")
    assert got[1].status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "field 'x'" in got[1].status.message
    assert got[2].prediction == f"b|{seq}".encode()
    assert got[3].status.code == grpc.StatusCode.NOT_FOUND.value[0]


def test_stream_predictions2_keeps_the_clients_sequence_id(inference, stubs) -> None:
    r = req(stubs, "multi", mode="seq", data="x")
    r.sequenceId = "my-seq"
    got = list(inference.StreamPredictions2(iter([r]), timeout=DEADLINE))
    assert [(g.sequenceId, g.prediction) for g in got] == [("my-seq", b"x|my-seq")]


def test_full_queue_is_resource_exhausted(inference, stubs) -> None:
    def call(_: int) -> str:
        try:
            inference.Predictions(req(stubs, "tiny", mode="sleep", seconds="3"), timeout=DEADLINE)
            return "ok"
        except grpc.RpcError as e:
            return e.code().name + ":" + e.details()

    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(call, range(5)))
    assert "ok" in results, results
    full = [r for r in results if r.startswith("RESOURCE_EXHAUSTED")]
    assert full, results
    assert "queue" in full[0]
    assert all(r == "ok" or r.startswith("RESOURCE_EXHAUSTED") for r in results), results


# ---------------------------------------------------------------- management service


def test_list_and_describe(server, management, stubs) -> None:
    m = stubs.management_pb2
    listed = json.loads(management.ListModels(m.ListModelsRequest(limit=10), timeout=DEADLINE).msg)
    assert {e["modelName"] for e in listed["models"]} >= {"multi", "tiny"}
    assert json.loads(management.ListModels(m.ListModelsRequest(), timeout=DEADLINE).msg)["models"] == []
    described = json.loads(management.DescribeModel(m.DescribeModelRequest(model_name="multi"), timeout=DEADLINE).msg)
    assert described[0]["modelName"] == "multi"
    assert described[0]["modelVersion"] == "1.0"
    assert described[0]["workers"]
    rest = requests.get(f"{server.management_url}/models/multi", timeout=DEADLINE).json()
    assert [list(d) for d in described] == [list(d) for d in rest]      # same document as REST, same field order
    assert described[0]["jobQueueStatus"] == rest[0]["jobQueueStatus"]
    expect_error(grpc.StatusCode.NOT_FOUND,
                 lambda: management.DescribeModel(m.DescribeModelRequest(model_name="nosuch"), timeout=DEADLINE), "nosuch")
    expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: management.DescribeModel(m.DescribeModelRequest(), timeout=DEADLINE), "model_name")


def test_register_scale_set_default_unregister(management, inference, stubs) -> None:
    m = stubs.management_pb2
    msg = management.RegisterModel(m.RegisterModelRequest(
        url="slow.mar", initial_workers=1, synchronous=True, response_timeout=2), timeout=120).msg
    assert 'Model "slow" Version: 2.0 registered with 1 initial workers' in msg
    expect_error(grpc.StatusCode.ABORTED, lambda: management.RegisterModel(m.RegisterModelRequest(url="slow.mar"),
                                                                           timeout=120), "already registered")
    expect_error(grpc.StatusCode.NOT_FOUND,
                 lambda: management.RegisterModel(m.RegisterModelRequest(url="missing.mar"), timeout=DEADLINE),
                 "missing.mar")
    expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: management.RegisterModel(m.RegisterModelRequest(), timeout=DEADLINE), "url")

    # the handler sleeps past the model's 2 s response timeout
    expect_error(grpc.StatusCode.DEADLINE_EXCEEDED,
                 lambda: inference.Predictions(req(stubs, "slow", mode="sleep", seconds="6"), timeout=DEADLINE),
                 "responseTimeout")

    scaled = management.ScaleWorker(m.ScaleWorkerRequest(model_name="slow", min_worker=2, synchronous=True),
                                    timeout=120).msg
    assert "Workers scaled to 2 for model: slow" in scaled
    described = json.loads(management.DescribeModel(m.DescribeModelRequest(model_name="slow"), timeout=DEADLINE).msg)
    assert described[0]["minWorkers"] == 2
    expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: management.ScaleWorker(m.ScaleWorkerRequest(model_name="slow", min_worker=3, max_worker=1),
                                                timeout=DEADLINE), "max_worker")
    assert "slow" in management.SetDefault(m.SetDefaultRequest(model_name="slow", model_version="2.0"),
                                           timeout=DEADLINE).msg
    expect_error(grpc.StatusCode.NOT_FOUND,
                 lambda: management.SetDefault(m.SetDefaultRequest(model_name="slow", model_version="7"),
                                               timeout=DEADLINE), "7")
    gone = management.UnregisterModel(m.UnregisterModelRequest(model_name="slow"), timeout=120).msg
    assert 'Model "slow" unregistered' in gone
    expect_error(grpc.StatusCode.NOT_FOUND,
                 lambda: management.UnregisterModel(m.UnregisterModelRequest(model_name="slow"), timeout=DEADLINE), "slow")


# ---------------------------------------------------------------- token auth, model API switch


def test_token_auth_and_model_api_switch(store: Path, stubs) -> None:
    with harness.Server(store, token_auth=True, model_api=False) as s:
        keys = s.keys()
        good_inf = [("authorization", f"Bearer {keys['inference']['key']}")]
        good_mgmt = [("authorization", f"Bearer {keys['management']['key']}")]
        with channel(s.grpc_inference_port) as ich, channel(s.grpc_management_port) as mch:
            inf = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ich)
            mgmt = stubs.management_pb2_grpc.ManagementAPIsServiceStub(mch)
            m = stubs.management_pb2
            expect_error(grpc.StatusCode.UNAUTHENTICATED, lambda: inf.Ping(stubs.empty(), timeout=DEADLINE),
                         "Token Authorization failed")
            expect_error(grpc.StatusCode.UNAUTHENTICATED,
                         lambda: inf.Ping(stubs.empty(), timeout=DEADLINE, metadata=[("authorization", "Bearer nope")]))
            expect_error(grpc.StatusCode.UNAUTHENTICATED,
                         lambda: inf.Ping(stubs.empty(), timeout=DEADLINE, metadata=good_mgmt), "inference")
            assert "Healthy" in inf.Ping(stubs.empty(), timeout=DEADLINE, metadata=good_inf).health
            expect_error(grpc.StatusCode.UNAUTHENTICATED,
                         lambda: mgmt.ListModels(m.ListModelsRequest(limit=5), timeout=DEADLINE, metadata=good_inf))
            assert json.loads(mgmt.ListModels(m.ListModelsRequest(limit=5), timeout=DEADLINE,
                                              metadata=good_mgmt).msg) == {"models": []}
            expect_error(grpc.StatusCode.PERMISSION_DENIED,
                         lambda: mgmt.RegisterModel(m.RegisterModelRequest(url="multi.mar"), timeout=DEADLINE,
                                                    metadata=good_mgmt), "enable_model_api")
            expect_error(grpc.StatusCode.PERMISSION_DENIED,
                         lambda: mgmt.UnregisterModel(m.UnregisterModelRequest(model_name="multi"), timeout=DEADLINE,
                                                      metadata=good_mgmt), "enable_model_api")


def test_tls_when_a_certificate_is_configured(store: Path, stubs, tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    config = {"enable_grpc_ssl": "true", "certificate_file": str(cert), "private_key_file": str(key)}
    with harness.Server(store, config=config) as s:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{s.grpc_inference_port}", creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as ch:
            stub = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)
            assert "Healthy" in stub.Ping(stubs.empty(), timeout=DEADLINE).health
        with channel(s.grpc_inference_port) as plain:
            stub = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(plain)
            expect_error(grpc.StatusCode.UNAVAILABLE, lambda: stub.Ping(stubs.empty(), timeout=10))
        assert "has no effect" not in s.output()


def test_tls_without_a_certificate_stops_startup(store: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as info:
        harness.Server(store, config={"enable_grpc_ssl": "true"}, start_timeout=60).start()
    assert "certificate_file" in str(info.value)
