"""The Open Inference Protocol's binary tensor data extension (Triton's, which KServe adopted).

A request body is a JSON header of ``Inference-Header-Content-Length`` bytes followed by the raw
data of each input whose ``parameters.binary_data_size`` says how many bytes it takes, in input
order. Raw data is little-endian, row-major; a BYTES element is a 4-byte little-endian length and
its bytes. An answer comes back the same way for each output asked for with
``parameters.binary_data_output`` (the request's) or ``parameters.binary_data`` (the output's).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from ts.torch_handler.request_envelope.base import bad_request

HEADER = "Inference-Header-Content-Length"
BINARY_MEDIA_TYPE = "application/octet-stream"

_DTYPES = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"), "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"), "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
}


def header_length(headers: dict[str, Any]) -> int | None:
    """The request's ``Inference-Header-Content-Length`` (any letter case), or None."""
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == HEADER.lower():
            try:
                return int(str(value))
            except ValueError:
                raise bad_request(f"{HEADER} must be a whole number of bytes, got {value!r}") from None
    return None


def bytes_element(raw: bytes) -> str | bytes:
    """A BYTES element as the handler sees it on every route: text when it is UTF-8, else bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def decode_request(body: bytes, length: int) -> dict[str, Any]:
    """A binary-extension body → the JSON request with every input's ``data`` filled in."""
    if not 0 < length <= len(body):
        raise bad_request(f"{HEADER} is {length} but the body has {len(body)} bytes; it must count the JSON "
                          "header at the body's start")
    try:
        doc = json.loads(body[:length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(f"the first {length} bytes ({HEADER}) must be the JSON inference request: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), list):
        raise bad_request('the binary request\'s JSON header needs "inputs": [{"name", "shape", "datatype", '
                          '"parameters": {"binary_data_size"}}]')
    offset = length
    for tensor in doc["inputs"]:
        params = tensor.get("parameters") if isinstance(tensor, dict) else None
        if not isinstance(params, dict) or "binary_data_size" not in params:
            continue
        size = params.pop("binary_data_size")
        name = tensor.get("name")
        if not isinstance(size, int) or size < 0 or offset + size > len(body):
            raise bad_request(f"input {name}: binary_data_size {size} exceeds the {len(body) - offset} bytes left "
                              "in the body")
        tensor["data"] = decode_tensor(body[offset:offset + size], str(tensor.get("datatype", "")), str(name))
        offset += size
    if offset != len(body):
        raise bad_request(f"the body has {len(body) - offset} bytes after the inputs' binary_data_size; "
                          "give every binary input its size")
    return doc


def decode_tensor(raw: bytes, datatype: str, name: str) -> list[Any]:
    """Raw tensor bytes → the flat element list of a JSON tensor."""
    dt = datatype.upper()
    if dt == "BYTES":
        out: list[Any] = []
        pos = 0
        while pos < len(raw):
            if pos + 4 > len(raw):
                raise bad_request(f"input {name}: truncated BYTES element length at byte {pos}")
            (n,) = struct.unpack_from("<I", raw, pos)
            if pos + 4 + n > len(raw):
                raise bad_request(f"input {name}: BYTES element of {n} bytes exceeds the data")
            out.append(bytes_element(raw[pos + 4:pos + 4 + n]))
            pos += 4 + n
        return out
    if dt == "BF16":
        if len(raw) % 2:
            raise bad_request(f"input {name}: {len(raw)} bytes is not a whole number of BF16 elements")
        widened = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return list(widened.view(np.float32).tolist())
    dtype = _DTYPES.get(dt)
    if dtype is None:
        raise bad_request(f"input {name}: unknown datatype {datatype!r}; use one of BOOL, INT8..INT64, "
                          "UINT8..UINT64, FP16, BF16, FP32, FP64, BYTES")
    if len(raw) % dtype.itemsize:
        raise bad_request(f"input {name}: {len(raw)} bytes is not a whole number of {dt} elements "
                          f"({dtype.itemsize} bytes each)")
    return list(np.frombuffer(raw, dtype=dtype).tolist())


def encode_tensor(arr: np.ndarray, datatype: str) -> bytes:
    """A tensor's raw bytes in the extension's layout."""
    if datatype == "BYTES":
        parts = []
        for item in arr.flatten().tolist():
            raw = item if isinstance(item, bytes) else str(item).encode("utf-8")
            parts.append(struct.pack("<I", len(raw)) + raw)
        return b"".join(parts)
    return np.ascontiguousarray(arr, dtype=_DTYPES[datatype]).tobytes()


def encode_response(doc: dict[str, Any], raws: list[bytes]) -> tuple[bytes, int]:
    """The JSON answer (binary outputs already carry ``binary_data_size``) and their raw bytes →
    the body and its JSON header's length."""
    head = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    return head + b"".join(raws), len(head)
