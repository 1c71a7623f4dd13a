"""Build pipeline_image.mar (SmallCNN, random weights, CPU-heavy preprocess, preprocessWorkers: 2).

Usage: python examples/pipeline/image/build_mar.py --export-path model_store [--blur-passes N] [--workers N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from small_cnn import SmallCNN  # noqa: E402

from model_archiver import ModelArchiver, ModelArchiverConfig  # noqa: E402


def build(export_path: Path, blur_passes: int | None = None, workers: int | None = None,
          model_name: str = "pipeline_image") -> Path:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="pipeline_image-") as tmp:  # the archiver copies what it needs
        staging = Path(tmp)
        weights = staging / "small_cnn.pt"
        torch.save(SmallCNN().state_dict(), weights)
        cfg = yaml.safe_load((HERE / "model-config.yaml").read_text())
        if blur_passes is not None:
            cfg["handler"]["blur_passes"] = blur_passes
        if workers is not None:
            cfg["preprocessWorkers"] = workers
        config_file = staging / "model-config.yaml"
        config_file.write_text(yaml.safe_dump(cfg, sort_keys=False))
        config = ModelArchiverConfig(
            model_name=model_name, version="1.0", handler=str(HERE / "handler.py"),
            model_file=str(HERE / "small_cnn.py"), serialized_file=str(weights),
            extra_files=str(HERE / "index_to_name.json"), config_file=str(config_file),
            export_path=str(export_path), force=True,
        )
        return Path(ModelArchiver.generate_model_archive(config))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export-path", default="model_store", type=Path)
    parser.add_argument("--blur-passes", type=int, help="override handler.blur_passes")
    parser.add_argument("--workers", type=int, help="override preprocessWorkers")
    args = parser.parse_args()
    args.export_path.mkdir(parents=True, exist_ok=True)
    print(build(args.export_path, args.blur_passes, args.workers))
