"""Readiness that tells the truth: not ready after every startup model failed (until a model is
registered), per-model readiness on the KServe routes (200 ready, 503 not), and the probes open
without a token when health_check_no_auth=true (default: token required, test_rest_auth.py)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
PING = "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Ping"
PREDICTIONS = "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("readiness-store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    harness.build_mar(store, "broken", HANDLERS / "broken_handler.py")
    return store


def probes(s: harness.Server) -> dict[str, int]:
    return {path: requests.get(s.inference_url + path, timeout=30).status_code
            for path in ("/ping", "/v2/health/ready", "/v2/health/live")}


def model_ready(url: str, route: str) -> tuple[int, dict]:
    r = requests.get(url + route, timeout=30)
    # KServe's readiness fields (on the inference port GET /v1/models/{m} is also OpenAI's model object)
    return r.status_code, {k: r.json()[k] for k in ("name", "ready")}


def test_not_ready_after_all_startup_models_failed_and_per_model_readiness(store: Path) -> None:
    with harness.Server(store, models=["broken=broken.mar"]) as s:
        assert probes(s) == {"/ping": 500, "/v2/health/ready": 503, "/v2/health/live": 200}
        assert requests.get(s.inference_url + "/ping", timeout=30).json() == {"status": "Unhealthy"}
        # a model without workers: the server serves again, the model is not ready
        assert s.register("echo.mar", initial_workers=0).status_code == 200
        assert probes(s) == {"/ping": 200, "/v2/health/ready": 200, "/v2/health/live": 200}
        not_ready = {"name": "echo", "ready": False}
        assert model_ready(s.inference_url, "/v1/models/echo") == (503, not_ready)
        assert model_ready(s.management_url, "/v1/models/echo") == (503, not_ready)
        assert model_ready(s.inference_url, "/v2/models/echo/ready") == (503, not_ready)
        assert model_ready(s.inference_url, "/v2/models/echo/versions/1.0/ready") == (503, not_ready)
        r = requests.put(f"{s.management_url}/models/echo", params={"min_worker": 1, "synchronous": "true"}, timeout=120)
        assert r.status_code == 200, r.text
        ready = {"name": "echo", "ready": True}
        for url, route in ((s.inference_url, "/v1/models/echo"), (s.management_url, "/v1/models/echo"),
                           (s.inference_url, "/v2/models/echo/ready")):
            assert model_ready(url, route) == (200, ready), route
        assert requests.get(s.inference_url + "/v1/models/nosuch", timeout=30).status_code == 404


def test_probes_without_token_when_the_operator_says_so(store: Path) -> None:
    with harness.Server(store, token_auth=True, models=["echo=echo.mar"], config={"health_check_no_auth": "true"}) as s:
        for path in ("/ping", "/v2/health/live", "/v2/health/ready", "/v2/models/echo/ready",
                     "/v2/models/echo/versions/1.0/ready", "/v1/models/echo"):
            assert requests.get(s.inference_url + path, timeout=30).status_code == 200, path
        assert requests.get(s.management_url + "/v1/models/echo", timeout=30).status_code == 200
        # everything else still needs its key
        assert requests.post(s.inference_url + "/predictions/echo", data=b"x", timeout=30).status_code == 401
        assert requests.get(s.inference_url + "/v2/models/echo", timeout=30).status_code == 401
        assert requests.post(s.inference_url + "/v1/models/echo:predict", json={"instances": [1]}, timeout=30).status_code == 401
        assert requests.get(s.management_url + "/models", timeout=30).status_code == 401
        key = json.loads((s.workdir / "key_file.json").read_text())["inference"]["key"]
        ok = requests.post(s.inference_url + "/predictions/echo", data=b"x", headers={"Authorization": f"Bearer {key}"},
                           timeout=60)
        assert ok.status_code == 200
        # gRPC: Ping answers without a token, Predictions does not
        with grpc.insecure_channel(f"127.0.0.1:{s.grpc_inference_port}") as channel:
            ping = channel.unary_unary(PING, request_serializer=lambda _: b"", response_deserializer=lambda b: b)
            assert b"Healthy" in ping(None, timeout=30)
            predict = channel.unary_unary(PREDICTIONS, request_serializer=lambda _: b"", response_deserializer=lambda b: b)
            with pytest.raises(grpc.RpcError) as err:
                predict(None, timeout=30)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
