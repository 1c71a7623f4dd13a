"""Worker lifecycle with a torch model (issue 18): what every start, scale-up and restart costs.

Per server, best of ``startup_repeats`` (the servers take turns):
- start with ``--models mlp=mlp.mar`` → first successful prediction;
- scale 1 → 4 workers (asynchronous) → all four READY in describe;
- PSS of the four workers (tserve: plus the zygote they were forked from, which exists only
  for them — the honest total);
- after the remaining worker has served for 11 s, SIGKILL it → first successful prediction.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks import procstat
from benchmarks.servers import Server, ServerError, ServerKind, http_request

MLP_BODY = bytes(64 * 4)  # 64 float32 zeros (the mlp model's input)
SCALED = 4
SERVED_BEFORE_KILL_S = 11.0  # a crash of a worker that was serving, not of one just started


def describe(srv: Server, model: str) -> list[dict[str, Any]]:
    status, data = http_request(srv.management_port, "GET", f"/models/{model}", timeout=10)
    if status != 200:
        raise ServerError(f"{srv.kind.name}: describe {model}: HTTP {status} {data[:200]!r}")
    return json.loads(data)[0]["workers"]


def ready_pids(srv: Server, model: str) -> list[int]:
    return [w["pid"] for w in describe(srv, model) if w.get("status") == "READY"]


def pss_mb(pid: int) -> float:
    """Proportional set size: shared pages count once, split among the processes sharing them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def zygote_pid(srv: Server) -> int | None:
    for p in procstat.process_tree(srv.pid):
        if "ts.warmstart.zygote" in procstat.cmdline(p.pid) and p.pid not in ready_pids(srv, "mlp"):
            return p.pid
    return None


def scale(srv: Server, workers: int, synchronous: bool) -> None:
    query = f"min_worker={workers}&max_worker={workers}&synchronous={'true' if synchronous else 'false'}"
    status, data = http_request(srv.management_port, "PUT", f"/models/mlp?{query}", timeout=120)
    if status not in (200, 202):
        raise ServerError(f"{srv.kind.name}: scale mlp to {workers}: HTTP {status} {data[:200]!r}")


def wait(predicate, timeout: float, what: str) -> float:
    """Seconds until ``predicate()`` holds (polled every 10 ms)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if predicate():
            return time.perf_counter() - t0
        time.sleep(0.01)
    raise ServerError(f"timed out after {timeout:.0f}s waiting for {what}")


def predicts(srv: Server) -> bool:
    try:
        status, _ = http_request(srv.inference_port, "POST", "/predictions/mlp", MLP_BODY, timeout=30)
    except OSError:
        return False
    return status == 200


def one_run(kind: ServerKind, store: Path) -> dict[str, float]:
    with Server(kind, store, models=["mlp=mlp.mar"]) as srv:
        first = srv.wait_prediction("mlp", MLP_BODY, timeout=180)
        first_at = time.monotonic()
        scale(srv, SCALED, synchronous=False)
        scale_s = wait(lambda: len(ready_pids(srv, "mlp")) == SCALED, 180, f"{SCALED} READY workers")
        pids = ready_pids(srv, "mlp")
        workers_pss = sum(pss_mb(p) for p in pids)
        zyg = zygote_pid(srv)
        total_pss = workers_pss + (pss_mb(zyg) if zyg else 0.0)
        scale(srv, 1, synchronous=True)
        time.sleep(max(0.0, SERVED_BEFORE_KILL_S - (time.monotonic() - first_at)))
        (victim,) = ready_pids(srv, "mlp")
        os.kill(victim, signal.SIGKILL)
        restart_s = wait(lambda: victim not in ready_pids(srv, "mlp") and predicts(srv), 180,
                         "a prediction after the kill")
        return {"first_prediction_s": first, "scale_s": scale_s, "pss_mb": total_pss,
                "workers_pss_mb": workers_pss, "restart_s": restart_s}


def lifecycle(kinds: list[ServerKind], stores: dict[str, Path], repeats: int) -> dict[str, dict[str, Any]]:
    runs: dict[str, list[dict[str, float]]] = {k.name: [] for k in kinds}
    for rep in range(repeats):
        for kind in (kinds if rep % 2 == 0 else kinds[::-1]):
            try:
                runs[kind.name].append(one_run(kind, stores[kind.name]))
            except ServerError as exc:  # one failed run is reported, not fatal
                print(f"  [{kind.name}] lifecycle run {rep + 1} failed: {' '.join(str(exc).split())[:300]}",
                      flush=True)
    out: dict[str, dict[str, Any]] = {}
    for name, rs in runs.items():
        if not rs:
            raise ServerError(f"{name}: every lifecycle run failed")
        best = {key: round(min(r[key] for r in rs), 3) for key in rs[0]}
        out[name] = {**best, "runs": [{k: round(v, 3) for k, v in r.items()} for r in rs]}
        print(f"  [{name}] lifecycle: start {best['first_prediction_s']} s, scale 1→{SCALED} {best['scale_s']} s, "
              f"PSS {best['pss_mb']:.0f} MB, restart {best['restart_s']} s", flush=True)
    return out
