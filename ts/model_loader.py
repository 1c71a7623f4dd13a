"""Load a model for the worker: manifest, model-config.yaml, handler import, Context, initialize."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import yaml

import ts
from ts.context import Context
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl
from ts.model_settings import ModelSettings, read_model_settings
from ts.service import Service
from ts.utils.util import list_classes_from_module

logger = logging.getLogger("ts.model_loader")

ENVELOPES = {
    "body": ("ts.torch_handler.request_envelope.body", "BodyEnvelope"),
    "json": ("ts.torch_handler.request_envelope.json", "JSONEnvelope"),
    "kserve": ("ts.torch_handler.request_envelope.kserve", "KServeEnvelope"),
    "kservev2": ("ts.torch_handler.request_envelope.kservev2", "KServev2Envelope"),
}


class LoadError(Exception):
    """The model cannot be loaded; ``status`` goes into LOADED (500, or 507 for OOM)."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class LoadRequest:
    """The LOAD frame's json (docs/protocol.md): this worker's own fields, and the model's resolved
    settings in ``settings`` (their fields and defaults come from the frontend's ModelKeys)."""

    model_name: str
    model_path: str
    settings: ModelSettings = field(default_factory=ModelSettings)
    handler: str = ""
    model_version: str = ""
    envelope: str = ""
    gpu_id: int = -1
    limit_max_image_pixels: bool = True
    worker_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # the whole json (the preprocess pool's children get it)

    @classmethod
    def from_json(cls, obj: Any) -> LoadRequest:
        if not isinstance(obj, dict):
            raise LoadError("LOAD body must be a JSON object")
        for key in ("modelName", "modelPath"):
            if not isinstance(obj.get(key), str) or not obj.get(key):
                raise LoadError(f"LOAD is missing {key!r} (a non-empty string)")
        gpu_id = obj.get("gpuId", -1)
        if isinstance(gpu_id, bool) or not isinstance(gpu_id, int):
            raise LoadError(f"LOAD field 'gpuId' must be an integer, got {gpu_id!r}")
        try:
            settings = read_model_settings(obj)
        except ValueError as exc:
            raise LoadError(str(exc)) from None
        return cls(
            model_name=obj["modelName"], model_path=obj["modelPath"], settings=settings,
            handler=str(obj.get("handler") or ""), model_version=str(obj.get("modelVersion") or ""),
            envelope=str(obj.get("envelope") or ""), gpu_id=gpu_id,
            limit_max_image_pixels=bool(obj.get("limitMaxImagePixels", True)),
            worker_name=str(obj.get("workerName") or ""), extra=obj,
        )


@dataclass
class HandlerSpec:
    """What the handler string resolved to."""

    module: ModuleType
    function: Callable[..., Any] | None  # module-level entry point, else None
    cls: type | None  # the single handler class, else None
    name: str


def read_manifest(model_dir: str) -> dict[str, Any]:
    path = os.path.join(model_dir, "MAR-INF", "MANIFEST.json")
    if not os.path.isfile(path):
        return {"model": {}}
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise LoadError(f"cannot read {path}: {exc}") from None
    if not isinstance(manifest, dict):
        raise LoadError(f"{path} must hold a JSON object")
    manifest.setdefault("model", {})
    return manifest


def read_model_yaml(model_dir: str, manifest: dict[str, Any]) -> dict[str, Any]:
    name = manifest.get("model", {}).get("configFile")
    if not name:
        return {}
    path = os.path.join(model_dir, name)
    try:
        with open(path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f) or {}
    except FileNotFoundError:
        raise LoadError(f"the manifest names configFile {name!r} but {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise LoadError(f"{name} is not valid YAML: {exc}") from None
    if not isinstance(cfg, dict):
        raise LoadError(f"{name} must be a YAML mapping, got {type(cfg).__name__}")
    return cfg


def _import_handler_module(module_name: str, model_dir: str) -> ModuleType:
    if model_dir not in sys.path:
        sys.path.insert(0, model_dir)
    local_file = os.path.join(model_dir, module_name + ".py")
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Fall back to a built-in handler only when the handler module itself is missing,
        # not when it exists and one of *its* imports fails.
        if os.path.isfile(local_file) or exc.name != module_name:
            raise
    try:
        return importlib.import_module(f"ts.torch_handler.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"ts.torch_handler.{module_name}":
            raise
        raise LoadError(
            f"handler {module_name!r} is neither a file in the model archive nor a built-in "
            "handler (base_handler, image_classifier, image_segmenter, object_detector, "
            "text_classifier, llm_handler, vllm_handler)") from None


def resolve_handler(handler: str, model_dir: str) -> HandlerSpec:
    """``file.py``, ``file.py:fn``, ``dir/file:fn`` or a built-in name, as TorchServe reads it."""
    handler = handler or "base_handler"
    module_part, _, function_name = handler.partition(":")
    module_name = os.path.basename(module_part)
    if module_name.endswith(".py"):
        module_name = module_name[:-3]
    module = _import_handler_module(module_name, model_dir)
    fname = function_name or "handle"
    fn = getattr(module, fname, None)
    if fn is not None and callable(fn) and not inspect.isclass(fn):
        return HandlerSpec(module, fn, None, handler)
    if function_name:
        raise LoadError(f"handler {handler!r}: module {module_name} has no function {function_name!r}")
    classes = list_classes_from_module(module)
    if len(classes) > 1:
        # TorchServe insists on exactly one class; helper classes beside the handler are
        # allowed here when exactly one class has a handle() method.
        with_handle = [c for c in classes if callable(getattr(c, "handle", None))]
        classes = with_handle if len(with_handle) == 1 else classes
    if len(classes) != 1:
        raise LoadError(
            f"handler {handler!r}: expected a module-level handle(data, context) function or "
            f"exactly one class in {module_name}, found classes {[c.__name__ for c in classes]}")
    return HandlerSpec(module, None, classes[0], handler)


def build_context(req: LoadRequest, manifest: dict[str, Any], yaml_cfg: dict[str, Any],
                  metrics_config: str | None, rank: int, local_rank: int, world_size: int,
                  device: str) -> Context:
    metrics = MetricsCacheYamlImpl(metrics_config, req.model_name)
    gpu = req.gpu_id if req.gpu_id >= 0 else None
    return Context(req.model_name, req.model_path, manifest, req.settings.batchSize, gpu, ts.__version__,
                   req.limit_max_image_pixels, metrics, yaml_cfg, rank=rank, local_rank=local_rank,
                   world_size=world_size, device=device, model_version=req.model_version or None,
                   model_settings=req.settings)


def wrap_envelope(entry: Callable[..., Any], envelope: str) -> Callable[..., Any]:
    if not envelope:
        return entry
    if envelope not in ENVELOPES:
        raise LoadError(f"unknown envelope {envelope!r}; use one of {sorted(ENVELOPES)}")
    mod_name, cls_name = ENVELOPES[envelope]
    handle: Callable[..., Any] = getattr(importlib.import_module(mod_name), cls_name)(entry).handle
    return handle


def load_service(req: LoadRequest, context: Context, spec: HandlerSpec) -> Service:
    """Instantiate and initialise the handler (the expensive part: loads the model)."""
    loop: asyncio.AbstractEventLoop | None = None

    def settle(ret: Any) -> None:
        nonlocal loop
        if inspect.isawaitable(ret):  # async initialisation (TorchServe's async handlers)
            loop = loop or asyncio.new_event_loop()
            loop.run_until_complete(ret)

    if spec.function is not None:
        settle(spec.function(None, context))  # TorchServe's convention: initialize = fn(None, context)
        entry = spec.function
        handler_obj = None
    else:
        assert spec.cls is not None
        handler_obj = spec.cls()
        if not hasattr(handler_obj, "handle"):
            raise LoadError(f"handler class {spec.cls.__name__} has no handle(data, context) method")
        if hasattr(handler_obj, "initialize"):
            settle(handler_obj.initialize(context))
        entry = handler_obj.handle
    service = Service(req.model_name, wrap_envelope(entry, req.envelope), context, handler_obj)
    service._loop = loop
    return service
