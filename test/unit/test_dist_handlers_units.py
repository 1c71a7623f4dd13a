"""In-process tests of the large-model helpers and of the Accelerate handler (one process)."""

from __future__ import annotations

import json
import mmap
import os
import sys
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "large_models"))
sys.path.insert(0, str(ROOT / "examples" / "large_models" / "common"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ts.handler_utils.distributed import deepspeed_shm  # noqa: E402
from ts.handler_utils.distributed.checkpoint import (  # noqa: E402
    CheckpointError,
    accelerate_checkpoint_path,
    build_model_from_config,
    find_checkpoint,
    load_state_dict,
    load_weights,
    meta_parameters,
    resolve_checkpoint_dir,
)
from ts.handler_utils.distributed.config import (  # noqa: E402
    KeySpec,
    ModelConfigError,
    handler_section,
    positive_int,
    section,
    validate_section,
)
from ts.handler_utils.distributed.generation import greedy_generate  # noqa: E402
from ts.handler_utils.distributed.pipelining import (  # noqa: E402
    LogitsOnly,
    check_split_points,
    even_split_points,
    pad_to,
    padded_rows,
)
from ts.handler_utils.distributed.tensor_parallel import (  # noqa: E402
    check_plan_targets,
    plan_from_config,
    transformers_plan,
)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_llama import save_tiny_llama

    d = tmp_path_factory.mktemp("tiny")
    save_tiny_llama(d)
    return d


# ---------------------------------------------------------------- config
def test_unknown_key_is_named() -> None:
    spec = {"chunks": KeySpec(positive_int, "a positive integer")}
    with pytest.raises(ModelConfigError, match=r"unknown key 'pippy\.chunk'.*known keys of 'pippy': chunks"):
        validate_section("pippy", {"chunk": 2}, spec)


def test_bad_value_is_named_and_defaults_filled() -> None:
    spec = {"chunks": KeySpec(positive_int, "a positive integer", default=1)}
    with pytest.raises(ModelConfigError, match=r"'pippy\.chunks' must be a positive integer, got 0"):
        validate_section("pippy", {"chunks": 0}, spec)
    assert validate_section("pippy", {}, spec) == {"chunks": 1}


def test_section_must_be_a_mapping() -> None:
    with pytest.raises(ModelConfigError, match="section 'tp' must be a mapping"):
        section({"tp": [1, 2]}, "tp")
    assert section({}, "tp") == {}


def test_handler_section_checks_known_keys_only() -> None:
    assert handler_section({"handler": {"anything": 1, "max_new_tokens": 3}})["anything"] == 1
    with pytest.raises(ModelConfigError, match="'handler.max_new_tokens'"):
        handler_section({"handler": {"max_new_tokens": "many"}})


# ---------------------------------------------------------------- checkpoints
def test_model_path_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="'handler.model_path' points to"):
        resolve_checkpoint_dir(tmp_path, "nope")
    (tmp_path / "ckpt").mkdir()
    assert resolve_checkpoint_dir(tmp_path, "ckpt") == tmp_path / "ckpt"
    assert resolve_checkpoint_dir(tmp_path, None) == tmp_path


@pytest.mark.parametrize(("weights", "shards"), [("safetensors", 1), ("safetensors", 3), ("torch", 2)])
def test_weights_round_trip(tmp_path: Path, tiny_dir: Path, weights: str, shards: int) -> None:
    from tiny_llama import build_tiny_llama, save_tiny_llama

    files = save_tiny_llama(tmp_path, weights=weights, shards=shards)
    ckpt = find_checkpoint(tmp_path)
    assert list(ckpt.files) == files
    model = build_model_from_config(tmp_path)
    load_weights(model, ckpt)
    want = build_tiny_llama().state_dict()
    got = model.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_index_json_is_followed(tmp_path: Path) -> None:
    from tiny_llama import save_tiny_llama

    files = save_tiny_llama(tmp_path, shards=2)
    weight_map = {k: f.name for f in files for k in load_state_dict([f])}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    ckpt = find_checkpoint(tmp_path)
    assert ckpt.index is not None and set(ckpt.files) == set(files)
    files[1].unlink()
    with pytest.raises(CheckpointError, match="names missing files"):
        find_checkpoint(tmp_path)


def test_missing_weights_are_named(tmp_path: Path, tiny_dir: Path) -> None:
    state = load_state_dict(find_checkpoint(tiny_dir).files)
    state.pop("lm_head.weight")
    (tmp_path / "config.json").write_text((tiny_dir / "config.json").read_text())
    torch.save(state, tmp_path / "weights.pt")
    model = build_model_from_config(tmp_path)
    with pytest.raises(CheckpointError, match=r"lacks 1 weights.*lm_head\.weight"):
        load_weights(model, find_checkpoint(tmp_path))


def test_no_weights_and_no_config(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no weights found"):
        find_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no config.json"):
        build_model_from_config(tmp_path)


def test_not_a_state_dict(tmp_path: Path) -> None:
    torch.save([1, 2, 3], tmp_path / "model.bin")
    with pytest.raises(CheckpointError, match="is not a state dict"):
        load_state_dict(find_checkpoint(tmp_path).files)


def test_meta_parameters_keeps_buffers(tiny_dir: Path) -> None:
    with meta_parameters():
        model = build_model_from_config(tiny_dir)
    assert all(p.is_meta for p in model.parameters())
    assert not model.model.rotary_emb.inv_freq.is_meta  # not in checkpoints: must stay real


def test_accelerate_index_for_unindexed_shards(tmp_path: Path) -> None:
    from tiny_llama import save_tiny_llama

    files = save_tiny_llama(tmp_path / "ck", weights="torch", shards=2)
    index = accelerate_checkpoint_path(find_checkpoint(tmp_path / "ck"), tmp_path / "scratch")
    weight_map = json.loads(index.read_text())["weight_map"]
    assert index.name == "model.bin.index.json"
    assert set(weight_map.values()) == {str(f.resolve()) for f in files}


# ---------------------------------------------------------------- generation / pipelining / tp
def test_batched_right_padded_generation_equals_one_by_one(tiny_dir: Path) -> None:
    model = build_model_from_config(tiny_dir)
    load_weights(model, find_checkpoint(tiny_dir))
    forward = LogitsOnly(model)
    prompts = [list(b"hi"), list(b"a much longer prompt"), list(b"xyz")]
    batched = greedy_generate(forward, prompts, 4)
    for i, p in enumerate(prompts):
        alone = greedy_generate(forward, [p], 4)
        assert alone.tokens[0] == batched.tokens[i]
        assert torch.allclose(alone.first_logits[0], batched.first_logits[i], atol=1e-5)
    with pytest.raises(ValueError, match="at least one token"):
        greedy_generate(forward, [[]], 1)


def test_split_points(tiny_dir: Path) -> None:
    model = build_model_from_config(tiny_dir)
    assert even_split_points(model, 2) == ["model.layers.1"]
    with pytest.raises(ModelConfigError, match="longest layer list has 2 layers"):
        even_split_points(model, 3)
    with pytest.raises(ModelConfigError, match="has 2 entries but 2 stages need 1"):
        check_split_points(model, ["model.layers.0", "model.layers.1"], 2)
    with pytest.raises(ModelConfigError, match="'model.layer.1' is not a submodule"):
        check_split_points(model, ["model.layer.1"], 2)


def test_padding() -> None:
    x = torch.tensor([[1, 2], [3, 4], [5, 6]])
    assert padded_rows(3, 2, 2) == 4
    with pytest.raises(ValueError, match="exceeds the pipeline capacity 4"):
        padded_rows(5, 2, 2)
    out = pad_to(x, 4, 5, 0)
    assert out.shape == (4, 5) and torch.equal(out[:3, :2], x) and out[3].sum() == 0
    with pytest.raises(ValueError, match="does not fit the traced length 1"):
        pad_to(x, 4, 1, 0)


def test_tp_plan_checks(tiny_dir: Path) -> None:
    model = build_model_from_config(tiny_dir)
    plan = transformers_plan(model)
    assert plan is not None and plan["model.layers.*.self_attn.o_proj"] == "rowwise"
    check_plan_targets(model, plan)
    with pytest.raises(ModelConfigError, match="'model.layers.*.attn.q' matches no submodule"):
        check_plan_targets(model, {"model.layers.*.attn.q": "colwise"})
    with pytest.raises(ModelConfigError, match=r"'tp\.plan\.lm_head' must be one of"):
        plan_from_config({"lm_head": "sideways"})


# ---------------------------------------------------------------- DeepSpeed shm files
def test_deepspeed_shm_removal_keeps_mapped_files(tmp_path: Path) -> None:
    uid = os.getuid()
    stale = tmp_path / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_29500_0"
    other_port = tmp_path / f"deepspeed_allreduce_buffer_{uid}_127.0.0.1_29600_0"
    other_user = tmp_path / f"deepspeed_allreduce_buffer_{uid + 1}_127.0.0.1_29500_0"
    unrelated = tmp_path / "something_else"
    for p in (stale, other_port, other_user, unrelated):
        p.write_bytes(b"\0" * 4096)
    removed = deepspeed_shm.remove_deepspeed_shm_buffers("127.0.0.1", 29500, shm_dir=tmp_path)
    assert removed == [stale]
    assert other_port.exists() and other_user.exists() and unrelated.exists()


def test_deepspeed_shm_in_use_file_is_kept() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm on this machine")
    path = shm / f"deepspeed_allreduce_buffer_{os.getuid()}_test-{os.getpid()}_1_0"
    path.write_bytes(b"\0" * 4096)
    try:
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096):
            assert path not in deepspeed_shm.remove_deepspeed_shm_buffers(f"test-{os.getpid()}")
            assert path.exists()
        assert deepspeed_shm.remove_deepspeed_shm_buffers(f"test-{os.getpid()}") == [path]
    finally:
        path.unlink(missing_ok=True)


def test_deepspeed_shm_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"deepspeed_allreduce_buffer_{os.getuid()}_h_1_0"
    path.write_bytes(b"x")
    assert deepspeed_shm.main(["--master-addr", "h", "--shm-dir", str(tmp_path)]) == 0
    assert str(path) in capsys.readouterr().out and not path.exists()
    assert deepspeed_shm.main(["--master-port", "1", "--shm-dir", str(tmp_path)]) == 2


# ---------------------------------------------------------------- Accelerate (single process)
ACCEL_REQUESTS = [{"prompt": "Hello", "max_new_tokens": 6, "return_logits": True}, "abc"]


def _accelerate(tmp_path: Path, accel: dict | None, extra: dict | None = None) -> list:
    import local_check
    from run_local import run

    cfg = yaml.safe_load((ROOT / "examples/large_models/accelerate/model-config.yaml").read_text())
    if accel is not None:
        cfg["accelerate"] = accel
    cfg.update(extra or {})
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg_path = tmp_path / "model-config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    model_dir = local_check.build_and_unpack("accelerate", tmp_path, config_file=cfg_path)
    return run(str(model_dir), ACCEL_REQUESTS)


def test_accelerate_disk_offload_equals_no_offload(tmp_path: Path) -> None:
    import local_check

    offloaded = _accelerate(tmp_path / "a", None)  # the example: layer 0 on disk
    assert list((tmp_path / "a").glob("*-unpacked/offload/model.layers.0.*.dat"))
    by_memory = _accelerate(tmp_path / "b", {"device_map": "auto", "max_memory": {"cpu": "60KB"},
                                             "offload_folder": "off"})
    assert list((tmp_path / "b").glob("*-unpacked/off/*.dat"))  # max_memory forced disk offload
    plain = _accelerate(tmp_path / "c", {"device_map": "auto"})
    assert offloaded[0]["generated_ids"] == plain[0]["generated_ids"] == by_memory[0]["generated_ids"]
    assert torch.allclose(torch.tensor(offloaded[0]["logits"]), torch.tensor(plain[0]["logits"]), atol=1e-5)
    model_dir = next((tmp_path / "c").glob("*-unpacked"))
    assert not local_check.compare(plain, local_check.reference(model_dir, ACCEL_REQUESTS))


@pytest.mark.parametrize(
    ("accel", "extra", "needle"),
    [
        (None, {"parallelLevel": 2}, "runs the model in ONE process"),
        (None, {"torchrun": {"nproc-per-node": 2}}, "runs the model in ONE process"),
        (None, {"parallelType": "tp", "parallelLevel": 1}, "parallelType 'tp' starts torchrun"),
        (None, {"parallelType": "pp"}, "parallelType pp needs parallelLevel >= 1"),  # the frontend's own check
        ({"device_map": "everywhere"}, None, "'accelerate.device_map' must be one of auto"),
        ({"offload_dir": "x"}, None, "unknown key 'accelerate.offload_dir'"),
        ({"device_map": {"model.layer.0": "cpu"}}, None, "names ['model.layer.0']"),
        ({"device_map": {"model": "disk", "lm_head": "cpu"}}, None, "set 'accelerate.offload_folder'"),
    ],
)
def test_accelerate_bad_config(tmp_path: Path, accel: dict | None, extra: dict | None, needle: str) -> None:
    with pytest.raises((ModelConfigError, ValueError)) as err:
        _accelerate(tmp_path, accel, extra)
    assert needle in str(err.value)


# ---------------------------------------------------------------- rank 0 drives, followers follow
def test_coordinator_delivers_every_step_in_order_and_cleans_up(tmp_path: Path) -> None:
    import torch.distributed as dist

    from ts.handler_utils.distributed.coordinator import RankCoordinator

    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        # Two coordinators on one store stand for rank 0 and rank 1 of a 2-rank job.
        leader = RankCoordinator("m", 0, 2, poll_s=0.1)
        follower = RankCoordinator("m", 1, 2, poll_s=0.1)
        seen: list[object] = []
        follower.start_following(seen.append)
        payloads = [{"prompts": [[1, 2]], "n": i} for i in range(3)] + [torch.arange(4)]
        results = [leader.run(p, lambda p: ("ran", p)) for p in payloads]
        assert [r[0] for r in results] == ["ran"] * 4
        leader.stop()
        assert follower.wait_stopped(30)
        assert seen[:3] == payloads[:3] and torch.equal(seen[3], payloads[3])
        leader._collect_acknowledged()
        assert leader._pending == []  # every step key deleted once the follower read it
        assert not any(leader.store.check([f"step/{i}"]) for i in range(5))
    finally:
        dist.destroy_process_group()
