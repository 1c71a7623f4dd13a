"""The torchrun large-model examples end to end: the frontend launches each worker as a
torchrun job of 2 CPU ranks, and the answers must equal the unsplit model's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import requests

import harness

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "large_models"))

import local_check  # noqa: E402
from build_mar import build  # noqa: E402

pytestmark = pytest.mark.slow

ENV = {"HF_HUB_OFFLINE": "1", "TS_DIST_TIMEOUT_S": "120"}
EXAMPLES = ("pippy", "tp", "deepspeed")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    for example in EXAMPLES:
        build(example, store)
    return store


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    model_dir = local_check.build_and_unpack("tp", tmp_path_factory.mktemp("ref"))
    return local_check.reference(model_dir, local_check.REQUESTS)


def _ask(server: harness.Server, model: str) -> list[dict]:
    out = []
    for req in local_check.REQUESTS:
        if isinstance(req, str):
            resp = server.predict(model, req, timeout=180)
        else:
            resp = requests.post(f"{server.inference_url}/predictions/{model}", json=req, timeout=180)
        assert resp.status_code == 200, resp.text
        out.append(resp.json())
    return out


SHM = Path("/dev/shm")


@pytest.mark.parametrize("example", EXAMPLES)
def test_torchrun_example_through_the_server(store: Path, reference: list[dict], example: str) -> None:
    from ts.handler_utils.distributed import deepspeed_shm

    model = f"tiny_llama_{example}"
    shm_before = set(SHM.glob(deepspeed_shm.PREFIX + "*"))
    with harness.Server(store, env=ENV) as server:
        r = server.register(f"{model}.mar", initial_workers=1, timeout=420)
        assert r.status_code == 200, r.text
        assert not local_check.compare(_ask(server, model), reference)
        bad = requests.post(f"{server.inference_url}/predictions/{model}", json={"prompt": ""}, timeout=180)
        assert bad.status_code == 400 and "non-empty text" in bad.text
        # The job still serves after a refused request.
        again = server.predict(model, "Hello", timeout=180)
        assert again.status_code == 200 and again.json()["generated_ids"] == reference[0]["generated_ids"]
    if example == "deepspeed":
        # The server kills its workers, so DeepSpeed's buffers stay behind; once the ranks are
        # gone nothing maps them and the cleanup function removes them.
        left = set(SHM.glob(deepspeed_shm.PREFIX + "*")) - shm_before
        removed: set[Path] = set()

        def all_removed() -> bool:
            removed.update(deepspeed_shm.remove_deepspeed_shm_buffers())
            return left <= removed

        harness.wait_for(all_removed, 30, interval=0.2, what="DeepSpeed shm buffers removed")
        assert not any(p.exists() for p in left)


def _rank_pid(server: harness.Server, rank: int) -> int:
    """The pid of one rank of the server's torchrun worker (read from /proc)."""
    from ts.utils import process_tree

    for pid in process_tree.descendants(server.pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"model_service_worker" in cmd and b"torch.distributed.run" not in cmd \
                and f"RANK={rank}".encode() in env:
            return pid
    raise AssertionError(f"no rank {rank} worker process found")


def test_tp_job_serves_again_after_a_rank_is_killed(store: Path, reference: list[dict]) -> None:
    import os
    import signal

    model = "tiny_llama_tp"
    with harness.Server(store, env=ENV) as server:
        assert server.register(f"{model}.mar", initial_workers=1, timeout=420).status_code == 200
        assert server.predict(model, "Hello", timeout=180).status_code == 200
        os.kill(_rank_pid(server, 1), signal.SIGKILL)

        def answered() -> bool:
            # During the elastic restart a request may fail with a clear error; poll until served.
            resp = server.predict(model, "Hello", timeout=240)
            assert resp.status_code in (200, 500, 503), resp.text
            return resp.status_code == 200 and resp.json()["generated_ids"] == reference[0]["generated_ids"]

        harness.wait_for(answered, 300, interval=1.0, what="the restarted tp job to answer")
