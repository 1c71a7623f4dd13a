"""Pipeline parallel test model: the MLP in two stages (split at layers.1) with
torch.distributed.pipelining; rank 0 feeds the pipeline, the last stage's output is answered."""

from __future__ import annotations

from typing import Any

import torch
from mlp_common import FEATURES, make_mlp, rows

from ts.torch_handler.distributed.base_pippy_handler import BasePippyHandler


class PPMLPHandler(BasePippyHandler):
    def load_model(self, dtype: torch.dtype | None) -> torch.nn.Module:
        return make_mlp()

    def example_microbatch(self) -> torch.Tensor:
        return torch.zeros((self.microbatch_size, FEATURES), dtype=torch.float32, device=self.device)

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor:
        return rows(data)

    def postprocess(self, data: torch.Tensor) -> list[Any]:
        return data.tolist()
