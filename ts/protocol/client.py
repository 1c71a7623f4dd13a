"""A minimal frontend side of the protocol: launch a worker, connect, send frames, read answers.

Used by the tests and by benchmarks that drive a worker without the Java frontend.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ts.protocol import codec
from ts.protocol.codec import Frame, FrameType, Request

REPO = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """``python -m ts.model_service_worker`` on a fresh Unix socket, connected once started."""

    def __init__(self, sock_dir: str | None = None, port: int = 9000, env: dict[str, str] | None = None,
                 extra_args: list[str] | None = None, connect: bool = True, start_timeout: float = 60.0,
                 cwd: str | None = None) -> None:
        # The worker's TMPDIR (and socket folder unless given), removed by close(): what the worker
        # leaves there when it is killed (its preprocess pool's folder, ...) goes with it.
        self._tmp = tempfile.TemporaryDirectory(prefix="tsw-", ignore_cleanup_errors=True)
        self.sock_dir = sock_dir or self._tmp.name
        self.sock_name = os.path.join(self.sock_dir, f".ts.sock.{port}")
        full_env = dict(os.environ, TMPDIR=self._tmp.name)
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO)] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p])
        full_env.setdefault("OMP_NUM_THREADS", "1")
        full_env.update(env or {})
        cmd = [sys.executable, "-m", "ts.model_service_worker", "--sock-type", "unix",
               "--sock-name", self.sock_name, *(extra_args or [])]
        self.proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=cwd)
        self.lines: list[str] = []
        self._started = threading.Event()
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()
        self.sock: socket.socket | None = None
        if connect:
            self.wait_started(start_timeout)
            self.connect()

    def _read_output(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.rstrip().endswith("Torch worker started."):
                self._started.set()

    def wait_started(self, timeout: float) -> None:
        if not self._started.wait(timeout):
            raise TimeoutError(f"worker did not start within {timeout} s; output: {self.output()}")

    def output(self) -> str:
        return "\n".join(self.lines)

    def connect(self, path: str | None = None) -> socket.socket:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path or self.sock_name)
        return self.sock

    # ----------------------------------------------------------------- frames
    def send(self, data: bytes) -> None:
        assert self.sock is not None
        self.sock.sendall(data)

    def send_json(self, ftype: FrameType, batch_id: int, obj: Any) -> None:
        self.send(codec.encode_json_frame(ftype, batch_id, obj))

    def send_batch(self, batch_id: int, requests: list[Request]) -> None:
        self.send(codec.encode_inference(batch_id, requests))

    def recv(self, timeout: float = 60.0) -> Frame:
        assert self.sock is not None
        self.sock.settimeout(timeout)
        return codec.read_frame(self.sock, max_length=2**31)

    def recv_until(self, ftype: FrameType, batch_id: int | None = None, timeout: float = 60.0,
                   seen: list[Frame] | None = None) -> Frame:
        """Read frames until one of ``ftype`` (and ``batch_id``) arrives; others go to ``seen``."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(max(0.01, deadline - time.monotonic()))
            if frame.type is ftype and (batch_id is None or frame.batch_id == batch_id):
                return frame
            if seen is not None:
                seen.append(frame)

    def load(self, load: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        self.send_json(FrameType.LOAD, 1, load)
        frame = self.recv_until(FrameType.LOADED, timeout=timeout)
        loaded: dict[str, Any] = codec.decode_json_body(frame.body)
        return loaded

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)
        self._tmp.cleanup()

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
