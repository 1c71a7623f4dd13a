"""The project's gRPC protos match TorchServe 0.12's inference.proto and management.proto.

Stubs generated from TorchServe's files must call tserve unchanged, so packages, service and rpc
names, streaming kinds, message names, field names, numbers, types and labels must all agree. The
expected table below is written from TorchServe 0.12.0's protos; the project's files are parsed
with grpcio-tools' protoc into a descriptor set and compared with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc_tools
import pytest
from google.protobuf import descriptor_pb2

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "frontend" / "src" / "main" / "proto"
WKT_DIR = Path(os.path.dirname(grpc_tools.__file__)) / "_proto"

F = descriptor_pb2.FieldDescriptorProto
STRING, BYTES, INT32, BOOL, MSG = F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_INT32, F.TYPE_BOOL, F.TYPE_MESSAGE
INT64, UINT32, UINT64, FLOAT, DOUBLE = F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_FLOAT, F.TYPE_DOUBLE
OPT, REP = F.LABEL_OPTIONAL, F.LABEL_REPEATED

# field name -> (number, type, label, type_name or "", proto3 `optional`)
Fields = dict[str, tuple[int, int, int, str, bool]]

INFERENCE_PKG = "org.pytorch.serve.grpc.inference"
MANAGEMENT_PKG = "org.pytorch.serve.grpc.management"

EXPECTED_MESSAGES: dict[str, dict[str, Fields]] = {
    "inference.proto": {
        "PredictionsRequest": {
            "model_name": (1, STRING, OPT, "", False),
            "model_version": (2, STRING, OPT, "", False),
            "input": (3, MSG, REP, f".{INFERENCE_PKG}.PredictionsRequest.InputEntry", False),
            "sequenceId": (4, STRING, OPT, "", True),
        },
        "PredictionResponse": {
            "prediction": (1, BYTES, OPT, "", False),
            "sequenceId": (2, STRING, OPT, "", True),
            "status": (3, MSG, OPT, ".google.rpc.Status", True),
        },
        "TorchServeHealthResponse": {"health": (1, STRING, OPT, "", False)},
    },
    "management.proto": {
        "ManagementResponse": {"msg": (1, STRING, OPT, "", False)},
        "DescribeModelRequest": {
            "model_name": (1, STRING, OPT, "", False),
            "model_version": (2, STRING, OPT, "", False),
            "customized": (3, BOOL, OPT, "", False),
        },
        "ListModelsRequest": {
            "limit": (1, INT32, OPT, "", False),
            "next_page_token": (2, INT32, OPT, "", False),
        },
        "RegisterModelRequest": {
            "batch_size": (1, INT32, OPT, "", False),
            "handler": (2, STRING, OPT, "", False),
            "initial_workers": (3, INT32, OPT, "", False),
            "max_batch_delay": (4, INT32, OPT, "", False),
            "model_name": (5, STRING, OPT, "", False),
            "response_timeout": (6, INT32, OPT, "", False),
            "runtime": (7, STRING, OPT, "", False),
            "synchronous": (8, BOOL, OPT, "", False),
            "url": (9, STRING, OPT, "", False),
            "s3_sse_kms": (10, BOOL, OPT, "", False),
            "startup_timeout": (11, INT32, OPT, "", False),
        },
        "ScaleWorkerRequest": {
            "model_name": (1, STRING, OPT, "", False),
            "model_version": (2, STRING, OPT, "", False),
            "max_worker": (3, INT32, OPT, "", False),
            "min_worker": (4, INT32, OPT, "", False),
            "number_gpu": (5, INT32, OPT, "", False),
            "synchronous": (6, BOOL, OPT, "", False),
            "timeout": (7, INT32, OPT, "", False),
        },
        "SetDefaultRequest": {
            "model_name": (1, STRING, OPT, "", False),
            "model_version": (2, STRING, OPT, "", False),
        },
        "UnregisterModelRequest": {
            "model_name": (1, STRING, OPT, "", False),
            "model_version": (2, STRING, OPT, "", False),
        },
    },
}

# rpc name -> (input type, output type, client streaming, server streaming)
Rpcs = dict[str, tuple[str, str, bool, bool]]

EXPECTED_SERVICES: dict[str, tuple[str, Rpcs]] = {
    "inference.proto": (
        "InferenceAPIsService",
        {
            "Ping": (".google.protobuf.Empty", f".{INFERENCE_PKG}.TorchServeHealthResponse", False, False),
            "Predictions": (f".{INFERENCE_PKG}.PredictionsRequest", f".{INFERENCE_PKG}.PredictionResponse", False, False),
            "StreamPredictions": (
                f".{INFERENCE_PKG}.PredictionsRequest", f".{INFERENCE_PKG}.PredictionResponse", False, True),
            "StreamPredictions2": (
                f".{INFERENCE_PKG}.PredictionsRequest", f".{INFERENCE_PKG}.PredictionResponse", True, True),
        },
    ),
    "management.proto": (
        "ManagementAPIsService",
        {
            name: (f".{MANAGEMENT_PKG}.{req}", f".{MANAGEMENT_PKG}.ManagementResponse", False, False)
            for name, req in [
                ("DescribeModel", "DescribeModelRequest"),
                ("ListModels", "ListModelsRequest"),
                ("RegisterModel", "RegisterModelRequest"),
                ("ScaleWorker", "ScaleWorkerRequest"),
                ("SetDefault", "SetDefaultRequest"),
                ("UnregisterModel", "UnregisterModelRequest"),
            ]
        },
    ),
}

EXPECTED_PACKAGES = {"inference.proto": INFERENCE_PKG, "management.proto": MANAGEMENT_PKG}

# TorchServe 0.12's open_inference_grpc.proto (KServe's Open Inference Protocol), nested messages dotted
OIP_PKG = "org.pytorch.serve.grpc.openinference"
_P = f".{OIP_PKG}."
OIP_MESSAGES: dict[str, Fields] = {
    "ServerLiveRequest": {},
    "ServerLiveResponse": {"live": (1, BOOL, OPT, "", False)},
    "ServerReadyRequest": {},
    "ServerReadyResponse": {"ready": (1, BOOL, OPT, "", False)},
    "ModelReadyRequest": {"name": (1, STRING, OPT, "", False), "version": (2, STRING, OPT, "", False)},
    "ModelReadyResponse": {"ready": (1, BOOL, OPT, "", False)},
    "ServerMetadataRequest": {},
    "ServerMetadataResponse": {"name": (1, STRING, OPT, "", False), "version": (2, STRING, OPT, "", False),
                               "extensions": (3, STRING, REP, "", False)},
    "ModelMetadataRequest": {"name": (1, STRING, OPT, "", False), "version": (2, STRING, OPT, "", False)},
    "ModelMetadataResponse": {
        "name": (1, STRING, OPT, "", False), "versions": (2, STRING, REP, "", False),
        "platform": (3, STRING, OPT, "", False),
        "inputs": (4, MSG, REP, _P + "ModelMetadataResponse.TensorMetadata", False),
        "outputs": (5, MSG, REP, _P + "ModelMetadataResponse.TensorMetadata", False)},
    "ModelMetadataResponse.TensorMetadata": {"name": (1, STRING, OPT, "", False), "datatype": (2, STRING, OPT, "", False),
                                             "shape": (3, INT64, REP, "", False)},
    "ModelInferRequest": {
        "model_name": (1, STRING, OPT, "", False), "model_version": (2, STRING, OPT, "", False),
        "id": (3, STRING, OPT, "", False), "parameters": (4, MSG, REP, _P + "ModelInferRequest.ParametersEntry", False),
        "inputs": (5, MSG, REP, _P + "ModelInferRequest.InferInputTensor", False),
        "outputs": (6, MSG, REP, _P + "ModelInferRequest.InferRequestedOutputTensor", False),
        "raw_input_contents": (7, BYTES, REP, "", False)},
    "ModelInferRequest.InferInputTensor": {
        "name": (1, STRING, OPT, "", False), "datatype": (2, STRING, OPT, "", False), "shape": (3, INT64, REP, "", False),
        "parameters": (4, MSG, REP, _P + "ModelInferRequest.InferInputTensor.ParametersEntry", False),
        "contents": (5, MSG, OPT, _P + "InferTensorContents", False)},
    "ModelInferRequest.InferRequestedOutputTensor": {
        "name": (1, STRING, OPT, "", False),
        "parameters": (2, MSG, REP, _P + "ModelInferRequest.InferRequestedOutputTensor.ParametersEntry", False)},
    "ModelInferResponse": {
        "model_name": (1, STRING, OPT, "", False), "model_version": (2, STRING, OPT, "", False),
        "id": (3, STRING, OPT, "", False), "parameters": (4, MSG, REP, _P + "ModelInferResponse.ParametersEntry", False),
        "outputs": (5, MSG, REP, _P + "ModelInferResponse.InferOutputTensor", False),
        "raw_output_contents": (6, BYTES, REP, "", False)},
    "ModelInferResponse.InferOutputTensor": {
        "name": (1, STRING, OPT, "", False), "datatype": (2, STRING, OPT, "", False), "shape": (3, INT64, REP, "", False),
        "parameters": (4, MSG, REP, _P + "ModelInferResponse.InferOutputTensor.ParametersEntry", False),
        "contents": (5, MSG, OPT, _P + "InferTensorContents", False)},
    "InferParameter": {"bool_param": (1, BOOL, OPT, "", False), "int64_param": (2, INT64, OPT, "", False),
                       "string_param": (3, STRING, OPT, "", False)},
    "InferTensorContents": {
        "bool_contents": (1, BOOL, REP, "", False), "int_contents": (2, INT32, REP, "", False),
        "int64_contents": (3, INT64, REP, "", False), "uint_contents": (4, UINT32, REP, "", False),
        "uint64_contents": (5, UINT64, REP, "", False), "fp32_contents": (6, FLOAT, REP, "", False),
        "fp64_contents": (7, DOUBLE, REP, "", False), "bytes_contents": (8, BYTES, REP, "", False)},
}
OIP_RPCS: Rpcs = {
    name: (_P + name + "Request", _P + name + "Response", False, False)
    for name in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer")
}
GOOGLE_RPC_STATUS: Fields = {
    "code": (1, INT32, OPT, "", False),
    "message": (2, STRING, OPT, "", False),
    "details": (3, MSG, REP, ".google.protobuf.Any", False),
}


@pytest.fixture(scope="module")
def descriptors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    out = tmp_path_factory.mktemp("protos") / "set.pb"
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"-I{PROTO_DIR}", f"-I{PROTO_DIR / 'third_party'}", f"-I{WKT_DIR}",
        "--include_imports", f"--descriptor_set_out={out}",
        "inference.proto", "management.proto", "open_inference_grpc.proto",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return {f.name: f for f in fds.file}


def _fields(msg: descriptor_pb2.DescriptorProto) -> Fields:
    return {
        f.name: (f.number, f.type, f.label, f.type_name, f.proto3_optional)
        for f in msg.field
    }


@pytest.mark.parametrize("file", sorted(EXPECTED_MESSAGES))
def test_package_and_java_options(descriptors: dict, file: str) -> None:
    fd = descriptors[file]
    assert fd.package == EXPECTED_PACKAGES[file]
    assert fd.syntax == "proto3"
    assert fd.options.java_multiple_files


@pytest.mark.parametrize("file", sorted(EXPECTED_MESSAGES))
def test_messages_match_torchserve(descriptors: dict, file: str) -> None:
    got = {m.name: _fields(m) for m in descriptors[file].message_type}
    assert got == EXPECTED_MESSAGES[file]


@pytest.mark.parametrize("file", sorted(EXPECTED_SERVICES))
def test_services_match_torchserve(descriptors: dict, file: str) -> None:
    name, rpcs = EXPECTED_SERVICES[file]
    services = descriptors[file].service
    assert [s.name for s in services] == [name]
    got = {
        m.name: (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
        for m in services[0].method
    }
    assert got == rpcs


def test_prediction_input_is_string_to_bytes_map(descriptors: dict) -> None:
    req = next(m for m in descriptors["inference.proto"].message_type if m.name == "PredictionsRequest")
    entry = next(n for n in req.nested_type if n.name == "InputEntry")
    assert entry.options.map_entry
    assert _fields(entry) == {"key": (1, STRING, OPT, "", False), "value": (2, BYTES, OPT, "", False)}


def test_google_rpc_status_keeps_googleapis_layout(descriptors: dict) -> None:
    fd = descriptors["google/rpc/status.proto"]
    assert fd.package == "google.rpc"
    assert fd.options.java_package == "com.google.rpc"
    assert {m.name: _fields(m) for m in fd.message_type} == {"Status": GOOGLE_RPC_STATUS}


def _all_messages(msgs, prefix: str = "") -> dict[str, descriptor_pb2.DescriptorProto]:
    out = {}
    for m in msgs:
        if m.options.map_entry:
            continue
        out[prefix + m.name] = m
        out.update(_all_messages(m.nested_type, prefix + m.name + "."))
    return out


def test_open_inference_protocol_matches_torchserve(descriptors: dict) -> None:
    fd = descriptors["open_inference_grpc.proto"]
    assert fd.package == OIP_PKG
    got = {name: _fields(m) for name, m in _all_messages(fd.message_type).items()}
    assert got == OIP_MESSAGES
    assert [s.name for s in fd.service] == ["GRPCInferenceService"]
    rpcs = {m.name: (m.input_type, m.output_type, m.client_streaming, m.server_streaming) for m in fd.service[0].method}
    assert rpcs == OIP_RPCS
    # every parameters map is map<string, InferParameter>; InferParameter's fields form one oneof
    entries = [n for m in _all_messages(fd.message_type).values() for n in m.nested_type if n.options.map_entry]
    assert len(entries) == 5   # request, its input and output tensors, response, its output tensor
    for e in entries:
        assert _fields(e) == {"key": (1, STRING, OPT, "", False), "value": (2, MSG, OPT, _P + "InferParameter", False)}
    params = _all_messages(fd.message_type)["InferParameter"]
    assert [o.name for o in params.oneof_decl] == ["parameter_choice"]
    assert all(f.HasField("oneof_index") for f in params.field)
