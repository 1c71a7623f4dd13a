"""A torchrun worker whose rank dies, run with the real `torchserve` CLI.

SIGKILL on rank 1 with a batch in flight: the batch fails with a clear 500, torch.distributed.
elastic restarts the group (max-restarts 1), the frontend reconnects to the new ranks without
killing the agent and serves again. A second death is past max-restarts: the agent exits and
the worker is restarted by the normal backoff. `torchserve --stop` then leaves no process and
no (DeepSpeed-like) shm buffer behind.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
import requests
from test_cli import cli_env, run_cli  # noqa: F401  (fixture and helper of the CLI tests)
from test_distributed import TP_YAML, build, check_answers, describe, environ, inputs

import harness
from ts.utils import process_tree

pytestmark = pytest.mark.slow

CPU_YAML = TP_YAML.replace("deviceType: gpu\n", "deviceType: cpu\n").replace("maxWorkers: 2", "maxWorkers: 1")


class Cli:
    """Just what check_answers/describe need of a server."""

    def __init__(self, config: dict) -> None:
        self.inference_url = config["inference_address"]
        self.management_url = config["management_address"]


def ranks_ready(server: Cli, old_pids: set[int]) -> dict | None:
    w = describe(server, "tp_mlp")["workers"]
    if len(w) != 1 or w[0]["status"] != "READY":
        return None
    ranks = w[0]["ranks"]
    fresh = all(r["state"] == "READY" and r["pid"] > 0 and r["pid"] not in old_pids for r in ranks)
    return w[0] if fresh else None


def slow_request(server: Cli, out: list) -> None:
    body = {"sleep": 8, "row": inputs(1)[0]}
    out.append(requests.post(f"{server.inference_url}/predictions/tp_mlp", data=json.dumps(body), timeout=120))


def tagged_processes(frontend_pid: int) -> list[int]:
    """Processes still carrying a worker tag of this server (TSERVE_WORKER_TAG=<pid>-...)."""
    needle = f"\0TSERVE_WORKER_TAG={frontend_pid}-".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in b"\0" + (entry / "environ").read_bytes() and harness.alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_rank_killed_under_load_then_stop_leaves_nothing(tmp_path: Path, cli_env: dict[str, str]) -> None:  # noqa: F811
    store = tmp_path / "store"
    build(store, "tp_mlp", "tp_mlp_handler.py", CPU_YAML)
    config = harness.server_config(store)
    cfg_path = harness.write_config(tmp_path / "config.properties", config)
    env = {**cli_env, "TS_DIST_TIMEOUT_S": "60"}
    logs = Path(env["LOG_LOCATION"])
    started = run_cli(["--start", "--ts-config", str(cfg_path), "--model-store", str(store), "--ncs"], env, tmp_path)
    assert started.returncode == 0, started.stdout + started.stderr
    frontend = int((Path(env["TMPDIR"]) / ".model_server.pid").read_text())
    server = Cli(config)
    seen: set[int] = set()
    shm: set[Path] = set()
    try:
        r = requests.post(f"{server.management_url}/models?url=tp_mlp.mar&initial_workers=1&synchronous=true",
                          timeout=300)
        assert r.status_code == 200, r.text
        worker = describe(server, "tp_mlp")["workers"][0]
        agent = worker["pid"]
        first = {r["pid"] for r in worker["ranks"]}
        seen |= first | {agent}
        assert [r["devices"] for r in worker["ranks"]] == ["cpu", "cpu"]
        assert "CUDA_VISIBLE_DEVICES" not in environ(worker["ranks"][0]["pid"])

        # 1. rank 1 dies while a batch is in flight
        answers: list = []
        slow = threading.Thread(target=slow_request, args=(server, answers))
        slow.start()
        harness.wait_for(lambda: "slow request: sleeping" in (logs / "model_log.log").read_text(), 60,
                         what="the slow batch to reach the ranks")
        os.kill(worker["ranks"][1]["pid"], signal.SIGKILL)
        slow.join(120)
        assert answers and answers[0].status_code == 500, answers and answers[0].text
        assert (f"rank 1 of worker {worker['id']} died; torchrun is restarting the ranks"
                in answers[0].json()["message"])
        again = harness.wait_for(lambda: ranks_ready(server, first), 180, interval=0.5,
                                 what="the restarted ranks to load")
        assert again["pid"] == agent, "the frontend reconnected without killing the agent"
        second = {r["pid"] for r in again["ranks"]}
        seen |= second
        shm |= {Path("/dev/shm", f"deepspeed_allreduce_buffer_{os.getuid()}_{e['MASTER_ADDR']}_"
                     f"{e['MASTER_PORT']}_{e['RANK']}") for e in (environ(p) for p in second)}
        assert all(environ(p)["TORCHELASTIC_RESTART_COUNT"] == "1" for p in second)
        check_answers(server, "tp_mlp")

        # 2. past max-restarts: the agent exits, the worker restarts with the normal backoff
        os.kill(again["ranks"][0]["pid"], signal.SIGKILL)
        third = harness.wait_for(lambda: ranks_ready(server, first | second), 240, interval=0.5,
                                 what="a new agent to load")
        assert third["pid"] != agent and not harness.alive(agent)
        seen |= {third["pid"]} | {r["pid"] for r in third["ranks"]}
        check_answers(server, "tp_mlp")
        seen |= set(process_tree.descendants(frontend))
        assert "torchrun has no restarts left" in (logs / "ts_log.log").read_text()
    finally:
        stopped = run_cli(["--stop"], env, tmp_path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    harness.wait_for(lambda: not harness.alive(frontend), 60, what="the frontend to exit")
    harness.wait_for(lambda: not any(harness.alive(p) for p in seen), 30, what="every agent and rank to exit")
    assert tagged_processes(frontend) == []
    assert shm and not any(p.exists() for p in shm), "the ranks' shm buffers are removed"

