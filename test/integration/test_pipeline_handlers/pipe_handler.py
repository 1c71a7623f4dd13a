"""Pipeline test handler: deterministic maths, per-row tags, and ops chosen by the request.

Request body: {"tag": str, "x": [4 numbers], "op": optional, ...}; the answer per row is
{"tag", "y", "pre_pid", "post_pid"} so a test can check who ran each stage and that every
client got its own row. Ops: "raise" (preprocess fails), "hold" (write this pool process's
pid to "mark", then sleep "s" seconds: a test can SIGKILL it mid-batch).
"""

import json
import os
import time
from pathlib import Path

import torch

from ts.torch_handler.base_handler import BaseHandler


class PipeHandler(BaseHandler):
    def initialize(self, context):
        self.setup_common(context)
        self.weights = torch.tensor([1.0, -2.0, 3.0, 0.5])
        self.initialize_preprocess(context)
        self.initialized = True

    def initialize_preprocess(self, context):
        self.scale = 2.0

    def preprocess(self, data):
        rows = []
        for row in data:
            body = row.get("body") or row.get("data")
            rows.append(json.loads(body) if isinstance(body, (bytes, bytearray, str)) else body)
        for r in rows:
            if r.get("op") == "raise":
                raise ValueError(f"cannot parse row {r.get('tag')}: expected 4 numbers")
            if r.get("op") == "hold":
                Path(r["mark"]).write_text(str(os.getpid()))
                time.sleep(r["s"])
        x = torch.tensor([r["x"] for r in rows], dtype=torch.float32) * self.scale
        return {"x": x, "tags": [r["tag"] for r in rows], "pid": os.getpid()}

    def inference(self, pre):
        return {"y": pre["x"] @ self.weights, "tags": pre["tags"], "pre_pid": pre["pid"]}

    def postprocess(self, out):
        return [{"tag": t, "y": round(float(y), 4), "pre_pid": out["pre_pid"], "post_pid": os.getpid()}
                for t, y in zip(out["tags"], out["y"].tolist(), strict=True)]
