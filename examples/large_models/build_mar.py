"""Save the tiny Llama's weights and build one example's .mar.

    python examples/large_models/build_mar.py pippy --export-path model_store
    python examples/large_models/build_mar.py tp --weights torch --shards 2

Uses the project's archiver API (model_archiver.ModelArchiverConfig +
ModelArchiver.generate_model_archive). The weights go in with --extra-files, so they sit
flat in the model dir next to the handler, where the base handlers look for them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = ("pippy", "tp", "deepspeed", "accelerate")
sys.path.insert(0, str(HERE / "common"))

from tiny_llama import save_tiny_llama  # noqa: E402


def build(example: str, export_path: Path, weights: str = "safetensors", shards: int = 1,
          model_name: str | None = None, config_file: Path | None = None) -> Path:
    """Write ``<export_path>/<model_name>.mar`` for ``example``; return its path."""
    from model_archiver import ModelArchiver, ModelArchiverConfig

    if example not in EXAMPLES:
        raise SystemExit(f"unknown example {example!r}; choose one of {', '.join(EXAMPLES)}")
    src = HERE / example
    name = model_name or f"tiny_llama_{example}"
    export_path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "checkpoint"
        save_tiny_llama(ckpt, weights=weights, shards=shards)
        shutil.copy(HERE / "common" / "byte_lm.py", ckpt / "byte_lm.py")
        for extra in src.glob("*.json"):
            shutil.copy(extra, ckpt / extra.name)
        config = ModelArchiverConfig(
            model_name=name,
            handler=str(src / "custom_handler.py"),
            version="1.0",
            extra_files=str(ckpt),
            config_file=str(config_file or src / "model-config.yaml"),
            export_path=str(export_path),
            force=True,
        )
        return Path(ModelArchiver.generate_model_archive(config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example", choices=EXAMPLES)
    parser.add_argument("--export-path", type=Path, default=Path("model_store"))
    parser.add_argument("--weights", choices=("safetensors", "torch"), default="safetensors")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--model-name")
    parser.add_argument("--config-file", type=Path, help="a model-config.yaml to use instead")
    args = parser.parse_args()
    print(build(args.example, args.export_path, args.weights, args.shards, args.model_name,
                args.config_file))


if __name__ == "__main__":
    main()
