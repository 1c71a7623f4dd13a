"""The Open Inference Protocol and KServe v1 as the standard clients speak them, unchanged and on
their defaults: tritonclient (http and grpc) and KServe's SDK (InferenceRESTClient v1/v2,
InferenceGRPCClient) call a real server. The clients need protobuf<7 and this venv's grpcio-tools
protobuf>=7, so they run in their own venv (test/clients/requirements.txt, installed from PyPI
once into .bench/) and report per scenario (test/clients/oip_calls.py); the raw-HTTP checks of
the same fixes run here.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

CLIENTS = harness.REPO / "test" / "clients"
REQUIREMENTS = CLIENTS / "requirements.txt"

HANDLER = textwrap.dedent('''
    """kservev2: per input X the outputs X_OUT and X_PLUS1 (numbers) or X_OUT and X_KIND (BYTES:
    upper-cased, and the type each element reached the handler as); kserve v1: each instance's sum."""
    import numpy as np


    def handle(data, context):
        if data is None:
            return None
        out = []
        for item in data:
            if not (isinstance(item, dict) and "datatype" in item):   # kserve v1 instance
                out.append(sum(item))
                continue
            name = item["name"]
            if item["datatype"] == "BYTES":
                text = [x.upper() for x in item["data"]]   # str or bytes alike
                kinds = [type(x).__name__ for x in item["data"]]
                out.append({name + "_OUT": np.array(text, dtype=object).reshape(item["shape"]),
                            name + "_KIND": np.array(kinds, dtype=object).reshape(item["shape"])})
                continue
            dtype = {"FP32": np.float32, "INT64": np.int64}[item["datatype"]]
            arr = np.asarray(item["data"], dtype=dtype).reshape(item["shape"])
            out.append({name + "_OUT": arr * 2, name + "_PLUS1": arr + 1})
        return out
''')


@pytest.fixture(scope="module")
def clients_python() -> Path:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    bin_dir = harness.cached_venv(harness.REPO / ".bench" / f"std-clients-{digest}", ["-r", str(REQUIREMENTS)],
                                  "the standard OIP/KServe clients")
    return bin_dir / "python"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clients")
    handler = root / "client_handler.py"
    handler.write_text(HANDLER)
    store = root / "store"
    harness.build_mar(store, "adder", handler)
    return store


@pytest.fixture(scope="module")
def v2(store: Path):
    with harness.Server(store, config={"service_envelope": "kservev2", "load_models": "adder.mar"}) as s:
        yield s


@pytest.fixture(scope="module")
def v1(store: Path):
    with harness.Server(store, config={"service_envelope": "kserve", "load_models": "adder.mar"}) as s:
        yield s


def _run(python: Path, *args: str) -> dict[str, str]:
    proc = subprocess.run([str(python), str(CLIENTS / "oip_calls.py"), *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def v2_results(clients_python: Path, v2) -> dict[str, str]:
    target = f"127.0.0.1:{v2.grpc_inference_port}"
    return {**_run(clients_python, "triton", v2.inference_url, target),
            **_run(clients_python, "kserve-v2", v2.inference_url, target)}


@pytest.fixture(scope="module")
def v1_results(clients_python: Path, v1) -> dict[str, str]:
    return _run(clients_python, "kserve-v1", v1.inference_url)


V2_SCENARIOS = [
    "triton_http_health_and_metadata",
    *(f"triton_http_infer_{t}_{m}" for t in ("FP32", "INT64", "BYTES") for m in ("binary", "json")),
    "triton_http_gzip_request", "triton_http_outputs_selected", "triton_http_errors",
    "triton_grpc_health_and_metadata", "triton_grpc_infer_FP32", "triton_grpc_infer_INT64",
    "triton_grpc_infer_BYTES", "triton_grpc_outputs_selected", "triton_grpc_errors",
    "kserve_v2_rest", "kserve_v2_grpc",
]


@pytest.mark.parametrize("scenario", V2_SCENARIOS)
def test_oip_clients(v2_results: dict[str, str], scenario: str) -> None:
    assert v2_results.get(scenario) == "ok", v2_results.get(scenario, "not run")


def test_kserve_v1_client(v1_results: dict[str, str]) -> None:
    assert v1_results.get("kserve_v1_rest") == "ok", v1_results


# ------------------------------------------------------------------------------ raw HTTP
def test_v2_errors_are_protocol_shaped(v2) -> None:
    r = requests.post(f"{v2.inference_url}/v2/models/adder/infer", json={"instances": [1]}, timeout=60)
    assert r.status_code == 400 and set(r.json()) == {"error"}, r.text
    assert '"inputs"' in r.json()["error"]
    r = requests.post(f"{v2.inference_url}/v2/models/nosuch/infer", json={"inputs": []}, timeout=60)
    assert r.status_code == 404 and "nosuch" in r.json()["error"], r.text
    r = requests.get(f"{v2.inference_url}/v2/models/nosuch", timeout=60)
    assert r.status_code == 404 and set(r.json()) == {"error"}, r.text


def test_v2_gzip_request_body(v2) -> None:
    body = {"inputs": [{"name": "X", "shape": [2], "datatype": "FP32", "data": [1, 2]}],
            "outputs": [{"name": "X_OUT"}]}
    r = requests.post(f"{v2.inference_url}/v2/models/adder/infer", data=gzip.compress(json.dumps(body).encode()),
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"] == [{"name": "X_OUT", "shape": [2], "datatype": "FP32", "data": [2.0, 4.0]}]


def test_v2_binary_request_errors_name_the_problem(v2) -> None:
    head = json.dumps({"inputs": [{"name": "X", "shape": [2], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 8}}]}).encode()
    url = f"{v2.inference_url}/v2/models/adder/infer"
    r = requests.post(url, data=head + b"\0" * 4, headers={"Inference-Header-Content-Length": str(len(head))},
                      timeout=60)
    assert r.status_code == 400 and "binary_data_size" in r.json()["error"], r.text
    r = requests.post(url, data=head + b"\0" * 8, headers={"Inference-Header-Content-Length": "x"}, timeout=60)
    assert r.status_code == 400 and "Inference-Header-Content-Length" in r.json()["error"], r.text


def test_kserve_v1_liveness_at_root(v1) -> None:
    r = requests.get(v1.inference_url + "/", timeout=30)
    assert r.status_code == 200 and r.json() == {"status": "alive"}
    assert requests.post(v1.inference_url + "/", timeout=30).status_code == 405
    assert requests.get(v1.management_url + "/", timeout=30).status_code == 405


def test_multipart_body_on_a_non_ascii_path_is_404(v1) -> None:
    # the path J%F1%88%A5%A2 as raw bytes: Netty refused to rebuild the request for the multipart decoder (500
    # "The URI contain illegal characters"); other bodies on the same path were 404 for the unknown model
    body = b'--XX\r\nContent-Disposition: form-data; name="data"\r\n\r\nx\r\n--XX--\r\n'
    for path in (b"/predictions/J\xf1\x88\xa5\xa2", b"/predictions/J%F1%88%A5%A2"):
        for content_type, data in ((b"multipart/form-data; boundary=XX", body), (b"text/plain", b"x")):
            status = _raw_post(v1.inference_port, path, content_type, data)
            assert status == 404, (path, content_type, status)


def _raw_post(port: int, path: bytes, content_type: bytes, body: bytes) -> int:
    """One request with the path's bytes as they are (HTTP clients percent-encode them)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: "
                     + content_type + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])
