"""Hugging Face Accelerate big-model inference, in ONE process.

The model is built with empty weights, then ``load_checkpoint_and_dispatch`` places each
block on a device from ``accelerate.device_map`` (``auto``, ``balanced``,
``balanced_low_0``, ``sequential``, or an explicit ``{module: device}`` map with GPU ids,
``cpu`` or ``disk``), limited by ``max_memory``; blocks that fit nowhere are offloaded to
``offload_folder``. Accelerate moves activations between devices itself, so there is no
torchrun: ``parallelLevel`` above 1 (or a torchrun ``parallelType``) is refused at load time.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import torch

from ts.context import Context
from ts.handler_utils.distributed.checkpoint import accelerate_checkpoint_path, find_checkpoint
from ts.handler_utils.distributed.config import (
    KeySpec,
    ModelConfigError,
    dtype_name,
    string,
    string_list,
    to_dtype,
)
from ts.handler_utils.distributed.pipelining import LogitsOnly
from ts.model_settings import ModelSettings
from ts.torch_handler.distributed.base_distributed_handler import BaseDistributedHandler

logger = logging.getLogger(__name__)

MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
TORCHRUN_TYPES = ("pp", "tp", "pptp")


def _device_map_ok(value: Any) -> bool:
    if isinstance(value, str):
        return value in MAP_STRATEGIES
    return isinstance(value, dict) and bool(value) and all(
        isinstance(k, str) and (isinstance(v, (str, int)) and not isinstance(v, bool))
        for k, v in value.items())


def _max_memory_ok(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(v, (str, int)) and not isinstance(v, bool) for v in value.values())


def _device_key(key: Any) -> int | str:
    # YAML gives "0" or 0 for a GPU; accelerate wants an int.
    if isinstance(key, int):
        return key
    return int(key) if str(key).isdigit() else str(key)


class BaseAccelerateHandler(BaseDistributedHandler):
    section_name: ClassVar[str] = "accelerate"
    section_spec: ClassVar[dict[str, KeySpec]] = {
        "device_map": KeySpec(_device_map_ok, f"one of {', '.join(MAP_STRATEGIES)} or a mapping "
                                              "of module names to a GPU id, cpu or disk",
                              default="auto"),
        "max_memory": KeySpec(_max_memory_ok, "a mapping of device (GPU id, cpu) to a size "
                                              "such as 2GiB or a number of bytes"),
        "offload_folder": KeySpec(string, "a folder (absolute, or relative to the model dir)"),
        "dtype": KeySpec(dtype_name, "float32, float16 or bfloat16", default="float32"),
        "no_split_module_classes": KeySpec(string_list, "a list of module class names"),
    }
    uses_torchrun: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.runner: torch.nn.Module | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def check_parallel_settings(self, settings: ModelSettings) -> None:
        level = settings.parallelLevel  # torchrun's nproc-per-node, resolved by the frontend
        if level > 1:
            raise ModelConfigError(
                "the Accelerate handler runs the model in ONE process and spreads it over devices "
                f"itself; remove 'parallelLevel'/'torchrun' (got parallelLevel={level}), or use "
                "base_pippy_handler/base_tp_handler/base_deepspeed_handler for torchrun")
        if settings.parallelType in TORCHRUN_TYPES:
            raise ModelConfigError(
                f"the model's parallelType {settings.parallelType!r} starts torchrun, but "
                "the Accelerate handler runs in one process; remove 'parallelType'")
        if self.rank_info.world_size > 1:
            raise ModelConfigError(
                f"the Accelerate handler runs in one process, but this worker has "
                f"WORLD_SIZE={self.rank_info.world_size}; do not start it under torchrun")

    def _folder(self, value: str) -> Path:
        path = Path(value)
        if not path.is_absolute():
            path = Path(self.context.system_properties.get("model_dir") or ".") / path  # type: ignore[union-attr]
        return path

    def setup_model(self, context: Context) -> None:
        from accelerate import init_empty_weights, load_checkpoint_and_dispatch

        cfg = self.config
        dtype = to_dtype(cfg["dtype"])
        assert self.checkpoint_dir is not None
        with init_empty_weights():
            model = self.build_model(self.checkpoint_dir, dtype)
        device_map = cfg["device_map"]
        if isinstance(device_map, dict):
            device_map = {k: _device_key(v) for k, v in device_map.items()}
            names = {n for n, _ in model.named_modules()}
            unknown = [k for k in device_map if k not in names]
            if unknown:
                raise ModelConfigError(
                    f"model-config.yaml: 'accelerate.device_map' names {unknown}, which are not "
                    "submodules of the model (use names from model.named_modules())")
        max_memory = {_device_key(k): v for k, v in cfg["max_memory"].items()} if "max_memory" in cfg else None
        offload = self._folder(cfg["offload_folder"]) if "offload_folder" in cfg else None
        if offload is None and isinstance(device_map, dict) and "disk" in device_map.values():
            raise ModelConfigError(
                "model-config.yaml: 'accelerate.device_map' offloads to disk; set "
                "'accelerate.offload_folder' (a folder, absolute or relative to the model dir)")
        if offload is not None:
            offload.mkdir(parents=True, exist_ok=True)
        self._scratch = tempfile.TemporaryDirectory(prefix="tserve-accelerate-")
        checkpoint = accelerate_checkpoint_path(find_checkpoint(self.checkpoint_dir),
                                                Path(self._scratch.name))
        no_split = cfg.get("no_split_module_classes") or getattr(model, "_no_split_modules", None)
        tie_weights = getattr(model, "tie_weights", None)
        if callable(tie_weights):
            tie_weights()
        self.model = load_checkpoint_and_dispatch(
            model, checkpoint=str(checkpoint), device_map=device_map, max_memory=max_memory,
            no_split_module_classes=no_split, offload_folder=str(offload) if offload else None,
            dtype=dtype,
        ).eval()
        placement = getattr(self.model, "hf_device_map", {})
        self.runner = LogitsOnly(self.model)
        logger.info("model %s: Accelerate placed the model as %s", context.model_name, placement)

    def input_device(self) -> torch.device:
        """Where the first block lives (Accelerate's hooks move everything after it)."""
        for param in self.model.parameters():
            if param.device.type != "meta":
                device: torch.device = param.device
                return device
        return torch.device("cpu")

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        assert self.runner is not None
        logits: torch.Tensor = self.runner(input_ids.to(self.input_device()))
        return logits
