"""The measured scenarios. Each returns plain dicts (JSON-ready), one per cell.

Same settings for every server: one worker per model, the same batch size and delay, token
auth off, model API on, the same closed-loop load generator and the same request body.
"""

from __future__ import annotations

import resource
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import loadgen, procstat, wrk
from benchmarks.servers import LitServeServer, Server, ServerError, ServerKind, http_request

MLP_BODY = bytes(64 * 4)  # 64 float32 zeros


@dataclass
class Settings:
    duration_s: float = 5.0
    max_requests: int = 200_000
    startup_repeats: int = 3
    use_wrk: bool = True
    pipeline_ms: float = 20.0
    warmup_s: float = 3.0  # JIT warm-up load per model before any cell is timed


class RssSampler:
    """Peak frontend/worker RSS of a server tree while a load runs (sampled every 0.25 s)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = {"frontend_mb": 0.0, "workers_mb": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            now = procstat.split_rss(self.pid)
            for key in self.peak:
                self.peak[key] = max(self.peak[key], now[key])

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(pid: int, port: int, path: str, concurrency: int, st: Settings,
            body: bytes = b"x", content_type: str = "application/octet-stream") -> dict[str, Any]:
    """One closed-loop cell with the server tree's CPU time per successful request."""
    cpu0 = procstat.split_cpu(pid)
    client0 = resource.getrusage(resource.RUSAGE_SELF)
    res = loadgen.load(port, path, body=body, content_type=content_type,
                       concurrency=concurrency, duration_s=st.duration_s,
                       max_requests=st.max_requests)
    client1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu1 = procstat.split_cpu(pid)
    out: dict[str, Any] = res.summary()
    # The load generator's own CPU share: near 1.0 means the client, not the server, is the limit.
    client_s = (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)
    out["client_cpu_share"] = round(client_s / max(res.duration_s, 1e-9), 2)
    n = max(res.requests, 1)
    d = {k: cpu1[k] - cpu0[k] for k in cpu1}
    # JIT compilation is a warm-up cost, not a per-request one: counted apart (jit_ms).
    out["cpu_us_per_req"] = round((d["frontend_s"] - d["jit_s"] + d["other_s"]) / n * 1e6, 1)
    out["frontend_cpu_us_per_req"] = round((d["frontend_s"] - d["jit_s"]) / n * 1e6, 1)
    out["worker_cpu_us_per_req"] = round(d["other_s"] / n * 1e6, 1)
    out["jit_ms"] = round(d["jit_s"] * 1000, 1)
    if res.first_error:
        out["first_error"] = res.first_error
    return out


ECHO_CELLS = [(b, c) for b in (1, 8) for c in (1, 8, 32)]
MLP_CELLS = [(1, 1), (8, 32)]
WRK_CELLS = [(1, 1), (1, 32), (8, 32)]


def steady_state(kind: ServerKind, store: Path, st: Settings, with_mlp: bool = True,
                 with_wrk: bool = True) -> dict[str, Any]:
    """Echo (and mlp) cells, wrk's second opinion, RSS idle / under load / after load."""
    out: dict[str, Any] = {"echo": {}, "mlp": {}, "wrk": {}, "rss": {}}
    with Server(kind, store) as srv:
        srv.wait_ready()
        srv.register("echo.mar", "echo_b1", batch_size=1, delay_ms=5)
        srv.register("echo.mar", "echo_b8", batch_size=8, delay_ms=5)
        if with_mlp:
            srv.register("mlp.mar", "mlp_b1", batch_size=1, delay_ms=5)
            srv.register("mlp.mar", "mlp_b8", batch_size=8, delay_ms=5)
        for model in ("echo_b1", "echo_b8"):
            srv.wait_prediction(model, b"x")
        if with_mlp:
            for model in ("mlp_b1", "mlp_b8"):
                srv.wait_prediction(model, MLP_BODY)
        _settle(srv.pid)
        out["rss"]["idle"] = procstat.split_rss(srv.pid)
        # Both frontends are JVMs: time nothing until the JIT has compiled the hot path.
        warm = ["echo_b1", "echo_b8"] + (["mlp_b1", "mlp_b8"] if with_mlp else [])
        for model in warm:
            loadgen.load(srv.inference_port, f"/predictions/{model}",
                         body=MLP_BODY if model.startswith("mlp") else b"x", concurrency=8,
                         duration_s=st.warmup_s)
        for batch, conc in ECHO_CELLS:
            model = f"echo_b{batch}"
            if (batch, conc) == (8, 32):
                with RssSampler(srv.pid) as sampler:
                    cell = measure(srv.pid, srv.inference_port, f"/predictions/{model}", conc, st)
                out["rss"]["under_load"] = sampler.peak
            else:
                cell = measure(srv.pid, srv.inference_port, f"/predictions/{model}", conc, st)
            out["echo"][f"b{batch}_c{conc}"] = cell
            _log(kind.name, f"echo b{batch} c{conc}", cell)
        if with_mlp:
            for batch, conc in MLP_CELLS:
                cell = measure(srv.pid, srv.inference_port, f"/predictions/mlp_b{batch}", conc,
                               st, body=MLP_BODY)
                out["mlp"][f"b{batch}_c{conc}"] = cell
                _log(kind.name, f"mlp b{batch} c{conc}", cell)
        if with_wrk and st.use_wrk and wrk.available():
            for batch, conc in WRK_CELLS:
                cell = wrk.run_wrk(srv.inference_port, f"/predictions/echo_b{batch}", conc,
                                   max(2, int(st.duration_s)))
                out["wrk"][f"b{batch}_c{conc}"] = cell
                _log(kind.name, f"wrk echo b{batch} c{conc}", cell)
        _settle(srv.pid)
        out["rss"]["after_load"] = procstat.split_rss(srv.pid)
    return out


def cross_archives(kind: ServerKind, store: Path) -> dict[str, str]:
    """Serve the archives the *other* archiver built (x_echo.mar, x_mlp.mar): same format?"""
    out: dict[str, str] = {}
    with Server(kind, store) as srv:
        srv.wait_ready()
        for name, body in (("echo", b"x"), ("mlp", MLP_BODY)):
            try:
                srv.register(f"x_{name}.mar", f"x_{name}", batch_size=1, delay_ms=5)
                status, data = http_request(srv.inference_port, "POST",
                                            f"/predictions/x_{name}", body)
                out[name] = "ok" if status == 200 else f"HTTP {status}: {data[:200]!r}"
            except (ServerError, OSError) as exc:
                out[name] = f"failed: {exc}"[:300]
    print(f"  [{kind.name}] archives from the other archiver: {out}", flush=True)
    return out


def startup(kind: ServerKind, store: Path, st: Settings) -> dict[str, Any]:
    """`torchserve --start` with echo loaded at startup, to its first successful prediction."""
    times = []
    for _ in range(st.startup_repeats):
        with Server(kind, store, models=["echo=echo.mar"]) as srv:
            times.append(srv.wait_prediction("echo", b"x", timeout=180))
    out = {"first_prediction_s": round(min(times), 3), "all_s": [round(t, 3) for t in times]}
    _log(kind.name, "startup", out)
    return out


def pipeline(kind: ServerKind, store: Path, st: Settings, pool_sizes: tuple[int, ...]
             ) -> dict[str, Any]:
    """Batches of 8 with P = I = pipeline_ms; archives pipe_w<N> carry preprocessWorkers N."""
    out: dict[str, Any] = {}
    with Server(kind, store) as srv:
        srv.wait_ready()
        for n in pool_sizes:
            srv.register(f"pipe_w{n}.mar", f"pipe_w{n}", batch_size=8, delay_ms=5)
            srv.wait_prediction(f"pipe_w{n}", b"x")
            loadgen.load(srv.inference_port, f"/predictions/pipe_w{n}", concurrency=32,
                         duration_s=st.warmup_s / 2)
            cell = measure(srv.pid, srv.inference_port, f"/predictions/pipe_w{n}", 32, st)
            out[f"w{n}"] = cell
            _log(kind.name, f"pipeline preprocessWorkers={n}", cell)
    return out


def pipeline_litserve(st: Settings) -> dict[str, Any]:
    with LitServeServer(st.pipeline_ms, st.pipeline_ms, 8, 5) as srv:
        loadgen.load(srv.port, "/predict", body=b'{"x": 1}', content_type="application/json",
                     concurrency=32, duration_s=st.warmup_s / 2)
        cell = measure(srv.pid, srv.port, "/predict", 32, st, body=b'{"x": 1}',
                       content_type="application/json")
    _log("litserve", "pipeline", cell)
    return {"w0": cell}


def _settle(pid: int, timeout: float = 5.0) -> None:
    """Wait until the server tree is idle (CPU time stops growing) before reading idle RSS."""
    deadline = time.monotonic() + timeout
    last = procstat.tree_cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = procstat.tree_cpu_s(pid)
        if now - last < 0.02:
            return
        last = now


def _log(server: str, what: str, cell: dict[str, Any]) -> None:
    keys = ("rps", "p50_ms", "p99_ms", "errors", "cpu_us_per_req", "first_prediction_s")
    shown = ", ".join(f"{k}={cell[k]}" for k in keys if k in cell)
    print(f"  [{server}] {what}: {shown}", flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0
