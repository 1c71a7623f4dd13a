"""Tensor-parallel plans for torch.distributed.tensor.parallel.parallelize_module."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

from ts.handler_utils.distributed.config import ModelConfigError

STYLES = ("colwise", "rowwise", "colwise_gather_output", "rowwise_replicate_input")


def style(name: str) -> ParallelStyle:
    """A ParallelStyle from a plan value (the names Transformers uses in ``tp_plan``)."""
    if name == "colwise":
        return ColwiseParallel()
    if name == "rowwise":
        return RowwiseParallel()
    if name == "colwise_gather_output":
        return ColwiseParallel(output_layouts=Replicate())
    if name == "rowwise_replicate_input":
        return RowwiseParallel(input_layouts=Replicate())
    raise ModelConfigError(f"unknown tensor-parallel style '{name}'; use one of {', '.join(STYLES)}")


def plan_from_config(plan: Mapping[str, str]) -> dict[str, ParallelStyle]:
    """``{"model.layers.*.self_attn.q_proj": "colwise", ...}`` to ParallelStyles."""
    out: dict[str, ParallelStyle] = {}
    for pattern, value in plan.items():
        if not isinstance(value, str) or value not in STYLES:
            raise ModelConfigError(
                f"model-config.yaml: 'tp.plan.{pattern}' must be one of {', '.join(STYLES)}, "
                f"got {value!r}"
            )
        out[pattern] = style(value)
    return out


def transformers_plan(model: nn.Module) -> dict[str, str] | None:
    """The decoder plan a Transformers model declares (``config.base_model_tp_plan``).

    Only the decoder layers are split; the embedding and the LM head stay whole, so the
    logits need no gather.
    """
    config = getattr(model, "config", None)
    base_plan = getattr(config, "base_model_tp_plan", None)
    prefix = getattr(model, "base_model_prefix", "")
    if not base_plan:
        return None
    has_prefix = bool(prefix) and hasattr(model, prefix)
    return {(f"{prefix}.{k}" if has_prefix else k): v for k, v in base_plan.items()}


def check_plan_targets(model: nn.Module, plan: Mapping[str, object]) -> None:
    """Every plan entry must match at least one submodule (catches typos at load time)."""
    import fnmatch

    names = [n for n, _ in model.named_modules()]
    for pattern in plan:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            raise ModelConfigError(
                f"model-config.yaml: 'tp.plan' entry '{pattern}' matches no submodule of the "
                "model (use names from model.named_modules(), with * for a layer index)"
            )


def check_divisible(model: nn.Module, world_size: int) -> None:
    """Attention heads must split evenly across the ranks."""
    config = getattr(model, "config", None)
    for key in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(config, key, None)
        if isinstance(heads, int) and heads % world_size:
            raise ModelConfigError(
                f"the model's {key}={heads} is not divisible by the tensor-parallel size "
                f"{world_size}; choose a parallelLevel that divides it"
            )
