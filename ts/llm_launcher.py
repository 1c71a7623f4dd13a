"""Serve a language model with one command, as TorchServe's ``ts.llm_launcher`` does.

    python -m ts.llm_launcher --model_id /models/my-llama [--model_name llm] [--engine tserve|vllm]
                              [--disable_token_auth] [--ts_config config.properties]

It writes a model folder (a no-archive "archive": ``MAR-INF/MANIFEST.json`` and a
model-config.yaml with continuous batching) into ``--model_store``, then runs ``torchserve`` in
the foreground with that model until Ctrl-C or SIGTERM. ``--model_id`` is a local Hugging Face
folder (``save_pretrained``): tserve's launcher downloads nothing. The model answers on
``/predictions/<name>`` and the OpenAI routes (``/v1/completions``, ``/v1/chat/completions``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

HANDLERS = {"tserve": "llm_handler", "vllm": "vllm_handler"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ts.llm_launcher", description=__doc__.splitlines()[0])
    p.add_argument("--model_id", required=True, help="a local Hugging Face model folder (save_pretrained)")
    p.add_argument("--model_name", default="model", help="the name to serve it as (default: model)")
    p.add_argument("--model_store", default="model_store", help="where the model folder is written")
    p.add_argument("--engine", choices=sorted(HANDLERS), default="tserve",
                   help="tserve: the built-in continuous-batching engine (CPU or GPU); vllm: vLLM (GPU)")
    p.add_argument("--batch_size", type=int, default=8, help="sequences decoded together (default 8)")
    p.add_argument("--max_new_tokens", type=int, default=256, help="when a request does not say")
    p.add_argument("--startup_timeout", type=int, default=1200, help="seconds to load the model")
    p.add_argument("--dtype", default="auto", help="auto, float32, float16 or bfloat16")
    p.add_argument("--vllm_engine.max_num_seqs", dest="vllm_max_num_seqs", type=int, default=None)
    p.add_argument("--vllm_engine.max_model_len", dest="vllm_max_model_len", type=int, default=None)
    p.add_argument("--disable_token_auth", action="store_true", help="serve without token authorization")
    p.add_argument("--ts_config", help="a config.properties for the server (addresses, ...)")
    return p.parse_args(argv)


def model_config(args: argparse.Namespace, model_id: Path) -> dict[str, Any]:
    handler: dict[str, Any] = {"model_path": str(model_id), "max_new_tokens": args.max_new_tokens}
    if args.engine == "tserve":
        handler["dtype"] = args.dtype
    else:
        engine = {"max_num_seqs": args.vllm_max_num_seqs or args.batch_size}
        if args.vllm_max_model_len:
            engine["max_model_len"] = args.vllm_max_model_len
        if args.dtype != "auto":
            engine["dtype"] = args.dtype
        handler["vllm_engine_config"] = engine
    return {"minWorkers": 1, "maxWorkers": 1, "batchSize": args.batch_size, "maxBatchDelay": 5,
            "startupTimeout": args.startup_timeout, "continuousBatching": True, "handler": handler}


def write_model(args: argparse.Namespace) -> Path:
    """The no-archive model folder ``<model_store>/<model_name>/``."""
    from model_archiver import ModelArchiver, ModelArchiverConfig

    model_id = Path(args.model_id).resolve()
    if not (model_id / "config.json").is_file():
        raise SystemExit(f"ts.llm_launcher: --model_id {args.model_id} is not a local Hugging Face model folder "
                         "(no config.json); save the model with save_pretrained, or download it first — tserve's "
                         "launcher does not download models")
    store = Path(args.model_store).resolve()
    store.mkdir(parents=True, exist_ok=True)
    config = store / f".{args.model_name}-model-config.yaml"
    config.write_text(yaml.safe_dump(model_config(args, model_id), sort_keys=False))
    try:
        ModelArchiver.generate_model_archive(ModelArchiverConfig(
            model_name=args.model_name, version="1.0", handler=HANDLERS[args.engine], config_file=str(config),
            export_path=str(store), archive_format="no-archive", force=True))
    finally:
        config.unlink(missing_ok=True)
    return store / str(args.model_name)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder = write_model(args)
    print(f"ts.llm_launcher: serving {args.model_id} as {args.model_name!r} ({args.engine} engine) from {folder}",
          flush=True)
    from ts import model_server

    cmd = ["--start", "--foreground", "--ncs", "--model-store", str(folder.parent),
           "--models", f"{args.model_name}={args.model_name}"]
    if args.disable_token_auth:
        cmd.append("--disable-token-auth")
    if args.ts_config:
        cmd += ["--ts-config", args.ts_config]
    return model_server.main(cmd)


if __name__ == "__main__":
    sys.exit(main())
