"""procstat, wrk output parsing, the report, the limit loop and archive building."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from benchmarks import limit, models, procstat, report, wrk

WRK_OUTPUT = """Running 5s test @ http://127.0.0.1:8080/predictions/echo
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms  300.00us   9.00ms   90.00%
  Latency Distribution
     50%  1.10ms
     75%  1.30ms
     90%  1.60ms
     99%    2.50s
  60000 requests in 5.00s, 5.00MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 4
Requests/sec:  12000.50
Transfer/sec:      1.00MB
"""


def test_wrk_parse() -> None:
    got = wrk.parse(WRK_OUTPUT)
    assert got["rps"] == 12000.5
    assert got["p50_ms"] == 1.1 and got["p90_ms"] == 1.6 and got["p99_ms"] == 2500.0
    assert got["errors"] == 7


def test_process_tree_sees_children_and_cpu() -> None:
    code = "import subprocess,sys; subprocess.run([sys.executable,'-c','import time; time.sleep(5)'])"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while len(procstat.process_tree(proc.pid)) < 2:
            assert time.monotonic() < deadline, "child never appeared"
            time.sleep(0.05)
        tree = procstat.process_tree(proc.pid)
        assert tree[0].pid == proc.pid and all(p.rss_mb > 0 for p in tree)
        assert procstat.split_rss(proc.pid)["workers"] == 1  # no JVM here: the child is a "worker"
        assert procstat.tree_cpu_s(proc.pid) >= 0
    finally:
        for p in reversed(procstat.process_tree(proc.pid)):
            os.kill(p.pid, signal.SIGTERM)
        proc.wait(10)


def _results(ts_rps: float, peer_rps: float) -> dict:
    cell = {"rps": ts_rps, "p50_ms": 1.0, "cpu_us_per_req": 100.0, "errors": 0}
    peer = {"rps": peer_rps, "p50_ms": 4.0, "cpu_us_per_req": 1000.0, "errors": 0}
    return {"servers": {"tserve": {"echo": {"b8_c32": cell, "b1_c1": cell}},
                        "torchserve-quiet": {"echo": {"b8_c32": peer, "b1_c1": peer}}},
            "machine": {"nproc": 2, "cpu": "x", "mem_gb": 1, "loadavg_start": [1, 1, 1],
                        "loadavg_end": [1, 1, 1]},
            "settings": {"duration_s": 5}, "wall_s": 10}


def test_report_ratios_and_targets() -> None:
    text = report.render(_results(3000.0, 1000.0))
    row = next(line for line in text.splitlines() if line.startswith("| echo b8/5ms c32 req/s"))
    assert "| 3 | ≥ 2.0 | yes |" in row
    missed = report.render(_results(1500.0, 1000.0))
    row = next(line for line in missed.splitlines() if line.startswith("| echo b8/5ms c32 req/s"))
    assert "**no**" in row
    p50 = next(line for line in text.splitlines() if line.startswith("| echo b1 c1 p50"))
    assert "| 0.25 | ≤ 0.6 | yes |" in p50


def test_limit_loop_answers_frames() -> None:
    res = limit.run_limit(batch_size=8, inflight=2, duration_s=0.3)
    assert res.requests > 0 and res.requests % 8 == 0 and res.rps > 0


def test_limit_drives_tserves_own_worker() -> None:
    res = limit.run_limit(batch_size=1, inflight=2, duration_s=0.3, worker="tserve")
    assert res.requests > 0 and res.p50_ms > 0 and res.worker_cpu_us_per_req > 0
    with pytest.raises(ValueError, match="'bare' or 'tserve'"):
        limit.run_limit(worker="threaded")


def test_archives_for_both_carry_the_same_handler(tmp_path: Path) -> None:
    spec = models.ModelSpec("echo", str(models.HANDLERS / "echo_handler.py"))
    mar = models.build_tserve(spec, tmp_path / "store")
    with zipfile.ZipFile(mar) as zf:
        manifest = json.loads(zf.read("MAR-INF/MANIFEST.json"))
        assert manifest["model"]["handler"] == "echo_handler.py"
        assert "echo_handler.py" in zf.namelist()


def test_pipeline_spec_writes_costs_and_pool_size(tmp_path: Path) -> None:
    spec = models.pipeline_spec("pipe_w1", 20, 10, 1, 8, 5, tmp_path)
    assert json.loads(Path(spec.extra_files[0]).read_text()) == {"preprocess_ms": 20,
                                                                  "inference_ms": 10}
    assert "preprocessWorkers: 1" in (spec.config_yaml or "")
