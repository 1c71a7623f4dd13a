"""Soak: tserve under steady load while its workers are SIGKILLed at random (issue 16).

    .venv/bin/python -m benchmarks.soak [--duration 1800] [--load 0.7] [--out .bench/soak.json]
    .venv/bin/python -m benchmarks.soak hostile [--only classes|storm|sigterm] [--runs N]   # issues 27, 43:
                                                 # benchmarks/hostile_suite.py

Builds the benchmark's echo and mlp models (benchmarks/models.py), starts one tserve (the
benchmark's launcher, benchmarks/servers.py) with ``--workers`` workers per model, measures the
peak throughput of both models loaded together (closed loop, benchmarks/loadgen.py), then for
``--duration`` seconds sends ``--load`` x that peak to each model at a fixed rate
(benchmarks/paced.py) while a worker of a random model is SIGKILLed every ``--kill-min`` to
``--kill-max`` seconds (PIDs from the describe API, checked to be in this server's process tree).

Sampled every ``--sample-s``: the frontend's RSS and open file descriptors (their slope is a least
squares fit, per hour, over the whole run and over its second half, after warm-up), the size of
every file in the server's log folder, and the workers' PIDs (restarts). Reported: requests sent,
answered, errors by class and unanswered. Passing means every request was answered, the only
errors were "Worker died" answers to requests in flight on a killed worker (at most one per kill
and batch slot), and every model had all its workers back at the end. JSON to ``--out`` and a
human summary on stdout; exit status 1 when the run did not pass.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import loadgen, models, paced, procstat, servers
from benchmarks.lifecycle import describe
from benchmarks.scenarios import MLP_BODY

MODELS = {"echo": b"x", "mlp": MLP_BODY}
WORKER_DIED = "worker died (request in flight on a killed worker)"


def classify(status: int, raw: bytes) -> str:
    if b"Worker died" in raw:
        return WORKER_DIED
    message = raw.split(b"\r\n\r\n", 1)[-1][:120].decode("utf-8", "replace")
    return f"HTTP {status}: {message}"


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, in value per hour."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mt) * (v - mv) for t, v in points) / var * 3600.0


def frontend_pid(srv: servers.Server) -> int:
    java = [p.pid for p in procstat.process_tree(srv.pid) if procstat.is_frontend(p)]
    if not java:
        raise servers.ServerError("no frontend JVM in the server's process tree")
    return java[0]


def ready_workers(srv: servers.Server) -> dict[str, list[int]]:
    return {m: [w["pid"] for w in describe(srv, m) if w.get("status") == "READY"] for m in MODELS}


class Sampler(threading.Thread):
    """Frontend RSS and fds, log sizes and worker PIDs, every ``every`` seconds."""

    def __init__(self, srv: servers.Server, every: float) -> None:
        super().__init__(daemon=True)
        self.srv, self.every = srv, every
        self.jvm = frontend_pid(srv)
        self.samples: list[dict[str, Any]] = []
        self.pids_seen: dict[str, set[int]] = {m: set(p) for m, p in ready_workers(srv).items()}
        self.initial = {m: len(p) for m, p in self.pids_seen.items()}
        self.stop = threading.Event()
        self.t0 = time.monotonic()

    def sample(self) -> None:
        rss = next((p.rss_mb for p in procstat.process_tree(self.jvm) if p.pid == self.jvm), 0.0)
        fds = len(os.listdir(f"/proc/{self.jvm}/fd"))
        try:
            for model, pids in ready_workers(self.srv).items():
                self.pids_seen[model].update(pids)
        except (OSError, servers.ServerError):
            pass  # describe is best effort here: the figures below do not depend on it
        self.samples.append({"t_s": round(time.monotonic() - self.t0, 1), "rss_mb": round(rss, 1), "fds": fds,
                             "logs_bytes": sum(log_sizes(self.srv).values())})

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.sample()

    def restarts(self) -> dict[str, int]:
        return {m: len(p) - self.initial[m] for m, p in self.pids_seen.items()}


class Killer(threading.Thread):
    """SIGKILLs a READY worker of a random model every ``lo``..``hi`` seconds: only PIDs that
    the describe API lists and that are in this server's process tree."""

    def __init__(self, srv: servers.Server, lo: float, hi: float, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.srv, self.lo, self.hi, self.rng = srv, lo, hi, rng
        self.kills: list[dict[str, Any]] = []
        self.skipped = 0  # rounds with no READY worker to kill (all restarting)
        self.stop = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(self.lo, self.hi)):
            model = self.rng.choice(sorted(MODELS))
            try:
                pids = [w["pid"] for w in describe(self.srv, model) if w.get("status") == "READY"]
            except (OSError, servers.ServerError):
                pids = []
            mine = {p.pid for p in procstat.process_tree(self.srv.pid)}
            pids = [p for p in pids if p in mine]
            if not pids:
                self.skipped += 1
                continue
            victim = self.rng.choice(pids)
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.kills.append({"t_s": round(time.monotonic() - self.t0, 1), "model": model, "pid": victim})


def log_sizes(srv: servers.Server) -> dict[str, int]:
    logs = srv.dir / "logs"
    out = {str(p.relative_to(logs)): p.stat().st_size for p in sorted(logs.rglob("*")) if p.is_file()}
    out["(stdout.log)"] = srv.stdout_path.stat().st_size if srv.stdout_path.exists() else 0
    return out


async def _peak(port: int, seconds: float, concurrency: int) -> dict[str, float]:
    runs = await asyncio.gather(*(loadgen.run_load(port, f"/predictions/{m}", body=b, concurrency=concurrency,
                                                   duration_s=seconds) for m, b in MODELS.items()))
    return {m: r.rps for m, r in zip(MODELS, runs, strict=True)}


async def _drive(port: int, rates: dict[str, float], seconds: float, connections: int) -> dict[str, paced.PacedResult]:
    runs = await asyncio.gather(*(paced.run_paced(port, f"/predictions/{m}", MODELS[m], rates[m], seconds, classify,
                                                  connections=connections) for m in MODELS))
    return dict(zip(MODELS, runs, strict=True))


def wait_all_ready(srv: servers.Server, workers: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(len(p) >= workers for p in ready_workers(srv).values()):
            return True
        time.sleep(0.5)
    return False


def trend(samples: list[dict[str, Any]], key: str) -> dict[str, float]:
    points = [(s["t_s"], s[key]) for s in samples]
    half = [p for p in points if p[0] >= points[-1][0] / 2] if points else []
    values = [v for _, v in points] or [0]
    return {"first": values[0], "last": values[-1], "min": min(values), "max": max(values),
            "slope_per_hour": round(slope_per_hour(points), 2),
            "slope_per_hour_second_half": round(slope_per_hour(half), 2)}


def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = servers.BENCH / "soak"
    store = work / "store"
    work.mkdir(parents=True, exist_ok=True)
    for spec in models.base_specs(work):
        models.build_tserve(spec, store)
    servers.snapshot_tserve()  # the server runs from a copy: a jar rebuilt meanwhile cannot break it
    kind = servers.kinds()["tserve"]
    config = {"default_workers_per_model": str(args.workers)}
    with servers.Server(kind, store, models=[f"{m}={m}.mar" for m in MODELS], config=config) as srv:
        srv.wait_ready(timeout=300)
        for m, body in MODELS.items():
            srv.wait_prediction(m, body, timeout=300)
        if not wait_all_ready(srv, args.workers, 300):
            raise servers.ServerError(f"the models did not get {args.workers} READY workers each")
        asyncio.run(_peak(srv.inference_port, min(3.0, args.peak_s), args.concurrency))  # warm-up (JIT, pools)
        peak = asyncio.run(_peak(srv.inference_port, args.peak_s, args.concurrency))
        rates = {m: max(1.0, args.load * r) for m, r in peak.items()}
        print(f"peak (both models at once, c={args.concurrency} each): "
              + ", ".join(f"{m} {r:.0f} req/s" for m, r in peak.items())
              + f"; driving {args.load:.0%}: " + ", ".join(f"{m} {r:.0f} req/s" for m, r in rates.items()), flush=True)
        sampler = Sampler(srv, args.sample_s)
        killer = Killer(srv, args.kill_min, args.kill_max, random.Random(args.seed))
        sampler.sample()
        sampler.start()
        killer.start()
        t0 = time.monotonic()
        try:
            results = asyncio.run(_drive(srv.inference_port, rates, args.duration, args.connections))
        finally:
            killer.stop.set()
            killer.join()
        driven_s = time.monotonic() - t0
        recovered = wait_all_ready(srv, args.workers, 120)
        sampler.stop.set()
        sampler.join()
        sampler.sample()
        srv._check_alive()
        return {
            "duration_s": round(driven_s, 1), "load": args.load, "workers_per_model": args.workers,
            "peak_rps": {m: round(r, 1) for m, r in peak.items()}, "target_rps": {m: round(r, 1) for m, r in rates.items()},
            "requests": {m: r.summary(driven_s) for m, r in results.items()},
            "kills": len(killer.kills), "kills_by_model": {m: sum(k["model"] == m for k in killer.kills) for m in MODELS},
            "kill_rounds_without_ready_worker": killer.skipped,
            "restarts_observed": sampler.restarts(), "workers_back_at_end": recovered,
            "frontend_rss_mb": trend(sampler.samples, "rss_mb"), "frontend_fds": trend(sampler.samples, "fds"),
            "logs_bytes": trend(sampler.samples, "logs_bytes"), "log_files_at_end": log_sizes(srv),
            "samples": sampler.samples, "kill_log": killer.kills,
        }


def verdict(report: dict[str, Any]) -> list[str]:
    """What failed (empty: the soak passed)."""
    problems = []
    for m, r in report["requests"].items():
        if r["unanswered"]:
            problems.append(f"{m}: unanswered requests {r['unanswered']}")
        other = {k: v for k, v in r["errors"].items() if k != WORKER_DIED}
        if other:
            problems.append(f"{m}: errors other than a killed worker's in-flight request: {other}")
        if r["errors"].get(WORKER_DIED, 0) > report["kills_by_model"][m]:
            problems.append(f"{m}: {r['errors'][WORKER_DIED]} 'Worker died' answers for {report['kills_by_model'][m]} kills "
                            "(batch size 1: at most one request is in flight on a worker)")
    if not report["workers_back_at_end"]:
        problems.append("not every model had all its workers READY again within 120 s of the end")
    return problems


def summary(report: dict[str, Any]) -> str:
    rss, fds, logs = report["frontend_rss_mb"], report["frontend_fds"], report["logs_bytes"]
    lines = [f"soak: {report['duration_s']:.0f} s at {report['load']:.0%} of peak, {report['workers_per_model']} workers per model, "
             f"{report['kills']} workers SIGKILLed, restarts seen {report['restarts_observed']}"]
    for m, r in report["requests"].items():
        lines.append(f"  {m}: target {report['target_rps'][m]} req/s (peak {report['peak_rps'][m]}), sent {r['sent']}, "
                     f"answered {r['answered']} (ok {r['ok']}), errors {r['errors'] or 0}, unanswered {r['unanswered'] or 0}, "
                     f"late {r['late']}, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms")
    lines.append(f"  frontend RSS {rss['first']} -> {rss['last']} MB (max {rss['max']}), slope {rss['slope_per_hour']} MB/h "
                 f"(second half {rss['slope_per_hour_second_half']} MB/h)")
    lines.append(f"  frontend fds {fds['first']} -> {fds['last']} (max {fds['max']}), slope {fds['slope_per_hour']}/h "
                 f"(second half {fds['slope_per_hour_second_half']}/h)")
    lines.append(f"  log folder {logs['first']} -> {logs['last']} bytes, {logs['slope_per_hour'] / 2**20:.1f} MiB/h; files at the end: "
                 + ", ".join(f"{k} {v}" for k, v in report["log_files_at_end"].items()))
    problems = report["problems"]
    lines.append("  PASS" if not problems else "  FAIL: " + "; ".join(problems))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hostile"]:  # issues 27 and 43: hostile classes, the storm, SIGTERM under load
        from benchmarks import hostile_suite

        return hostile_suite.main(argv[1:])
    ap = argparse.ArgumentParser(prog="benchmarks.soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds of load with kills (default 1800)")
    ap.add_argument("--load", type=float, default=0.7, help="fraction of the measured peak to send (default 0.7)")
    ap.add_argument("--peak-s", type=float, default=10.0, help="seconds of the peak measurement (default 10)")
    ap.add_argument("--concurrency", type=int, default=8, help="connections per model for the peak (default 8)")
    ap.add_argument("--connections", type=int, default=32, help="connections per model under paced load (default 32)")
    ap.add_argument("--workers", type=int, default=2, help="workers per model (default 2)")
    ap.add_argument("--kill-min", type=float, default=2.0, help="least seconds between kills (default 2)")
    ap.add_argument("--kill-max", type=float, default=6.0, help="most seconds between kills (default 6)")
    ap.add_argument("--sample-s", type=float, default=5.0, help="seconds between samples (default 5)")
    ap.add_argument("--seed", type=int, default=16, help="seed of the kill schedule (default 16)")
    ap.add_argument("--out", default=str(servers.BENCH / "soak.json"), help="JSON report (default .bench/soak.json)")
    args = ap.parse_args(argv)
    if not 0 < args.load <= 1 or args.duration <= 0 or not 0 < args.kill_min <= args.kill_max:
        ap.error("need 0 < --load <= 1, --duration > 0 and 0 < --kill-min <= --kill-max")
    report = soak(args)
    report["problems"] = verdict(report)
    report["command"] = " ".join(["python -m benchmarks.soak", *argv])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(summary(report))
    print(f"report: {args.out}")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
