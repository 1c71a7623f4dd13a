"""Test handler driven by the first request's "op" (see test_worker.py)."""

import time

import torch

from ts.handler_utils.utils import send_intermediate_predict_response
from ts.utils.util import PredictionException


class EchoHandler:
    def initialize(self, context):
        self.context = context
        if context.model_yaml_config.get("handler", {}).get("fail_init"):
            raise RuntimeError("tokenizer file vocab.txt is missing from the archive")
        self.hits = context.metrics.add_metric_to_cache("EchoHits", "count", ["ModelName"])

    def handle(self, data, context):
        first = data[0].get("body") if data else None
        op = first.get("op") if isinstance(first, dict) else "echo"
        if op == "raise":
            raise ValueError("bad pixel value -3")
        if op == "predexc":
            raise PredictionException("input too long for this model", 422)
        if op == "oom":
            raise MemoryError("cannot allocate 4 GiB")
        if op == "short":
            return data[:-1]
        if op == "notlist":
            return {"x": 1}
        if op == "sleep":
            time.sleep(first.get("s", 0.2))
        if op == "stream":
            for i in range(3):
                send_intermediate_predict_response([f"piece{i} "] * len(data), context.request_ids,
                                                   "Intermediate Prediction success", 200, context)
            return ["end"] * len(data)
        if op == "tensor":
            return [torch.arange(3)] * len(data)
        self.hits.add_or_update(len(data), [context.model_name])
        context.metrics.add_counter("EchoRequests", len(data))
        out = []
        for idx, row in enumerate(data):
            context.set_response_header(idx, "x-index", str(idx))
            value = row.get("body", b"multipart")
            if isinstance(value, dict) and value.get("status"):
                context.set_response_status(value["status"], "custom phrase", idx)
            if isinstance(value, (bytes, str)):
                context.set_response_content_type(idx, "text/plain")
                out.append({"type": type(value).__name__, "len": len(value),
                            "header": context.get_request_header(idx, "x-test"),
                            "parts": sorted(row)})
            else:
                out.append(value)
        return out
