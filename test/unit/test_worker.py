"""The backend worker driven over a real Unix socket by a client that uses the codec."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

import harness
from ts.protocol import codec
from ts.protocol.client import WorkerProcess
from ts.protocol.codec import FrameType, Part, Request

HANDLERS = Path(__file__).parent / "test_worker_handlers"


def make_model_dir(root: Path, handler_file: str, yaml_text: str = "", name: str = "echo") -> Path:
    model_dir = root / name
    (model_dir / "MAR-INF").mkdir(parents=True)
    shutil.copy(HANDLERS / handler_file, model_dir / handler_file)
    model: dict = {"modelName": name, "handler": handler_file, "modelVersion": "1.0"}
    if yaml_text:
        (model_dir / "model-config.yaml").write_text(yaml_text)
        model["configFile"] = "model-config.yaml"
    (model_dir / "MAR-INF" / "MANIFEST.json").write_text(json.dumps({"runtime": "python", "model": model}))
    return model_dir


def load_msg(model_dir: Path, **extra) -> dict:
    return {"modelName": model_dir.name, "modelPath": str(model_dir), "batchSize": 4, **extra}


def req(rid: str, body: object, ctype: str = "application/json", headers=None) -> Request:
    value = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Request(rid, list(headers or []), [Part("body", ctype, value)])


def result(worker: WorkerProcess, batch_id: int, seen=None) -> list[codec.Response]:
    return codec.decode_responses(worker.recv_until(FrameType.RESULT, batch_id, seen=seen).body)


@pytest.fixture(scope="module")
def echo_worker(tmp_path_factory):
    """One loaded worker shared by the tests that leave it running."""
    model_dir = make_model_dir(tmp_path_factory.mktemp("echo"), "echo_handler.py")
    with WorkerProcess() as worker:
        loaded = worker.load(load_msg(model_dir))
        assert loaded["status"] == 200, loaded
        yield worker


def test_startup_lines_and_load_answer(tmp_path):
    model_dir = make_model_dir(tmp_path, "echo_handler.py")
    with WorkerProcess() as worker:
        assert worker.lines[0] == f"[PID]{worker.proc.pid}"
        assert worker.lines[1] == "Torch worker started."
        loaded = worker.load(load_msg(model_dir))
        startup = loaded.pop("startup")
        assert loaded == {"status": 200, "message": "loaded model echo", "pid": worker.proc.pid,
                          "rank": 0, "worldSize": 1}
        assert startup["warm"] is False and startup["importMs"] >= 0 and startup["loadMs"] >= 0, startup
        worker.send(codec.encode_frame(FrameType.PING, 77))
        pong = codec.decode_json_body(worker.recv_until(FrameType.PONG, 77).body)
        assert pong["status"] == "healthy" and pong["pid"] == worker.proc.pid and pong["rank"] == 0
        assert set(pong["stages"]) == {"handle"}


def test_batch_inputs_decoded_as_torchserve_does(echo_worker):
    batch = [
        req("a", {"k": [1, 2]}),
        req("b", "héllo".encode(), "text/plain", [("x-test", "yes")]),
        Request("c", [], [Part("data", "image/png", b"\x89PNG"), Part("caption", "", b"cap")]),
        req("d", b"{not json", "application/json"),
    ]
    echo_worker.send_batch(5, batch)
    out = result(echo_worker, 5)
    assert [r.request_id for r in out] == ["a", "b", "c", "d"]
    assert json.loads(out[0].body) == {"k": [1, 2]}
    assert out[0].content_type == ""
    assert json.loads(out[1].body) == {"type": "str", "len": 5, "header": "yes", "parts": ["body"]}
    assert out[1].content_type == "text/plain"
    assert ("x-index", "1") in out[1].headers
    assert json.loads(out[2].body)["parts"] == ["caption", "data"]
    assert json.loads(out[2].body)["type"] == "bytes"  # the 'data' part is missing 'body': row itself
    assert json.loads(out[3].body)["type"] == "bytes"  # invalid JSON stays bytes
    assert all(r.status == 200 for r in out)


def test_per_request_status_and_metrics_frame(echo_worker):
    echo_worker.send_batch(6, [req("a", {"v": 1}), req("b", {"status": 404})])
    # the METRICS frame comes first: the frontend records it before it answers
    metrics = codec.decode_json_body(echo_worker.recv_until(FrameType.METRICS, 6).body)
    out = result(echo_worker, 6)
    assert (out[0].status, out[1].status, out[1].message) == (200, 404, "custom phrase")
    by_name = {m["name"]: m for m in metrics}
    assert by_name["EchoHits"]["value"] == 2
    assert by_name["EchoHits"]["dimensions"] == {"ModelName": "echo"}
    assert by_name["EchoRequests"]["unit"] == "Count"
    assert by_name["EchoRequests"]["dimensions"] == {"ModelName": "echo", "Level": "Model"}
    assert by_name["EchoRequests"]["requestId"] == "a,b"
    assert by_name["PredictionTime"]["unit"] == "Milliseconds" and by_name["PredictionTime"]["type"] == "gauge"


@pytest.mark.parametrize("interval, second_has_stages", [("60", False), ("0", True)])
def test_stage_gauges_are_sampled_per_interval(tmp_path, interval, second_has_stages):
    """The first batch reports ts_stage_busy_seconds/ts_stage_queue_wait_seconds; later ones only once per
    TS_STAGE_METRICS_INTERVAL_S, before RESULT in the same write. PredictionTime comes every batch."""
    model_dir = make_model_dir(tmp_path, "echo_handler.py")
    with WorkerProcess(env={"TS_STAGE_METRICS_INTERVAL_S": interval}) as worker:
        assert worker.load(load_msg(model_dir, workerName="W-9000-echo_1.0"))["status"] == 200
        names = []
        for bid in (1, 2):
            worker.send_batch(bid, [req(f"r{bid}", {"v": bid})])
            records = codec.decode_json_body(worker.recv_until(FrameType.METRICS, bid).body)
            result(worker, bid)
            names.append({r["name"]: r for r in records})
        first, second = names
        assert first["ts_stage_busy_seconds"]["dimensions"] == {
            "model_name": "echo", "worker_name": "W-9000-echo_1.0", "stage": "handle"}
        assert first["ts_stage_queue_wait_seconds"]["requestId"] == "r1"
        assert ("ts_stage_busy_seconds" in second) is second_has_stages
        assert "PredictionTime" in first and "PredictionTime" in second
        worker.send(codec.encode_frame(FrameType.PING, 3))
        stages = codec.decode_json_body(worker.recv_until(FrameType.PONG, 3).body)["stages"]
        assert stages["handle"]["batches"] == 2  # the cumulative counters count every batch


@pytest.mark.parametrize("op, status, message", [
    ("raise", 500, "ValueError: bad pixel value -3"),
    ("predexc", 422, "input too long for this model"),
    ("oom", 507, "out of memory: cannot allocate 4 GiB"),
    ("short", 500, "handler returned 1 results for a batch of 2 requests"),
    ("notlist", 500, "handler returned dict for a batch of 2 requests"),
])
def test_handler_errors_fail_only_their_batch(echo_worker, op, status, message):
    echo_worker.send_batch(10, [req("a", {"op": op}), req("b", {"v": 2})])
    out = result(echo_worker, 10)
    assert [(r.request_id, r.status) for r in out] == [("a", status), ("b", status)]
    assert message in out[0].message
    echo_worker.send_batch(11, [req("c", {"v": 3})])
    assert json.loads(result(echo_worker, 11)[0].body) == {"v": 3}


def test_traceback_logged_once_for_unexpected_errors(tmp_path):
    model_dir = make_model_dir(tmp_path, "echo_handler.py")
    with WorkerProcess() as worker:
        worker.load(load_msg(model_dir))
        worker.send_batch(12, [req("a", {"op": "raise"})])
        result(worker, 12)
        worker.send_batch(13, [req("a", {"op": "predexc"})])
        result(worker, 13)
        worker.send(codec.encode_frame(FrameType.STOP, 14))
        assert worker.wait_exit() == 0
        out = worker.output()
    assert out.count("Traceback") == 1
    assert "PredictionException(422)" in out


def test_streaming_sends_chunks_before_result(echo_worker):
    echo_worker.send_batch(20, [req("s1", {"op": "stream"}), req("s2", {})])
    chunks = [echo_worker.recv_until(FrameType.CHUNK, 20) for _ in range(3)]
    pieces = [codec.decode_responses(c.body) for c in chunks]
    assert [p[0].body for p in pieces] == [b"piece0 ", b"piece1 ", b"piece2 "]
    assert all(("ts_stream_next", "true") in p[1].headers for p in pieces)
    final = result(echo_worker, 20)
    assert [r.body for r in final] == [b"end", b"end"]
    assert ("ts_stream_next", "false") in final[0].headers


def test_several_batches_in_flight_answered_in_order(echo_worker):
    for bid in (31, 32, 33):
        echo_worker.send_batch(bid, [req(f"r{bid}", {"op": "sleep", "s": 0.05, "id": bid})])
    got = []
    while len(got) < 3:
        frame = echo_worker.recv()
        if frame.type is FrameType.RESULT:
            got.append((frame.batch_id, codec.decode_responses(frame.body)[0].request_id))
    assert got == [(31, "r31"), (32, "r32"), (33, "r33")]


def test_tensor_results_use_torch_save(echo_worker):
    import io

    import torch

    echo_worker.send_batch(40, [req("t", {"op": "tensor"})])
    body = result(echo_worker, 40)[0].body
    assert torch.equal(torch.load(io.BytesIO(body)), torch.arange(3))


def test_function_handler_and_named_function(tmp_path):
    model_dir = make_model_dir(tmp_path, "fn_handler.py")
    with WorkerProcess() as worker:
        assert worker.load(load_msg(model_dir))["status"] == 200
        worker.send_batch(2, [req("a", b"x", "text/plain")])
        assert result(worker, 2)[0].body == b"echo:x"
    with WorkerProcess() as worker:
        assert worker.load(load_msg(model_dir, handler="fn_handler.py:shout"))["status"] == 200
        worker.send_batch(2, [req("a", b"x", "text/plain")])
        assert result(worker, 2)[0].body == b"X"


def test_sequence_end_reaches_the_handlers_hook_and_a_failing_hook_is_not_fatal(tmp_path):
    model_dir = make_model_dir(tmp_path, "sequence_fn_handler.py")
    with WorkerProcess() as worker:
        assert worker.load(load_msg(model_dir))["status"] == 200
        for seq in ("s1", "boom", "s2"):
            worker.send(codec.encode_frame(FrameType.SEQUENCE_END, 0, seq.encode()))
        worker.send_batch(2, [req("a", b"x", "text/plain")])
        assert json.loads(result(worker, 2)[0].body) == ["s1", "boom", "s2"]
        harness.wait_for(lambda: "end_sequence(boom) failed" in worker.output(), timeout=10, what="the hook's error logged")


def test_a_handler_without_torch_never_imports_it(tmp_path):
    """Encoding a JSON result must not import torch to rule out a tensor (seconds on a first
    request, enough to trip a short responseTimeout); what LOAD created is frozen out of GC."""
    model_dir = make_model_dir(tmp_path, "fn_handler.py")
    with WorkerProcess() as worker:
        assert worker.load(load_msg(model_dir, handler="fn_handler.py:modules"))["status"] == 200
        for bid in (1, 2):  # the second answer tells what encoding the first one imported
            worker.send_batch(bid, [req("a", b"x", "text/plain")])
            assert json.loads(result(worker, bid)[0].body) == {"torch_imported": False, "gc_frozen": True}


def test_load_failure_reports_error_and_exits_nonzero(tmp_path):
    model_dir = make_model_dir(tmp_path, "echo_handler.py", "handler:\n  fail_init: true\n")
    with WorkerProcess() as worker:
        loaded = worker.load(load_msg(model_dir))
        assert loaded["status"] == 500
        assert "tokenizer file vocab.txt is missing" in loaded["message"]
        assert worker.wait_exit() != 0


def test_missing_handler_module_names_it(tmp_path):
    model_dir = make_model_dir(tmp_path, "echo_handler.py")
    with WorkerProcess() as worker:
        loaded = worker.load(load_msg(model_dir, handler="nope_handler.py"))
        assert loaded["status"] == 500
        assert "'nope_handler' is neither a file in the model archive nor a built-in" in loaded["message"]


def test_stop_and_close_exit_zero(tmp_path):
    model_dir = make_model_dir(tmp_path, "echo_handler.py")
    with WorkerProcess() as worker:
        worker.load(load_msg(model_dir))
        worker.send(codec.encode_frame(FrameType.STOP, 3))
        assert worker.wait_exit() == 0
    with WorkerProcess() as worker:
        worker.sock.close()
        worker.sock = None
        assert worker.wait_exit() == 0


def test_inference_before_load_and_unknown_frames(tmp_path):
    with WorkerProcess() as worker:
        worker.send_batch(4, [req("a", {})])
        out = result(worker, 4)
        assert out[0].status == 503 and "send LOAD first" in out[0].message
        worker.send(codec.encode_frame(0x7E, 5, b"xyz"))
        err = codec.decode_json_body(worker.recv_until(FrameType.ERROR, 5).body)
        assert err["status"] == 400 and "unknown frame type 0x7E" in err["message"]
        worker.send(codec.encode_frame(FrameType.PING, 6))
        assert worker.recv_until(FrameType.PONG, 6)


def test_ping_answered_while_a_batch_runs(echo_worker):
    echo_worker.send_batch(50, [req("slow", {"op": "sleep", "s": 1.0})])
    echo_worker.send(codec.encode_frame(FrameType.PING, 51))
    seen: list = []
    pong = echo_worker.recv_until(FrameType.PONG, 51, seen=seen)
    assert not [f for f in seen if f.batch_id == 50]  # not stuck behind the running batch
    assert codec.decode_json_body(pong.body)["inFlight"] == 1
    result(echo_worker, 50)


def test_torchrun_rank_socket_naming(tmp_path):
    env = {"LOCAL_RANK": "2", "RANK": "2", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}
    with WorkerProcess(port=9100, env=env, connect=False) as worker:
        worker.wait_started(60)
        rank_sock = os.path.join(worker.sock_dir, ".ts.sock.9102")
        assert os.path.exists(rank_sock)
        assert not os.path.exists(worker.sock_name)
        worker.connect(rank_sock)
        worker.send(codec.encode_frame(FrameType.PING, 1))
        pong = codec.decode_json_body(worker.recv_until(FrameType.PONG, 1).body)
        assert (pong["rank"], pong["localRank"], pong["worldSize"]) == (2, 2, 4)


def test_two_rank_worker_loads_everywhere_and_only_rank0_answers(tmp_path):
    model_dir = make_model_dir(tmp_path, "rank_handler.py")
    sock_dir = str(tmp_path)
    master = str(harness.free_port())
    workers = []
    try:
        for rank in (0, 1):
            env = {"LOCAL_RANK": str(rank), "RANK": str(rank), "WORLD_SIZE": "2",
                   "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": master,
                   "TS_DIST_TIMEOUT_S": "60"}
            workers.append(WorkerProcess(sock_dir=sock_dir, port=9200, env=env, connect=False))
        for rank, worker in enumerate(workers):
            worker.wait_started(60)
            worker.connect(os.path.join(sock_dir, f".ts.sock.{9200 + rank}"))
        for worker in workers:
            worker.send_json(FrameType.LOAD, 1, load_msg(model_dir, parallelType="tp", parallelLevel=2))
        loaded = [codec.decode_json_body(w.recv_until(FrameType.LOADED, timeout=120).body) for w in workers]
        assert [(m["status"], m["rank"], m["worldSize"]) for m in loaded] == [(200, 0, 2), (200, 1, 2)]
        for worker in workers:
            worker.send_batch(9, [req("a", {})])
        out = result(workers[0], 9)
        assert json.loads(out[0].body) == {"rank": 0, "world": 2, "sum": 3.0, "device": "cpu"}
        # rank 1 ran the batch (the all_reduce completed) but sends nothing back
        workers[1].send(codec.encode_frame(FrameType.PING, 10))
        assert workers[1].recv().type is FrameType.PONG
    finally:
        for worker in workers:
            worker.close()


def test_frontend_closing_mid_batch_exits_cleanly(tmp_path):
    model_dir = make_model_dir(tmp_path, "echo_handler.py")
    with WorkerProcess() as worker:
        worker.load(load_msg(model_dir))
        worker.send_batch(2, [req("a", {"op": "sleep", "s": 0.5})])
        worker.sock.close()
        worker.sock = None
        assert worker.wait_exit() == 0
        assert "Traceback" not in worker.output()


def test_exits_when_no_frontend_connects(tmp_path):
    with WorkerProcess(env={"TS_WORKER_ACCEPT_TIMEOUT_S": "1"}, connect=False) as worker:
        worker.wait_started(60)
        assert worker.wait_exit() == 1
        assert "no frontend connected" in worker.output()


class _TorchrunJob:
    """``torchrun --nproc-per-node 2 -m ts.model_service_worker`` as the frontend launches it."""

    def __init__(self, tmp_path: Path, port: int, max_restarts: int = 1) -> None:
        import subprocess
        import sys
        import threading

        from ts.protocol.client import REPO

        self.sock_dir = str(tmp_path)
        self.port = port
        # the job's own TMPDIR (under tmp_path): what a killed rank leaves there goes with the test
        (tmp_path / "tmp").mkdir(exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", TS_DIST_TIMEOUT_S="60",
                   TMPDIR=str(tmp_path / "tmp"))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{harness.free_port()}",
               "--max-restarts", str(max_restarts), "--log-dir", str(tmp_path / "tlogs"), "--tee", "3",
               "-m", "ts.model_service_worker", "--sock-type", "unix", "--sock-name",
               os.path.join(self.sock_dir, f".ts.sock.{port}")]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def started_count(self) -> int:
        return sum(1 for line in list(self.lines) if line.endswith("Torch worker started."))

    def wait_started(self, count: int, timeout: float = 120) -> None:
        import time

        deadline = time.monotonic() + timeout
        while self.started_count() < count:
            assert self.proc.poll() is None, "\n".join(self.lines)
            assert time.monotonic() < deadline, "\n".join(self.lines)
            time.sleep(0.05)

    def connect_all(self) -> list[socket.socket]:
        socks = []
        for rank in (0, 1):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(os.path.join(self.sock_dir, f".ts.sock.{self.port + rank}"))
            s.settimeout(120)
            socks.append(s)
        return socks

    def stop(self) -> None:
        import signal as sig

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig.SIGTERM)
            try:
                self.proc.wait(40)
            except Exception:  # noqa: BLE001
                os.killpg(self.proc.pid, sig.SIGKILL)
                self.proc.wait(10)


def _load_and_infer(socks: list[socket.socket], model_dir: Path) -> dict:
    for s in socks:
        s.sendall(codec.encode_json_frame(FrameType.LOAD, 1, load_msg(model_dir, parallelType="tp", parallelLevel=2)))
    for s in socks:
        loaded = codec.decode_json_body(codec.read_frame(s).body)
        assert loaded["status"] == 200, loaded
    for s in socks:
        s.sendall(codec.encode_inference(2, [req("a", {})]))
    frame = codec.read_frame(socks[0])
    while frame.type is FrameType.METRICS:  # the batch's metrics precede its RESULT
        frame = codec.read_frame(socks[0])
    assert (frame.type, frame.batch_id) == (FrameType.RESULT, 2)
    return json.loads(codec.decode_responses(frame.body)[0].body)


@pytest.mark.slow
def test_torchrun_job_serves_and_survives_an_elastic_restart(tmp_path):
    import signal as sig

    model_dir = make_model_dir(tmp_path, "rank_handler.py")
    job = _TorchrunJob(tmp_path, 9400)
    try:
        job.wait_started(2)
        socks = job.connect_all()
        assert _load_and_infer(socks, model_dir) == {"rank": 0, "world": 2, "sum": 3.0, "device": "cpu"}
        socks[1].sendall(codec.encode_frame(FrameType.PING, 3))
        rank1_pid = codec.decode_json_body(codec.read_frame(socks[1]).body)["pid"]
        os.kill(rank1_pid, sig.SIGKILL)
        for s in socks:
            s.close()
        job.wait_started(4)  # torchrun restarted both ranks (attempt 1)
        socks = job.connect_all()
        # a fresh process group on the shared agent store: needs the per-attempt prefix
        assert _load_and_infer(socks, model_dir)["sum"] == 3.0
        import time

        deadline = time.monotonic() + 30  # torchrun's --tee forwards rank output asynchronously
        while not any("prefix tserve/attempt1" in line for line in list(job.lines)):
            assert time.monotonic() < deadline, "\n".join(job.lines)
            time.sleep(0.05)
        for s in socks:
            s.close()
    finally:
        job.stop()


def test_a_model_config_error_at_load_is_one_line_not_a_traceback(tmp_path):
    model_dir = make_model_dir(tmp_path, "bad_config_handler.py")
    with WorkerProcess() as worker:
        loaded = worker.load(load_msg(model_dir))
        assert loaded["status"] == 500
        assert loaded["message"] == "handler.max_batch_size must be a positive integer, got -1; fix model-config.yaml"
        assert worker.wait_exit() == 1
        out = worker.output()
    assert "failed to load: handler.max_batch_size must be a positive integer" in out
    assert "Traceback" not in out
