"""The torchrun base handlers on 2 CPU ranks (gloo) against the unsplit model.

Each test builds an example archive with the project's archiver, unpacks it, runs its
handler on both ranks with examples/large_models/run_local.py (initialize, then handle on
one batch; rank 0 writes the answers), and compares tokens and logits with the same model
run whole in this process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "large_models"))

import local_check  # noqa: E402

pytestmark = pytest.mark.slow

REQUESTS = local_check.REQUESTS


def _config(example: str, edit: dict, tmp_path: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "examples" / "large_models" / example / "model-config.yaml").read_text())
    for dotted, value in edit.items():
        target = cfg
        *parents, key = dotted.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    path = tmp_path / "model-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run_and_compare(example: str, tmp_path: Path, timeout: float = 240, **build_kwargs) -> dict:
    model_dir = local_check.build_and_unpack(example, tmp_path, **build_kwargs)
    code, result, logs = local_check.run_handler(model_dir, REQUESTS, tmp_path, nproc=2, timeout=timeout)
    assert code == 0 and "responses" in result, f"{result.get('error')}\n{logs[-6000:]}"
    problems = local_check.compare(result["responses"], local_check.reference(model_dir, REQUESTS))
    assert not problems, problems
    return result


def test_pipeline_parallel_matches_unsplit_model(tmp_path: Path) -> None:
    result = _run_and_compare("pippy", tmp_path)
    first = result["responses"][0]
    assert first["prompt"] == "Hello" and len(first["generated_ids"]) == 8


def test_pipeline_even_split_and_odd_batch(tmp_path: Path) -> None:
    # No split points (even split by layer count); 3 requests with chunks=2 need row padding.
    cfg = _config("pippy", {"pippy.split_points": None, "pippy.schedule": "1F1B"}, tmp_path)
    _run_and_compare("pippy", tmp_path, config_file=cfg)


def test_tensor_parallel_matches_unsplit_model_torch_shards(tmp_path: Path) -> None:
    # torch.save shards without an index, split across two files.
    _run_and_compare("tp", tmp_path, weights="torch", shards=2)


def test_tensor_parallel_default_plan_from_model(tmp_path: Path) -> None:
    cfg = _config("tp", {"tp.plan": None}, tmp_path)
    _run_and_compare("tp", tmp_path, config_file=cfg)


def test_deepspeed_tp2_matches_unsplit_model_and_removes_shm_files(tmp_path: Path) -> None:
    from ts.handler_utils.distributed import deepspeed_shm

    shm = Path("/dev/shm")
    before = set(shm.glob(deepspeed_shm.PREFIX + "*"))
    # The first DeepSpeed init on a machine JIT-compiles its shm op (about a minute).
    _run_and_compare("deepspeed", tmp_path, timeout=420)
    # Each rank unlinked its own all-reduce buffer when it exited.
    assert set(shm.glob(deepspeed_shm.PREFIX + "*")) - before == set()


def test_deepspeed_single_rank_meta_init_matches_unsplit_model(tmp_path: Path) -> None:
    # tp_size 1: DeepSpeed does not load checkpoints into a meta model it does not shard.
    cfg = _config("deepspeed", {"parallelLevel": 1, "torchrun.nproc-per-node": 1}, tmp_path)
    model_dir = local_check.build_and_unpack("deepspeed", tmp_path, config_file=cfg)
    code, result, logs = local_check.run_handler(model_dir, REQUESTS, tmp_path, nproc=1,
                                                 torchrun=True, timeout=300)
    assert code == 0 and "responses" in result, f"{result.get('error')}\n{logs[-6000:]}"
    assert not local_check.compare(result["responses"], local_check.reference(model_dir, REQUESTS))


@pytest.mark.parametrize(
    ("example", "edit", "needle"),
    [
        ("pippy", {"pippy.chunk": 2}, "unknown key 'pippy.chunk'"),
        ("pippy", {"pippy.split_points": ["model.layers.7"]}, "'model.layers.7' is not a submodule"),
        ("pippy", {"pippy.microbatch_size": 1}, "is smaller than batchSize (3)"),
        ("tp", {"tp.plan": {"model.layers.*.mlp.up_proj": "diagonal"}},
         "'tp.plan.model.layers.*.mlp.up_proj' must be one of"),
        ("deepspeed", {"deepspeed.dtype": "float64"}, "'deepspeed.dtype' must be"),
    ],
)
def test_bad_config_fails_at_load_naming_the_key(tmp_path: Path, example: str, edit: dict,
                                                 needle: str) -> None:
    cfg = _config(example, edit, tmp_path)
    model_dir = local_check.build_and_unpack(example, tmp_path, config_file=cfg)
    code, result, logs = local_check.run_handler(model_dir, REQUESTS, tmp_path, nproc=2, timeout=180)
    assert code != 0
    # rank 0 writes the error to the result file, unless torchrun stopped it first because the other
    # rank failed at once (a loaded machine): then the failing rank's own log names it
    said = result.get("error") or logs
    assert needle in said and "ModelConfigError" in said, f"{result}\n{logs[-3000:]}"


def test_world_size_must_match_parallel_level(tmp_path: Path) -> None:
    cfg = _config("tp", {"torchrun.nproc-per-node": 4, "parallelLevel": 4}, tmp_path)
    model_dir = local_check.build_and_unpack("tp", tmp_path, config_file=cfg)
    code, result, logs = local_check.run_handler(model_dir, REQUESTS, tmp_path, nproc=2, timeout=180)
    assert code != 0
    assert "asks for 4 ranks" in result.get("error", "") and "WORLD_SIZE=2" in result["error"], logs[-3000:]
