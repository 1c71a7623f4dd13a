"""Profile tserve's hot path under echo load: JFR for the Java frontend, py-spy for the worker.

    bash benchmarks/run.sh --profile [--server tserve] [--seconds 8]

The frontend gets ``-XX:StartFlightRecording`` through the ``vmargs`` config key (the
launcher passes it to the JVM) and is dumped with ``jcmd`` after the load; ``jfr print --json``
is then reduced to the methods that were on-CPU most often (self) and the project methods that
were on the stack most often (inclusive). py-spy samples the worker at the same time. The
summary goes to ``.bench/profile/hotspots.md``; raw files stay beside it.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import loadgen, procstat, servers
from benchmarks.run import build_stores

OUT = servers.BENCH / "profile"
JDK_BIN = Path("/usr/lib/jvm/java-17-openjdk-amd64/bin")
TSERVE_VMARGS = "-XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError"
# JDK 17's "profile" settings sample Java code every 10 ms and skip native frames: too coarse
# for a 10 s echo run. This one samples every millisecond, native (I/O) frames included.
JFC = """<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="tserve-bench" description="hot-path sampling">
  <event name="jdk.ExecutionSample"><setting name="enabled">true</setting>
    <setting name="period">1 ms</setting></event>
  <event name="jdk.NativeMethodSample"><setting name="enabled">true</setting>
    <setting name="period">1 ms</setting></event>
  <event name="jdk.GarbageCollection"><setting name="enabled">true</setting>
    <setting name="threshold">0 ms</setting></event>
</configuration>
"""
PROJECT_PREFIXES = {"tserve": ("org.tserve.",), "torchserve-quiet": ("org.pytorch.serve.",),
                    "torchserve": ("org.pytorch.serve.",)}


def _jdk_tool(name: str) -> str:
    found = shutil.which(name) or (str(JDK_BIN / name) if (JDK_BIN / name).exists() else None)
    if not found:
        raise SystemExit(f"profile: `{name}` not found: install openjdk-17-jdk-headless")
    return found


def _frame_name(frame: dict[str, Any]) -> str:
    method = frame.get("method", {})
    cls = method.get("type", {}).get("name", "?").replace("/", ".")
    return f"{cls}.{method.get('name', '?')}"


def summarize_jfr(jfr_file: Path, prefixes: tuple[str, ...], top: int = 25) -> dict[str, Any]:
    """Self and inclusive sample counts from a JFR recording's jdk.ExecutionSample events."""
    res = subprocess.run([_jdk_tool("jfr"), "print", "--json", "--events", "jdk.ExecutionSample",
                          "--stack-depth", "64", str(jfr_file)],
                         capture_output=True, text=True, check=True)
    events = json.loads(res.stdout)["recording"]["events"]
    self_counts: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for ev in events:
        values = ev.get("values", {})
        frames = (values.get("stackTrace") or {}).get("frames") or []
        if not frames:
            continue
        names = [_frame_name(f) for f in frames]
        self_counts[names[0]] += 1
        for name in set(names):
            if name.startswith(prefixes):
                incl[name] += 1
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        threads[thread.rstrip("0123456789-")] += 1
    return {"samples": len(events), "self": self_counts.most_common(top),
            "inclusive_project": incl.most_common(top), "threads": threads.most_common(10)}


def summarize_pyspy(raw: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive counts from py-spy's raw (collapsed-stack) output."""
    self_counts: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_counts[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    return {"samples": total, "self": self_counts.most_common(top),
            "inclusive": incl.most_common(top)}


def _table(rows: list[tuple[str, int]], total: int) -> list[str]:
    out = ["| % | samples | frame |", "|---|---|---|"]
    for name, n in rows:
        out.append(f"| {100.0 * n / max(total, 1):.1f} | {n} | `{name}` |")
    return out + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="tserve", choices=list(servers.kinds()))
    ap.add_argument("--seconds", type=float, default=8.0, help="profiled load per phase")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1, choices=(1, 8))
    args = ap.parse_args(argv)
    if args.server == "tserve":
        servers.snapshot_tserve()
    kind = servers.kinds()[args.server]
    OUT.mkdir(parents=True, exist_ok=True)
    ts_store, peer_store = build_stores(servers.BENCH / "work", 20.0)
    store = ts_store if args.server == "tserve" else peer_store
    jfr_file = OUT / f"{args.server}.jfr"
    jfr_file.unlink(missing_ok=True)
    base = TSERVE_VMARGS if args.server == "tserve" else ""
    vmargs = f"{base} -XX:StartFlightRecording=name=bench,settings=profile".strip()
    pyspy = servers.BENCH_VENV / "bin" / "py-spy"
    model = f"echo_b{args.batch}"
    with servers.Server(kind, store, vmargs=vmargs) as srv:
        srv.wait_ready()
        srv.register("echo.mar", model, batch_size=args.batch, delay_ms=5)
        srv.wait_prediction(model, b"x")
        print("warming up", flush=True)
        loadgen.load(srv.inference_port, f"/predictions/{model}", concurrency=args.concurrency,
                     duration_s=3)
        tree = procstat.process_tree(srv.pid)
        java = next(p for p in tree if procstat.is_frontend(p))
        workers = [p for p in tree if p.pid not in (srv.pid, java.pid)]
        worker = max(workers, key=lambda p: p.cpu_s)
        raw = OUT / f"{args.server}-worker.pyspy.txt"
        spy = subprocess.Popen([str(pyspy), "record", "--pid", str(worker.pid), "--duration",
                                str(int(args.seconds)), "--rate", "250", "--format", "raw",
                                "--output", str(raw)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # JFR samples only this window: start a fresh recording now, dump it after the load.
        subprocess.run([_jdk_tool("jcmd"), str(java.pid), "JFR.stop", "name=bench"],
                       capture_output=True, check=False)
        jfc = OUT / "bench.jfc"
        jfc.write_text(JFC)
        subprocess.run([_jdk_tool("jcmd"), str(java.pid), "JFR.start", "name=hot",
                        f"settings={jfc}"], capture_output=True, check=True)
        result = {"load": loadgen.load(srv.inference_port, f"/predictions/{model}",
                                       concurrency=args.concurrency,
                                       duration_s=args.seconds).summary()}
        subprocess.run([_jdk_tool("jcmd"), str(java.pid), "JFR.dump", "name=hot",
                        f"filename={jfr_file}"], capture_output=True, check=True)
        _, err = spy.communicate(timeout=args.seconds + 30)
        if spy.returncode != 0:
            print(f"py-spy failed: {err.decode(errors='replace')[-500:]}", file=sys.stderr)
    java_sum = summarize_jfr(jfr_file, PROJECT_PREFIXES[args.server])
    py_sum = summarize_pyspy(raw) if raw.exists() else {"samples": 0, "self": [], "inclusive": []}
    lines = [f"# Hot spots: {args.server}, echo batch {args.batch}, c={args.concurrency}, "
             f"{args.seconds:g} s", "", f"Load: {result.get('load')}", "",
             f"## Frontend (JFR, {java_sum['samples']} execution samples)", "",
             "Threads: " + ", ".join(f"{n} {c}" for n, c in java_sum["threads"]), "",
             "### Self (on-CPU leaf frame)", "", *_table(java_sum["self"], java_sum["samples"]),
             "### Inclusive (project methods on the stack)", "",
             *_table(java_sum["inclusive_project"], java_sum["samples"]),
             f"## Worker (py-spy, {py_sum['samples']} samples, idle excluded)", "",
             "### Self", "", *_table(py_sum["self"], py_sum["samples"]),
             "### Inclusive", "", *_table(py_sum["inclusive"], py_sum["samples"])]
    out = OUT / f"hotspots-{args.server}-b{args.batch}.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"Written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
