"""Benchmark handler with tunable stage costs: preprocess P ms, inference I ms per batch.

``costs.json`` in the archive: ``{"preprocess_ms": P, "inference_ms": I, "preprocess_mode": M}``.
* inference sleeps I ms: it stands for an accelerator, which leaves the CPU free while it computes;
* preprocess ``spin`` burns P ms of CPU (decode/resize work); ``wait`` blocks P ms without using
  the CPU (inputs fetched from storage or a remote decoder): on a loaded machine it measures the
  pipeline's overlap rather than how many cores happen to be free.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import torch

from ts.torch_handler.base_handler import BaseHandler


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


class CostHandler(BaseHandler):
    def __init__(self) -> None:
        super().__init__()
        self.costs: dict[str, Any] = {}

    def initialize(self, context: Any) -> None:
        self.initialize_preprocess(context)
        self.initialized = True

    def initialize_preprocess(self, context: Any) -> None:
        path = os.path.join(context.system_properties.get("model_dir"), "costs.json")
        with open(path, encoding="utf-8") as fh:
            self.costs = json.load(fh)

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor:
        if self.costs.get("preprocess_mode", "spin") == "spin":
            _spin(self.costs["preprocess_ms"])
        else:
            time.sleep(self.costs["preprocess_ms"] / 1000.0)
        return torch.full((len(data), 16), 1.0)

    def inference(self, data: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        time.sleep(self.costs["inference_ms"] / 1000.0)
        return data.sum(dim=1)

    def postprocess(self, data: torch.Tensor) -> list[str]:
        return [str(float(v)) for v in data]
