"""DeepSpeed inference: ``deepspeed.init_inference`` with AutoTP over all ranks.

``tensor_parallel.tp_size`` is always the world size. The ``deepspeed`` section names the
DeepSpeed config json (``config``), an optional checkpoint json (``checkpoint``), the dtype, and
``meta_init``: build the model on the meta device and let DeepSpeed load only this rank's
shard from the checkpoint (for models larger than one device's memory). Without
``meta_init`` every rank loads the whole model on CPU first, then DeepSpeed shards it.

DeepSpeed's CPU communication needs ``LOCAL_SIZE`` (torchrun does not set it; without it the
ranks die with SIGSEGV), so it is set here from ``LOCAL_WORLD_SIZE``. DeepSpeed leaves
``/dev/shm/deepspeed_allreduce_buffer_*`` files behind: each rank unlinks its own at a normal
exit, local rank 0 removes the ones no live process maps before it starts, and
``ts.handler_utils.distributed.deepspeed_shm`` removes those of a killed worker.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import torch

from ts.context import Context
from ts.handler_utils.distributed.checkpoint import CheckpointError, find_checkpoint, meta_parameters
from ts.handler_utils.distributed.config import (
    KeySpec,
    ModelConfigError,
    boolean,
    dtype_name,
    string,
    to_dtype,
)
from ts.handler_utils.distributed.deepspeed_shm import (
    remove_deepspeed_shm_buffers,
    remove_own_buffer_at_exit,
)
from ts.handler_utils.distributed.pipelining import LogitsOnly
from ts.torch_handler.distributed.base_distributed_handler import BaseDistributedHandler

logger = logging.getLogger(__name__)


def _read_json(path: Path, key: str) -> dict[str, Any]:
    if not path.is_file():
        raise ModelConfigError(f"model-config.yaml: '{key}' points to {path}, which does not "
                               "exist; add the file to the archive with --extra-files")
    try:
        value = json.loads(path.read_text())
    except ValueError as exc:
        raise ModelConfigError(f"model-config.yaml: '{key}' file {path} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ModelConfigError(f"model-config.yaml: '{key}' file {path} must hold a JSON object")
    return value


class BaseDeepSpeedHandler(BaseDistributedHandler):
    section_name: ClassVar[str] = "deepspeed"
    section_spec: ClassVar[dict[str, KeySpec]] = {
        "config": KeySpec(string, "a DeepSpeed inference config json (relative to the model dir)"),
        "checkpoint": KeySpec(string, "a DeepSpeed checkpoint json (relative to the model dir)"),
        "dtype": KeySpec(dtype_name, "float32, float16 or bfloat16", default="float32"),
        "meta_init": KeySpec(boolean, "true or false", default=False),
        "replace_with_kernel_inject": KeySpec(boolean, "true or false"),
    }
    parallel_types: ClassVar[tuple[str, ...]] = ("tp",)

    def __init__(self) -> None:
        super().__init__()
        self.engine: Any = None
        self.runner: torch.nn.Module | None = None

    def _model_file(self, key: str) -> Path:
        model_dir = Path(self.context.system_properties.get("model_dir") or ".")  # type: ignore[union-attr]
        path = Path(self.config[key])
        return path if path.is_absolute() else model_dir / path

    def ds_config(self) -> dict[str, Any]:
        """The config dict given to init_inference (file first, then this section's keys)."""
        cfg = _read_json(self._model_file("config"), "deepspeed.config") if "config" in self.config else {}
        dtype = to_dtype(self.config["dtype"])
        cfg["dtype"] = dtype
        cfg["tensor_parallel"] = {**cfg.get("tensor_parallel", {}), "tp_size": self.rank_info.world_size}
        if "replace_with_kernel_inject" in self.config:
            cfg["replace_with_kernel_inject"] = self.config["replace_with_kernel_inject"]
        cfg.setdefault("replace_with_kernel_inject", False)  # kernel injection needs CUDA
        return cfg

    def checkpoint_json(self, scratch: Path) -> Path:
        """``deepspeed.checkpoint`` or a generated ``ds_model`` description of the archive's weights."""
        if "checkpoint" in self.config:
            path = self._model_file("checkpoint")
            _read_json(path, "deepspeed.checkpoint")
            return path
        assert self.checkpoint_dir is not None
        ckpt = find_checkpoint(self.checkpoint_dir)
        path = scratch / "ds_checkpoint.json"
        path.write_text(json.dumps({"type": "ds_model", "version": 1.0,
                                    "checkpoints": [str(f) for f in ckpt.files]}))
        return path

    def setup_model(self, context: Context) -> None:
        info = self.rank_info
        device = self.device
        assert device is not None  # set by setup_common before setup_model
        # Before DeepSpeed's comm starts: its CPU all-reduce reads LOCAL_SIZE.
        os.environ["LOCAL_SIZE"] = str(info.local_world_size)
        if info.local_rank == 0:
            remove_deepspeed_shm_buffers()
        import deepspeed

        deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo")
        if device.type == "cpu":
            remove_own_buffer_at_exit(info.rank)
        cfg = self.ds_config()
        dtype = cfg["dtype"]
        assert self.checkpoint_dir is not None
        with tempfile.TemporaryDirectory(prefix="tserve-ds-") as scratch:
            # DeepSpeed loads a checkpoint into a meta model only when it shards it (tp_size > 1);
            # with one rank the handler loads the weights itself (also without copies).
            if self.config["meta_init"] and info.world_size > 1:
                with meta_parameters():  # deepspeed.OnDevice breaks on torch >= 2.13
                    model = self.build_model(self.checkpoint_dir, dtype)
                cfg["checkpoint"] = str(self.checkpoint_json(Path(scratch)))
            else:
                model = self.load_model(dtype)
                if "checkpoint" in self.config:
                    cfg["checkpoint"] = str(self.checkpoint_json(Path(scratch)))
            self.engine = deepspeed.init_inference(model.eval(), config=cfg)
        self.model = self.engine.module
        meta = [n for n, p in self.model.named_parameters() if p.is_meta]
        if meta:
            raise CheckpointError(f"DeepSpeed left {len(meta)} parameters unloaded, e.g. {meta[:3]}; "
                                  "check deepspeed.checkpoint or turn meta_init off")
        self.runner = LogitsOnly(self.model)
        logger.info("model %s: rank %d DeepSpeed engine ready (tp_size %d, dtype %s, meta_init %s)",
                    context.model_name, info.rank, info.world_size, dtype, self.config["meta_init"])

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        assert self.runner is not None
        logits: torch.Tensor = self.runner(input_ids.to(self.device))
        return logits
