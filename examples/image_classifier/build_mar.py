"""Build tiny_cnn.mar: random weights saved as a state dict, served by the `image_classifier` default handler.

Usage: python examples/image_classifier/build_mar.py --export-path model_store
"""

import argparse
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from model import TinyCNN  # noqa: E402

from model_archiver import ModelArchiver, ModelArchiverConfig  # noqa: E402


def build(export_path: Path) -> Path:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="tiny_cnn-") as tmp:  # the archiver copies what it needs
        weights = Path(tmp) / "tiny_cnn.pt"
        torch.save(TinyCNN().state_dict(), weights)
        config = ModelArchiverConfig(
            model_name="tiny_cnn",
            version="1.0",
            handler="image_classifier",
            model_file=str(HERE / "model.py"),
            serialized_file=str(weights),
            extra_files=str(HERE / "index_to_name.json"),
            export_path=str(export_path),
            force=True,
        )
        return Path(ModelArchiver.generate_model_archive(config))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export-path", default="model_store", type=Path)
    args = parser.parse_args()
    args.export_path.mkdir(parents=True, exist_ok=True)
    print(build(args.export_path))
