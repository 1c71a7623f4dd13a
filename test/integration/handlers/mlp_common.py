"""The small MLP the distributed tests serve: the same seeded weights in every rank and in the
single-process reference, inputs of FEATURES floats per row, OUTPUTS floats out."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

FEATURES = 8
HIDDEN = 16
OUTPUTS = 4


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(FEATURES, HIDDEN), nn.Linear(HIDDEN, HIDDEN),
                                     nn.Linear(HIDDEN, OUTPUTS)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.layers[0](x))
        x = torch.relu(self.layers[1](x))
        return self.layers[2](x)


def make_mlp() -> MLP:
    torch.manual_seed(1234)
    return MLP().eval()


logger = logging.getLogger(__name__)


def rows(data: list[dict[str, Any]]) -> torch.Tensor:
    """One request = one row: a JSON list of FEATURES numbers, or ``{"sleep": s, "row": [...]}``
    (the failure tests keep a batch in flight that long)."""
    out = []
    for req in data:
        value = req.get("data") or req.get("body")
        if isinstance(value, (bytes, bytearray)):
            value = json.loads(value)
        if isinstance(value, dict) and "sleep" in value:
            logger.info("slow request: sleeping %s s", value["sleep"])
            time.sleep(float(value["sleep"]))
            value = value.get("row")
        if not isinstance(value, list) or len(value) != FEATURES:
            raise ValueError(f"each request must be a JSON list of {FEATURES} numbers")
        out.append([float(v) for v in value])
    return torch.tensor(out, dtype=torch.float32)


def fake_deepspeed_shm(rank: int) -> None:
    """Create the file DeepSpeed's CPU all-reduce would leave (the server must remove it)."""
    name = (f"deepspeed_allreduce_buffer_{os.getuid()}_{os.environ['MASTER_ADDR']}_"
            f"{os.environ['MASTER_PORT']}_{rank}")
    Path("/dev/shm", name).write_bytes(b"\0" * 64)
