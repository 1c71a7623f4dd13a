"""BaseHandler: TorchServe's default lifecycle (initialize, preprocess, inference, postprocess)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from typing import Any

import torch

from ts.context import Context
from ts.utils.util import check_valid_pt2_backend, list_classes_from_module, load_label_mapping

logger = logging.getLogger(__name__)


def _select_device(gpu_id: Any) -> tuple[str, torch.device]:
    if gpu_id is not None and int(gpu_id) >= 0 and torch.cuda.is_available():
        return "cuda", torch.device(f"cuda:{int(gpu_id)}")
    if os.environ.get("TS_IPEX_GPU_ENABLE", "false").lower() == "true" and hasattr(torch, "xpu") \
            and torch.xpu.is_available():
        return "xpu", torch.device(f"xpu:{int(gpu_id or 0)}")
    if torch.backends.mps.is_available() and gpu_id is not None and int(gpu_id) >= 0:
        return "mps", torch.device("mps")
    return "cpu", torch.device("cpu")


class BaseHandler:
    """Loads ``manifest.model.serializedFile`` and runs it on the batch.

    Weights: eager (``modelFile`` + state dict), TorchScript (``.pt``), ``torch.export``
    (``.pt2``, ExportedProgram or AOTInductor package) and AOTInductor ``.so``.
    """

    def __init__(self) -> None:
        self.model: Any = None
        self.mapping: dict[str, Any] | None = None
        self.device: torch.device | None = None
        self.initialized = False
        self.context: Context | None = None
        self.model_pt_path: str | None = None
        self.manifest: dict[str, Any] | None = None
        self.map_location: str | None = None
        self.explain = False
        self.target = 0
        self.profiler_args: dict[str, Any] = {}
        self.model_yaml_config: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle
    def setup_common(self, context: Context, device: torch.device | None = None) -> None:
        """Light state shared by initialize() and the preprocess pool (no model loading)."""
        self.context = context
        self.manifest = context.manifest or {"model": {}}
        self.model_yaml_config = context.model_yaml_config or {}
        if device is None:
            self.map_location, device = _select_device(context.system_properties.get("gpu_id"))
        else:
            self.map_location = device.type
        self.device = device
        model_dir = context.system_properties.get("model_dir") or "."
        self.mapping = load_label_mapping(os.path.join(model_dir, "index_to_name.json"))

    def initialize(self, context: Context) -> None:
        self.setup_common(context)
        model_dir = context.system_properties.get("model_dir") or "."
        model_meta = (self.manifest or {}).get("model", {})
        serialized = model_meta.get("serializedFile")
        self.model_pt_path = os.path.join(model_dir, serialized) if serialized else None
        model_file = model_meta.get("modelFile", "")
        path = self.model_pt_path or ""
        if path.endswith(".so"):
            self.model = self._load_aot_so(path)
        elif path.endswith(".pt2"):
            self.model = self._load_pt2(path)
        elif model_file:
            self.model = self._load_pickled_model(model_dir, model_file, self.model_pt_path)
            self.model.to(self.device)
            self.model.eval()
        elif path.endswith((".pt", ".pth", ".torchscript")) and os.path.isfile(path):
            self.model = self._load_torchscript_model(path)
            self.model.eval()
        elif path.endswith(".onnx"):
            raise RuntimeError(f"{serialized}: ONNX models need onnxruntime, which tserve's "
                               "BaseHandler does not bundle; use a TorchScript or eager model")
        else:
            raise RuntimeError(
                "No model weights could be loaded: the manifest names serializedFile="
                f"{serialized!r} and modelFile={model_file!r}; give a TorchScript .pt, a "
                "torch.export .pt2/.so, or --model-file with a state dict")
        self._maybe_compile()
        # TorchServe's MockContext, which handler tests copy, has no model_name
        name = getattr(context, "model_name", None) or model_meta.get("modelName", "")
        logger.info("model %s: loaded %s on %s", name, serialized, self.device)
        self.initialized = True

    # ------------------------------------------------------------------ loaders
    def _load_torchscript_model(self, model_pt_path: str) -> Any:
        return torch.jit.load(model_pt_path, map_location=self.device)  # type: ignore[no-untyped-call]  # torch.jit.load is unannotated

    def _load_pickled_model(self, model_dir: str, model_file: str, model_pt_path: str | None) -> Any:
        model_def_path = os.path.join(model_dir, model_file)
        if not os.path.isfile(model_def_path):
            raise RuntimeError(f"Missing the model definition file {model_file} in {model_dir}")
        if model_dir not in sys.path:
            sys.path.insert(0, model_dir)
        module = importlib.import_module(os.path.splitext(os.path.basename(model_file))[0])
        classes = [c for c in list_classes_from_module(module) if issubclass(c, torch.nn.Module)]
        if len(classes) != 1:
            raise ValueError(f"Expected only one class as model definition in {model_file}, "
                             f"found {[c.__name__ for c in classes]}")
        model = classes[0]()
        if model_pt_path:
            state = torch.load(model_pt_path, map_location=self.device, weights_only=True)
            model.load_state_dict(state)
        return model

    def _load_pt2(self, path: str) -> Any:
        import zipfile

        with zipfile.ZipFile(path) as zf:
            is_aoti = any("aotinductor" in n or n.endswith(".so") for n in zf.namelist())
        if is_aoti:
            from torch._inductor import aoti_load_package

            return aoti_load_package(path)
        return torch.export.load(path).module()

    def _load_aot_so(self, path: str) -> Any:
        loader = getattr(getattr(torch, "_export", None), "aot_load", None)
        if loader is None:
            raise RuntimeError(f"{os.path.basename(path)}: this torch has no torch._export.aot_load; "
                               "package the model with torch._inductor.aoti_compile_and_package (.pt2)")
        return loader(path, str(self.device))

    def _maybe_compile(self) -> None:
        cfg = self.model_yaml_config.get("pt2")
        if not cfg or not isinstance(self.model, torch.nn.Module):
            return
        kwargs: dict[str, Any] = {}
        if isinstance(cfg, str):
            kwargs["backend"] = cfg
        elif isinstance(cfg, dict):
            if "compile" in cfg:
                comp = dict(cfg["compile"] or {})
                if not comp.pop("enable", False):
                    return
                kwargs = comp
            elif "export" in cfg:
                return
            else:
                kwargs = dict(cfg)
        backend = kwargs.get("backend", "inductor")
        if not check_valid_pt2_backend(backend):
            logger.warning("pt2 backend %s is not supported; running eagerly", backend)
            return
        try:
            self.model = torch.compile(self.model, **kwargs)
            # TorchServe's wording ("Compiled model with backend inductor, mode reduce-overhead"), which logs are grepped for
            logger.info("Compiled model with %s", ", ".join(f"{k} {v}" for k, v in kwargs.items()))
        except Exception as exc:  # noqa: BLE001 - compilation is an optimisation
            logger.warning("Compiling model failed (%s); running eagerly", exc)

    # ------------------------------------------------------------------ steps
    def preprocess(self, data: list[dict[str, Any]]) -> Any:
        return torch.as_tensor(data, device=self.device)

    def inference(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            marshalled = data.to(self.device) if hasattr(data, "to") else data
            return self.model(marshalled, *args, **kwargs)

    def postprocess(self, data: Any) -> list[Any]:
        out: list[Any] = data.tolist()
        return out

    def handle(self, data: list[dict[str, Any]], context: Context) -> list[Any]:
        start = time.time()
        self.context = context
        if self._is_describe():
            output = [self.describe_handle()]
        elif os.environ.get("ENABLE_TORCH_PROFILER", "false").lower() == "true":
            output = self._infer_with_profiler(data)
        else:
            pre = self.preprocess(data)
            if self._is_explain():
                output = self.explain_handle(pre, data)
            else:
                output = self.postprocess(self.inference(pre))
        if context.metrics is not None:
            context.metrics.add_time("HandlerTime", round((time.time() - start) * 1000, 2), None, "ms")
        return output

    def _infer_with_profiler(self, data: list[dict[str, Any]]) -> Any:
        """TorchServe's ENABLE_TORCH_PROFILER=true: traces in /tmp/pytorch_profiler/<model>."""
        from torch.profiler import ProfilerActivity, profile, record_function

        if not self.profiler_args:
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            self.profiler_args = {"activities": activities, "record_shapes": True}
        if "on_trace_ready" not in self.profiler_args:
            name = (self.manifest or {}).get("model", {}).get("modelName", "")
            self.profiler_args["on_trace_ready"] = torch.profiler.tensorboard_trace_handler(
                os.path.join("/tmp/pytorch_profiler", name))
        with profile(**self.profiler_args) as prof:
            with record_function("preprocess"):
                pre = self.preprocess(data)
            if self._is_explain():
                with record_function("explain"):
                    output = self.explain_handle(pre, data)
            else:
                with record_function("inference"):
                    output = self.inference(pre)
                with record_function("postprocess"):
                    output = self.postprocess(output)
        logger.info(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
        return output

    def explain_handle(self, data_preprocess: Any, raw_data: list[dict[str, Any]]) -> Any:
        inputs, target = None, 0
        row = raw_data[0] if raw_data else {}
        if isinstance(row, dict):
            inputs = row.get("data") or row.get("body")
            target = row.get("target") or 0
        if not hasattr(self, "get_insights"):
            raise RuntimeError(f"{type(self).__name__} does not implement get_insights(), so it "
                               "cannot explain; send the request without explain")
        return self.get_insights(data_preprocess, inputs, target)

    def describe_handle(self) -> Any:
        logger.info("Collect customized metadata")
        return None

    def _header(self, name: str) -> Any:
        ctx = self.context
        if ctx is None or not getattr(ctx, "request_processor", None):   # MockContext has none
            return None
        return ctx.get_request_header(0, name)

    def _is_explain(self) -> bool:
        return bool(self._header("explain") == "True")

    def _is_describe(self) -> bool:
        return bool(self._header("describe") == "True")
