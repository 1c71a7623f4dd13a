"""A small MLP (64 -> 256 -> 256 -> 10) on one CPU thread.

Input: 64 little-endian float32 values as the raw body. Output: 10 float32 logits, raw.
The weights come from the archive's serialized file (``mlp.pt``, a state dict).
"""

from __future__ import annotations

import os
import struct
from typing import Any

import torch
from torch import nn

IN_FEATURES = 64


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(IN_FEATURES, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


class MLPHandler:
    def __init__(self) -> None:
        self.model: nn.Module | None = None

    def initialize(self, context: Any) -> None:
        torch.set_num_threads(1)  # one thread: the benchmark compares servers, not BLAS
        model_dir = context.system_properties.get("model_dir")
        model = build_model()
        weights = os.path.join(model_dir, context.manifest["model"]["serializedFile"])
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        self.model = model.eval()

    def handle(self, data: list[dict[str, Any]], context: Any) -> list[bytes]:
        rows = [bytes(row.get("body") or row.get("data") or b"") for row in data]
        for i, raw in enumerate(rows):
            if len(raw) != IN_FEATURES * 4:
                raise ValueError(
                    f"request {i}: body must be {IN_FEATURES} float32 values "
                    f"({IN_FEATURES * 4} bytes), got {len(raw)} bytes"
                )
        batch = torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.float32)
        with torch.inference_mode():
            out = self.model(batch.view(len(rows), IN_FEATURES))
        # struct, not .numpy(): the handler must not need numpy in the worker's environment.
        return [struct.pack("<10f", *out[i].tolist()) for i in range(len(rows))]


_service = MLPHandler()


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[bytes] | None:
    if _service.model is None:
        _service.initialize(context)
    if data is None:
        return None
    return _service.handle(data, context)
