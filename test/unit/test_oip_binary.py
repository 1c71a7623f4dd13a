"""The kservev2 envelope with the Open Inference Protocol's binary tensor data extension, requested
outputs, named outputs and BYTES elements (ts/torch_handler/request_envelope/oip_binary.py)."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest

from ts.context import Context, RequestProcessor
from ts.model_loader import wrap_envelope
from ts.torch_handler.request_envelope import oip_binary
from ts.utils.util import PredictionException


def ctx_for(headers: list[dict]) -> Context:
    ctx = Context("m", "/m", {"model": {"modelName": "m", "modelVersion": "1.0"}}, len(headers), None, "x")
    ctx.set_batch({i: f"r{i}" for i in range(len(headers))}, [RequestProcessor(h) for h in headers])
    return ctx


def binary_body(doc: dict, raws: list[bytes]) -> tuple[bytes, dict]:
    head = json.dumps(doc).encode()
    return head + b"".join(raws), {"inference-header-content-length": str(len(head))}


def handler(data, context):
    """Numbers: {X_OUT: doubled, X_PLUS1}; BYTES: {X_OUT: upper-cased, X_KIND: element types}."""
    out = []
    for item in data:
        if item["datatype"] == "BYTES":
            out.append({"X_OUT": np.array([x.upper() for x in item["data"]], dtype=object),
                        "X_KIND": np.array([type(x).__name__ for x in item["data"]], dtype=object)})
        else:
            arr = np.asarray(item["data"], dtype=np.float32).reshape(item["shape"])
            out.append({"X_OUT": arr * 2, "X_PLUS1": arr + 1})
    return out


def bytes_tensor(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(x)) + x for x in items)


def test_binary_in_and_out_with_selected_outputs():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    doc = {"inputs": [{"name": "X", "shape": [2, 3], "datatype": "FP32",
                       "parameters": {"binary_data_size": arr.nbytes}}],
           "outputs": [{"name": "X_PLUS1", "parameters": {"binary_data": True}}, {"name": "X_OUT"}]}
    body, headers = binary_body(doc, [arr.tobytes()])
    ctx = ctx_for([headers])
    (answer,) = wrap_envelope(handler, "kservev2")([{"body": body}], ctx)
    length = int(ctx.get_response_headers(0)[oip_binary.HEADER])
    assert ctx.get_response_content_type(0) == oip_binary.BINARY_MEDIA_TYPE
    head = json.loads(answer[:length])
    assert [o["name"] for o in head["outputs"]] == ["X_PLUS1", "X_OUT"]
    assert head["outputs"][0]["parameters"] == {"binary_data_size": arr.nbytes}
    assert np.array_equal(np.frombuffer(answer[length:], dtype="<f4").reshape(2, 3), arr + 1)
    assert head["outputs"][1]["data"] == (arr * 2).flatten().tolist()


def test_binary_default_for_every_output_and_bytes_elements():
    raw = bytes_tensor([b"hi", "w\u00f6".encode(), b"\xff\xfe"])
    doc = {"inputs": [{"name": "X", "shape": [3], "datatype": "BYTES", "parameters": {"binary_data_size": len(raw)}}],
           "parameters": {"binary_data_output": True}}
    body, headers = binary_body(doc, [raw])
    ctx = ctx_for([headers])
    seen = []

    def upper(data, context):
        seen.extend(data[0]["data"])
        return [{"X_OUT": np.array([x.upper() for x in data[0]["data"]], dtype=object)}]

    (answer,) = wrap_envelope(upper, "kservev2")([{"body": body}], ctx)
    assert seen == ["hi", "w\u00f6", b"\xff\xfe"]   # text when UTF-8, else bytes
    length = int(ctx.get_response_headers(0)[oip_binary.HEADER])
    assert answer[length:] == bytes_tensor([b"HI", "W\u00d6".encode(), b"\xff\xfe"])


def test_json_request_with_a_base64_bytes_input_from_grpc():
    doc = {"inputs": [{"name": "X", "shape": [2], "datatype": "BYTES", "data": [
        base64.b64encode(b"ok").decode(), base64.b64encode(b"\x80").decode()],
        "parameters": {"tserve_bytes_base64": True}}]}
    seen = []

    def keep(data, context):
        seen.append(data[0])
        return [{"X_OUT": np.array(["a", "b"])}]

    (answer,) = wrap_envelope(keep, "kservev2")([{"body": doc}], ctx_for([{}]))
    assert seen[0]["data"] == ["ok", b"\x80"] and seen[0]["parameters"] == {}
    assert answer["outputs"] == [{"name": "X_OUT", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]


@pytest.mark.parametrize("datatype,values", [
    ("BOOL", [True, False]), ("UINT8", [0, 255]), ("INT16", [-3, 7]), ("UINT32", [1, 4_000_000_000]),
    ("INT64", [-(2 ** 40), 5]), ("FP16", [0.5, -2.0]), ("FP64", [1e-300, 3.25]),
])
def test_raw_tensors_round_trip(datatype, values):
    arr = np.array(values, dtype=oip_binary._DTYPES[datatype])
    raw = oip_binary.encode_tensor(arr, datatype)
    assert oip_binary.decode_tensor(raw, datatype, "X") == arr.tolist()


def test_bf16_widens_to_float():
    raw = struct.pack("<2H", 0x3F80, 0xC000)   # 1.0, -2.0
    assert oip_binary.decode_tensor(raw, "BF16", "X") == [1.0, -2.0]


@pytest.mark.parametrize("body,length,needle", [
    (b'{"inputs": []}', 99, "must count the JSON header"),
    (b'{"inputs": [', 12, "JSON inference request"),
    (b'{"x": 1}', 8, '"inputs"'),
    (b'{"inputs": [{"name": "X", "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}\0\0\0\0', 86,
     "exceeds"),
    (b'{"inputs": []}\0', 14, "bytes after the inputs"),
])
def test_malformed_binary_bodies_are_400(body, length, needle):
    with pytest.raises(PredictionException) as err:
        oip_binary.decode_request(body, length)
    assert err.value.error_code == 400 and needle in err.value.message


@pytest.mark.parametrize("raw,datatype,needle", [
    (b"\x01\x00", "BYTES", "truncated"), (b"\x09\x00\x00\x00ab", "BYTES", "exceeds"),
    (b"\x00\x00\x00", "FP32", "whole number"), (b"\x00", "BF16", "whole number"), (b"", "COMPLEX", "unknown"),
])
def test_malformed_tensors_are_400(raw, datatype, needle):
    with pytest.raises(PredictionException) as err:
        oip_binary.decode_tensor(raw, datatype, "X")
    assert needle in err.value.message


def test_header_length_must_be_a_number():
    assert oip_binary.header_length({"Inference-Header-Content-Length": "12"}) == 12
    assert oip_binary.header_length({"other": "1"}) is None
    with pytest.raises(PredictionException):
        oip_binary.header_length({"INFERENCE-HEADER-CONTENT-LENGTH": "x"})


def test_unknown_requested_output_and_bad_outputs_are_400():
    doc = {"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1]}], "outputs": [{"name": "NOPE"}]}
    entry = wrap_envelope(handler, "kservev2")
    with pytest.raises(PredictionException) as err:
        entry([{"body": doc}], ctx_for([{}]))
    assert "NOPE" in err.value.message and "X_OUT" in err.value.message
    with pytest.raises(PredictionException):
        entry([{"body": {**doc, "outputs": ["X_OUT"]}}], ctx_for([{}]))


def test_plain_results_keep_the_input_name_and_a_batch_splits_per_request():
    def double(data, context):
        return [np.asarray(x["data"]) * 2 for x in data]

    rows = [{"body": {"id": "a", "inputs": [{"name": "A", "shape": [1], "datatype": "INT64", "data": [2]}]}},
            {"body": {"inputs": [{"name": "B", "shape": [2], "datatype": "INT64", "data": [1, 3]}]}}]
    a, b = wrap_envelope(double, "kservev2")(rows, ctx_for([{}, {}]))
    assert a["id"] == "a" and a["outputs"] == [{"name": "A", "shape": [1], "datatype": "INT64", "data": [4]}]
    assert b["id"] == "r1" and b["outputs"][0]["data"] == [2, 6]
