"""The frontend's own start, with and without its class archive (ts/class_archive.py).

    .venv/bin/python -m benchmarks.jvm_start [--runs 5]

Starts a server with no models (free 127.0.0.1 ports, no warm-start zygote, so only the JVM
counts) ``--runs`` times each way, alternating, and reports per way the median wall time from the
launch to ``Model server started.`` and the JVM's CPU seconds (user + system, from /proc) at that
moment. "without" keeps the JDK's own base archive (``-Xshare:auto``) and leaves tserve's out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ts import class_archive
from ts.model_server import DEFAULT_VMARGS, build_java_command
from ts.utils.java import archive_path
from ts.utils.process_tree import stop_process_tree


def jvm_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_start(with_archive: bool) -> tuple[float, float]:
    """(seconds to ready, JVM CPU seconds at ready) of one bare start."""
    with tempfile.TemporaryDirectory(prefix="tserve-jvm-start-") as tmp:
        work = Path(tmp)
        (work / "store").mkdir()
        vmargs = list(DEFAULT_VMARGS) + ([] if with_archive else ["-Xshare:auto"])
        cmd = build_java_command(model_store=work / "store", ts_config=class_archive.training_config(work),
                                 no_config_snapshots=True, disable_token_auth=True, tmp_dir=work, vmargs=vmargs)
        log = work / "server.log"
        env = {**os.environ, "LOG_LOCATION": str(work / "logs"), "METRICS_LOCATION": str(work / "logs")}
        started = time.monotonic()
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            class_archive.await_ready(proc, log, started + class_archive.TRAINING_TIMEOUT_S)
            return time.monotonic() - started, jvm_cpu_s(proc.pid)
        finally:
            stop_process_tree(proc.pid, 60.0)
            proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jvm_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    if not archive_path().is_file():
        class_archive.build()
    results: dict[str, list[tuple[float, float]]] = {"with the archive": [], "without": []}
    for _ in range(args.runs):
        for way in results:
            results[way].append(one_start(way == "with the archive"))
    for way, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{way:17} start {wall:5.2f} s  JVM CPU {cpu:5.2f} s  (median of {len(runs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
