"""SageMaker's `/invocations` and `/models/{m}/invoke`, and MMS's legacy `/{m}[/{v}]/predict`, as
TorchServe 0.12 serves them: query parameters become handler inputs, /invocations finds its model
in `model_name` (query, then form field) or uses the only model."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py", version="1.0")
    harness.build_mar(store, "echo2", HANDLERS / "echo_handler.py", version="2.0")
    return store


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store, models=["echo=echo.mar"]) as s:
        yield s


def test_invocations_uses_the_only_model(server: harness.Server) -> None:
    r = requests.post(f"{server.inference_url}/invocations", data=b"hi", timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "hi" and r.json()["keys"] == ["body"]


def test_invocations_query_parameters_become_inputs(server: harness.Server) -> None:
    r = requests.post(f"{server.inference_url}/invocations?model_name=echo&data=from-query", timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["text"] == "from-query"
    assert out["keys"] == ["body", "data", "model_name"]


def test_models_invoke(server: harness.Server) -> None:
    r = requests.post(f"{server.inference_url}/models/echo/invoke", data=b"x", headers={"x-custom": "c"}, timeout=60)
    assert r.status_code == 200, r.text
    assert (r.json()["text"], r.json()["x_custom"], r.json()["explain"]) == ("x", "c", "False")
    missing = requests.post(f"{server.inference_url}/models/nope/invoke", data=b"x", timeout=60)
    assert missing.status_code == 404 and "nope" in missing.json()["message"]


def test_legacy_predict(server: harness.Server) -> None:
    r = requests.post(f"{server.inference_url}/echo/predict?data=q", timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "q"
    r = requests.post(f"{server.inference_url}/echo/1.0/predict", data=b"v", timeout=60)
    assert r.status_code == 200 and r.json()["version"] == "1.0"
    assert requests.post(f"{server.inference_url}/echo/9.9/predict", data=b"v", timeout=60).status_code == 404


def test_management_routes_are_not_shadowed(server: harness.Server) -> None:
    described = requests.get(f"{server.management_url}/models/echo", timeout=60)
    assert described.status_code == 200 and described.json()[0]["modelName"] == "echo"
    # on the management connector /models/{m}/invoke is not an inference route
    assert requests.post(f"{server.management_url}/models/echo/invoke", data=b"x", timeout=60).status_code != 200


def test_invocations_needs_model_name_when_several(server: harness.Server) -> None:
    assert server.register("echo2.mar", initial_workers=1).status_code == 200
    try:
        r = requests.post(f"{server.inference_url}/invocations", data=b"x", timeout=60)
        assert r.status_code == 400 and r.json()["message"] == "Parameter model_name is required."
        form = requests.post(f"{server.inference_url}/invocations", data={"model_name": "echo2", "data": "f"}, timeout=60)
        assert form.status_code == 200, form.text
        assert form.json()["version"] == "2.0" and form.json()["text"] == "f"
        query = requests.post(f"{server.inference_url}/invocations?model_name=echo2", data=b"b", timeout=60)
        assert query.status_code == 200 and query.json()["version"] == "2.0"
    finally:
        requests.delete(f"{server.management_url}/models/echo2", timeout=60)


def test_sagemaker_routes_need_the_inference_token(store: Path) -> None:
    with harness.Server(store, token_auth=True, models=["echo=echo.mar"]) as s:
        assert requests.post(f"{s.inference_url}/invocations", data=b"x", timeout=60).status_code == 401
        key = s.keys()["inference"]["key"]
        ok = requests.post(f"{s.inference_url}/models/echo/invoke", data=b"x", headers={"Authorization": f"Bearer {key}"},
                           timeout=60)
        assert ok.status_code == 200, ok.text
