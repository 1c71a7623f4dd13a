"""Pipeline throughput through the real servers: tserve with preprocessWorkers 0 and N, and
TorchServe 0.12 (installed by ``bash benchmarks/run.sh`` into .bench/venv), in one run.

Batches of B requests, preprocess P ms and inference I ms per batch (``cost_handler.py``;
``--mode spin`` burns CPU in preprocess, ``--mode wait`` blocks without it), a closed loop of C
clients (the bench's load generator). Expected: pool off ≈ B / (P + I) req/s, pool on
≈ B / max(P / N, I); the table gives each server's ratio to those.

    python examples/pipeline/server_bench.py [--p-ms 20] [--i-ms 20] [--modes spin,wait]
        [--pool 1] [--duration 8] [--servers tserve,torchserve-quiet]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks import loadgen, models, scenarios, servers  # noqa: E402

HANDLER = Path(__file__).resolve().parent / "cost_handler.py"
BATCH, DELAY_MS, CLIENTS = 8, 5, 32


def specs(work: Path, p_ms: float, i_ms: float, mode: str, pools: list[int], in_flight: int = 0
          ) -> list[models.ModelSpec]:
    out = []
    for n in pools:
        name = f"cost_{mode}_w{n}"
        costs = work / f"{name}-costs" / "costs.json"
        costs.parent.mkdir(parents=True, exist_ok=True)
        costs.write_text(json.dumps({"preprocess_ms": p_ms, "inference_ms": i_ms, "preprocess_mode": mode}))
        yaml = (f"minWorkers: 1\nmaxWorkers: 1\nbatchSize: {BATCH}\nmaxBatchDelay: {DELAY_MS}\n"
                f"preprocessWorkers: {n}\n" + (f"maxBatchesInFlight: {in_flight}\n" if n and in_flight else ""))
        out.append(models.ModelSpec(name, str(HANDLER), extra_files=[str(costs)], config_yaml=yaml))
    return out


def measure(kind: servers.ServerKind, store: Path, names: list[str], st: scenarios.Settings) -> dict[str, float]:
    rps = {}
    with servers.Server(kind, store) as srv:
        srv.wait_ready()
        for name in names:
            srv.register(f"{name}.mar", name, batch_size=BATCH, delay_ms=DELAY_MS)
            srv.wait_prediction(name, b"x")
            loadgen.load(srv.inference_port, f"/predictions/{name}", concurrency=CLIENTS, duration_s=2.0)
            cell = scenarios.measure(srv.pid, srv.inference_port, f"/predictions/{name}", CLIENTS, st)
            print(f"  [{kind.name}] {name}: {cell['rps']} req/s, p50 {cell['p50_ms']} ms, errors {cell['errors']}",
                  flush=True)
            rps[name] = cell["rps"] if not cell["errors"] else 0.0
            srv.unregister(name)
    return rps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p-ms", type=float, default=20.0)
    ap.add_argument("--i-ms", type=float, default=20.0)
    ap.add_argument("--modes", default="spin,wait")
    ap.add_argument("--pool", type=int, default=1, help="preprocessWorkers N of the pooled cell")
    ap.add_argument("--in-flight", type=int, default=0,
                    help="maxBatchesInFlight of the pooled cell (0: the default, preprocessWorkers + 1)")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--servers", default="tserve,torchserve-quiet")
    args = ap.parse_args()
    modes = args.modes.split(",")
    load0 = os.getloadavg()
    servers.snapshot_tserve()
    kinds = servers.kinds()
    archiver = servers.BENCH_VENV / "bin" / "torch-model-archiver"
    st = scenarios.Settings(duration_s=args.duration, use_wrk=False)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        work = Path(tmp)
        ts_store, peer_store = work / "store-tserve", work / "store-torchserve"
        for mode in modes:
            for spec in specs(work, args.p_ms, args.i_ms, mode, [0, args.pool], args.in_flight):
                models.build_tserve(spec, ts_store)
                if "torchserve-quiet" in args.servers and spec.name.endswith("_w0"):
                    models.build_torchserve(spec, peer_store, archiver)
        for name in args.servers.split(","):
            pools = [0, args.pool] if name.startswith("tserve") else [0]
            names = [f"cost_{m}_w{n}" for m in modes for n in pools]
            results[name] = measure(kinds[name], ts_store if name.startswith("tserve") else peer_store, names, st)
    load1 = os.getloadavg()
    p, i, n = args.p_ms, args.i_ms, args.pool
    off, on = BATCH / ((p + i) / 1000), BATCH / (max(p / n, i) / 1000)
    print(f"\nbatch {BATCH}, P = {p:g} ms, I = {i:g} ms, c = {CLIENTS}, {args.duration:g} s per cell; "
          f"load average {load0[0]:.1f} before, {load1[0]:.1f} after, {os.cpu_count()} CPUs; "
          f"pooled maxBatchesInFlight {args.in_flight or args.pool + 2}")
    print(f"expected: pool off {off:.0f} req/s = B/(P+I); pool on (N={n}) {on:.0f} req/s = B/max(P/N, I)\n")
    print("| preprocess | server | preprocessWorkers | req/s | vs expected | vs pool off | vs TorchServe |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for mode in modes:
        ts_rps = results.get("torchserve-quiet", {}).get(f"cost_{mode}_w0")
        base = results.get("tserve", {}).get(f"cost_{mode}_w0")
        for name, cells in results.items():
            for cell, rps in cells.items():
                if not cell.startswith(f"cost_{mode}_"):
                    continue
                w = int(cell.rsplit("_w", 1)[1])
                expected = on if w else off
                label = "TorchServe 0.12 (quiet logs)" if name == "torchserve-quiet" else name
                print(f"| {mode} | {label} | {w if name.startswith('tserve') else '–'} | {rps:.0f} | "
                      f"{rps / expected:.2f} | {rps / base:.2f} | "
                      f"{(rps / ts_rps) if ts_rps else float('nan'):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
