"""KServe v1 and Open Inference Protocol (KServe v2) routes, in the JSON shapes KServe documents,
as KServe's TorchServe runtime calls them (`service_envelope=kserve` / `kservev2`)."""

from __future__ import annotations

import importlib
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import grpc
import grpc_tools
import pytest
import requests

import harness

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "frontend" / "src" / "main" / "proto"

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
    assert r.status_code == 400
    assert "inputs" in r.json()["error"]   # the protocol's error shape


# ---------------------------------------------------------------- OIP gRPC (GRPCInferenceService)


@pytest.fixture(scope="module")
def oip(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    """open_inference_grpc stubs compiled from the project's proto with grpcio-tools."""
    out = tmp_path_factory.mktemp("oip_stubs")
    wkt = Path(os.path.dirname(grpc_tools.__file__)) / "_proto"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"-I{wkt}",
           f"--python_out={out}", f"--grpc_python_out={out}", "open_inference_grpc.proto"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("open_inference_grpc_pb2"), importlib.import_module("open_inference_grpc_pb2_grpc")
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def oip_stub(v2, oip):
    pb, pb_grpc = oip
    with grpc.insecure_channel(f"127.0.0.1:{v2.grpc_inference_port}") as ch:
        yield pb, pb_grpc.GRPCInferenceServiceStub(ch)


def test_oip_grpc_server_and_model_status(oip_stub) -> None:
    pb, stub = oip_stub
    assert stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live is True
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready is True
    meta = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30)
    assert meta.name and meta.version and "kserve" in meta.extensions
    assert stub.ModelReady(pb.ModelReadyRequest(name="adder"), timeout=30).ready is True
    assert stub.ModelReady(pb.ModelReadyRequest(name="adder", version="1.0"), timeout=30).ready is True
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelReady(pb.ModelReadyRequest(name="nosuch"), timeout=30)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    model = stub.ModelMetadata(pb.ModelMetadataRequest(name="adder"), timeout=30)
    assert model.name == "adder" and list(model.versions) == ["1.0"]


def test_oip_grpc_model_infer_with_typed_contents(oip_stub) -> None:
    pb, stub = oip_stub
    tensor = pb.ModelInferRequest.InferInputTensor(
        name="input-0", datatype="FP32", shape=[2, 2], contents=pb.InferTensorContents(fp32_contents=[1, 2, 3, 4]))
    r = stub.ModelInfer(pb.ModelInferRequest(model_name="adder", id="7", inputs=[tensor]), timeout=60)
    assert (r.model_name, r.model_version, r.id) == ("adder", "1.0", "7")
    (out,) = r.outputs
    assert (out.name, out.datatype, list(out.shape)) == ("input-0", "FP32", [2, 2])
    assert list(out.contents.fp32_contents) == [2.0, 4.0, 6.0, 8.0]


def test_oip_grpc_model_infer_with_raw_contents(oip_stub) -> None:
    pb, stub = oip_stub
    tensor = pb.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[3])
    raw = struct.pack("<3f", 0.5, 1.5, -2.0)
    r = stub.ModelInfer(pb.ModelInferRequest(model_name="adder", inputs=[tensor], raw_input_contents=[raw]), timeout=60)
    # raw contents in, raw contents out (as KServe and Triton answer; tritonclient reads only these)
    assert not r.outputs[0].contents.fp32_contents
    assert struct.unpack("<3f", r.raw_output_contents[0]) == (1.0, 3.0, -4.0)


def test_oip_grpc_model_infer_errors(oip_stub) -> None:
    pb, stub = oip_stub
    tensor = pb.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[1])
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(pb.ModelInferRequest(model_name="adder", inputs=[tensor], raw_input_contents=[b"abc"]), timeout=60)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "FP32" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(pb.ModelInferRequest(model_name="nosuch", inputs=[tensor]), timeout=60)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
