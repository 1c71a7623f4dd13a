"""Preprocess-pipeline benchmark: preprocess burns P ms of CPU per batch, inference takes I ms.

Inference sleeps instead of spinning: it stands for an accelerator, which leaves the CPU free
(on a 2-core machine two spinning stages would only measure the scheduler). The costs come from
``costs.json`` in the archive: ``{"preprocess_ms": P, "inference_ms": I}``.

With tserve's ``preprocessWorkers: N`` the pool runs ``preprocess`` of later batches while the
inference process sleeps through earlier ones, so a batch takes max(P/N, I) instead of P + I.
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


def _costs(context: Any) -> dict[str, float]:
    path = os.path.join(context.system_properties.get("model_dir"), "costs.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class PipelineHandler(BaseHandler):
    def __init__(self) -> None:
        super().__init__()
        self.costs: dict[str, float] = {}

    def initialize(self, context: Any) -> None:
        self.costs = _costs(context)
        self.initialized = True

    def initialize_preprocess(self, context: Any) -> None:
        # Runs in each preprocess-pool process (tserve); it needs only the costs, no model.
        self.costs = _costs(context)

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor:
        _spin(self.costs["preprocess_ms"])
        return torch.full((len(data), 16), 1.0)

    def inference(self, data: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        time.sleep(self.costs["inference_ms"] / 1000.0)
        return data.sum(dim=1)

    def postprocess(self, data: torch.Tensor) -> list[str]:
        return [str(float(v)) for v in data]
