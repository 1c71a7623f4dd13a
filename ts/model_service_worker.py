"""The backend worker: one process (or one torchrun rank) serving one frontend connection.

    python -m ts.model_service_worker --sock-type unix --sock-name DIR/.ts.sock.9000
    python -m ts.model_service_worker --sock-type tcp --host 127.0.0.1 --port 9000

It binds, prints ``[PID]<pid>`` and ``Torch worker started.``, accepts one connection and
serves LOAD / INFERENCE / PING / STOP frames (docs/protocol.md) until the socket closes.
The main thread reads each frame and handles it in arrival order: read, decode, run, answer,
with no thread hand-off on the way (``ts/protocol/frame_source.py``: a watcher thread answers PING while
a long batch runs).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
import sys
import threading
import time
from typing import Any, Literal

if __name__ == "__main__" and not __package__:
    # Run as a file (python ts/model_service_worker.py, as TorchServe's launcher does): put the
    # repository root, not ts/ itself, on sys.path so that ts/utils etc. never shadow a
    # handler's own top-level modules.
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.path.insert(0, os.path.dirname(_HERE))

from ts.arg_parser import ArgParser  # noqa: E402
from ts.protocol import codec  # noqa: E402
from ts.protocol.codec import Frame, FrameType  # noqa: E402
from ts.protocol.frame_source import FrameSource  # noqa: E402
from ts.utils.ranks import RankInfo  # noqa: E402

logger = logging.getLogger("ts.worker")

LOG_FORMAT = "%(asctime)s [%(levelname)s] %(name)s - %(message)s"
_JOIN_LIMIT = 64 * 1024  # frames up to this size in all are copied into one write
STEP_WAIT_S = 0.05  # the longest a stepping loop waits on the frontend and its handler's step together


def rank_socket_name(sock_name: str, local_rank: int) -> str:
    """``.../.ts.sock.9000`` -> ``.../.ts.sock.<9000+local_rank>`` (TorchServe's rule)."""
    if local_rank == 0:
        return sock_name
    base, dot, number = sock_name.rpartition(".")
    if not dot or not number.isdigit():
        raise SystemExit(f"--sock-name {sock_name!r} must end in .<number> for torchrun ranks")
    return f"{base}.{int(number) + local_rank}"


def bind_listener(args: argparse.Namespace, ranks: RankInfo) -> tuple[socket.socket, str]:
    if args.sock_type == "unix":
        if not args.sock_name:
            raise SystemExit("--sock-name is required with --sock-type unix")
        path = rank_socket_name(args.sock_name, ranks.local_rank)
        try:
            os.unlink(path)  # stale socket from a previous worker
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        where = path
    else:
        if args.port is None:
            raise SystemExit("--port is required with --sock-type tcp")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        port = int(args.port) + ranks.local_rank
        sock.bind((args.host, port))
        where = f"{args.host}:{port}"
    sock.listen(1)
    return sock, where


def init_process_group(ranks: RankInfo, device_type: str, timeout_s: float) -> None:
    """Initialise torch.distributed once per process, safely across elastic restarts.

    With torchrun's shared agent store every restart attempt would reuse the same keys
    (pytorch #135712), so the group is built on a PrefixStore keyed by the restart count.
    With ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` each attempt has a fresh store: use env://.
    """
    import datetime

    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if device_type == "gpu" and torch.cuda.is_available() else "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    use_agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    if addr and port and use_agent_store:
        base = dist.TCPStore(addr, int(port), ranks.world_size, is_master=False, timeout=timeout)
        store = dist.PrefixStore(f"tserve/attempt{ranks.restart_count}", base)
        dist.init_process_group(backend, store=store, rank=ranks.rank,
                                world_size=ranks.world_size, timeout=timeout)
        how = f"agent store {addr}:{port}, prefix tserve/attempt{ranks.restart_count}"
    else:
        dist.init_process_group(backend, init_method="env://", rank=ranks.rank,
                                world_size=ranks.world_size, timeout=timeout)
        how = "env://"
    logger.info("rank %d/%d: process group ready (%s, %s)", ranks.rank, ranks.world_size, backend, how)


class Worker:
    """Serves one connection; see the module docstring."""

    def __init__(self, conn: socket.socket, ranks: RankInfo, metrics_config: str | None) -> None:
        self.conn = conn
        self.ranks = ranks
        self.metrics_config = metrics_config
        self._send_lock = threading.Lock()  # pipeline and watcher threads send beside the main thread
        self.source = FrameSource(conn, self._answer_ping)
        self.pipeline: Any = None
        self.model_name = ""
        self.exit_code = 0
        self._received = 0  # INFERENCE frames taken off the socket
        self._answered_early = 0  # of those, answered without the pipeline (bad batch, no model)

    # ------------------------------------------------------------------ io
    def send(self, *frames: bytes) -> None:
        """Write frames back to back; small ones in one syscall (a RESULT and its METRICS)."""
        with self._send_lock:
            if len(frames) == 1:
                self.conn.sendall(frames[0])
            elif sum(map(len, frames)) <= _JOIN_LIMIT:
                self.conn.sendall(b"".join(frames))
            else:
                for frame in frames:
                    self.conn.sendall(frame)

    def send_json(self, ftype: FrameType, batch_id: int, obj: Any) -> None:
        self.send(codec.encode_json_frame(ftype, batch_id, obj))

    def _next_frame(self, wait: bool = True, also: int | None = None) -> Frame | None | Literal[False]:
        """The next LOAD / INFERENCE / CANCEL / SEQUENCE_END / STOP frame; PING and bad frames are answered on
        the way. None when the connection ended (cleanly, or with the reason logged); False when
        ``wait`` is off and no frame has arrived."""
        while True:
            try:
                frame = self.source.next() if wait else self.source.poll(also, STEP_WAIT_S)
                if frame is None:
                    return False
            except codec.UnknownFrameType as exc:
                logger.warning("ignoring %s (batch %d)", exc, exc.batch_id)
                self.send_json(FrameType.ERROR, exc.batch_id,
                               {"status": 400, "message": f"{exc}; this worker speaks protocol version 1"})
                continue
            except codec.ConnectionClosed as exc:
                if not exc.clean:
                    logger.warning("frontend connection lost: %s", exc)
                return None
            except codec.ProtocolError as exc:
                logger.error("bad frame from the frontend: %s; closing the connection", exc)
                self.exit_code = 1
                try:
                    self.send_json(FrameType.ERROR, 0, {"status": 400, "message": str(exc)})
                except OSError:
                    pass
                return None
            if frame.type is FrameType.PING:
                self._answer_ping(frame)
            elif frame.type in (FrameType.LOAD, FrameType.INFERENCE, FrameType.CANCEL, FrameType.SEQUENCE_END,
                                FrameType.STOP):
                return frame
            else:
                self.send_json(FrameType.ERROR, frame.batch_id, {
                    "status": 400, "message": f"unexpected {frame.type.name} frame from the frontend"})

    def _answer_ping(self, frame: Frame) -> None:
        self.send_json(FrameType.PONG, frame.batch_id, self.pong())

    def pong(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "healthy", "pid": os.getpid(), "rank": self.ranks.rank,
                               "localRank": self.ranks.local_rank, "worldSize": self.ranks.world_size,
                               "modelName": self.model_name, "loaded": self.pipeline is not None}
        if self.pipeline is not None:
            out["inFlight"] = self._received - self._answered_early - self.pipeline.completed
            out["stages"] = self.pipeline.stats.snapshot()
            pool = getattr(self.pipeline, "pool", None)
            if pool is not None:
                out["poolPids"] = pool.pids()
        return out

    # ------------------------------------------------------------------ main loop
    def serve(self) -> int:
        try:
            while True:
                stepping = self._stepping()
                frame = self._next_frame(wait=not stepping, also=self._step_fd() if stepping else None)
                if frame is False:  # nothing arrived: the running batch takes a step
                    with self.source.busy():
                        self.pipeline.step()
                    continue
                received_at = time.monotonic()
                if frame is None:
                    logger.info("frontend closed the connection; worker exits")
                    break
                if frame.type is FrameType.STOP:
                    logger.info("STOP received; finishing in-flight batches")
                    break
                if frame.type is FrameType.LOAD:
                    with self.source.busy():
                        loaded = self._load(frame)
                    if not loaded:
                        return 1
                elif frame.type is FrameType.INFERENCE:
                    self._received += 1
                    with self.source.busy():
                        self._inference(frame, received_at)
                elif frame.type is FrameType.CANCEL:
                    self._cancel(frame)
                elif frame.type is FrameType.SEQUENCE_END:
                    self._end_sequence(frame)
        except OSError as exc:  # the frontend went away while we were answering
            logger.warning("model %s: connection to the frontend lost (%s); worker exits", self.model_name, exc)
        finally:
            self.source.close()
            if self.pipeline is not None:
                self.pipeline.drain()
                self.pipeline.close()
        return self.exit_code

    def _step_fd(self) -> int | None:
        """What a continuous-batching handler's next step waits on (an engine process's pipe):
        the loop waits on it and on the frontend together, so a frame is read the moment it
        arrives and a step is taken the moment one is ready."""
        fileno = getattr(self.pipeline, "step_fileno", None)
        return fileno() if callable(fileno) else None

    def _stepping(self) -> bool:
        """A continuous-batching handler has sequences running: read frames without waiting."""
        return self.pipeline is not None and hasattr(self.pipeline, "step") and self.pipeline.has_work()

    def _cancel(self, frame: Frame) -> None:
        cancel = getattr(self.pipeline, "cancel", None)
        if cancel is None:  # an ordinary batch runs to its end; its RESULT comes as usual
            logger.debug("CANCEL for batch %d ignored: the handler takes no cancellations", frame.batch_id)
            return
        cancel(frame.batch_id, bytes(frame.body).decode("utf-8", "replace"))

    def _end_sequence(self, frame: Frame) -> None:
        """A stateful model's sequence closed in the frontend: its handler may drop the state."""
        service = getattr(self.pipeline, "service", None)
        if service is not None:
            service.end_sequence(bytes(frame.body).decode("utf-8", "replace"))

    def _load(self, frame: Frame) -> bool:
        started = time.monotonic()
        from ts.model_loader import LoadError, LoadRequest
        from ts.pipeline.loader import load_pipeline
        from ts.service import is_oom

        if self.pipeline is not None:
            self.send_json(FrameType.LOADED, frame.batch_id, {
                "status": 409, "message": f"model {self.model_name} is already loaded in this worker"})
            return True
        marks: dict[str, float] = {}
        try:
            req = LoadRequest.from_json(codec.decode_json_body(frame.body, "LOAD body"))
            self.model_name = req.model_name
            logger.info("loading model %s from %s", req.model_name, req.model_path)
            if self.ranks.distributed:
                init_process_group(self.ranks, req.settings.deviceType,
                                   float(os.environ.get("TS_DIST_TIMEOUT_S", "300")))
            self.pipeline = load_pipeline(req, self.metrics_config, self.ranks, self.send, marks)
        except (LoadError, codec.ProtocolError) as exc:
            status = getattr(exc, "status", 500)
            logger.error("model %s failed to load: %s", self.model_name, exc)
            self.send_json(FrameType.LOADED, frame.batch_id, {"status": status, "message": str(exc)})
            return False
        except BaseException as exc:  # noqa: BLE001 - report any handler failure to the frontend
            status = 507 if is_oom(exc) else 500
            logger.exception("model %s failed to load", self.model_name)
            self.send_json(FrameType.LOADED, frame.batch_id,
                           {"status": status, "message": f"{type(exc).__name__}: {exc}"})
            return False
        # What the load created lives as long as the worker: keep it out of every later full
        # collection (with torch imported, one is tens of ms at a random request).
        gc.collect()
        gc.freeze()
        done = time.monotonic()
        imported = marks.get("imported", started)
        logger.info("model %s loaded in %.0f ms", self.model_name, (done - started) * 1000)
        self.send_json(FrameType.LOADED, frame.batch_id, {
            "status": 200, "message": f"loaded model {self.model_name}", "pid": os.getpid(),
            "rank": self.ranks.rank, "worldSize": self.ranks.world_size,
            "startup": {"importMs": round((imported - started) * 1000, 1),
                        "loadMs": round((done - imported) * 1000, 1),
                        "warm": os.environ.get("TS_WARM_START") == "1"}})
        return True

    def _inference(self, frame: Frame, received_at: float) -> None:
        try:
            requests = codec.decode_batch(frame.body)
        except codec.ProtocolError as exc:
            logger.error("batch %d: %s", frame.batch_id, exc)
            self._answered_early += 1
            self.send_json(FrameType.ERROR, frame.batch_id, {"status": 400, "message": str(exc)})
            return
        if self.pipeline is None:
            from ts.service import error_responses

            self._answered_early += 1
            self.send(codec.encode_result(frame.batch_id, error_responses(
                requests, 503, "no model is loaded in this worker yet: send LOAD first")))
            return
        self.pipeline.submit(frame.batch_id, requests, received_at)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return ArgParser.extract_args(argv)


def own_process_group() -> None:
    """A session (and process group) of its own: the frontend ends the whole group when the worker
    stops, so a handler's children that ignore SIGTERM go with it (frontend WorkerProcess.endTree).
    A process that leads its group already (torchrun may start ranks so) keeps it."""
    try:
        os.setsid()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("TS_WORKER_LOG_LEVEL", "INFO"), format=LOG_FORMAT,
                        stream=sys.stdout)
    args = parse_args(argv)
    own_process_group()
    ranks = RankInfo.from_env()
    try:
        listener, where = bind_listener(args, ranks)
    except OSError as exc:
        logger.error("cannot listen on %s: %s", args.sock_name if args.sock_type == "unix" else args.port, exc)
        return 1
    print(f"[PID]{os.getpid()}", flush=True)
    print("Torch worker started.", flush=True)
    print(f"Python runtime: {sys.version.split()[0]}", flush=True)
    logger.info("rank %d listening on %s", ranks.rank, where)
    # read here, not at import: the zygote imports this module before a worker's environment exists
    accept_timeout_s = float(os.environ.get("TS_WORKER_ACCEPT_TIMEOUT_S", "60"))
    listener.settimeout(accept_timeout_s)
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        logger.error("no frontend connected to %s within %.0f s; exiting", where, accept_timeout_s)
        return 1
    finally:
        listener.close()
        if args.sock_type == "unix":
            try:
                os.unlink(where)
            except OSError:
                pass
    conn.settimeout(None)
    try:
        return Worker(conn, ranks, args.metrics_config).serve()
    finally:
        conn.close()


def remove_multiprocessing_tempdir() -> None:
    """os._exit skips the atexit hook that removes multiprocessing's ``pymp-*`` folder, made when
    this process hands a tensor to the preprocess pool (torch passes its file descriptor through a
    listener there): remove it here. Only one that exists: making one just to remove it would
    leave it behind when a signal ends the process in between."""
    process = sys.modules.get("multiprocessing.process")
    tempdir = process.current_process()._config.get("tempdir") if process is not None else None
    if tempdir:
        import shutil

        shutil.rmtree(tempdir, ignore_errors=True)


if __name__ == "__main__":
    code = main()
    remove_multiprocessing_tempdir()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: handler threads or CUDA contexts must not delay the exit.
    os._exit(code)
