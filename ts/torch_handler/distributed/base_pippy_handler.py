"""Pipeline-parallel inference with torch.distributed.pipelining (PiPPy's successor).

Every rank traces the model once with a microbatch of the fixed shape
[``pippy.microbatch_size``, ``pippy.max_length``], splits it at ``pippy.split_points`` (or
evenly by layer count), keeps its own stage and runs the schedule (``pippy.schedule``, GPipe
by default) over ``pippy.chunks`` microbatches. Batches are padded to that shape (rows and
positions on the right) and the padding is cut off the output, so any batch up to
``chunks x microbatch_size`` rows works without retracing. The last stage's logits are
broadcast so that every rank can run the same generation loop.
"""

from __future__ import annotations

import gc
import logging
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch.distributed.pipelining import SplitPoint, pipeline
from torch.distributed.pipelining.schedules import get_schedule_class

from ts.context import Context
from ts.handler_utils.distributed.config import (
    KeySpec,
    ModelConfigError,
    anything,
    dtype_name,
    non_negative_int,
    one_of,
    positive_int,
    string_list,
    to_dtype,
)
from ts.handler_utils.distributed.pipelining import (
    SINGLE_STAGE_SCHEDULES,
    LogitsOnly,
    check_split_points,
    even_split_points,
    microbatches_needed,
    pad_to,
    padded_rows,
)
from ts.torch_handler.distributed.base_distributed_handler import BaseDistributedHandler

logger = logging.getLogger(__name__)

_compat = "accepted for TorchServe compatibility"


class BasePippyHandler(BaseDistributedHandler):
    section_name: ClassVar[str] = "pippy"
    section_spec: ClassVar[dict[str, KeySpec]] = {
        "chunks": KeySpec(positive_int, "a positive integer (microbatches per step)"),
        "microbatch_size": KeySpec(positive_int, "a positive integer (rows per microbatch)"),
        "max_length": KeySpec(positive_int, "a positive integer (traced sequence length)"),
        "split_points": KeySpec(string_list, "a list of submodule names, e.g. [model.layers.1]"),
        "schedule": KeySpec(one_of(*SINGLE_STAGE_SCHEDULES),
                            f"one of {', '.join(SINGLE_STAGE_SCHEDULES)}", default="GPipe"),
        "pad_token_id": KeySpec(non_negative_int, "a token id (non-negative integer)", default=0),
        "dtype": KeySpec(dtype_name, "float32, float16 or bfloat16", default="float32"),
        "rpc_timeout": KeySpec(anything, _compat, ignored=True),
        "num_worker_threads": KeySpec(anything, _compat, ignored=True),
        "model_type": KeySpec(anything, _compat, ignored=True),
        "input_names": KeySpec(anything, _compat, ignored=True),
        "pp_group_size": KeySpec(anything, _compat, ignored=True),
    }
    parallel_types: ClassVar[tuple[str, ...]] = ("pp",)

    def __init__(self) -> None:
        super().__init__()
        self.schedule: Any = None
        self.chunks = 1
        self.microbatch_size = 1
        self.max_length = 0
        self.out_shape: tuple[int, ...] = ()
        self.out_dtype = torch.float32

    def validate_config(self) -> None:
        if self.rank_info.world_size < 2:
            raise ModelConfigError(
                "pipeline parallel needs at least 2 ranks: set parallelLevel (or "
                "torchrun.nproc-per-node) to the number of stages and run under torchrun")

    def setup_model(self, context: Context) -> None:
        info = self.rank_info
        cfg = self.config
        self.chunks = cfg.get("chunks", info.world_size)
        batch_size = int(context.system_properties.get("batch_size") or 1)
        self.microbatch_size = cfg.get("microbatch_size", microbatches_needed(batch_size, self.chunks))
        if self.chunks * self.microbatch_size < batch_size:
            # Checked here: a batch refused after rank 0 published it would strand the other ranks.
            raise ModelConfigError(
                f"model-config.yaml: 'pippy.chunks' ({self.chunks}) x 'pippy.microbatch_size' "
                f"({self.microbatch_size}) is smaller than batchSize ({batch_size}); raise one of them")
        model = self.load_model(to_dtype(cfg["dtype"]))
        self.max_length = int(cfg.get("max_length") or self.handler_config.get("max_length") or
                              getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0)
        if not self.max_length:
            raise ModelConfigError("model-config.yaml: set 'pippy.max_length' (the sequence "
                                   "length the pipeline is traced with)")
        points = cfg.get("split_points") or even_split_points(model, info.world_size)
        check_split_points(model, points, info.world_size)
        wrapper = self.trace_module(model)
        example = self.example_microbatch()
        with torch.inference_mode(False), torch.no_grad():
            pipe = pipeline(wrapper, mb_args=(example,),
                            split_spec={f"module.{p}": SplitPoint.BEGINNING for p in points})
        assert self.device is not None  # set by setup_common before setup_model
        stage = pipe.build_stage(info.rank, self.device)
        del pipe, wrapper, model  # keep only this rank's stage
        gc.collect()
        schedule_cls = get_schedule_class(cfg["schedule"])
        self.schedule = schedule_cls(stage, n_microbatches=self.chunks)
        self._warm_up(example)
        logger.info("model %s: rank %d holds pipeline stage %d/%d (split at %s), %d x %d rows, "
                    "length %d", context.model_name, info.rank, info.rank, info.world_size,
                    points, self.chunks, self.microbatch_size, self.max_length)

    def trace_module(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module the pipeline traces (``forward(input_ids) -> logits``); override as needed."""
        return LogitsOnly(model)

    def example_microbatch(self) -> torch.Tensor:
        """One microbatch of the traced shape; override for inputs other than token ids."""
        return torch.zeros((self.microbatch_size, self.max_length), dtype=torch.long,
                           device=self.device)

    def _warm_up(self, example: torch.Tensor) -> None:
        # One step learns the output shape, which rank 0 needs to receive the logits.
        batch = example.repeat(self.chunks, *([1] * (example.dim() - 1)))
        out = self._run_schedule(batch)
        last = self.rank_info.world_size - 1
        meta = [(tuple(out.shape), out.dtype) if out is not None else None]
        dist.broadcast_object_list(meta, src=last)
        shape_and_dtype = meta[0]
        assert shape_and_dtype is not None  # the last stage's, broadcast to every rank
        self.out_shape, self.out_dtype = shape_and_dtype

    def _run_schedule(self, batch: torch.Tensor | None) -> torch.Tensor | None:
        with torch.no_grad():
            out: torch.Tensor | None = self.schedule.eval(batch) if self.rank_info.is_leader else self.schedule.eval()
            return out

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        rows, length = input_ids.shape[0], input_ids.shape[1]
        batch = None
        if self.rank_info.is_leader:
            capacity = padded_rows(rows, self.chunks, self.microbatch_size)
            batch = pad_to(input_ids.to(self.device), capacity, self.max_length,
                           self.config["pad_token_id"])
        out = self._run_schedule(batch)
        last = self.rank_info.world_size - 1
        if self.rank_info.rank != last:
            out = torch.empty(self.out_shape, dtype=self.out_dtype, device=self.device)
        assert out is not None  # the last stage's logits, or the buffer that receives them
        dist.broadcast(out, src=last)
        return out[:rows, :length]
