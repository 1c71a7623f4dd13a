"""The limit: a bare Python loop answering frames on a Unix socket, with tserve's own codec.

No server, no handler framework: one process reads INFERENCE frames (``ts.protocol.codec``),
decodes the batch, answers every request with its body as a RESULT frame. A second process
plays the frontend with pre-encoded frames and a closed loop of ``inflight`` frames. What it
reaches is the most any Python worker built on this codec can do per core; the docs compare
tserve's echo numbers with it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import tempfile
import threading
import time
from dataclasses import dataclass

from ts.protocol import codec

# The headers tserve's frontend forwards for one load-generator request (docs/protocol.md).
_HEADERS = [("host", "127.0.0.1:8080"), ("content-type", "application/octet-stream"),
            ("content-length", "1"), ("connection", "keep-alive"),
            ("url_path", "/predictions/echo"), ("explain", "False")]


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


def _stage_metrics(frame: codec.Frame) -> bytes:
    """A METRICS frame like the one tserve's worker sends after every batch (2 stage records)."""
    dims = {"ModelName": "echo", "Level": "Model", "Stage": "handle"}
    records = [{"name": n, "unit": "Milliseconds", "value": 0.05, "type": "gauge",
                "dimensions": dims, "requestId": "req"} for n in ("StageBusyTime",
                                                               "StageQueueTime")]
    return codec.encode_json_frame(codec.FrameType.METRICS, frame.batch_id, records)


def _worker_loop(path: str, threaded: bool = False) -> None:
    """Answer frames until STOP. ``threaded``: tserve's worker shape (reader thread, queue,
    send lock, a METRICS frame per batch) instead of one inline loop."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    conn, _ = srv.accept()
    try:
        if threaded:
            _threaded(conn)
            return
        while True:
            try:
                frame = codec.read_frame(conn)
            except codec.ConnectionClosed:
                return
            if frame.type == codec.FrameType.STOP:
                return
            conn.sendall(_answer(frame))
    finally:
        conn.close()
        srv.close()


def _threaded(conn: socket.socket) -> None:
    inbox: queue.Queue[codec.Frame | None] = queue.Queue()
    lock = threading.Lock()

    def reader() -> None:
        try:
            while True:
                inbox.put(codec.read_frame(conn))
        except (codec.ConnectionClosed, OSError):
            inbox.put(None)

    threading.Thread(target=reader, daemon=True).start()
    while True:
        frame = inbox.get()
        if frame is None or frame.type == codec.FrameType.STOP:
            return
        result = _answer(frame)
        try:
            with lock:
                conn.sendall(result)
            with lock:
                conn.sendall(_stage_metrics(frame))
        except OSError:  # the driver hung up after its last RESULT
            return


def _recv_frame(sock: socket.socket) -> None:
    """Read up to the next RESULT (METRICS frames are read and dropped, as a frontend would)."""
    while codec.read_frame(sock, max_length=1 << 30).type == codec.FrameType.METRICS:
        pass


def run_limit(batch_size: int = 1, inflight: int = 1, duration_s: float = 3.0,
              threaded: bool = False) -> LimitResult:
    """Drive the loop closed-loop for ``duration_s``; requests = frames × batch size."""
    tmp = tempfile.mkdtemp(prefix="tserve-limit-")
    path = os.path.join(tmp, "limit.sock")
    ctx = mp.get_context("spawn")  # a fresh interpreter: nothing inherited from the driver
    proc = ctx.Process(target=_worker_loop, args=(path, threaded), daemon=True)
    proc.start()
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(path):
            if time.monotonic() > deadline or not proc.is_alive():
                raise RuntimeError("limit worker did not start")
            time.sleep(0.005)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
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
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
        try:
            os.unlink(path)
            os.rmdir(tmp)
        except OSError:
            pass


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="latin-1") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    for threaded in (False, True):
        for b, k in ((1, 1), (8, 1), (8, 4)):
            r = run_limit(b, k, threaded=threaded)
            print(f"{'threaded' if threaded else 'bare'} batch={b} inflight={k}: {r.rps:.0f} "
                  f"req/s, p50 {r.p50_ms:.3f} ms/frame, worker CPU "
                  f"{r.worker_cpu_us_per_req:.1f} us/req")
