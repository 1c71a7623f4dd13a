"""Hostile soak (issue 27): valid predictions mixed with every hostile class at once, then checks.

    .venv/bin/python -m benchmarks.soak hostile --only classes [--duration 60]   # benchmarks/hostile_suite.py

Starts one tserve with ``torchserve --start`` (token auth on, two workers of an echo model built
from benchmarks/handlers/hostile_soak_handler.py, a private TMPDIR so its pid file and sockets are
its own) and for ``--duration`` seconds runs, side by side, ``--clients`` clients sending valid
predictions on keep-alive connections and one client per hostile class, each paced by
``--pause`` seconds (bounded load):

  deep_json       a 2 KB ``application/json`` body nested 1000 levels (issue 27 item 1)
  wrong_key       a prediction with a wrong bearer key (item 2: must not lock out valid clients)
  huge_form       a 6 MB ``application/x-www-form-urlencoded`` body of 1.5 M fields (item 3)
  two_cl          two Content-Length values, then a request on the same connection (item 4)
  bad_chunk       a chunk size that is not hex, then a request on the same connection (item 4)
  pipelined       a slow and a fast prediction in one write: answers must come in order (item 5)
  cl_te           Content-Length with chunked and a request after the chunked end (item 6)
  forged_version  archives whose manifest modelVersion holds CR/LF, ``../`` or 100 KB (item 7)
  bad_allowed_url ``.../ok/%2e%2e/bad/x.mar`` against an ``/ok/.*`` allowed_urls rule (item 9)

Each class counts the answers that show the behaviour issue 27 asks for ("expected"). Then:
``/ping`` answers 200, a normal prediction answers 200 (retried up to 65 s: a failure throttle
may hold the address for the rest of its minute), the frontend's RSS is within 20 % of its value
10 % into the load (after the JIT and heap warm-up; the value before the load is reported too),
``torchserve --stop``, run while ``--stop-clients`` (16) keep-alive clients predict, gives no
connection reset and no 503 without ``Connection: close`` (issue 43; benchmarks/stop_under_load.py),
and after it no process of the server is left (every
process that carried its TMPDIR, and the handlers' SIGTERM-ignoring children). A summary table on
stdout, JSON to ``--out``; exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import models, rawhttp, servers, stop_under_load
from ts.utils.free_ports import free_port, free_port_block
from ts.utils.process_tree import process_alive

DEEP = b"[" * 1000 + b"]" * 1000
FORM = b"a=1&" * 1_500_000  # 6 MB, 1.5 M fields
FORGED_VERSIONS = ("1\nFORGED [INFO] admin logged in", "../../x", "9" * 100_000)
ALLOWED = "http://127\\.0\\.0\\.1:1/ok/.*"
BAD_URL = "http://127.0.0.1:1/ok/%2e%2e/bad/x.mar"
# which branch of issue 27 fixes the class (docs/reliability.md)
CLOSE_WAIT_S = 0.3
WARM_UP = 0.1  # the RSS baseline is taken this far into the load
FIXED_BY = {"deep_json": "hardworker", "wrong_key": "HTTP hardening", "huge_form": "HTTP hardening",
            "two_cl": "HTTP hardening", "bad_chunk": "HTTP hardening", "pipelined": "HTTP hardening",
            "cl_te": "HTTP hardening", "forged_version": "hardworker", "bad_allowed_url": "hardworker"}


def read_answers(sock: socket.socket, want: int, timeout: float) -> tuple[list[tuple[int, bytes]], str]:
    """Up to ``want`` HTTP answers (status, body) and how the connection ended: closed/open (a
    server that closes after its answer does so at once: ``CLOSE_WAIT_S``)."""
    got = rawhttp.read(sock, expect=want, timeout=timeout, linger=CLOSE_WAIT_S)
    return [(r.status, r.body) for r in got.responses[:want]], "closed" if got.closed else "open"


class Target:
    """The running server: ports, keys, raw requests."""

    def __init__(self, inference: int, management: int, keys: dict[str, str]) -> None:
        self.inference, self.management, self.keys = inference, management, keys

    def raw(self, port: int, payload: bytes, want: int, timeout: float = 5.0) -> tuple[list[tuple[int, bytes]], str]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(payload)
            return read_answers(s, want, timeout)

    def auth(self, api: str = "inference") -> bytes:
        return b"Authorization: Bearer " + self.keys[api].encode() + b"\r\n"

    def post(self, path: str, body: bytes, headers: bytes = b"", api: str = "inference") -> bytes:
        return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + self.auth(api) + headers
                + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    def ping_after(self) -> bytes:
        """A second request on the same connection (no key: any answer to it counts)."""
        return b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def outcome(answers: list[tuple[int, bytes]], end: str) -> str:
    """``400 closed``: the statuses read, then whether the server closed the connection."""
    return ("+".join(str(s) for s, _ in answers) if answers else "no answer") + " " + end


# ------------------------------------------------------------------------ the hostile classes
# each sends one probe and returns (outcome label, whether it shows what issue 27 asks for)

def deep_json(t: Target) -> tuple[str, bool]:
    a, end = t.raw(t.inference, t.post("/predictions/echo", DEEP, b"Content-Type: application/json\r\n"), 1, 30)
    return outcome(a, end), bool(a) and a[0] == (200, DEEP)


def wrong_key(t: Target) -> tuple[str, bool]:
    payload = b"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\nContent-Length: 1\r\n\r\nx"
    a, end = t.raw(t.inference, payload, 1)
    return outcome(a, end), bool(a) and a[0][0] in (401, 429)


def huge_form(t: Target) -> tuple[str, bool]:
    a, end = t.raw(t.inference, t.post("/predictions/echo", FORM, b"Content-Type: application/x-www-form-urlencoded\r\n"),
                   1, 60)
    return outcome(a, end), bool(a) and a[0][0] in (400, 413)


def two_cl(t: Target) -> tuple[str, bool]:
    payload = (b"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n" + t.auth() + b"Content-Length: 1\r\n"
               b"Content-Length: 2\r\n\r\nxy" + t.ping_after())
    a, end = t.raw(t.inference, payload, 2, 3)
    return outcome(a, end), bool(a) and a[0][0] == 400 and len(a) == 1 and end == "closed"


def bad_chunk(t: Target) -> tuple[str, bool]:
    payload = (b"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n" + t.auth() + b"Transfer-Encoding: chunked\r\n\r\n"
               b"zz\r\nhello\r\n0\r\n\r\n" + t.ping_after())
    a, end = t.raw(t.inference, payload, 2, 3)
    return outcome(a, end), bool(a) and a[0][0] == 400 and len(a) == 1 and end == "closed"


def pipelined(t: Target) -> tuple[str, bool]:
    a, end = t.raw(t.inference, t.post("/predictions/echo", b"sleep:0.3") + t.post("/predictions/echo", b"fast"), 2, 10)
    in_order = [b for _, b in a] == [b"sleep:0.3", b"fast"]
    return ("in order" if in_order else "out of order" if len(a) == 2 else outcome(a, end)), in_order


def cl_te(t: Target) -> tuple[str, bool]:
    chunked = b"5\r\nhello\r\n0\r\n\r\n"
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    payload = (b"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n" + t.auth() + b"Content-Length: "
               + str(len(chunked)).encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + smuggled)
    a, end = t.raw(t.inference, payload, 2, 3)
    return outcome(a, end), len(a) <= 1 and end == "closed"  # the bytes after the chunked end are no request


def forged_version(t: Target, archives: list[str], n: list[int]) -> tuple[str, bool]:
    n[0] += 1
    name = archives[n[0] % len(archives)]
    a, end = t.raw(t.management, t.post(f"/models?url={name}&synchronous=true", b"", api="management"), 1, 60)
    return outcome(a, end), bool(a) and a[0][0] == 400 and b"Invalid model version" in a[0][1]


def bad_allowed_url(t: Target) -> tuple[str, bool]:
    from urllib.parse import quote

    a, end = t.raw(t.management, t.post("/models?url=" + quote(BAD_URL, safe=""), b"", api="management"), 1, 30)
    return outcome(a, end), bool(a) and a[0][0] == 400 and b"dot segment" in a[0][1]


def valid(t: Target, n: int) -> tuple[str, bool]:
    body = b"valid-%d" % n
    a, _ = t.raw(t.inference, t.post("/predictions/echo", body), 1, 30)
    return (str(a[0][0]) if a else "no answer"), bool(a) and a[0] == (200, body)


# ------------------------------------------------------------------------ the run

class Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.expected = 0
        self.outcomes: Counter[str] = Counter()
        self.lock = threading.Lock()

    def add(self, label: str, ok: bool) -> None:
        with self.lock:
            self.sent += 1
            self.expected += ok
            self.outcomes[label] += 1


def drive(probe: Callable[[], tuple[str, bool]], tally: Tally, until: float, pause: float) -> None:
    while time.monotonic() < until:
        try:
            tally.add(*probe())
        except OSError as exc:
            tally.add(f"{type(exc).__name__}", False)
        time.sleep(pause)


def forged_archives(store: Path) -> list[str]:
    names = []
    for i, version in enumerate(FORGED_VERSIONS):
        target = store / f"forged{i}.mar"
        with zipfile.ZipFile(store / "echo.mar") as src, zipfile.ZipFile(target, "w") as out:
            for item in src.infolist():
                data = src.read(item)
                if item.filename == "MAR-INF/MANIFEST.json":
                    manifest = json.loads(data)
                    manifest["model"].update(modelName=f"forged{i}", modelVersion=version)
                    data = json.dumps(manifest).encode()
                out.writestr(item, data)
        names.append(target.name)
    return names


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def carrying(marker: bytes) -> set[int]:
    """Live processes whose environment holds ``marker`` (the server's private TMPDIR)."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker in Path(f"/proc/{name}/environ").read_bytes() and process_alive(int(name)):
                    found.add(int(name))
            except OSError:
                pass
    return found


def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work)
    store, tmp, logs = work / "store", work / "tmp", work / "logs"
    for d in (store, tmp, logs):
        d.mkdir(parents=True, exist_ok=True)
    spec = models.ModelSpec("echo", str(Path(models.HANDLERS) / "hostile_soak_handler.py"))
    models.build_tserve(spec, store)
    archives = forged_archives(store)
    inference, management = free_port(), free_port()
    config = {"inference_address": f"http://127.0.0.1:{inference}", "management_address": f"http://127.0.0.1:{management}",
              "metrics_address": f"http://127.0.0.1:{free_port()}", "grpc_inference_port": str(free_port()),
              "grpc_management_port": str(free_port()), "initial_worker_port": str(free_port_block(16)),
              "default_workers_per_model": "2", "allowed_urls": ALLOWED, "enable_model_api": "true",
              "disable_system_metrics": "true"}
    (work / "config.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    env = {**os.environ, "TMPDIR": str(tmp), "LOG_LOCATION": str(logs), "METRICS_LOCATION": str(logs),
           "PYTHONPATH": f"{servers.REPO}:{servers.REPO / 'model-archiver'}", "HF_HUB_OFFLINE": "1"}
    env.pop("TS_CONFIG_FILE", None)
    cli = [sys.executable, "-m", "ts.model_server"]
    start = subprocess.run([*cli, "--start", "--model-store", str(store), "--ts-config", str(work / "config.properties"),
                            "--ncs", "--models", "echo=echo.mar"], cwd=work, env=env, capture_output=True, text=True,
                           timeout=300)
    if start.returncode != 0:
        raise servers.ServerError(f"torchserve --start failed: {start.stdout[-2000:]}{start.stderr[-2000:]}")
    frontend = int((tmp / ".model_server.pid").read_text())
    marker = b"TMPDIR=" + str(tmp).encode() + b"\0"
    stops: list[subprocess.CompletedProcess[str]] = []
    report: dict[str, Any] = {"duration_s": args.duration, "clients": args.clients, "pause_s": args.pause,
                              "skipped": sorted(args.skip)}
    try:
        keys = json.loads((work / "key_file.json").read_text())
        target = Target(inference, management, {k: v["key"] for k, v in keys.items() if isinstance(v, dict)})
        deadline = time.monotonic() + 120
        while not valid(target, 0)[1]:
            if time.monotonic() > deadline:
                raise servers.ServerError("no valid prediction within 120 s of the start")
            time.sleep(0.2)
        children = {json.loads(target.raw(inference, target.post("/predictions/echo", b"spawn"), 1, 30)[0][0][1])["pid"]
                    for _ in range(8)}
        rss_start = rss_mb(frontend)
        counter = [0]
        probes: dict[str, Callable[[], tuple[str, bool]]] = {
            "deep_json": lambda: deep_json(target), "wrong_key": lambda: wrong_key(target),
            "huge_form": lambda: huge_form(target), "two_cl": lambda: two_cl(target),
            "bad_chunk": lambda: bad_chunk(target), "pipelined": lambda: pipelined(target),
            "cl_te": lambda: cl_te(target), "forged_version": lambda: forged_version(target, archives, counter),
            "bad_allowed_url": lambda: bad_allowed_url(target)}
        probes = {name: probe for name, probe in probes.items() if name not in args.skip}
        tallies = {name: Tally() for name in ["valid", *probes]}
        until = time.monotonic() + args.duration
        threads = [threading.Thread(target=drive, args=(lambda i=i: valid(target, i), tallies["valid"], until, 0.0))
                   for i in range(args.clients)]
        threads += [threading.Thread(target=drive, args=(probe, tallies[name], until, args.pause))
                    for name, probe in probes.items()]
        seen = set(carrying(marker))
        for th in threads:
            th.start()
        time.sleep(args.duration * WARM_UP)  # the JVM's JIT and heap settle under the mixed load
        rss_warm = rss_mb(frontend)
        while any(th.is_alive() for th in threads):
            seen |= carrying(marker)
            time.sleep(2)
        rss_end = rss_mb(frontend)
        ping = target.raw(inference, b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n" + target.auth() + b"\r\n", 1)[0]
        waited = time.monotonic()
        while not (ok := valid(target, 1)[1]) and time.monotonic() - waited < 65:
            time.sleep(1)
        report.update(classes={n: {"sent": t.sent, "expected": t.expected, "outcomes": dict(t.outcomes.most_common(4)),
                                   "fixed_by": FIXED_BY.get(n, "")} for n, t in tallies.items()},
                      ping=ping[0][0] if ping else None, normal_prediction=ok,
                      normal_prediction_wait_s=round(time.monotonic() - waited, 1),
                      frontend_rss_mb={"before_load": round(rss_start, 1), "start": round(rss_warm, 1),
                                       "end": round(rss_end, 1),
                                       "change_pct": round(100 * (rss_end - rss_warm) / rss_warm, 1)})
        seen |= carrying(marker) | children
        # the stop itself under load (issue 43): SIGTERM while --stop-clients keep-alive clients predict
        under_load = stop_under_load.load(
            inference, args.stop_clients, 2.0, lambda: stops.append(subprocess.run(
                [*cli, "--stop"], cwd=work, env=env, capture_output=True, text=True, timeout=120)),
            headers={"Authorization": "Bearer " + target.keys["inference"]})
        report["stop_under_load"] = {"clients": args.stop_clients, "outcomes": dict(under_load.most_common()),
                                     "problems": stop_under_load.broken(under_load)}
    finally:
        if not stops:
            stops.append(subprocess.run([*cli, "--stop"], cwd=work, env=env, capture_output=True, text=True, timeout=120))
    stop = stops[0]
    report["stop"] = stop.stdout.strip().splitlines()[-1:] if stop.stdout else []
    time.sleep(1)
    left = sorted(p for p in seen | carrying(marker) if process_alive(p))
    for pid in left:  # ours: report them, then end them
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    report.update(processes_seen=len(seen), processes_left_after_stop=left)
    return report


def verdict(r: dict[str, Any]) -> list[str]:
    problems = []
    if r.get("ping") != 200:
        problems.append(f"/ping answered {r.get('ping')} after the load")
    if not r.get("normal_prediction"):
        problems.append("no normal prediction answered 200 within 65 s of the load")
    if abs(r["frontend_rss_mb"]["change_pct"]) > 20:
        problems.append(f"frontend RSS changed {r['frontend_rss_mb']['change_pct']} % (more than 20 %)")
    if r["processes_left_after_stop"]:
        problems.append(f"processes left after --stop: {r['processes_left_after_stop']}")
    problems += [f"--stop under load: {p}" for p in r.get("stop_under_load", {}).get("problems", [])]
    return problems


def summary(r: dict[str, Any]) -> str:
    lines = [f"hostile soak: {r['duration_s']:.0f} s, {r['clients']} valid clients + one client per hostile class "
             f"(pause {r['pause_s']} s)" + (f", skipped: {', '.join(r['skipped'])}" if r["skipped"] else ""),
             f"  {'class':<16}{'sent':>7}{'expected':>10}  {'fixed by':<16}outcomes"]
    for name, c in r["classes"].items():
        outcomes = ", ".join(f"{k} x{v}" for k, v in c["outcomes"].items())
        lines.append(f"  {name:<16}{c['sent']:>7}{c['expected']:>10}  {c['fixed_by'] or '-':<16}{outcomes}")
    rss = r["frontend_rss_mb"]
    lines.append(f"  /ping {r['ping']}; normal prediction {'200' if r['normal_prediction'] else 'FAILED'} after "
                 f"{r['normal_prediction_wait_s']} s; frontend RSS {rss['start']} -> {rss['end']} MB ({rss['change_pct']:+} %; "
                 f"{rss['before_load']} MB before the load); "
                 f"{r['processes_seen']} server processes seen, left after --stop: {r['processes_left_after_stop'] or 'none'}")
    if "stop_under_load" in r:
        sul = r["stop_under_load"]
        lines.append(f"  --stop under load ({sul['clients']} keep-alive clients): "
                     + ", ".join(f"{k} x{v}" for k, v in sul["outcomes"].items()) + " (no reset allowed)")
    lines.append("  PASS" if not r["problems"] else "  FAIL: " + "; ".join(r["problems"]))
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The hostile classes' options (``benchmarks.soak hostile``: benchmarks/hostile_suite.py)."""
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    ap.add_argument("--clients", type=int, default=4, help="clients sending valid predictions (default 4)")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between two probes of a hostile class (default 0.2)")
    ap.add_argument("--skip", action="append", default=[], choices=sorted(FIXED_BY),
                    help="leave a hostile class out (repeatable): e.g. wrong_key, whose lockout hides the rest on main")
    ap.add_argument("--stop-clients", type=int, default=16,
                    help="keep-alive clients predicting while the server is stopped (default 16; issue 43)")
    ap.add_argument("--work", default=str(servers.BENCH / "hostile-soak"), help="work folder (default .bench/hostile-soak)")
