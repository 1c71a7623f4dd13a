"""The benchmark models: one source per model, archived for tserve and for TorchServe.

tserve's archives are built with the project's ``model_archiver`` Python API; TorchServe's with
the real ``torch-model-archiver`` 0.12.0 from the bench venv. Both read the same handler files.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HANDLERS = Path(__file__).resolve().parent / "handlers"


@dataclass
class ModelSpec:
    name: str
    handler: str
    serialized_file: str | None = None
    extra_files: list[str] = field(default_factory=list)
    config_yaml: str | None = None


def make_mlp_weights(path: Path) -> Path:
    """A deterministic state dict for the MLP (seeded, so both servers load the same weights)."""
    import torch

    from benchmarks.handlers.mlp_handler import build_model

    torch.manual_seed(0)
    torch.save(build_model().state_dict(), path)
    return path


def pipeline_spec(name: str, preprocess_ms: float, inference_ms: float, workers: int,
                  batch_size: int, delay_ms: int, work: Path) -> ModelSpec:
    costs = work / f"{name}-costs" / "costs.json"
    costs.parent.mkdir(parents=True, exist_ok=True)
    costs.write_text(json.dumps({"preprocess_ms": preprocess_ms, "inference_ms": inference_ms}))
    yaml = (
        f"minWorkers: 1\nmaxWorkers: 1\nbatchSize: {batch_size}\nmaxBatchDelay: {delay_ms}\n"
        f"preprocessWorkers: {workers}\n"
    )
    return ModelSpec(name, str(HANDLERS / "pipeline_handler.py"), extra_files=[str(costs)],
                     config_yaml=yaml)


def base_specs(work: Path) -> list[ModelSpec]:
    weights = make_mlp_weights(work / "mlp.pt")
    return [
        ModelSpec("echo", str(HANDLERS / "echo_handler.py")),
        ModelSpec("mlp", str(HANDLERS / "mlp_handler.py"), serialized_file=str(weights),
                  extra_files=[]),
    ]


@contextlib.contextmanager
def _config_file(spec: ModelSpec) -> Iterator[str | None]:
    """The spec's model-config.yaml as a file, while the archiver copies it into the archive."""
    if spec.config_yaml is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix=f"{spec.name}-cfg-") as tmp:
        path = Path(tmp) / "model-config.yaml"
        path.write_text(spec.config_yaml)
        yield str(path)


def build_tserve(spec: ModelSpec, store: Path) -> Path:
    """Archive with the project's archiver (Python API)."""
    from model_archiver import ModelArchiver, ModelArchiverConfig

    store.mkdir(parents=True, exist_ok=True)
    with _config_file(spec) as config_file:
        config = ModelArchiverConfig(
            model_name=spec.name,
            handler=spec.handler,
            version="1.0",
            serialized_file=spec.serialized_file,
            model_file=None,
            extra_files=",".join(spec.extra_files) if spec.extra_files else None,
            runtime="python",
            export_path=str(store),
            archive_format="default",
            force=True,
            requirements_file=None,
            config_file=config_file,
        )
        return Path(ModelArchiver.generate_model_archive(config))


def build_torchserve(spec: ModelSpec, store: Path, archiver: Path) -> Path:
    """Archive with TorchServe's own torch-model-archiver 0.12.0."""
    store.mkdir(parents=True, exist_ok=True)
    cmd = [str(archiver), "--model-name", spec.name, "--version", "1.0", "--handler", spec.handler,
           "--export-path", str(store), "--force"]
    if spec.serialized_file:
        cmd += ["--serialized-file", spec.serialized_file]
    if spec.extra_files:
        cmd += ["--extra-files", ",".join(spec.extra_files)]
    with _config_file(spec) as cfg:
        if cfg:
            cmd += ["--config-file", cfg]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"torch-model-archiver failed for {spec.name}: {res.stderr.strip()}")
    return store / f"{spec.name}.mar"
