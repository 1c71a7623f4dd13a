"""`wrk` (Debian package `wrk`) as a second opinion on the frontend-overhead (echo) cells."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

_LUA = """wrk.method = "POST"
wrk.body = "x"
wrk.headers["Content-Type"] = "application/octet-stream"
"""

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def available() -> bool:
    return shutil.which("wrk") is not None


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    if not m:
        return 0.0
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse(output: str) -> dict[str, float]:
    """Requests/sec, p50/p90/p99 (ms) and error count from ``wrk --latency`` output."""
    out: dict[str, float] = {"rps": 0.0, "errors": 0.0}
    m = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if m:
        out["rps"] = float(m.group(1))
    for pct in ("50", "90", "99"):
        m = re.search(rf"^\s+{pct}(?:\.000)?%\s+(\S+)", output, re.M)
        if m:
            out[f"p{pct}_ms"] = round(_ms(m.group(1)), 3)
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    if m:
        out["errors"] += float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    if m:
        out["errors"] += sum(float(g) for g in m.groups())
    return out


def run_wrk(port: int, path: str, connections: int, duration_s: int = 5) -> dict[str, float]:
    """One wrk run against 127.0.0.1 (one thread: the load generator gets one core at most)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(_LUA)
        script = fh.name
    try:
        res = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{duration_s}s", "--latency", "-s", script,
             f"http://127.0.0.1:{port}{path}"],
            capture_output=True, text=True, timeout=duration_s + 30, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"wrk failed ({res.returncode}): {res.stderr.strip()}")
        return parse(res.stdout)
    finally:
        Path(script).unlink(missing_ok=True)
