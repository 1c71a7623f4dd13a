"""Pool test handler: preprocess behaviour chosen by the first request's "op"."""

import os
import signal
import time

import torch

from ts.handler_utils.utils import send_intermediate_predict_response
from ts.torch_handler.base_handler import BaseHandler


class PoolHandler(BaseHandler):
    def initialize(self, context):
        self.setup_common(context)
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 2).eval()
        self.scale = 2.0
        self.initialized = True

    def initialize_preprocess(self, context):
        self.scale = 2.0

    def preprocess(self, data):
        first = data[0].get("body")
        op = first.get("op") if isinstance(first, dict) else None
        if op == "raise":
            raise ValueError("cannot parse row 0: expected 4 numbers")
        if op == "sleep":
            time.sleep(first["s"])
        if op == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if op == "status":
            self.context.set_response_status(202, "accepted in pool", 0)
        if op == "metric":
            self.context.metrics.add_counter("PoolRows", len(data))
        x = torch.tensor([row["body"]["x"] for row in data], dtype=torch.float32) * self.scale
        return {"x": x, "pid": os.getpid(), "op": op}

    def inference(self, pre):
        if pre["op"] == "late_metric":  # recorded, then drained only after the sleep
            self.context.metrics.add_counter("InferenceRows", len(pre["x"]))
            time.sleep(1.0)
        with torch.inference_mode():
            y = self.model(pre["x"])
        return {"y": y, "pre_pid": pre["pid"], "shared": pre["x"].is_shared(), "op": pre["op"]}

    def postprocess(self, out):
        if out["op"] == "slow_post":
            time.sleep(0.3)
        if out["op"] == "stream":
            n = len(self.context.request_ids)
            send_intermediate_predict_response([f"chunk-from-{os.getpid()}"] * n, self.context.request_ids,
                                               "Intermediate Prediction success", 200, self.context)
        return [{"y": [round(v, 6) for v in row], "pre_pid": out["pre_pid"], "post_pid": os.getpid(),
                 "shared": out["shared"]} for row in out["y"].tolist()]
