"""Build sentiment.mar: a TorchScript bag-of-words model with hand-set weights and a custom handler.

Usage: python examples/text_custom/build_mar.py --export-path model_store
"""

import argparse
import json
import tempfile
from pathlib import Path

import torch

from model_archiver import ModelArchiver, ModelArchiverConfig

HERE = Path(__file__).resolve().parent
POSITIVE = ["good", "great", "excellent", "love", "wonderful", "best", "fun"]
NEGATIVE = ["bad", "awful", "terrible", "hate", "boring", "worst", "dull"]


def build(export_path: Path) -> Path:
    vocab = {word: i for i, word in enumerate(POSITIVE + NEGATIVE)}
    linear = torch.nn.Linear(len(vocab), 2)
    with torch.no_grad():  # column 0 = negative, 1 = positive: each known word pushes its side
        linear.weight.zero_()
        linear.bias.zero_()
        for word, index in vocab.items():
            linear.weight[1 if word in POSITIVE else 0, index] = 1.5
    with tempfile.TemporaryDirectory(prefix="sentiment-") as tmp:  # the archiver copies what it needs
        staging = Path(tmp)
        torch.jit.script(linear).save(str(staging / "sentiment.pt"))
        (staging / "vocab.json").write_text(json.dumps(vocab))
        config = ModelArchiverConfig(
            model_name="sentiment",
            version="1.0",
            handler=str(HERE / "handler.py"),
            serialized_file=str(staging / "sentiment.pt"),
            extra_files=str(staging / "vocab.json"),
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
