"""Preprocess pool: a worker with preprocessWorkers > 0 driven over its Unix socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from ts.pipeline.probe import missing_attributes
from ts.protocol import codec
from ts.protocol.client import WorkerProcess
from ts.protocol.codec import FrameType, Part, Request

HANDLERS = Path(__file__).parent / "test_pool_handlers"


def model_dir_for(root: Path, handler_file: str, name: str = "pool") -> Path:
    d = root / name
    (d / "MAR-INF").mkdir(parents=True)
    shutil.copy(HANDLERS / handler_file, d / handler_file)
    (d / "MAR-INF" / "MANIFEST.json").write_text(json.dumps({"model": {"modelName": name, "handler": handler_file}}))
    return d


def load_msg(d: Path, workers: int, **extra) -> dict:
    return {"modelName": d.name, "modelPath": str(d), "batchSize": 4, "preprocessWorkers": workers, **extra}


def row(rid: str, x: list[float], **extra) -> Request:
    return Request(rid, [], [Part("body", "application/json", json.dumps({"x": x, **extra}).encode())])


def result(w: WorkerProcess, batch_id: int) -> list[codec.Response]:
    return codec.decode_responses(w.recv_until(FrameType.RESULT, batch_id).body)


def pong(w: WorkerProcess, batch_id: int) -> dict:
    w.send(codec.encode_frame(FrameType.PING, batch_id))
    return codec.decode_json_body(w.recv_until(FrameType.PONG, batch_id).body)


BATCHES = [[row("a", [1, 2, 3, 4]), row("b", [0.5, -1, 2, 0])], [row("c", [9, 9, 9, 9])]]


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    d = model_dir_for(tmp_path_factory.mktemp("pooled"), "pool_handler.py")
    # stage gauges with every batch (not sampled once a second), so each test can look for them
    with WorkerProcess(env={"TS_STAGE_METRICS_INTERVAL_S": "0"}) as w:
        loaded = w.load(load_msg(d, 2))
        assert loaded["status"] == 200, loaded
        yield w


def test_results_identical_with_and_without_pool(tmp_path, pooled):
    d = model_dir_for(tmp_path, "pool_handler.py")
    with WorkerProcess() as plain:
        assert plain.load(load_msg(d, 0))["status"] == 200
        expected = []
        for i, batch in enumerate(BATCHES):
            plain.send_batch(100 + i, batch)
            expected.append([json.loads(r.body) for r in result(plain, 100 + i)])
    got = []
    for i, batch in enumerate(BATCHES):
        pooled.send_batch(200 + i, batch)
        got.append([json.loads(r.body) for r in result(pooled, 200 + i)])
    assert [[r["y"] for r in b] for b in got] == [[r["y"] for r in b] for b in expected]
    worker_pid = pooled.proc.pid
    assert all(r["pre_pid"] != worker_pid and r["post_pid"] == worker_pid for b in got for r in b)
    assert all(r["shared"] for b in got for r in b)  # preprocessed tensors arrived in shared memory
    assert all(r["pre_pid"] == plain.proc.pid for b in expected for r in b)


def test_results_keep_batch_order_when_preprocess_finishes_out_of_order(pooled):
    pooled.send_batch(301, [row("slow", [1, 1, 1, 1], op="sleep", s=0.6)])
    pooled.send_batch(302, [row("fast", [2, 2, 2, 2])])
    order = []
    while len(order) < 2:
        frame = pooled.recv()
        if frame.type is FrameType.RESULT:
            order.append(frame.batch_id)
    assert order == [301, 302]


def test_preprocess_exception_fails_only_its_batch(pooled):
    pooled.send_batch(401, [row("bad", [1], op="raise"), row("x", [1, 2, 3, 4])])
    pooled.send_batch(402, [row("ok", [1, 2, 3, 4])])
    bad = result(pooled, 401)
    assert [(r.status, r.message) for r in bad] == [(500, "ValueError: cannot parse row 0: expected 4 numbers")] * 2
    assert result(pooled, 402)[0].status == 200


def test_metrics_recorded_in_the_pool_reach_the_metrics_frame(pooled):
    pooled.send_batch(502, [row("m", [1, 2, 3, 4], op="metric")])
    records = codec.decode_json_body(pooled.recv_until(FrameType.METRICS, 502).body)  # before the RESULT
    r = result(pooled, 502)
    assert r[0].status == 200
    names = {(m["name"], m["dimensions"].get("stage")) for m in records}
    assert ("PoolRows", None) in names
    assert {("ts_stage_busy_seconds", s) for s in ("preprocess", "inference", "postprocess")} <= names
    assert ("ts_inference_idle_ratio", None) in names
    assert ("PredictionTime", None) in names


@pytest.mark.slow  # starts a worker and its own pool: left out of make test-quick
def test_each_batch_gets_its_own_inference_metrics(tmp_path):
    """Batch 1 finishes (pooled postprocess, 0.3 s) while batch 2's inference has recorded a
    metric it drains only later: the metric belongs to batch 2's METRICS frame, not batch 1's."""
    d = model_dir_for(tmp_path, "pool_handler.py")
    with WorkerProcess() as w:
        assert w.load(load_msg(d, 2, postprocessInPool=True))["status"] == 200
        w.send_batch(1, [row("one", [1, 2, 3, 4], op="slow_post")])
        w.send_batch(2, [row("two", [1, 2, 3, 4], op="late_metric")])
        frames = {}
        while len(frames) < 2:
            frame = w.recv()
            if frame.type is FrameType.METRICS:
                frames[frame.batch_id] = codec.decode_json_body(frame.body)
        names = {bid: {(m["name"], m["requestId"]) for m in records} for bid, records in frames.items()}
        assert ("InferenceRows", "two") in names[2]
        assert not [n for n in names[1] if n[0] == "InferenceRows"]
        assert ("PredictionTime", "one") in names[1] and ("PredictionTime", "two") in names[2]


def test_pool_status_phrase(pooled):
    pooled.send_batch(511, [row("s", [1, 2, 3, 4], op="status")])
    out = result(pooled, 511)
    assert (out[0].status, out[0].message) == (202, "accepted in pool")


def test_stage_metrics_in_pong(pooled):
    info = pong(pooled, 601)
    stages = info["stages"]
    assert set(stages) == {"preprocess", "inference", "postprocess"}
    assert stages["preprocess"]["batches"] >= 1 and stages["inference"]["batches"] >= 1
    assert 0.0 <= stages["inference"]["idleFraction"] <= 1.0
    assert {"busyMs", "queueWaitMs"} <= set(stages["preprocess"])
    assert len(info["poolPids"]) == 2


def test_pool_process_killed_mid_batch_is_replaced(pooled):
    before = set(pong(pooled, 701)["poolPids"])
    pooled.send_batch(702, [row("die", [1, 2, 3, 4], op="die")])
    out = result(pooled, 702)
    assert out[0].status == 500 and "died (killed by SIGKILL)" in out[0].message
    assert "it has been replaced" in out[0].message
    pooled.send_batch(703, [row("after", [1, 2, 3, 4])])
    assert result(pooled, 703)[0].status == 200
    deadline = time.monotonic() + 60
    while True:
        pids = pong(pooled, 704)["poolPids"]
        if len(pids) == 2 and set(pids) != before:
            break
        assert time.monotonic() < deadline, pids
        time.sleep(0.05)


def test_idle_pool_process_killed_externally_is_replaced(pooled):
    victim = pong(pooled, 801)["poolPids"][0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while victim in pong(pooled, 802)["poolPids"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for bid in (803, 804, 805):
        pooled.send_batch(bid, [row("r", [1, 2, 3, 4])])
    assert [result(pooled, bid)[0].status for bid in (803, 804, 805)] == [200, 200, 200]


@pytest.mark.slow  # starts a worker and its own pool: left out of make test-quick
def test_postprocess_in_pool(tmp_path):
    d = model_dir_for(tmp_path, "pool_handler.py")
    with WorkerProcess() as w:
        assert w.load(load_msg(d, 1, postprocessInPool=True))["status"] == 200
        w.send_batch(2, [row("a", [1, 2, 3, 4])])
        body = json.loads(result(w, 2)[0].body)
        assert body["post_pid"] != w.proc.pid and body["pre_pid"] != w.proc.pid
        w.send_batch(3, [row("s", [1, 2, 3, 4], op="stream")])
        chunk = codec.decode_responses(w.recv_until(FrameType.CHUNK, 3).body)
        assert chunk[0].body == f"chunk-from-{body['post_pid']}".encode()
        assert ("ts_stream_next", "true") in chunk[0].headers
        final = result(w, 3)
        assert ("ts_stream_next", "false") in final[0].headers


@pytest.mark.parametrize("handler, needle", [
    ("needs_init.py", "uses self.tokenizer (read in NeedsInit.preprocess), which the preprocess pool never sets"),
    ("fn_pool.py", "is a module-level function, but preprocessWorkers=1 needs a handler class"),
    ("custom_handle.py", "overrides handle()"),
])
@pytest.mark.slow  # starts a worker and its own pool: left out of make test-quick
def test_load_refuses_handlers_the_pool_cannot_run(tmp_path, handler, needle):
    d = model_dir_for(tmp_path, handler)
    with WorkerProcess() as w:
        loaded = w.load(load_msg(d, 1))
        assert loaded["status"] == 400  # the handler does not fit the pool: the user fixes it
        assert needle in loaded["message"]
        if handler == "needs_init.py":
            assert "initialize_preprocess" in loaded["message"]
        assert w.wait_exit() != 0


class _Probe:
    items = ()

    def __init__(self):
        self.present = 1

    def helper(self):
        return self.from_helper

    def preprocess(self, data):
        self.local = 1
        return [self.present + self.local + x for x in data] + [self.helper(), len(self.items), self.in_comprehension]


def test_probe_follows_methods_and_comprehensions():
    missing = missing_attributes(_Probe())
    assert set(missing) == {"from_helper", "in_comprehension"}
    assert missing["from_helper"].endswith("helper")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # zombies are gone for our purpose
    except FileNotFoundError:
        return False


@pytest.mark.slow  # starts a worker and its own pool: left out of make test-quick
def test_pool_processes_exit_when_the_worker_is_killed(tmp_path):
    d = model_dir_for(tmp_path, "pool_handler.py")
    with WorkerProcess() as w:
        assert w.load(load_msg(d, 2))["status"] == 200
        pids = pong(w, 2)["poolPids"]
        w.proc.kill()  # what the frontend does to a stuck worker
        w.proc.wait(10)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids):
            assert time.monotonic() < deadline, [p for p in pids if _alive(p)]
            time.sleep(0.05)
