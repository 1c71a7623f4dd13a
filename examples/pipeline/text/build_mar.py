"""Build pipeline_text.mar (bag-of-embeddings classifier, tokenizer in initialize_preprocess).

Usage: python examples/pipeline/text/build_mar.py --export-path model_store
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bag_model import BagClassifier  # noqa: E402

from model_archiver import ModelArchiver, ModelArchiverConfig  # noqa: E402

WORDS = ["<unk>", "good", "great", "bad", "awful", "movie", "film", "plot", "acting", "not", "very", "boring",
         "fun", "the", "a", "was", "is", "and", "i", "loved", "hated", "it"]


def build(export_path: Path, model_name: str = "pipeline_text") -> Path:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="pipeline_text-") as tmp:  # the archiver copies what it needs
        staging = Path(tmp)
        weights = staging / "bag.pt"
        torch.save(BagClassifier().state_dict(), weights)
        vocab = staging / "vocab.json"
        vocab.write_text(json.dumps({w: i for i, w in enumerate(WORDS)}))
        labels = staging / "index_to_name.json"
        labels.write_text(json.dumps({"0": "negative", "1": "neutral", "2": "positive"}))
        config = ModelArchiverConfig(
            model_name=model_name, version="1.0", handler=str(HERE / "handler.py"),
            model_file=str(HERE / "bag_model.py"), serialized_file=str(weights),
            extra_files=f"{vocab},{labels}", config_file=str(HERE / "model-config.yaml"),
            export_path=str(export_path), force=True,
        )
        return Path(ModelArchiver.generate_model_archive(config))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export-path", default="model_store", type=Path)
    args = parser.parse_args()
    args.export_path.mkdir(parents=True, exist_ok=True)
    print(build(args.export_path))
