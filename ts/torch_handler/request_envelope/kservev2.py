"""KServe v2 (Open Inference Protocol) envelope.

In: {"id", "inputs": [{"name", "shape", "datatype", "data"}], "outputs": [{"name"}], "parameters"}
per request, as JSON or with the binary tensor data extension (:mod:`oip_binary`); the handler
sees each input dict, its ``data`` a flat list. BYTES elements are ``str`` when they are UTF-8
text and ``bytes`` otherwise, whichever way they came (JSON, binary REST, gRPC).

Out, per request: {"id", "model_name", "model_version", "outputs": [{"name", "shape",
"datatype", "data"}]}. One handler result per input: an array (the output takes the input's
name) or a mapping {output name: array} (one output per key). The request's ``outputs`` picks
which come back; ``parameters.binary_data_output`` / an output's ``parameters.binary_data``
answer those outputs as raw bytes (binary extension).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ts.torch_handler.request_envelope import oip_binary
from ts.torch_handler.request_envelope.base import BaseEnvelope, bad_request, request_body, split_by_lengths

_DATATYPES = {
    "bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float16": "FP16",
    "float32": "FP32", "float64": "FP64",
}
# an input parameter the frontend sets when it had to carry non-UTF-8 BYTES elements as base64 (gRPC)
BASE64_PARAMETER = "tserve_bytes_base64"


def to_datatype(dtype: np.dtype) -> str:
    return _DATATYPES.get(str(dtype), "BYTES")


@dataclass
class _Request:
    """What one request asked for besides its inputs."""
    id: Any
    names: list[str]
    outputs: list[str] | None = None            # the requested outputs' names, in order; None: all
    binary_default: bool = False                # parameters.binary_data_output
    binary: dict[str, bool] = field(default_factory=dict)   # per output parameters.binary_data


class KServev2Envelope(BaseEnvelope):
    def __init__(self, handle_fn: Any) -> None:
        super().__init__(handle_fn)
        self._requests: list[_Request] = []

    def parse_input(self, data: list[Any]) -> list[Any]:
        self._requests = []
        items: list[Any] = []
        for idx, row in enumerate(data):
            body = self._body(idx, row)
            if "inputs" not in body:
                raise bad_request('the kservev2 envelope needs the key "inputs" in the request body: '
                                  '{"inputs": [{"name", "shape", "datatype", "data"}]} '
                                  f'(got keys {sorted(body)})')
            inputs = body["inputs"]
            if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
                raise bad_request('"inputs" must be a list of objects {"name", "shape", "datatype", "data"} '
                                  'in the kservev2 envelope')
            for tensor in inputs:
                _normalise_bytes(tensor)
            req = _Request(body.get("id"), [str(i.get("name", f"input-{n}")) for n, i in enumerate(inputs)])
            _read_requested_outputs(body, req)
            self._requests.append(req)
            items.extend(inputs)
        return items

    def _body(self, idx: int, row: Any) -> dict[str, Any]:
        """The request's JSON document, decoded from the binary extension when its header says so."""
        headers = self.context.get_all_request_header(idx) if self.context and self.context.request_processor else {}
        length = oip_binary.header_length(headers)
        raw = row.get("data") or row.get("body") if isinstance(row, dict) else row
        if length is not None and isinstance(raw, (bytes, bytearray)):
            return oip_binary.decode_request(bytes(raw), length)
        if length is not None and isinstance(raw, str):
            return oip_binary.decode_request(raw.encode("utf-8"), length)
        return dict(request_body(row, "kservev2"))

    def format_output(self, data: list[Any]) -> list[Any]:
        total = sum(len(r.names) for r in self._requests)
        if len(data) != total:
            raise ValueError(f"handler returned {len(data)} outputs for {total} inputs")
        model = ((self.context.manifest or {}).get("model", {}) if self.context else {})
        out: list[Any] = []
        chunks = split_by_lengths(list(data), [len(r.names) for r in self._requests])
        for idx, (req, chunk) in enumerate(zip(self._requests, chunks, strict=True)):
            tensors: list[tuple[str, np.ndarray]] = []
            for name, item in zip(req.names, chunk, strict=True):
                tensors.extend(_named_outputs(name, item))
            doc = {"id": req.id or (self.context.get_request_id(idx) if self.context else None),
                   "model_name": model.get("modelName", self.context.model_name if self.context else ""),
                   "model_version": model.get("modelVersion"), "outputs": []}
            out.append(self._answer(idx, req, doc, _select(req, tensors)))
        return out

    def _answer(self, idx: int, req: _Request, doc: dict[str, Any],
                tensors: list[tuple[str, np.ndarray]]) -> Any:
        """The JSON answer, or the binary extension's body when an output is asked for as binary."""
        raws: list[bytes] = []
        for name, arr in tensors:
            datatype = to_datatype(arr.dtype)
            tensor: dict[str, Any] = {"name": name, "shape": list(arr.shape), "datatype": datatype}
            if req.binary.get(name, req.binary_default):
                raw = oip_binary.encode_tensor(arr, datatype)
                tensor["parameters"] = {"binary_data_size": len(raw)}
                raws.append(raw)
            else:
                tensor["data"] = _json_data(arr, datatype)
            doc["outputs"].append(tensor)
        if not raws:
            return doc
        body, length = oip_binary.encode_response(doc, raws)
        if self.context is not None:
            self.context.set_response_header(idx, oip_binary.HEADER, str(length))
            self.context.set_response_content_type(idx, oip_binary.BINARY_MEDIA_TYPE)
        return body


def _normalise_bytes(tensor: dict[str, Any]) -> None:
    """BYTES elements the frontend carried as base64 (gRPC, non-UTF-8) become what REST gives."""
    params = tensor.get("parameters")
    if isinstance(params, dict) and params.pop(BASE64_PARAMETER, False) and isinstance(tensor.get("data"), list):
        tensor["data"] = [oip_binary.bytes_element(base64.b64decode(x)) for x in tensor["data"]]


def _read_requested_outputs(body: dict[str, Any], req: _Request) -> None:
    params = body.get("parameters")
    if isinstance(params, dict):
        req.binary_default = bool(params.get("binary_data_output", False))
    outputs = body.get("outputs")
    if outputs is None:
        return
    if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                for o in outputs):
        raise bad_request('"outputs" must be a list of objects {"name", "parameters"} in the kservev2 envelope')
    req.outputs = [o["name"] for o in outputs]
    for o in outputs:
        p = o.get("parameters")
        if isinstance(p, dict) and "binary_data" in p:
            req.binary[o["name"]] = bool(p["binary_data"])


def _named_outputs(name: str, item: Any) -> list[tuple[str, np.ndarray]]:
    """A handler result → (output name, array) pairs: a mapping names its outputs, else the input's name."""
    if isinstance(item, dict):
        return [(str(k), _array(v)) for k, v in item.items()]
    return [(name, _array(item))]


def _array(item: Any) -> np.ndarray:
    if hasattr(item, "detach"):
        item = item.detach().cpu().numpy()
    return np.asarray(item)


def _select(req: _Request, tensors: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
    if req.outputs is None:
        return tensors
    by_name = dict(tensors)
    missing = [n for n in req.outputs if n not in by_name]
    if missing:
        raise bad_request(f"requested outputs {missing} are not among the model's outputs {list(by_name)}")
    return [(n, by_name[n]) for n in req.outputs]


def _json_data(arr: np.ndarray, datatype: str) -> list[Any]:
    flat = arr.flatten().tolist()
    if datatype == "BYTES":   # JSON carries text: bytes elements as UTF-8 (binary outputs carry them exactly)
        return [x.decode("utf-8", errors="replace") if isinstance(x, bytes) else x for x in flat]
    return list(flat)
