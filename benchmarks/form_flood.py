"""Measures what hostile form bodies cost the frontend (issue 27 item 3; docs/reliability.md).

Starts the server from this tree (echo model, the launcher's JVM options with -Xmx set by
--xmx), sends one 6 MB application/x-www-form-urlencoded body of 3 M empty fields and reports the
answer, its time and the frontend's peak RSS growth, then sends --parallel such bodies at once and
reports whether the JVM survived.

    PYTHONPATH=.:model-archiver:test/support python benchmarks/form_flood.py [--xmx 1g] [--parallel 4]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import tempfile
import threading
import time
from pathlib import Path

import requests

import harness
from ts import model_server

HANDLERS = Path(__file__).resolve().parents[1] / "test" / "integration" / "handlers"
BODY = b"a&" * 3_000_000
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xmx", default="1g")
    ap.add_argument("--parallel", type=int, default=4)
    args = ap.parse_args()
    store = Path(tempfile.mkdtemp(prefix="form-flood-"))
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    vmargs = [*model_server.DEFAULT_VMARGS, f"-Xmx{args.xmx}"]
    with harness.Server(store, config={"load_models": "echo.mar", "default_workers_per_model": 1},
                        vmargs=vmargs) as s:
        assert s.proc is not None
        pid = s.proc.pid
        before = rss_kb(pid)
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss_kb(pid))
                time.sleep(0.02)

        threading.Thread(target=sample, daemon=True).start()
        t = time.monotonic()
        r = s.predict("echo", BODY, headers=FORM, timeout=120)
        took = time.monotonic() - t
        done.set()
        print(f"one 6 MB form of 3 M fields: {r.status_code} in {took:.2f} s, frontend RSS +{(peak[0] - before) // 1024} MB"
              f" ({r.text[:120].strip()!r})")
        with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
            codes = list(pool.map(lambda _: _status(s), range(args.parallel)))
        alive = s.proc.poll() is None
        print(f"{args.parallel} at once under -Xmx{args.xmx}: {codes}; JVM {'alive' if alive else 'EXITED'}")


def _status(s: harness.Server) -> str:
    try:
        return str(s.predict("echo", BODY, headers=FORM, timeout=120).status_code)
    except requests.RequestException as e:
        return type(e).__name__


if __name__ == "__main__":
    main()
