"""The large-model handlers inside the real backend worker under torchrun (2 CPU ranks).

This test plays the frontend's part of docs/protocol.md: it connects to each rank's socket,
sends LOAD to every rank, sends the batch to rank 0 only (``pp``) or to every rank (``tp``),
and reads rank 0's RESULT, which must equal the unsplit model's answers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ts.protocol import codec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "large_models"))

import local_check  # noqa: E402

pytestmark = pytest.mark.slow


def _connect(path: Path, proc: subprocess.Popen, deadline: float) -> socket.socket:
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"torchrun exited with {proc.returncode} before {path} accepted")
        if path.exists():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                s.settimeout(max(1.0, deadline - time.monotonic()))
                return s
            except OSError:
                s.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"no worker listening on {path}")
        time.sleep(0.1)


def _read(sock: socket.socket, want: codec.FrameType) -> codec.Frame:
    while True:
        frame = codec.read_frame(sock)
        if frame.type == want:
            return frame
        assert frame.type == codec.FrameType.METRICS, f"unexpected {frame.type.name}: {frame.body[:500]!r}"


def _request(i: int, req: object) -> codec.Request:
    if isinstance(req, str):
        part = codec.Part("body", "text/plain", req.encode())
    else:
        part = codec.Part("body", "application/json", json.dumps(req).encode())
    return codec.Request(f"req-{i}", [("content-type", part.content_type)], [part])


@pytest.mark.parametrize(("example", "to_all"), [("pippy", False), ("tp", True)])
def test_worker_serves_distributed_handler(tmp_path: Path, example: str, to_all: bool) -> None:
    model_dir = local_check.build_and_unpack(example, tmp_path)
    sock_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"tsdist-{os.getpid()}-{example}"
    sock_dir.mkdir(parents=True, exist_ok=True)
    base = sock_dir / ".ts.sock.29500"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--nnodes=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{local_check.free_port()}",
           f"--log-dir={tmp_path / 'logs'}", "--max-restarts=0", "--redirects=3",
           "-m", "ts.model_service_worker", "--sock-type", "unix", "--sock-name", str(base)]
    proc = subprocess.Popen(cmd, env=local_check.env(), cwd=model_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 120
        socks = [_connect(base, proc, deadline), _connect(sock_dir / ".ts.sock.29501", proc, deadline)]
        load = {"modelName": f"tiny_{example}", "modelVersion": "1.0", "modelPath": str(model_dir),
                "handler": "", "batchSize": 4, "gpuId": -1, "deviceType": "cpu",
                "parallelType": "pp" if example == "pippy" else "tp", "parallelLevel": 2}
        for s in socks:
            s.sendall(codec.encode_json_frame(codec.FrameType.LOAD, 1, load))
        for rank, s in enumerate(socks):
            loaded = codec.decode_json_body(_read(s, codec.FrameType.LOADED).body)
            assert loaded["status"] == 200, f"rank {rank}: {loaded}"
        batch = [_request(i, r) for i, r in enumerate(local_check.REQUESTS)]
        for s in socks if to_all else socks[:1]:
            s.sendall(codec.encode_inference(7, batch))
        result = _read(socks[0], codec.FrameType.RESULT)
        assert result.batch_id == 7
        responses = codec.decode_responses(result.body)
        assert [r.status for r in responses] == [200] * len(batch), [r.message for r in responses]
        got = [json.loads(r.body) for r in responses]
        assert not local_check.compare(got, local_check.reference(model_dir, local_check.REQUESTS))
        # A bad request fails on rank 0 alone; the job keeps serving.
        socks[0].sendall(codec.encode_inference(8, [_request(0, {"prompt": ""})]))
        bad = codec.decode_responses(_read(socks[0], codec.FrameType.RESULT).body)
        assert bad[0].status == 400 and "non-empty text" in bad[0].message
        socks[0].sendall(codec.encode_inference(9, batch[:1]))
        again = codec.decode_responses(_read(socks[0], codec.FrameType.RESULT).body)
        assert json.loads(again[0].body)["generated_ids"] == got[0]["generated_ids"]
    except BaseException:
        logs = "".join(p.read_text(errors="replace") for p in sorted((tmp_path / "logs").rglob("*.log")))
        print(logs[-8000:])
        raise
    finally:
        for s in socks:
            s.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the torchrun job this test started
            proc.wait(10)
        for p in sock_dir.glob(".ts.sock.*"):
            p.unlink(missing_ok=True)
        sock_dir.rmdir()
