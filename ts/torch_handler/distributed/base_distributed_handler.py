"""What the four large-model base handlers share.

Load time: check the ``parallel*``/``torchrun`` keys against the ranks this process really
has, validate the handler's own section, find the checkpoint folder, join the process group,
and let the subclass build its model. Request time: rank 0 preprocesses, publishes the model
input to the other ranks (see ``RankCoordinator``), every rank runs ``inference``, rank 0
postprocesses and answers.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, ClassVar

import torch

from ts.context import Context
from ts.handler_utils.distributed.checkpoint import (
    build_model_from_config,
    find_checkpoint,
    load_weights,
    meta_parameters,
    resolve_checkpoint_dir,
)
from ts.handler_utils.distributed.config import (
    KeySpec,
    ModelConfigError,
    handler_section,
    section,
    validate_section,
)
from ts.handler_utils.distributed.coordinator import RankCoordinator
from ts.handler_utils.distributed.dist_env import (
    RankInfo,
    device_for,
    ensure_process_group,
    rank_info,
)
from ts.model_settings import ModelSettings
from ts.torch_handler.base_handler import BaseHandler

logger = logging.getLogger(__name__)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _node_range(value: Any) -> tuple[int, int]:
    """``torchrun.nnodes``: N, or ``"MIN:MAX"`` for an elastic job (the world may be any of them)."""
    if isinstance(value, str) and ":" in value:
        low, _, high = value.partition(":")
        if low.strip().isdigit() and high.strip().isdigit() and 0 < int(low) <= int(high):
            return int(low), int(high)
    n = _positive(value) or 1
    return n, n


class BaseDistributedHandler(BaseHandler):
    """Common lifecycle; subclasses implement ``setup_model`` and ``forward``."""

    section_name: ClassVar[str] = ""
    section_spec: ClassVar[dict[str, KeySpec]] = {}
    parallel_types: ClassVar[tuple[str, ...]] = ()  # accepted ``parallelType`` values
    uses_torchrun: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.rank_info = RankInfo(0, 0, 1, 1)
        self.config: dict[str, Any] = {}
        self.handler_config: dict[str, Any] = {}
        self.checkpoint_dir: Path | None = None
        self.coordinator: RankCoordinator | None = None

    # ------------------------------------------------------------------ load
    def initialize(self, context: Context) -> None:
        start = time.time()
        yaml = context.model_yaml_config or {}  # the handler's own sections; the settings: context.model_settings
        self.rank_info = rank_info(context)
        self.check_parallel_settings(context.model_settings)
        device = device_for(self.rank_info, context.model_settings.deviceType)
        self.setup_common(context, device)
        self.handler_config = handler_section(yaml)
        self.config = validate_section(
            self.section_name, section(yaml, self.section_name), self.section_spec
        )
        for key, spec in self.section_spec.items():
            if spec.ignored and key in self.config:
                logger.warning("model %s: '%s.%s' is accepted for TorchServe compatibility and "
                               "ignored", context.model_name, self.section_name, key)
        self.validate_config()
        model_dir = context.system_properties.get("model_dir") or "."
        self.checkpoint_dir = resolve_checkpoint_dir(model_dir, self.handler_config.get("model_path"))
        if self.uses_torchrun:
            ensure_process_group(self.rank_info, device)
        self.setup_model(context)
        info = self.rank_info
        if self.uses_torchrun and info.world_size > 1:
            self.coordinator = RankCoordinator(context.model_name, info.rank, info.world_size)
            if not info.is_leader:
                self.coordinator.start_following(self.inference)
        self.initialized = True
        logger.info("model %s: rank %d/%d loaded with %s on %s in %.1f s", context.model_name,
                    info.rank, info.world_size, type(self).__name__, device, time.time() - start)

    def check_parallel_settings(self, settings: ModelSettings) -> None:
        """``parallelType`` must suit this handler and the ranks must match the resolved settings
        (``parallelLevel`` is torchrun's nproc-per-node once the frontend resolved them)."""
        ptype = settings.parallelType
        if self.parallel_types and ptype not in self.parallel_types:
            raise ModelConfigError(
                f"the model's 'parallelType' is {ptype!r} but {type(self).__name__} "
                f"needs one of {', '.join(repr(p) for p in self.parallel_types)}"
            )
        nproc = _positive(settings.parallelLevel)
        low, high = _node_range(settings.torchrun.get("nnodes"))
        world = self.rank_info.world_size
        if nproc is not None and not any(nproc * n == world for n in range(low, high + 1)):
            wanted = f"{nproc * low}" if low == high else f"{nproc * low} to {nproc * high} (a multiple of {nproc})"
            raise ModelConfigError(
                f"the model asks for {wanted} ranks (parallelLevel / "
                f"torchrun.nproc-per-node x nnodes) but this worker runs with WORLD_SIZE={world}; "
                "start it under torchrun with that many processes"
            )

    def validate_config(self) -> None:
        """Cross-key checks of ``self.config`` (subclasses)."""

    # ------------------------------------------------------------------ model
    def build_model(self, checkpoint_dir: Path, dtype: torch.dtype | None) -> torch.nn.Module:
        """The model, not yet loaded; override for models without a Transformers config.json."""
        return build_model_from_config(checkpoint_dir, dtype)

    def load_model(self, dtype: torch.dtype | None) -> torch.nn.Module:
        """Build the model with meta parameters and give it the archive's weights (on CPU).

        No random initialisation and no second copy: the parameters are the loaded tensors.
        """
        assert self.checkpoint_dir is not None
        with meta_parameters():
            model = self.build_model(self.checkpoint_dir, dtype)
        load_weights(model, find_checkpoint(self.checkpoint_dir), dtype)
        return model.eval()

    def setup_model(self, context: Context) -> None:
        raise NotImplementedError

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits for ``input_ids`` [B, S]; runs on every rank with the same input."""
        raise NotImplementedError

    # ------------------------------------------------------------------ requests
    def inference(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        """Runs on every rank with rank 0's preprocessed batch; default: the logits."""
        with torch.inference_mode():
            return self.forward(torch.as_tensor(data))

    def handle(self, data: list[dict[str, Any]], context: Context) -> list[Any]:
        self.context = context
        if not self.rank_info.is_leader:
            # Rank 0 drives the step; this rank takes part through its follower thread.
            return [None] * len(data)
        start = time.time()
        if self._is_describe():
            return [self.describe_handle()]
        pre = self.preprocess(data)
        if self.coordinator is not None:
            out = self.coordinator.run(pre, self.inference)
        else:
            out = self.inference(pre)
        output = self.postprocess(out)
        if context.metrics is not None:
            context.metrics.add_time("HandlerTime", round((time.time() - start) * 1000, 2), None, "ms")
        return output

    def stop_followers(self) -> None:
        """Release the other ranks' follower threads (rank 0; used on shutdown and by drivers)."""
        if self.coordinator is not None and self.rank_info.is_leader:
            self.coordinator.stop()
