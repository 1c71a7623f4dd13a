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


def steady_state(kinds: list[ServerKind], stores: dict[str, Path], st: Settings,
                 wrk_kinds: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Echo and mlp cells, wrk's second opinion, RSS idle / under load / after load.

    Every server runs at once (idle ones cost nothing) and each cell is measured on every
    server back to back, the order reversed from one cell to the next: a change in the
    machine's background load then hits both sides of a ratio alike.
    """
    out = {k.name: {"echo": {}, "mlp": {}, "wrk": {}, "rss": {}} for k in kinds}
    running: dict[str, Server] = {}
    try:
        for kind in kinds:
            running[kind.name] = Server(kind, stores[kind.name])
            running[kind.name].start()
        for srv in running.values():
            srv.wait_ready()
            for model, batch in (("echo", 1), ("echo", 8), ("mlp", 1), ("mlp", 8)):
                srv.register(f"{model}.mar", f"{model}_b{batch}", batch_size=batch, delay_ms=5)
            for model in ("echo_b1", "echo_b8"):
                srv.wait_prediction(model, b"x")
            for model in ("mlp_b1", "mlp_b8"):
                srv.wait_prediction(model, MLP_BODY)
        for name, srv in running.items():
            _settle(srv.pid)
            out[name]["rss"]["idle"] = procstat.split_rss(srv.pid)
        # Both frontends are JVMs: time nothing until the JIT has compiled the hot path.
        for srv in running.values():
            for model in ("echo_b1", "echo_b8", "mlp_b1", "mlp_b8"):
                loadgen.load(srv.inference_port, f"/predictions/{model}",
                             body=MLP_BODY if model.startswith("mlp") else b"x", concurrency=8,
                             duration_s=st.warmup_s)
        order = list(running)
        cells = ([("echo", b, c) for b, c in ECHO_CELLS] + [("mlp", b, c) for b, c in MLP_CELLS])
        for i, (model, batch, conc) in enumerate(cells):
            for name in (order if i % 2 == 0 else order[::-1]):
                srv = running[name]
                path = f"/predictions/{model}_b{batch}"
                body = MLP_BODY if model == "mlp" else b"x"
                if (model, batch, conc) == ("echo", 8, 32):
                    with RssSampler(srv.pid) as sampler:
                        cell = measure(srv.pid, srv.inference_port, path, conc, st, body=body)
                    out[name]["rss"]["under_load"] = sampler.peak
                else:
                    cell = measure(srv.pid, srv.inference_port, path, conc, st, body=body)
                out[name][model][f"b{batch}_c{conc}"] = cell
                _log(name, f"{model} b{batch} c{conc}", cell)
        if st.use_wrk and wrk.available():
            wrk_order = [n for n in order if n in wrk_kinds]
            for i, (batch, conc) in enumerate(WRK_CELLS):
                for name in (wrk_order if i % 2 == 0 else wrk_order[::-1]):
                    cell = wrk.run_wrk(running[name].inference_port, f"/predictions/echo_b{batch}",
                                       conc, max(2, int(st.duration_s)))
                    out[name]["wrk"][f"b{batch}_c{conc}"] = cell
                    _log(name, f"wrk echo b{batch} c{conc}", cell)
        for name, srv in running.items():
            _settle(srv.pid)
            out[name]["rss"]["after_load"] = procstat.split_rss(srv.pid)
    finally:
        for srv in running.values():
            srv.stop()
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


def startup(kinds: list[ServerKind], stores: dict[str, Path], st: Settings
            ) -> dict[str, dict[str, Any]]:
    """`torchserve --start` with echo loaded at startup, to its first successful prediction.

    Best of ``startup_repeats`` per server, the servers taking turns (order reversed each round).
    """
    times: dict[str, list[float]] = {k.name: [] for k in kinds}
    failures: dict[str, list[str]] = {k.name: [] for k in kinds}
    for rep in range(st.startup_repeats):
        for kind in (kinds if rep % 2 == 0 else kinds[::-1]):
            try:
                with Server(kind, stores[kind.name], models=["echo=echo.mar"]) as srv:
                    times[kind.name].append(srv.wait_prediction("echo", b"x", timeout=180))
            except ServerError as exc:  # one failed start is reported, not fatal
                failures[kind.name].append(" ".join(str(exc).split())[:300])
                print(f"  [{kind.name}] start {rep + 1} failed: {failures[kind.name][-1]}",
                      flush=True)
    out = {}
    for name, ts in times.items():
        if not ts:
            raise ServerError(f"{name}: every start failed: {failures[name][-1]}")
        out[name] = {"first_prediction_s": round(min(ts), 3), "all_s": [round(t, 3) for t in ts],
                     "failed_starts": failures[name]}
        _log(name, "startup", out[name])
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
