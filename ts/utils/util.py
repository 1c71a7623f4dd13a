"""Handler utilities with TorchServe's names: PredictionException, label mapping, yaml config."""

from __future__ import annotations

import enum
import inspect
import itertools
import json
import logging
import os
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import yaml

logger = logging.getLogger(__name__)


class PredictionException(Exception):
    """Raised by a handler to fail the whole batch with a chosen HTTP status."""

    def __init__(self, message: str, error_code: int = 500) -> None:
        self.message = message
        self.error_code = error_code
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} : {self.error_code}"


class PT2Backend(enum.StrEnum):
    EAGER = "eager"
    AOT_EAGER = "aot_eager"
    INDUCTOR = "inductor"
    NVFUSER = "nvfuser"
    AOT_NVFUSER = "aot_nvfuser"
    AOT_CUDAGRAPHS = "aot_cudagraphs"
    OFI = "ofi"
    FX2TRT = "fx2trt"
    ONNXRT = "onnxrt"
    IPEX = "ipex"
    TORCH_TENSORRT = "tensorrt"
    OPENVINO = "openvino"
    HPU_BACKEND = "hpu_backend"


def check_valid_pt2_backend(backend: str) -> bool:
    return backend in {b.value for b in PT2Backend}


def list_classes_from_module(module: ModuleType, parent_class: type | None = None) -> list[type]:
    """Classes defined in ``module`` itself (not imported into it), optionally subclasses only."""
    classes = [
        cls for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__
    ]
    if parent_class is not None:
        classes = [c for c in classes if issubclass(c, parent_class)]
    return classes


def load_label_mapping(mapping_file_path: str) -> dict[str, Any] | None:
    """Read ``index_to_name.json``; None if the file does not exist."""
    if not os.path.isfile(mapping_file_path):
        logger.warning("Missing the index_to_name.json file. Inference output will not include class name.")
        return None
    with open(mapping_file_path, encoding="utf-8") as f:
        mapping = json.load(f)
    if not isinstance(mapping, dict):
        raise ValueError(f"{mapping_file_path} must hold a JSON object {{index: name}}")
    first = next(iter(mapping.values()), None)
    if isinstance(first, list):
        mapping = {k: v[-1] for k, v in mapping.items()}  # ImageNet style [wnid, name]
    return mapping


def map_class_to_label(probs: list[list[float]], mapping: dict[str, Any] | None = None,
                       lbl_classes: list[list[Any]] | None = None) -> list[dict[str, float]]:
    """[[p,...]] + [[class,...]] -> [{label: p}], labels from mapping when given."""
    if not isinstance(probs, list):
        raise TypeError("Convert classes to list before doing mapping")
    if mapping is not None and not isinstance(mapping, dict):
        raise TypeError("mapping must be a dict")
    classes: Iterable[Any] = lbl_classes if lbl_classes is not None else itertools.repeat(range(len(probs[0])), len(probs))
    return [
        {(mapping.get(str(lbl), str(lbl)) if mapping else str(lbl)): prob
         for lbl, prob in zip(*row, strict=False)}
        for row in zip(classes, probs, strict=False)
    ]


def get_yaml_config(yaml_file_path: str) -> dict[str, Any]:
    with open(yaml_file_path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}
