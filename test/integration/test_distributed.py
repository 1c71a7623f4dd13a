"""Distributed (torchrun) workers end to end on CPU with gloo, parallelLevel 2.

One server with a fake device count (number_of_gpu=4 on this CPU machine: the frontend
reserves and assigns devices, the ranks still run on CPU because CUDA is unavailable to them).
A tensor-parallel MLP (DTensor) and a pipeline-parallel MLP (torch.distributed.pipelining)
must answer exactly what the unsplit model computes in this process.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
import torch

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
sys.path.insert(0, str(HANDLERS))

from mlp_common import FEATURES, make_mlp  # noqa: E402

ENV = {"TS_DIST_TIMEOUT_S": "60"}
TP_YAML = """\
minWorkers: 1
maxWorkers: 2
batchSize: 2
maxBatchDelay: 20
responseTimeout: 120
deviceType: gpu
parallelType: tp
parallelLevel: 2
torchrun:
  nproc-per-node: 2
  max-restarts: 1
tp:
  plan:
    layers.0: colwise
    layers.1: rowwise
handler:
  fake_deepspeed_shm: true
"""
PP_YAML = """\
minWorkers: 1
maxWorkers: 1
batchSize: 2
maxBatchDelay: 20
responseTimeout: 120
deviceType: gpu
deviceIds: [2, 3]
parallelType: pp
parallelLevel: 2
pippy:
  chunks: 2
  microbatch_size: 1
  max_length: 8
"""


def build(store: Path, name: str, handler: str, yaml: str) -> None:
    harness.build_mar(store, name, HANDLERS / handler, extra_files=[HANDLERS / "mlp_common.py"],
                      config_yaml=yaml)


def environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k.decode(): v.decode() for k, v in pairs}


def inputs(n: int) -> list[list[float]]:
    g = torch.Generator().manual_seed(7)
    return torch.randn(n, FEATURES, generator=g).tolist()


def reference(rows: list[list[float]]) -> list[list[float]]:
    with torch.no_grad():
        return make_mlp()(torch.tensor(rows)).tolist()


def close(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= 1e-5 + 1e-5 * abs(y) for x, y in zip(a, b, strict=True))


def predict(server: harness.Server, model: str, row: list[float]) -> requests.Response:
    return requests.post(f"{server.inference_url}/predictions/{model}", json=row, timeout=120)


def describe(server: harness.Server, model: str) -> dict:
    r = requests.get(f"{server.management_url}/models/{model}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    build(store, "tp_mlp", "tp_mlp_handler.py", TP_YAML)
    build(store, "pp_mlp", "pp_mlp_handler.py", PP_YAML)
    build(store, "bad_nproc", "tp_mlp_handler.py",
          "parallelType: tp\nparallelLevel: 2\ntorchrun:\n  nproc-per-node: 3\n")
    build(store, "bad_pp", "pp_mlp_handler.py", "parallelType: pp\nparallelLevel: 1\n")
    build(store, "too_big", "tp_mlp_handler.py", "deviceType: gpu\nparallelType: tp\nparallelLevel: 6\n")
    return store


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store, config={"number_of_gpu": 4}, env=ENV) as s:
        yield s


def check_answers(server: harness.Server, model: str) -> None:
    rows = inputs(6)
    expected = reference(rows)
    with ThreadPoolExecutor(4) as pool:   # concurrent requests, batched by the frontend
        got = list(pool.map(lambda row: predict(server, model, row), rows))
    for resp, want in zip(got, expected, strict=True):
        assert resp.status_code == 200, resp.text
        assert close(resp.json(), want), (resp.json(), want)


def test_tensor_parallel_mlp_matches_one_process(server: harness.Server) -> None:
    r = server.register("tp_mlp.mar", initial_workers=1, timeout=300)
    assert r.status_code == 200, r.text
    check_answers(server, "tp_mlp")
    worker = describe(server, "tp_mlp")["workers"][0]
    ranks = worker["ranks"]
    assert [(x["rank"], x["devices"], x["state"]) for x in ranks] == [(0, "0", "READY"), (1, "1", "READY")]
    for rank in ranks:
        env = environ(rank["pid"])
        # exactly the worker's devices, to every rank; torchrun's own variables show it is a rank
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert env["LOCAL_RANK"] == str(rank["rank"]) and env["WORLD_SIZE"] == "2"
    log = server.logs("model_log.log")
    assert f"W-{worker['id']}-tp_mlp_1.0 rank 1:" in log
    assert f"W-{worker['id']}-tp_mlp_1.0 torchrun: " in log and "Starting elastic_operator" in log
    # gloo here (CUDA unavailable to the ranks); test/gpu/run_distributed_gpu.sh expects nccl
    assert f"process group ready ({os.environ.get('TSERVE_DIST_BACKEND', 'gloo')}" in log


def test_pipeline_parallel_mlp_matches_one_process(server: harness.Server) -> None:
    r = server.register("pp_mlp.mar", initial_workers=1, timeout=300)
    assert r.status_code == 200, r.text
    check_answers(server, "pp_mlp")
    ranks = describe(server, "pp_mlp")["workers"][0]["ranks"]
    assert [(x["rank"], x["devices"]) for x in ranks] == [(0, "2"), (1, "3")]
    assert all(environ(x["pid"])["CUDA_VISIBLE_DEVICES"] == "2,3" for x in ranks)


def test_inconsistent_settings_are_refused(server: harness.Server) -> None:
    r = server.register("bad_nproc.mar", initial_workers=1)
    assert r.status_code == 400, r.text
    assert "torchrun.nproc-per-node (3) differs from parallelLevel (2)" in r.json()["message"]
    r = server.register("bad_pp.mar", initial_workers=1)
    assert r.status_code == 400, r.text
    assert "parallelLevel >= 2, got 1" in r.json()["message"]


def test_too_few_devices_are_refused_and_freed_devices_are_reused(server: harness.Server) -> None:
    r = server.register("too_big.mar", initial_workers=1)
    assert r.status_code == 507, r.text
    assert "needs 6 device(s) but only 0 of 4 are free" in r.json()["message"]
    # tp_mlp holds 0,1 and pp_mlp 2,3: a second tp worker does not fit until pp_mlp goes
    r = requests.put(f"{server.management_url}/models/tp_mlp?min_worker=2&synchronous=true", timeout=300)
    assert r.status_code == 507, r.text
    assert "needs 2 device(s) but only 0 of 4 are free" in r.json()["message"]
    pp_pids = [x["pid"] for x in describe(server, "pp_mlp")["workers"][0]["ranks"]]
    r = requests.delete(f"{server.management_url}/models/pp_mlp", timeout=120)
    assert r.status_code == 200, r.text
    harness.wait_for(lambda: not any(harness.alive(p) for p in pp_pids), 30, what="pp ranks to exit")
    r = requests.put(f"{server.management_url}/models/tp_mlp?min_worker=2&synchronous=true", timeout=300)
    assert r.status_code == 200, r.text
    workers = describe(server, "tp_mlp")["workers"]
    assert sorted(tuple(x["devices"] for x in w["ranks"]) for w in workers) == [("0", "1"), ("2", "3")]
    assert len({w["id"] for w in workers}) == 2
    check_answers(server, "tp_mlp")


def test_stopping_a_worker_leaves_no_rank_and_no_shm_buffer(server: harness.Server) -> None:
    workers = describe(server, "tp_mlp")["workers"]
    pids = [x["pid"] for w in workers for x in w["ranks"]] + [w["pid"] for w in workers]
    shm = [Path("/dev/shm", f"deepspeed_allreduce_buffer_{os.getuid()}_{e['MASTER_ADDR']}_{e['MASTER_PORT']}_{e['RANK']}")
           for e in (environ(x["pid"]) for w in workers for x in w["ranks"])]
    assert all(p.exists() for p in shm), "the test handler made DeepSpeed-like buffers"
    r = requests.delete(f"{server.management_url}/models/tp_mlp", timeout=120)
    assert r.status_code == 200, r.text
    harness.wait_for(lambda: not any(harness.alive(p) for p in pids), 30, what="agents and ranks to exit")
    assert not any(p.exists() for p in shm), "the server removes the ranks' shm buffers"
