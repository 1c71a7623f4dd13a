"""A torchrun worker (parallelType tp, parallelLevel 2, gloo on CPU): the frontend launches one
elastic agent with two ranks, connects to each rank's socket, loads on every rank, broadcasts
inference and answers with rank 0's result; scaling to zero stops the whole process tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests

import harness
from ts.utils import process_tree

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


def test_tensor_parallel_worker_spans_two_ranks(tmp_path: Path) -> None:
    harness.build_mar(tmp_path, "tp", HANDLERS / "rank_handler.py",
                      config_yaml="parallelType: tp\nparallelLevel: 2\ntorchrun:\n  nproc-per-node: 2\n")
    with harness.Server(tmp_path) as s:
        r = s.register("tp.mar", initial_workers=1, timeout=300)
        assert r.status_code == 200, r.text
        d = requests.get(s.management_url + "/models/tp", timeout=10).json()[0]
        assert (d["parallelType"], d["parallelLevel"]) == ("tp", 2)
        agent = d["workers"][0]["pid"]
        out = s.predict("tp", b"hello", timeout=120)
        assert out.status_code == 200, out.text
        answer = out.json()
        # rank 0 answers; the all-reduce shows both ranks ran the batch
        assert answer == {"rank": 0, "world_size": 2, "sum_of_ranks": 1, "text": "hello"}
        ranks = process_tree.descendants(agent)
        assert len(ranks) >= 2, "expected the agent's two rank processes"
        assert "rank 1: " in s.logs("model_log.log")
        r = requests.put(s.management_url + "/models/tp?min_worker=0&max_worker=0&synchronous=true", timeout=120)
        assert r.status_code == 200, r.text
        harness.wait_for(lambda: not harness.alive(agent) and not any(harness.alive(p) for p in ranks), 30,
                         what="torchrun agent and ranks to exit")
        assert os.path.isdir(s.log_dir / "torchelastic_ts")
