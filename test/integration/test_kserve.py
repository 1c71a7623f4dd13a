"""KServe v1 and Open Inference Protocol (KServe v2) routes, in the JSON shapes KServe documents,
as KServe's TorchServe runtime calls them (`service_envelope=kserve` / `kservev2`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLER = textwrap.dedent('''
    """Envelope-agnostic test handler: kserve gives instances (lists), kservev2 input dicts."""
    import numpy as np


    def handle(data, context):
        if data is None:
            return None
        out = []
        for item in data:
            if isinstance(item, dict) and "data" in item:          # kservev2 input tensor
                arr = np.asarray(item["data"], dtype=np.float32).reshape(item["shape"])
                out.append(arr * 2)
            else:                                                  # kserve v1 instance
                out.append(sum(item))
        return out
''')


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kserve")
    handler = root / "kserve_handler.py"
    handler.write_text(HANDLER)
    store = root / "store"
    harness.build_mar(store, "adder", handler)
    return store


@pytest.fixture(scope="module")
def v1(store: Path):
    with harness.Server(store, config={"service_envelope": "kserve", "load_models": "adder.mar"}) as s:
        yield s


@pytest.fixture(scope="module")
def v2(store: Path):
    with harness.Server(store, config={"service_envelope": "kservev2", "load_models": "adder.mar"}) as s:
        yield s


def test_v1_predict(v1) -> None:
    r = requests.post(f"{v1.inference_url}/v1/models/adder:predict", json={"instances": [[1, 2], [3, 4, 5]]}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json() == {"predictions": [3, 12]}


def test_v1_explain(v1) -> None:
    r = requests.post(f"{v1.inference_url}/v1/models/adder:explain", json={"instances": [[1, 1]]}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json() == {"explanations": [2]}


def test_v1_model_ready_on_management_port(v1) -> None:
    r = requests.get(f"{v1.management_url}/v1/models/adder", timeout=30)
    assert r.status_code == 200
    assert r.json() == {"name": "adder", "ready": True}
    assert requests.get(f"{v1.management_url}/v1/models/nosuch", timeout=30).status_code == 404


def test_v1_errors(v1) -> None:
    r = requests.post(f"{v1.inference_url}/v1/models/nosuch:predict", json={"instances": [[1]]}, timeout=30)
    assert r.status_code == 404
    assert "nosuch" in r.json()["message"]
    r = requests.post(f"{v1.inference_url}/v1/models/adder:predict", json={"inputs": [1]}, timeout=60)
    assert r.status_code >= 400
    assert "instances" in r.json()["message"]


def test_v2_infer(v2) -> None:
    body = {"id": "42", "inputs": [{"name": "input-0", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    r = requests.post(f"{v2.inference_url}/v2/models/adder/infer", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "id": "42", "model_name": "adder", "model_version": "1.0",
        "outputs": [{"name": "input-0", "shape": [2, 2], "datatype": "FP32", "data": [2.0, 4.0, 6.0, 8.0]}],
    }
    r = requests.post(f"{v2.inference_url}/v2/models/adder/versions/1.0/infer", json=body, timeout=60)
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [2.0, 4.0, 6.0, 8.0]
    r = requests.post(f"{v2.inference_url}/v2/models/adder/versions/9/infer", json=body, timeout=60)
    assert r.status_code == 404


def test_v2_health_and_server_metadata(v2) -> None:
    assert requests.get(f"{v2.inference_url}/v2/health/live", timeout=30).json() == {"live": True}
    r = requests.get(f"{v2.inference_url}/v2/health/ready", timeout=30)
    assert r.status_code == 200 and r.json() == {"ready": True}
    meta = requests.get(f"{v2.inference_url}/v2", timeout=30).json()
    assert meta["name"] and meta["version"] and "kserve" in meta["extensions"]


def test_v2_model_ready_and_metadata(v2) -> None:
    r = requests.get(f"{v2.inference_url}/v2/models/adder/ready", timeout=30)
    assert r.status_code == 200 and r.json() == {"name": "adder", "ready": True}
    assert requests.get(f"{v2.inference_url}/v2/models/adder/versions/1.0/ready", timeout=30).json()["ready"] is True
    assert requests.get(f"{v2.inference_url}/v2/models/nosuch/ready", timeout=30).status_code == 404
    meta = requests.get(f"{v2.inference_url}/v2/models/adder", timeout=30).json()
    assert meta["name"] == "adder" and meta["versions"] == ["1.0"]
    assert {"platform", "inputs", "outputs"} <= set(meta)
    assert requests.get(f"{v2.inference_url}/v2/models/nosuch", timeout=30).status_code == 404


def test_v2_bad_request_names_the_expected_shape(v2) -> None:
    r = requests.post(f"{v2.inference_url}/v2/models/adder/infer", json={"instances": [1]}, timeout=60)
    assert r.status_code >= 400
    assert "inputs" in r.json()["message"]
