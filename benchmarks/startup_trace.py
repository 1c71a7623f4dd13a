"""Where a torch model's start → first prediction goes (docs/performance.md, "Startup timing").

    .venv/bin/python -m benchmarks.startup_trace [--runs 3]

Starts tserve with ``--models mlp=mlp.mar`` (the lifecycle scenario's store, built by
``bash benchmarks/run.sh --only lifecycle``) until its first successful prediction, and reads the
milestones from its log timestamps and the worker's describe ``startup``; each run also times a
bare ``python -c "import torch"`` just before. Two kinds take turns: ``tserve`` (the launcher
starts the zygote before the JVM) and ``tserve-jvm-zygote`` (``enable_envvars_config=true``: the
launcher leaves the zygote to the JVM, as before).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from benchmarks import lifecycle, servers

MARKS = [("Configuration:", "jvm_configured"), ("zygote pid", "zygote_started"),
         ("gRPC inference API bound", "grpc_bound"), ("registered with 1 initial", "registered"),
         ("launching", "worker_launched"), ("loaded by worker", "worker_ready")]


def log_time(line: str) -> float | None:
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{3})", line)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").timestamp() + int(m.group(2)) / 1000


def one(kind: servers.ServerKind, store: Path) -> dict:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    torch_s = time.perf_counter() - t
    srv = servers.Server(kind, store, models=["mlp=mlp.mar"])
    wall0 = time.time()
    with srv:
        first = srv.wait_prediction("mlp", lifecycle.MLP_BODY, timeout=180)
        lines = (srv.dir / "logs" / "ts_log.log").read_text().splitlines()
        startup = lifecycle.describe(srv, "mlp")[0]["startup"]
    out = {"kind": kind.name, "first_prediction_s": round(first, 3), "import_torch_alone_s": round(torch_s, 3)}
    for pattern, key in MARKS:
        at = next((log_time(ln) for ln in lines if pattern in ln), None)
        if at is not None:
            out[key] = round(at - wall0, 3)
    return {**out, "worker": startup}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per kind (they take turns)")
    args = ap.parse_args()
    store = (servers.BENCH / "work" / "store-tserve").resolve()
    if not (store / "mlp.mar").is_file():
        print(f"{store / 'mlp.mar'} is missing: run 'bash benchmarks/run.sh --only lifecycle' once", file=sys.stderr)
        return 1
    base = servers.kinds()["tserve"]
    kinds = [base, replace(base, name="tserve-jvm-zygote",
                           extra_config={**base.extra_config, "enable_envvars_config": "true"})]
    for r in range(args.runs):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            print(json.dumps(one(kind, store)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
