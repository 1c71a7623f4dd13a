"""Build tiny_llm.mar: a 2-layer Llama with seeded random weights and a locally trained tokenizer.

Usage: python examples/llm/build_mar.py --export-path model_store

Nothing is downloaded: the model is made from a LlamaConfig and the tokenizer is a byte-level BPE
trained on a built-in text (ts/testing/tiny_llm.py). Its output is gibberish, but every token is the one
Hugging Face's own generate would pick, which is what the tests check.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(export_path: Path, model_name: str = "tiny_llm", seed: int = 0,
          config_file: Path | None = None) -> Path:
    """Write ``<export_path>/<model_name>.mar``; return its path."""
    from model_archiver import ModelArchiver, ModelArchiverConfig
    from ts.testing.tiny_llm import build_model, build_tokenizer

    export_path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tiny-llm-") as tmp:
        folder = Path(tmp) / "model"  # goes in flat: config.json sits in the model dir
        tokenizer = build_tokenizer()
        build_model(tokenizer, seed=seed).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        config = ModelArchiverConfig(
            model_name=model_name,
            version="1.0",
            handler=str(HERE / "handler.py"),
            extra_files=str(folder),
            config_file=str(config_file or HERE / "model-config.yaml"),
            export_path=str(export_path),
            force=True,
        )
        return Path(ModelArchiver.generate_model_archive(config))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export-path", default="model_store", type=Path)
    parser.add_argument("--model-name", default="tiny_llm")
    parser.add_argument("--seed", default=0, type=int)
    parser.add_argument("--config-file", type=Path, help="a model-config.yaml to use instead")
    args = parser.parse_args()
    print(build(args.export_path, args.model_name, args.seed, args.config_file))
