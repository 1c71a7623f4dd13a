"""Native tensor-parallel inference with DTensor (no third-party dependency).

Every rank loads the model on CPU, then ``parallelize_module`` shards the layers named by
the plan across a 1-D device mesh of all ranks. The plan comes from ``tp.plan`` in
model-config.yaml (``{module pattern: style}``), else from ``get_tp_plan`` (override it), else
from the ``base_model_tp_plan`` a Transformers config declares. The embedding and the LM head
stay whole, so every rank ends with the full logits.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ParallelStyle, parallelize_module

from ts.context import Context
from ts.handler_utils.distributed.config import (
    KeySpec,
    ModelConfigError,
    dtype_name,
    mapping,
    to_dtype,
)
from ts.handler_utils.distributed.pipelining import LogitsOnly
from ts.handler_utils.distributed.tensor_parallel import (
    check_divisible,
    check_plan_targets,
    plan_from_config,
    transformers_plan,
)
from ts.torch_handler.distributed.base_distributed_handler import BaseDistributedHandler

logger = logging.getLogger(__name__)


class BaseTPHandler(BaseDistributedHandler):
    section_name: ClassVar[str] = "tp"
    section_spec: ClassVar[dict[str, KeySpec]] = {
        "plan": KeySpec(mapping, "a mapping of module patterns to styles "
                                 "(colwise, rowwise, colwise_gather_output, rowwise_replicate_input)"),
        "dtype": KeySpec(dtype_name, "float32, float16 or bfloat16", default="float32"),
    }
    parallel_types: ClassVar[tuple[str, ...]] = ("tp",)

    def __init__(self) -> None:
        super().__init__()
        self.mesh: Any = None
        self.runner: torch.nn.Module | None = None

    def get_tp_plan(self, model: torch.nn.Module) -> dict[str, ParallelStyle | str] | None:
        """The plan when model-config.yaml gives none; default: the Transformers one."""
        plan = transformers_plan(model)
        styles: dict[str, ParallelStyle | str] | None = None if plan is None else dict(plan)
        return styles

    def setup_model(self, context: Context) -> None:
        model = self.load_model(to_dtype(self.config["dtype"]))
        world = self.rank_info.world_size
        raw_plan = self.config.get("plan") or self.get_tp_plan(model)
        if not raw_plan:
            raise ModelConfigError(
                "model-config.yaml: no tensor-parallel plan: set 'tp.plan' "
                "({module pattern: colwise|rowwise}) or override get_tp_plan() in the handler")
        check_plan_targets(model, raw_plan)
        as_strings = {k: v for k, v in raw_plan.items() if not isinstance(v, ParallelStyle)}
        plan: dict[str, ParallelStyle] = {k: v for k, v in raw_plan.items()
                                          if isinstance(v, ParallelStyle)}
        plan.update(plan_from_config(as_strings))
        if world > 1:
            check_divisible(model, world)
            assert self.device is not None  # set by setup_common before setup_model
            self.mesh = init_device_mesh(self.device.type, (world,))
            # On CPU: distribute_tensor moves one parameter at a time to the mesh's device and
            # keeps only this rank's shard, so the whole model never sits on one accelerator.
            model = parallelize_module(model, self.mesh, plan)
        self.model = model.to(self.device)  # the unsharded rest (embedding, norms, head)
        self.runner = LogitsOnly(self.model)
        logger.info("model %s: rank %d sharded %d plan entries over %d ranks",
                    context.model_name, self.rank_info.rank, len(plan), world)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        assert self.runner is not None
        out: torch.Tensor = self.runner(input_ids.to(self.device))
        if isinstance(out, DTensor):
            out = out.full_tensor()
        wait = getattr(out, "wait", None)
        if callable(wait):  # an AsyncCollectiveTensor under no_grad
            out = wait()
        return out
