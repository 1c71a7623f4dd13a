"""KServe v2 (Open Inference Protocol) envelope.

In: {"id", "inputs": [{"name", "shape", "datatype", "data"}]} per request; the handler sees
each input dict. Out, per request: {"id", "model_name", "model_version",
"outputs": [{"name", "shape", "datatype", "data"}]}, one output per handler result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ts.torch_handler.request_envelope.base import BaseEnvelope, bad_request, request_body, split_by_lengths

_DATATYPES = {
    "bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float16": "FP16",
    "float32": "FP32", "float64": "FP64",
}


def to_datatype(dtype: np.dtype) -> str:
    return _DATATYPES.get(str(dtype), "BYTES")


class KServev2Envelope(BaseEnvelope):
    def __init__(self, handle_fn: Any) -> None:
        super().__init__(handle_fn)
        self._lengths: list[int] = []
        self._ids: list[Any] = []
        self._names: list[str] = []

    def parse_input(self, data: list[Any]) -> list[Any]:
        self._lengths, self._ids, self._names = [], [], []
        items: list[Any] = []
        for row in data:
            body = request_body(row, "kservev2")
            if "inputs" not in body:
                raise bad_request('the kservev2 envelope needs the key "inputs" in the request body: '
                                  '{"inputs": [{"name", "shape", "datatype", "data"}]} '
                                  f'(got keys {sorted(body)})')
            inputs = body["inputs"]
            if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
                raise bad_request('"inputs" must be a list of objects {"name", "shape", "datatype", "data"} '
                                  'in the kservev2 envelope')
            self._ids.append(body.get("id"))
            self._lengths.append(len(inputs))
            self._names.extend(str(i.get("name", f"input-{n}")) for n, i in enumerate(inputs))
            items.extend(inputs)
        return items

    def format_output(self, data: list[Any]) -> list[dict[str, Any]]:
        if len(data) != sum(self._lengths):
            raise ValueError(f"handler returned {len(data)} outputs for {sum(self._lengths)} inputs")
        model = ((self.context.manifest or {}).get("model", {}) if self.context else {})
        out, offset = [], 0
        for idx, chunk in enumerate(split_by_lengths(list(data), self._lengths)):
            req_id = self._ids[idx] or (self.context.get_request_id(idx) if self.context else None)
            outputs = [self._to_json(item, self._names[offset + j]) for j, item in enumerate(chunk)]
            offset += len(chunk)
            out.append({"id": req_id, "model_name": model.get("modelName", self.context.model_name if self.context else ""),
                        "model_version": model.get("modelVersion"), "outputs": outputs})
        return out

    @staticmethod
    def _to_json(item: Any, name: str) -> dict[str, Any]:
        if hasattr(item, "detach"):
            item = item.detach().cpu().numpy()
        arr = np.asarray(item)
        flat = arr.flatten()
        return {"name": name, "shape": list(arr.shape), "datatype": to_datatype(flat.dtype),
                "data": flat.tolist()}
