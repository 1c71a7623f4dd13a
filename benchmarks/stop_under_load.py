"""SIGTERM to the frontend under load (issue 43): every request is answered (200), or told 503 with
``Connection: close``; no client sees a connection reset.

    .venv/bin/python -m benchmarks.stop_under_load [--runs 10] [--clients 16] [--transport epoll|nio]

Each run starts one tserve (two workers of the hostile soak's echo model, a private TMPDIR),
runs ``--clients`` threads that each send predictions back to back on a keep-alive connection
(reconnecting after a close), lets the load settle for ``--warm`` seconds, then runs
``torchserve --stop`` (SIGTERM) while the load goes on. A client stops when the port refuses
it. Outcomes, per run: answers by status (a 503 counts as ``503 close`` only with
``Connection: close``), ``reset`` (ECONNRESET or EPIPE: the server's kernel sent a TCP reset),
``closed`` (EOF before an answer: a request sent on a keep-alive connection as the server closed
it, which no server can answer), ``refused``. The invariant: 0 resets and no 503 without
``Connection: close``. ``hostile_soak`` stops its server this way too (``stop_under_load.load``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import models, servers
from ts.utils.free_ports import free_port, free_port_block

RESET = "reset"


def _outcome(conn: http.client.HTTPConnection, body: bytes, headers: dict[str, str] | None = None) -> tuple[str, bool]:
    """One prediction on ``conn``: (outcome, keep the connection)."""
    try:
        conn.request("POST", "/predictions/echo", body=body,
                     headers={"Content-Type": "application/octet-stream", **(headers or {})})
        resp = conn.getresponse()
        resp.read()
    except (ConnectionResetError, BrokenPipeError):
        return RESET, False
    except ConnectionRefusedError:
        return "refused", False
    except (http.client.RemoteDisconnected, http.client.IncompleteRead):
        return "closed", False
    except OSError as exc:  # a timeout, or anything else: named
        return type(exc).__name__, False
    close = (resp.getheader("Connection") or "").lower() == "close"
    label = str(resp.status) + (" close" if resp.status == 503 and close else "")
    return label, not close


def _client(port: int, tally: Counter[str], lock: threading.Lock, until: float, headers: dict[str, str] | None) -> None:
    conn: http.client.HTTPConnection | None = None
    n = 0
    while time.monotonic() < until:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n += 1
        label, keep = _outcome(conn, b"load-%d" % n, headers)
        with lock:
            tally[label] += 1
        if not keep:
            conn.close()
            conn = None
        if label == "refused":
            return


def load(port: int, clients: int, warm_s: float, stop: Callable[[], object], limit_s: float = 120.0,
         headers: dict[str, str] | None = None) -> Counter[str]:
    """``clients`` keep-alive clients on ``port`` (each request with ``headers``, e.g. a token);
    ``stop()`` after ``warm_s`` seconds, while they run. Returns the outcomes over the whole load."""
    tally: Counter[str] = Counter()
    lock = threading.Lock()
    until = time.monotonic() + limit_s
    threads = [threading.Thread(target=_client, args=(port, tally, lock, until, headers), daemon=True) for _ in range(clients)]
    for th in threads:
        th.start()
    time.sleep(warm_s)
    stop()
    for th in threads:
        th.join(limit_s)
    return tally


def broken(tally: Counter[str]) -> list[str]:
    """What breaks the promise: resets, and 503s that keep the connection open."""
    problems = []
    if tally[RESET]:
        problems.append(f"{tally[RESET]} connection resets")
    if tally["503"]:
        problems.append(f"{tally['503']} answers 503 without Connection: close")
    return problems


def one_run(work: Path, clients: int, warm_s: float, transport: str) -> Counter[str]:
    store, tmp = work / "store", work / "tmp"
    for d in (store, tmp):
        d.mkdir(parents=True, exist_ok=True)
    models.build_tserve(models.ModelSpec("echo", str(Path(models.HANDLERS) / "hostile_soak_handler.py")), store)
    inference = free_port()
    config = {"inference_address": f"http://127.0.0.1:{inference}", "management_address": f"http://127.0.0.1:{free_port()}",
              "metrics_address": f"http://127.0.0.1:{free_port()}", "grpc_inference_port": str(free_port()),
              "grpc_management_port": str(free_port()), "initial_worker_port": str(free_port_block(16)),
              "default_workers_per_model": "2", "disable_system_metrics": "true",
              "use_native_io": "true" if transport == "epoll" else "false"}
    (work / "config.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    env = {**os.environ, "TMPDIR": str(tmp), "LOG_LOCATION": str(work / "logs"), "METRICS_LOCATION": str(work / "logs"),
           "PYTHONPATH": f"{servers.REPO}:{servers.REPO / 'model-archiver'}", "HF_HUB_OFFLINE": "1"}
    env.pop("TS_CONFIG_FILE", None)
    cli = [sys.executable, "-m", "ts.model_server"]
    start = subprocess.run([*cli, "--start", "--model-store", str(store), "--ts-config", str(work / "config.properties"),
                            "--ncs", "--disable-token-auth", "--models", "echo=echo.mar"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
    if start.returncode != 0:
        raise servers.ServerError(f"torchserve --start failed: {start.stdout[-2000:]}{start.stderr[-2000:]}")
    stopped: list[subprocess.CompletedProcess[str]] = []
    try:
        deadline = time.monotonic() + 120
        while _outcome(http.client.HTTPConnection("127.0.0.1", inference, timeout=30), b"up")[0] != "200":
            if time.monotonic() > deadline:
                raise servers.ServerError("no prediction answered within 120 s of the start")
            time.sleep(0.2)
        return load(inference, clients, warm_s, lambda: stopped.append(
            subprocess.run([*cli, "--stop"], cwd=work, env=env, capture_output=True, text=True, timeout=120)))
    finally:
        if not stopped:
            subprocess.run([*cli, "--stop"], cwd=work, env=env, capture_output=True, text=True, timeout=120)


def one_report(tally: Counter[str]) -> dict[str, Any]:
    """A run's outcomes and what broke the promise in it."""
    return {"outcomes": dict(tally.most_common()), "problems": broken(tally)}


def line(report: dict[str, Any]) -> str:
    return (", ".join(f"{k} x{v}" for k, v in report["outcomes"].items())
            + ("" if not report["problems"] else "  FAIL: " + "; ".join(report["problems"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.stop_under_load", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--warm", type=float, default=3.0, help="seconds of load before the stop (default 3)")
    ap.add_argument("--transport", choices=["epoll", "nio"], default="epoll")
    ap.add_argument("--work", default=str(servers.BENCH / "stop-under-load"))
    ap.add_argument("--out", default=str(servers.BENCH / "stop_under_load.json"))
    args = ap.parse_args(argv)
    runs = []
    for i in range(args.runs):
        runs.append(one_report(one_run(Path(args.work) / f"run{i}", args.clients, args.warm, args.transport)))
        print(f"run {i + 1}/{args.runs} ({args.transport}, {args.clients} clients): {line(runs[-1])}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"transport": args.transport, "clients": args.clients, "runs": runs}, indent=1))
    failed = sum(1 for r in runs if r["problems"])
    print(f"{args.runs - failed} of {args.runs} runs without a reset or a 503 that keeps the connection")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
