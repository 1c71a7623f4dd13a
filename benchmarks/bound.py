"""The physical bound of the echo path on this machine (issue 18), measured in the same run as tserve.

- **frontend bound**: ``bound/FrontendBound.java``, a Netty HTTP server on the frontend's own jar
  (same Netty classes, event loop groups and codec/aggregator pipeline) that answers every POST
  with a fixed body — no worker; compiled here with ``javac`` into ``.bench/bound-classes``.
- **worker bound**: ``limit.py``'s bare loop at batch 8 (frames answered with ``ts.protocol.codec``,
  no frontend, no handler API).
- **combined bound**: both parts share the same cores, so a request costs at least the CPU time of
  both plus the load generator's: ``cores / (frontend-bound CPU + client CPU + bare-loop CPU)`` per
  request (the harmonic combination of each part's throughput had it the machine alone).

Each round measures, in turn (order reversed every round), the frontend bound, the bare loop, tserve
and TorchServe (quiet log4j2) with wrk, echo batch 8 / 5 ms, c=32; the result is the median of the
rounds' figures (the machine is shared and noisy: ratios within one round, medians across rounds).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks import limit, procstat, servers, wrk
from benchmarks.servers import BENCH, Server, ServerError, ServerKind, free_port

SOURCE = Path(__file__).resolve().parent / "bound" / "FrontendBound.java"
CLASSES = BENCH / "bound-classes"
CONNECTIONS = 32
PATH = "/predictions/echo_b8"


def compile_bound(jar: Path) -> Path:
    """javac the bound server against ``jar`` when the class is missing or older than its inputs."""
    out = CLASSES / "FrontendBound.class"
    if out.exists() and out.stat().st_mtime >= max(SOURCE.stat().st_mtime, jar.stat().st_mtime):
        return CLASSES
    CLASSES.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["javac", "-d", str(CLASSES), "-cp", str(jar), str(SOURCE)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise ServerError(f"javac {SOURCE.name} failed: {res.stderr.strip()[-1000:]}")
    return CLASSES


class BoundServer:
    """The frontend bound, started with tserve's default JVM flags."""

    def __init__(self, jar: Path) -> None:
        from ts.model_server import DEFAULT_VMARGS

        self.port = free_port()
        cp = f"{jar}{os.pathsep}{compile_bound(jar)}"
        self.proc = subprocess.Popen(["java", *DEFAULT_VMARGS, "-cp", cp, "FrontendBound", str(self.port)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("bound ready"):
            self.stop()
            raise ServerError(f"the frontend bound did not start: {line.strip()!r}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def __enter__(self) -> BoundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wrk_cell(pid: int, port: int, duration_s: int) -> dict[str, float]:
    """wrk c=32 on ``PATH`` with the server tree's and wrk's own CPU time per request."""
    cpu0, kids0 = procstat.tree_cpu_s(pid), resource.getrusage(resource.RUSAGE_CHILDREN)
    cell = wrk.run_wrk(port, PATH, CONNECTIONS, duration_s)
    cpu1, kids1 = procstat.tree_cpu_s(pid), resource.getrusage(resource.RUSAGE_CHILDREN)
    n = max(cell["rps"] * duration_s, 1.0)
    client = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    return {**cell, "server_cpu_us_per_req": round((cpu1 - cpu0) / n * 1e6, 1),
            "client_cpu_us_per_req": round(client / n * 1e6, 1)}


def combined_rps(frontend: dict[str, float], bare_worker_cpu_us: float, cores: int) -> float:
    """Requests/s if each request cost exactly the bound's frontend, the client's and the bare
    loop's CPU time, all on the same ``cores``."""
    per_req_us = frontend["server_cpu_us_per_req"] + frontend["client_cpu_us_per_req"] + bare_worker_cpu_us
    return cores * 1e6 / per_req_us


# the servers this scenario measures, in its table's order (tserve-quiet: TorchServe-quiet's logging)
KINDS = ("tserve", "tserve-quiet", "torchserve-quiet")


def run(kinds: list[ServerKind], stores: dict[str, Path], duration_s: float, rounds: int = 3
        ) -> dict[str, Any]:
    if not wrk.available():
        raise ServerError("the bound scenario needs wrk (Debian package wrk)")
    seconds = max(2, int(duration_s))
    cores = os.cpu_count() or 1
    jar = servers.SNAPSHOT / "ts" / "frontend" / "tserve-frontend.jar"
    running: dict[str, Server] = {}
    per_round: list[dict[str, Any]] = []
    try:
        for kind in kinds:
            running[kind.name] = srv = Server(kind, stores[kind.name])
            srv.start()
            srv.wait_ready()
            srv.register("echo.mar", "echo_b8", batch_size=8, delay_ms=5)
            srv.wait_prediction("echo_b8", b"x")
        with BoundServer(jar) as bound:
            targets: dict[str, tuple[int, int]] = {"frontend_bound": (bound.pid, bound.port)}
            targets.update({name: (srv.pid, srv.inference_port) for name, srv in running.items()})
            for _pid, port in targets.values():  # JIT warm-up: nothing is timed before
                wrk.run_wrk(port, PATH, CONNECTIONS, seconds)
            steps = [*targets, "bare_loop"]
            for r in range(rounds):
                got: dict[str, Any] = {}
                for step in (steps if r % 2 == 0 else steps[::-1]):
                    if step == "bare_loop":
                        lim = limit.run_limit(8, 1, float(seconds), worker="bare")
                        got[step] = {"rps": round(lim.rps, 1),
                                     "worker_cpu_us_per_req": round(lim.worker_cpu_us_per_req, 2)}
                    else:
                        got[step] = wrk_cell(*targets[step], seconds)
                failed = [n for n in targets if got[n]["rps"] <= 0]
                if failed:  # e.g. wrk saw only socket errors: the round says nothing
                    print(f"  round {r + 1}: no answers from {', '.join(failed)} ({got[failed[0]]}); "
                          "round left out", flush=True)
                    continue
                got["combined_rps"] = round(combined_rps(got["frontend_bound"],
                                                         got["bare_loop"]["worker_cpu_us_per_req"], cores), 1)
                got["loadavg"] = round(os.getloadavg()[0], 2)
                per_round.append(got)
                print(f"  round {r + 1}: bound {got['frontend_bound']['rps']:.0f} req/s, bare loop "
                      f"{got['bare_loop']['worker_cpu_us_per_req']:.1f} µs/req, combined "
                      f"{got['combined_rps']:.0f}; " + ", ".join(
                          f"{n} {got[n]['rps']:.0f}" for n in running), flush=True)
                time.sleep(0.5)
    finally:
        for srv in running.values():
            srv.stop()
    if not per_round:
        raise ServerError("every round of the bound scenario failed (see the lines above)")
    return summarize(per_round, list(running))


def summarize(per_round: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Medians across rounds of every figure and of the per-round fractions."""
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    out: dict[str, Any] = {"rounds": per_round, "combined_rps": med([r["combined_rps"] for r in per_round]),
                           "frontend_bound_rps": med([r["frontend_bound"]["rps"] for r in per_round]),
                           "bare_loop_cpu_us": med([r["bare_loop"]["worker_cpu_us_per_req"] for r in per_round])}
    for name in names:
        out[name] = {"rps": med([r[name]["rps"] for r in per_round]),
                     "server_cpu_us_per_req": med([r[name]["server_cpu_us_per_req"] for r in per_round]),
                     "of_combined": med([r[name]["rps"] / r["combined_rps"] for r in per_round]),
                     "of_frontend_bound": med([r[name]["rps"] / r["frontend_bound"]["rps"] for r in per_round]),
                     # the same question in CPU time, which a busy machine stretches far less than req/s
                     "bound_cpu_share": med([(r["frontend_bound"]["server_cpu_us_per_req"]
                                              + r["bare_loop"]["worker_cpu_us_per_req"])
                                             / r[name]["server_cpu_us_per_req"] for r in per_round])}
    if "tserve" in names and "torchserve-quiet" in names:
        out["tserve_vs_torchserve"] = med([r["tserve"]["rps"] / r["torchserve-quiet"]["rps"] for r in per_round])
    if "tserve-quiet" in names and "torchserve-quiet" in names:
        out["tserve_quiet_vs_torchserve"] = med([r["tserve-quiet"]["rps"] / r["torchserve-quiet"]["rps"]
                                                 for r in per_round])
    return out


def render(bound: dict[str, Any]) -> list[str]:
    """The bound's table for results.md."""
    if not bound:
        return []
    if "error" in bound:
        return [f"Bound scenario FAILED: {' '.join(bound['error'].split())[:300]}", ""]
    lines = ["The physical bound (benchmarks/bound.py), wrk echo b8/5 ms c32, medians of "
             f"{len(bound['rounds'])} rounds: frontend bound {bound['frontend_bound_rps']:.0f} req/s, "
             f"bare loop {bound['bare_loop_cpu_us']:.1f} µs/req, combined bound {bound['combined_rps']:.0f} req/s.",
             "", "| server | req/s | server CPU µs/req | of combined bound | of frontend bound | "
             "bound's CPU / server's CPU per request |", "|---|---|---|---|---|---|"]
    for name in KINDS:
        s = bound.get(name)
        if s:
            lines.append(f"| {name} | {s['rps']:.0f} | {s['server_cpu_us_per_req']} | {s['of_combined']} | "
                         f"{s['of_frontend_bound']} | {s['bound_cpu_share']} |")
    if "tserve_vs_torchserve" in bound:
        lines.append(f"\ntserve / TorchServe in the same rounds: {bound['tserve_vs_torchserve']}")
    if "tserve_quiet_vs_torchserve" in bound:
        lines.append(f"\ntserve-quiet / TorchServe (both with TorchServe-quiet's log4j2.xml) in the same rounds: "
                     f"{bound['tserve_quiet_vs_torchserve']}")
    lines.append("")
    return lines
