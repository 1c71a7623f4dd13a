"""Helpers for pipeline parallel inference with torch.distributed.pipelining."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ts.handler_utils.distributed.config import ModelConfigError

SINGLE_STAGE_SCHEDULES = ("GPipe", "1F1B")


class LogitsOnly(nn.Module):
    """Wraps a model so that tracing sees ``forward(input_ids) -> tensor``.

    Hugging Face models return a ModelOutput and build a KV cache; the pipeline tracer needs
    plain tensors, so ask for ``use_cache=False`` and return ``.logits``.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self._hf = hasattr(getattr(module, "config", None), "to_dict")

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self._hf:
            logits: torch.Tensor = self.module(input_ids=input_ids, use_cache=False).logits
            return logits
        out = self.module(input_ids)
        return out if isinstance(out, torch.Tensor) else out[0]


def largest_layer_list(model: nn.Module) -> tuple[str, int]:
    """The name and length of the longest ModuleList (the decoder layers of an LLM)."""
    best = ("", 0)
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > best[1]:
            best = (name, len(module))
    return best


def even_split_points(model: nn.Module, num_stages: int) -> list[str]:
    """Split points that give every stage the same number of layers (±1)."""
    name, count = largest_layer_list(model)
    if count < num_stages:
        raise ModelConfigError(
            f"cannot split the model into {num_stages} pipeline stages: its longest layer list "
            f"has {count} layers; lower parallelLevel or set 'pippy.split_points'"
        )
    return [f"{name}.{start}" for start, _ in stage_bounds(count, num_stages)[1:]]


def stage_bounds(count: int, num_stages: int) -> list[tuple[int, int]]:
    """Each stage's ``[start, end)`` of ``count`` layers: contiguous, the same number (±1) each."""
    cuts = [math.floor(i * count / num_stages) for i in range(num_stages + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def check_split_points(model: nn.Module, points: list[str], num_stages: int) -> list[str]:
    """Each point must name a submodule, and there must be one fewer than the stages."""
    if len(points) != num_stages - 1:
        raise ModelConfigError(
            f"model-config.yaml: 'pippy.split_points' has {len(points)} entries but "
            f"{num_stages} stages need {num_stages - 1}"
        )
    for point in points:
        try:
            model.get_submodule(point)
        except AttributeError as exc:
            raise ModelConfigError(
                f"model-config.yaml: 'pippy.split_points' entry '{point}' is not a submodule "
                "of the model (use names from model.named_modules(), e.g. model.layers.1)"
            ) from exc
    return points


def padded_rows(rows: int, chunks: int, microbatch_size: int) -> int:
    """Rows one schedule step takes: the traced ``chunks * microbatch_size``."""
    capacity = chunks * microbatch_size
    if rows > capacity:
        raise ValueError(
            f"batch of {rows} exceeds the pipeline capacity {capacity} "
            "(pippy.chunks x pippy.microbatch_size)"
        )
    return capacity


def pad_to(x: torch.Tensor, rows: int, length: int, pad_value: Any) -> torch.Tensor:
    """Right-pad ``x`` [B, S] to [rows, length].

    Extra rows are dropped after the step; padding on the right of a causal decoder does not
    change the outputs at the real positions.
    """
    if x.dim() < 2 or x.shape[1] > length:
        raise ValueError(f"input of shape {tuple(x.shape)} does not fit the traced length {length}")
    out = torch.full((rows, length, *x.shape[2:]), pad_value, dtype=x.dtype, device=x.device)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def microbatches_needed(rows: int, chunks: int) -> int:
    """Rows per microbatch so that ``rows`` fits into ``chunks`` microbatches."""
    return max(1, math.ceil(rows / chunks))
