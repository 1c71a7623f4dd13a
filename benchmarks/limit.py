"""The limit: a bare Python loop answering frames on a Unix socket, with tserve's own codec.

No server, no handler framework: one process reads INFERENCE frames (``ts.protocol.codec``),
decodes the batch, answers every request with its body as a RESULT frame. A second process
plays the frontend with pre-encoded frames and a closed loop of ``inflight`` frames. What it
reaches is the most any Python worker built on this codec can do per core. The same driver
runs against tserve's real worker with the echo handler (``worker="tserve"``): the difference
is what the worker's handler API and bookkeeping cost, without the frontend in the way.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ts.protocol import codec

# The headers tserve's frontend forwards for one load-generator request (docs/protocol.md).
_HEADERS = [("host", "127.0.0.1:8080"), ("content-type", "application/octet-stream"),
            ("content-length", "1"), ("connection", "keep-alive"),
            ("url_path", "/predictions/echo"), ("explain", "False")]
ECHO_HANDLER = Path(__file__).resolve().parent / "handlers" / "echo_handler.py"


@dataclass
class LimitResult:
    batch_size: int
    inflight: int
    requests: int
    duration_s: float
    worker_cpu_us_per_req: float
    p50_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s


def _answer(frame: codec.Frame) -> bytes:
    batch = codec.decode_batch(frame.body)
    responses = [codec.Response(r.request_id, body=r.parts[0].value if r.parts else b"")
                 for r in batch]
    return codec.encode_result(frame.batch_id, responses)


def _worker_loop(path: str) -> None:
    """Answer frames until STOP, one inline loop: read, decode, answer."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    conn, _ = srv.accept()
    reader = codec.FrameReader(conn)
    try:
        while True:
            try:
                frame = reader.read()
            except codec.ConnectionClosed:
                return
            if frame.type == codec.FrameType.STOP:
                return
            conn.sendall(_answer(frame))
    finally:
        conn.close()
        srv.close()


class _BareLoop:
    """The bare loop in a fresh interpreter (spawn: nothing inherited from the driver)."""

    def __init__(self, tmp: str) -> None:
        self.path = os.path.join(tmp, "limit.sock")
        self.proc = mp.get_context("spawn").Process(target=_worker_loop, args=(self.path,), daemon=True)
        self.proc.start()
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.is_alive()

    def loaded(self, sock: socket.socket) -> None:
        """Nothing to load."""

    def stop(self) -> None:
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()


class _TserveWorker:
    """tserve's own worker (``python -m ts.model_service_worker``) serving the echo handler."""

    def __init__(self, tmp: str) -> None:
        model = Path(tmp) / "echo"
        (model / "MAR-INF").mkdir(parents=True)
        shutil.copy(ECHO_HANDLER, model / "echo_handler.py")
        (model / "MAR-INF" / "MANIFEST.json").write_text(json.dumps(
            {"model": {"modelName": "echo", "handler": "echo_handler.py"}}))
        self.model = str(model)
        self.path = os.path.join(tmp, ".ts.sock.9000")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(Path(codec.__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ts.model_service_worker", "--sock-type", "unix", "--sock-name",
             self.path], cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def loaded(self, sock: socket.socket) -> None:
        sock.sendall(codec.encode_json_frame(codec.FrameType.LOAD, 1, {
            "modelName": "echo", "modelVersion": "1.0", "modelPath": self.model, "handler": "echo_handler.py",
            "batchSize": 8}))
        answer = codec.decode_json_body(codec.read_frame(sock).body)
        if answer.get("status") != 200:
            raise RuntimeError(f"tserve worker did not load the echo handler: {answer}")

    def stop(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _recv_frame(sock: socket.socket) -> None:
    """Read up to the next RESULT (METRICS frames are read and dropped, as the frontend would
    after recording them)."""
    while codec.read_frame(sock, max_length=1 << 30).type == codec.FrameType.METRICS:
        pass


def _connect(path: str, proc: _BareLoop | _TserveWorker, worker: str) -> socket.socket:
    """The worker's socket once it listens: the file exists from its bind, a moment before its
    listen, and a connect in between is refused."""
    deadline = time.monotonic() + 60
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() > deadline or not proc.alive():
                raise RuntimeError(f"limit worker ({worker}) did not start") from None
            time.sleep(0.005)


def run_limit(batch_size: int = 1, inflight: int = 1, duration_s: float = 3.0,
              worker: str = "bare") -> LimitResult:
    """Drive ``worker`` ("bare": the inline codec loop; "tserve": tserve's worker with the echo
    handler) closed-loop for ``duration_s``; requests = frames × batch size."""
    if worker not in ("bare", "tserve"):
        raise ValueError(f"worker must be 'bare' or 'tserve', not {worker!r}")
    tmp = tempfile.mkdtemp(prefix="tserve-limit-")
    proc = _BareLoop(tmp) if worker == "bare" else _TserveWorker(tmp)
    path = proc.path
    try:
        sock = _connect(path, proc, worker)
        proc.loaded(sock)
        frames = []
        for i in range(inflight):
            reqs = [codec.Request(f"req-{i}-{j}-0123456789abcdef", _HEADERS,
                                  [codec.Part("body", "application/octet-stream", b"x")])
                    for j in range(batch_size)]
            frames.append(codec.encode_inference(i + 1, reqs))
        for f in frames:  # warm-up round
            sock.sendall(f)
        for _ in frames:
            _recv_frame(sock)
        cpu0 = _cpu_s(proc.pid)
        latencies: list[float] = []
        sent = {}
        n = 0
        start = time.perf_counter()
        end = start + duration_s
        for i, f in enumerate(frames):
            sent[i] = time.perf_counter()
            sock.sendall(f)
        slot = 0
        while True:
            _recv_frame(sock)  # answers come back in order: one connection, one loop
            now = time.perf_counter()
            latencies.append((now - sent[slot]) * 1000)
            n += 1
            if now >= end:
                break
            sent[slot] = now
            sock.sendall(frames[slot])
            slot = (slot + 1) % inflight
        elapsed = time.perf_counter() - start
        for _ in range(inflight - 1):
            _recv_frame(sock)
        cpu = _cpu_s(proc.pid) - cpu0
        sock.sendall(codec.encode_frame(codec.FrameType.STOP, 0))
        sock.close()
        latencies.sort()
        reqs = n * batch_size
        return LimitResult(batch_size, inflight, reqs, elapsed, cpu / reqs * 1e6,
                           latencies[len(latencies) // 2])
    finally:
        proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    for kind in ("bare", "tserve"):
        for b, k in ((1, 1), (8, 1), (8, 4)):
            r = run_limit(b, k, worker=kind)
            print(f"{kind} batch={b} inflight={k}: {r.rps:.0f} "
                  f"req/s, p50 {r.p50_ms:.3f} ms/frame, worker CPU "
                  f"{r.worker_cpu_us_per_req:.1f} us/req")
