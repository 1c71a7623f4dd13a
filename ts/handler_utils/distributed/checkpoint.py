"""Finding and loading model weights inside a model archive.

A checkpoint folder is the model dir itself (files added with ``--extra-files``), or
``handler.model_path`` (absolute, or relative to the model dir). Weights are safetensors
files or ``torch.save`` state-dict shards, with or without a Hugging Face index json.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ts.handler_utils.distributed.config import ModelConfigError

logger = logging.getLogger(__name__)

TORCH_SUFFIXES = (".bin", ".pt", ".pth")


class CheckpointError(RuntimeError):
    """Weights are missing, unreadable, or do not fit the model."""


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    files: tuple[Path, ...]
    index: Path | None  # a Hugging Face *.index.json, when the folder has one

    @property
    def is_safetensors(self) -> bool:
        return all(f.suffix == ".safetensors" for f in self.files)


def resolve_checkpoint_dir(model_dir: str | os.PathLike[str], model_path: str | None) -> Path:
    """The folder that holds the weights (``handler.model_path`` or the model dir)."""
    base = Path(model_dir)
    folder = base if not model_path else Path(model_path)
    if not folder.is_absolute():
        folder = base / folder
    if not folder.is_dir():
        raise ModelConfigError(
            f"model-config.yaml: 'handler.model_path' points to {folder}, which is not a "
            "folder; give a checkpoint folder (absolute or relative to the model dir) or "
            "add the weights with --extra-files"
        )
    return folder


def _index_files(index: Path) -> tuple[Path, ...]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"cannot read the weight index {index}: {exc}") from exc
    return tuple(dict.fromkeys(index.parent / name for name in weight_map.values()))


def find_checkpoint(folder: Path) -> Checkpoint:
    """Locate the weight files of ``folder`` (index json first, then safetensors, then torch)."""
    indexes = sorted(folder.glob("*.safetensors.index.json")) or sorted(folder.glob("*.bin.index.json"))
    if indexes:
        files = _index_files(indexes[0])
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"weight index {indexes[0]} names missing files: {missing}")
        return Checkpoint(folder, files, indexes[0])
    files = tuple(sorted(folder.glob("*.safetensors")))
    if not files:
        files = tuple(sorted(p for p in folder.iterdir() if p.suffix in TORCH_SUFFIXES and p.is_file()))
    if not files:
        raise CheckpointError(
            f"no weights found in {folder}: expected *.safetensors or torch.save shards "
            f"({', '.join(TORCH_SUFFIXES)}), optionally with an *.index.json"
        )
    return Checkpoint(folder, files, None)


def load_file(path: Path) -> dict[str, torch.Tensor]:
    """One shard as a CPU state dict."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file as load_safetensors

        return load_safetensors(str(path), device="cpu")
    try:
        obj: Any = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling error means the same to the user
        raise CheckpointError(f"cannot load torch.save shard {path}: {exc}") from exc
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointError(f"{path} is not a state dict (a mapping of names to tensors)")
    return obj


def load_state_dict(files: Iterable[Path]) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(load_file(path))
    return state


def load_weights(model: nn.Module, checkpoint: Checkpoint, dtype: torch.dtype | None = None) -> None:
    """Copy the checkpoint into ``model``; fail naming the parameters it does not provide."""
    state = load_state_dict(checkpoint.files)
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    # A model built with meta parameters gets the checkpoint's tensors themselves (assign).
    assign = any(p.is_meta for p in model.parameters())
    result = model.load_state_dict(state, strict=False, assign=assign)
    tie = getattr(model, "tie_weights", None)
    if callable(tie):
        tie()  # tied heads are not stored in Hugging Face checkpoints
    tied = _tied_names(model)
    missing = [k for k in result.missing_keys if k not in tied]
    if missing:
        raise CheckpointError(
            f"checkpoint {checkpoint.folder} lacks {len(missing)} weights of the model, "
            f"e.g. {missing[:5]}; check that the weights and the model config match"
        )
    if result.unexpected_keys:
        logger.warning("checkpoint %s has %d unused weights, e.g. %s", checkpoint.folder,
                       len(result.unexpected_keys), result.unexpected_keys[:5])


def load_parameters(model: nn.Module, checkpoint: Checkpoint, names: dict[int, list[str]],
                    dtype: torch.dtype | None = None) -> None:
    """Give each meta parameter left in ``model`` its tensor, reading only those from the
    checkpoint (a pipeline stage keeps part of a model built with ``meta_parameters``).

    ``names`` maps a parameter's id to its names in the whole model (several when tied: the first
    the checkpoint holds is read, as tied heads are not stored)."""
    places: dict[int, list[tuple[nn.Module, str]]] = {}
    params: dict[int, nn.Parameter] = {}
    for module in model.modules():
        for attr, param in module._parameters.items():
            if param is not None and param.is_meta:
                places.setdefault(id(param), []).append((module, attr))
                params[id(param)] = param
    reader = _TensorReader(checkpoint)
    for pid, param in params.items():
        key = next((n for n in names.get(pid, []) if n in reader), None)
        if key is None:
            raise CheckpointError(f"checkpoint {checkpoint.folder} has no weight {' or '.join(names.get(pid, ['?']))}; "
                                  "check that the weights and the model config match")
        tensor = reader.get(key)
        if tuple(tensor.shape) != tuple(param.shape):
            raise CheckpointError(f"checkpoint {checkpoint.folder}: {key} has shape {tuple(tensor.shape)}, the "
                                  f"model expects {tuple(param.shape)}; check that the weights and the config match")
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        loaded = nn.Parameter(tensor, requires_grad=False)
        for module, attr in places[pid]:
            module._parameters[attr] = loaded


class _TensorReader:
    """Single tensors by name from a checkpoint's files: safetensors read just the tensor asked
    for; torch.save shards are memory-mapped."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        from safetensors import safe_open

        self._files: dict[str, Any] = {}
        for path in checkpoint.files:
            handle: Any = (safe_open(str(path), framework="pt", device="cpu") if path.suffix == ".safetensors"
                           else load_file(path))
            for key in handle.keys():
                self._files[key] = handle

    def __contains__(self, key: str) -> bool:
        return key in self._files

    def get(self, key: str) -> torch.Tensor:
        handle = self._files[key]
        tensor: torch.Tensor = handle[key] if isinstance(handle, dict) else handle.get_tensor(key)
        return tensor


def _tied_names(model: nn.Module) -> set[str]:
    """Names of parameters that share storage with an earlier parameter."""
    seen: dict[int, str] = {}
    tied: set[str] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            tied.add(name)
        else:
            seen[id(param)] = name
    return tied


def build_model_from_config(folder: Path, dtype: torch.dtype | None = None) -> nn.Module:
    """A Transformers causal LM built from ``folder/config.json`` (weights not loaded)."""
    if not (folder / "config.json").is_file():
        raise CheckpointError(
            f"{folder} has no config.json: add the model's Hugging Face config to the archive "
            "or override build_model() in your handler to construct the model"
        )
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    model: nn.Module = AutoModelForCausalLM.from_config(config, **kwargs)  # type: ignore[no-untyped-call]  # transformers' untyped classmethod
    return model.eval()


def accelerate_checkpoint_path(checkpoint: Checkpoint, scratch: Path) -> Path:
    """A single path Accelerate can load: the file, the index, or an index written to ``scratch``."""
    if checkpoint.index is not None:
        return checkpoint.index
    if len(checkpoint.files) == 1:
        return checkpoint.files[0]
    weight_map: dict[str, str] = {}
    for path in checkpoint.files:
        for key in load_file(path):
            weight_map[key] = str(path.resolve())  # absolute: the index lives elsewhere
    suffix = ".safetensors.index.json" if checkpoint.is_safetensors else ".bin.index.json"
    scratch.mkdir(parents=True, exist_ok=True)
    index = scratch / f"model{suffix}"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return index


@contextlib.contextmanager
def meta_parameters() -> Iterator[None]:
    """Create parameters on the meta device; buffers stay real.

    Like ``accelerate.init_empty_weights``: non-persistent buffers (rotary frequencies) are
    computed in ``__init__`` and are not in checkpoints, so they must not become meta.
    """
    register = nn.Module.register_parameter

    def register_on_meta(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(self, name, param)
        if param is not None and not param.is_meta:
            self._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    nn.Module.register_parameter = register_on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]
