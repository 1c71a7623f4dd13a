"""`make bench`: tserve against TorchServe 0.12.0 (and LitServe 0.2.19), ratios in one run.

    .venv/bin/python -m benchmarks.run [--duration 5] [--only echo,startup,pipeline,limit]
    .venv/bin/python -m benchmarks.run --only llm --duration 10   # LLM serving (not in the default)

Builds the models for both servers, runs every scenario, prints the table of ratios
tserve / TorchServe (quiet logs = TorchServe at its best; default logs reported too) and writes
``.bench/results.json`` and ``.bench/results.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import headline, loadgen, models, report, scenarios, servers
from benchmarks.scenarios import Settings

ALL = ("echo", "bound", "startup", "lifecycle", "pipeline", "limit")
EXTRA = ("llm", "llm-vllm")  # run only when named: builds and serves an LLM, several minutes
# (llm runs llm-vllm after its TorchServe comparison; llm-vllm alone is only the vLLM one)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"nproc": os.cpu_count(), "mem_gb": round(mem_gb, 1), "cpu": cpu,
            "kernel": platform.release(), "python": platform.python_version(),
            "loadavg_start": list(os.getloadavg())}


def build_stores(work: Path, pipeline_ms: float) -> tuple[Path, Path]:
    """tserve's store (project archiver) and TorchServe's store (torch-model-archiver 0.12.0)."""
    work.mkdir(parents=True, exist_ok=True)
    specs = models.base_specs(work)
    specs += [models.pipeline_spec(f"pipe_w{n}", pipeline_ms, pipeline_ms, n, 8, 5, work)
              for n in (0, 1)]
    ts_store, peer_store = work / "store-tserve", work / "store-torchserve"
    archiver = servers.BENCH_VENV / "bin" / "torch-model-archiver"
    for spec in specs:
        models.build_tserve(spec, ts_store)
        models.build_torchserve(spec, peer_store, archiver)
    # Each server also gets the other archiver's echo and mlp, as x_<name>.mar (compat check).
    for name in ("echo", "mlp"):
        shutil.copyfile(peer_store / f"{name}.mar", ts_store / f"x_{name}.mar")
        shutil.copyfile(ts_store / f"{name}.mar", peer_store / f"x_{name}.mar")
    return ts_store, peer_store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per cell (default 5)")
    ap.add_argument("--only", default=",".join(ALL),
                    help=f"comma list of scenarios to run, from {','.join(ALL + EXTRA)} "
                    "(default: all but llm; llm = continuous batching vs TorchServe's "
                    "batch-and-generate, ~2.5 minutes at --duration 10, the shortest that "
                    "measures more than the last batches draining)")
    ap.add_argument("--servers", default="tserve,torchserve-quiet,torchserve,tserve-tuned",
                    help="server kinds to compare (default: all four)")
    ap.add_argument("--pipeline-ms", type=float, default=20.0,
                    help="pipeline scenario: P = I = this many ms per batch (default 20)")
    ap.add_argument("--no-wrk", action="store_true", help="skip the wrk second opinion")
    ap.add_argument("--out", default=str(servers.BENCH), help="where results go (.bench/)")
    ap.add_argument("--docs-results", default=str(headline.DOCS_RESULTS),
                    help="where the headline tables of docs/benchmarks.md go, one file per scenario run "
                    "(default docs/results/)")
    ap.add_argument("--llm-models", default="toy,realistic",
                    help="llm beside vLLM: models from benchmarks/llm_shapes.py (default toy,realistic)")
    ap.add_argument("--llm-dtypes", default="float32,bfloat16", help="llm beside vLLM: dtypes (default both)")
    ap.add_argument("--llm-cells", default=None,
                    help="llm beside vLLM: cells from c1,c8,c32,prefix-c8,prefix-c32 (default all)")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    unknown = only - set(ALL + EXTRA)
    if unknown:
        ap.error(f"unknown scenario(s) {sorted(unknown)}: choose from {','.join(ALL + EXTRA)}")
    try:
        snapshot = (servers.snapshot_tserve()
                    if any(k.startswith("tserve") for k in args.servers.split(",")) else {})
    except servers.ServerError as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 1
    kinds = servers.kinds()
    chosen = args.servers.split(",")
    vllm_only = only == {"llm-vllm"}  # tserve and vLLM alone: no TorchServe archives or venv needed
    if vllm_only:
        chosen = ["tserve"]
    bad = [k for k in chosen if k not in kinds]
    if bad:
        ap.error(f"unknown server kind(s) {bad}: choose from {','.join(kinds)}")
    for need in {kinds[k].cli for k in chosen}:
        if not need.exists():
            print(f"benchmarks: {need} is missing; run 'bash benchmarks/run.sh' (make bench), "
                  "which installs it", file=sys.stderr)
            return 1

    st = Settings(duration_s=args.duration, use_wrk=not args.no_wrk, pipeline_ms=args.pipeline_ms)
    results: dict[str, Any] = {"machine": machine(), "settings": vars(st), "servers": {},
                               "tserve_build": snapshot,
                               "command": " ".join(["python -m benchmarks.run", *sys.argv[1:]]),
                               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    t0 = time.monotonic()
    out_dir = Path(args.out).resolve()
    print("Building archives (tserve: project archiver; TorchServe: torch-model-archiver "
          "0.12.0)", flush=True)
    if vllm_only:
        ts_store, peer_store = out_dir / "work" / "store-tserve", out_dir / "work" / "store-torchserve"
    else:
        ts_store, peer_store = build_stores(out_dir / "work", st.pipeline_ms)
    stores = {name: ts_store if name.startswith("tserve") else peer_store for name in chosen}
    for name in chosen:
        results["servers"][name] = {}
    if "echo" in only:
        print(f"== echo and mlp, interleaved across {', '.join(chosen)}", flush=True)
        try:
            steady = scenarios.steady_state([kinds[n] for n in chosen], stores, st,
                                            wrk_kinds=("tserve", "tserve-quiet", "tserve-base", "torchserve-quiet"))
            for name, res in steady.items():
                results["servers"][name].update(res)
        except (servers.ServerError, loadgen.LoadError) as exc:
            print(f"  FAILED: {exc}", flush=True)
            for name in chosen:
                results["servers"][name]["error"] = str(exc)
    if "bound" in only:
        from benchmarks import bound

        print("== bound: frontend bound (Netty alone), bare worker loop, tserve and TorchServe, wrk echo b8 "
              "c32, in rounds", flush=True)
        try:
            results["bound"] = bound.run([kinds[n] for n in chosen if n in bound.KINDS],
                                         stores, st.duration_s)
        except (servers.ServerError, RuntimeError) as exc:
            print(f"  FAILED: {exc}", flush=True)
            results["bound"] = {"error": str(exc)}
    if "lifecycle" in only:
        from benchmarks import lifecycle

        print("== lifecycle with a torch model: start, scale 1 → 4, PSS, restart after SIGKILL", flush=True)
        try:
            life = lifecycle.lifecycle([kinds[n] for n in chosen if n in ("tserve", "torchserve-quiet")],
                                       stores, st.startup_repeats)
            for name, res in life.items():
                results["servers"][name]["lifecycle"] = res
        except servers.ServerError as exc:
            print(f"  FAILED: {exc}", flush=True)
    if "startup" in only:
        print("== startup (servers take turns)", flush=True)
        try:
            for name, res in scenarios.startup([kinds[n] for n in chosen], stores, st).items():
                results["servers"][name]["startup"] = res
        except servers.ServerError as exc:
            print(f"  FAILED: {exc}", flush=True)
    for name in chosen:
        res = results["servers"][name]
        if not ({"echo", "pipeline"} & only) or name not in ("tserve", "torchserve-quiet"):
            continue
        print(f"== {name}", flush=True)
        try:
            if "echo" in only and name in ("tserve", "torchserve-quiet"):
                res["compat"] = scenarios.cross_archives(kinds[name], stores[name])
            if "pipeline" in only and name in ("tserve", "torchserve-quiet"):
                pools = (0, 1) if name.startswith("tserve") else (0,)
                res["pipeline"] = scenarios.pipeline(kinds[name], stores[name], st, pools)
        except (servers.ServerError, loadgen.LoadError) as exc:
            print(f"  [{name}] FAILED: {exc}", flush=True)
            res["error"] = str(exc)
    if "pipeline" in only:
        print("== litserve", flush=True)
        try:
            results["servers"]["litserve"] = {"pipeline": scenarios.pipeline_litserve(st)}
        except (servers.ServerError, loadgen.LoadError) as exc:
            print(f"  [litserve] FAILED: {exc}", flush=True)
    if "limit" in only:
        from benchmarks import limit

        print("== limit (bare Python loop with ts.protocol.codec; tserve's worker alone)", flush=True)
        results["limit"] = {}
        for worker in ("bare", "tserve"):
            for batch in (1, 8):
                r = limit.run_limit(batch, 1, min(st.duration_s, 3.0), worker=worker)
                key = f"b{batch}" + ("_worker" if worker == "tserve" else "")
                results["limit"][key] = {"rps": round(r.rps, 1), "p50_ms": round(r.p50_ms, 3),
                                         "worker_cpu_us_per_req":
                                         round(r.worker_cpu_us_per_req, 1)}
                print(f"  {key}: {r.rps:.0f} req/s, worker CPU "
                      f"{r.worker_cpu_us_per_req:.0f} µs/req", flush=True)
    if "llm" in only:
        from benchmarks import llm

        print("== llm (tserve continuous batching vs TorchServe batch-and-generate, same model)",
              flush=True)
        try:
            results["llm"] = llm.run(kinds, ts_store, peer_store, out_dir / "work",
                                     servers.BENCH_VENV / "bin" / "torch-model-archiver",
                                     st.duration_s)
        except (servers.ServerError, loadgen.LoadError, ValueError) as exc:
            print(f"  FAILED: {exc}", flush=True)
            results["llm"] = {"error": str(exc)}
    if {"llm", "llm-vllm"} & only:
        from benchmarks import llm_vllm

        print("== llm beside vLLM's CPU backend (same model folder, prompts and load)", flush=True)
        results["llm_vllm"] = llm_vllm.run(kinds, ts_store, out_dir / "work", st.duration_s,
                                           args.llm_models.split(","), args.llm_dtypes.split(","),
                                           args.llm_cells.split(",") if args.llm_cells else None)
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    results["wall_s"] = round(time.monotonic() - t0, 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    table = report.render(results)
    (out_dir / "results.md").write_text(table)
    print()
    print(table)
    print(f"Results: {out_dir / 'results.json'}, {out_dir / 'results.md'} "
          f"({results['wall_s']} s)")
    for path in headline.write(results, Path(args.docs_results)):
        print(f"Headline table: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
