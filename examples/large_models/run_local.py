"""Run a large-model archive's handler without the server (every rank of a torchrun job).

    torchrun --nproc-per-node 2 examples/large_models/run_local.py \\
        --model-dir DIR --requests req.json --output out.json

``DIR`` is an unpacked .mar (or any folder with MAR-INF/MANIFEST.json); ``req.json`` is a JSON
list of request bodies (strings or objects). Each rank builds the Context the worker would,
calls ``initialize`` and then ``handle`` on the whole list as one batch; rank 0 writes the
responses to ``--output`` (or ``{"error": ...}`` when loading or inference fails, exit 1).
Without torchrun it runs as a single rank (the Accelerate example).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _context(model_dir: str, batch_size: int) -> Any:
    import ts
    from ts.context import Context
    from ts.model_loader import read_manifest, read_model_yaml
    from ts.model_settings import resolve_model_yaml

    manifest = read_manifest(model_dir)
    yaml_cfg = read_model_yaml(model_dir, manifest)
    config_file = manifest["model"].get("configFile")
    # the settings the frontend would send in LOAD (this file the only layer), as the worker reads them
    settings = resolve_model_yaml(os.path.join(model_dir, config_file) if config_file else None)
    rank = int(os.environ.get("RANK", 0))
    return Context(manifest["model"].get("modelName", "model"), model_dir, manifest, batch_size,
                   None, ts.__version__, True, None, yaml_cfg, rank=rank,
                   local_rank=int(os.environ.get("LOCAL_RANK", 0)),
                   world_size=int(os.environ.get("WORLD_SIZE", 1)), device="cpu",
                   model_settings=dataclasses.replace(settings, batchSize=batch_size))


def _init_process_group() -> None:
    # What the tserve worker does once per torchrun rank before loading the model.
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        import torch.distributed as dist

        from ts.handler_utils.distributed.dist_env import pg_timeout

        dist.init_process_group("gloo", timeout=pg_timeout())


def run(model_dir: str, requests: list[Any]) -> list[Any]:
    from ts.context import RequestProcessor
    from ts.model_loader import resolve_handler

    _init_process_group()
    ctx = _context(model_dir, len(requests))
    spec = resolve_handler(ctx.manifest["model"].get("handler", ""), model_dir)
    assert spec.cls is not None, "the example handlers are classes"
    handler = spec.cls()
    handler.initialize(ctx)
    data = [{"body": r if isinstance(r, str) else json.dumps(r)} for r in requests]
    ctx.set_batch({i: f"req-{i}" for i in range(len(data))}, [RequestProcessor({}) for _ in data])
    out = handler.handle(data, ctx)
    coordinator = getattr(handler, "coordinator", None)
    if coordinator is not None:
        if ctx.rank == 0:
            handler.stop_followers()
        elif not coordinator.wait_stopped(timeout=300):
            raise TimeoutError("rank 0 did not finish within 300 s")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--requests", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", 0))
    logging.basicConfig(level=logging.INFO, format=f"rank{rank} %(levelname)s %(name)s: %(message)s")
    try:
        out = run(os.path.abspath(args.model_dir), json.loads(args.requests.read_text()))
        result: dict[str, Any] = {"responses": out}
        code = 0
    except Exception as exc:  # noqa: BLE001 - reported to the caller as data
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
        code = 1
    if rank == 0:
        args.output.write_text(json.dumps(result, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
