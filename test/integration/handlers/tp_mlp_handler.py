"""Tensor parallel test model: the MLP's first two layers split over the ranks with DTensor
(ColwiseParallel then RowwiseParallel, from model-config.yaml's tp.plan)."""

from __future__ import annotations

from typing import Any

import torch
from mlp_common import fake_deepspeed_shm, make_mlp, rows

from ts.context import Context
from ts.torch_handler.distributed.base_tp_handler import BaseTPHandler


class TPMLPHandler(BaseTPHandler):
    def load_model(self, dtype: torch.dtype | None) -> torch.nn.Module:
        return make_mlp()

    def initialize(self, context: Context) -> None:
        super().initialize(context)
        if (context.model_yaml_config or {}).get("handler", {}).get("fake_deepspeed_shm"):
            fake_deepspeed_shm(self.rank_info.rank)

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor:
        return rows(data)

    def postprocess(self, data: torch.Tensor) -> list[Any]:
        return data.tolist()

