"""The zygote and its launcher without the server: a forked worker's output and exit status reach
the launcher, signals are relayed, the worker dies with its launcher, and no zygote means a cold
start (ts/warmstart/zygote.py, ts/warmstart/launch.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import harness

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "ts" / "warmstart" / "launch.py"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TS_ZYGOTE_FALLBACK_PYTHON": sys.executable}


@pytest.fixture()
def zygote(tmp_path: Path):
    sock = tmp_path / "z.sock"
    proc = subprocess.Popen([sys.executable, "-m", "ts.warmstart.zygote", "--socket", str(sock), "--preload", "json"],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "zygote ready" in proc.stdout.readline()
        ZYGOTE_PIDS[sock] = proc.pid
        yield sock
    finally:
        proc.kill()
        proc.wait(10)


ZYGOTE_PIDS: dict[Path, int] = {}


def launch(sock: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-I", "-S", str(LAUNCH), "--zygote", str(sock), "--", *args],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_forked_worker_writes_to_the_launchers_output_and_its_status_is_the_launchers(zygote: Path) -> None:
    ok = launch(zygote, "--help")
    out, err = ok.communicate(timeout=60)
    assert ok.returncode == 0, err
    assert "usage: ts.model_service_worker" in out
    bad = launch(zygote, "--sock-type", "carrier-pigeon")
    _, err = bad.communicate(timeout=60)
    assert bad.returncode == 2
    assert "invalid choice: 'carrier-pigeon'" in err


def _worker_pid(zygote: Path) -> int:
    """The zygote's one forked child (a worker carries the zygote's command line, not its own)."""
    kids = lambda: psutil.Process(ZYGOTE_PIDS[zygote]).children()  # noqa: E731
    return harness.wait_for(lambda: kids()[0].pid if len(kids()) == 1 else None, timeout=30, what="forked worker")


def test_sigterm_reaches_the_worker_and_a_killed_launcher_takes_it_along(zygote: Path, tmp_path: Path) -> None:
    listen = ["--sock-type", "unix"]
    term = launch(zygote, *listen, "--sock-name", str(tmp_path / "a.sock"))
    worker = _worker_pid(zygote)
    term.send_signal(signal.SIGTERM)
    term.wait(30)
    assert term.returncode == 128 + signal.SIGTERM
    harness.wait_for(lambda: not _alive(worker), timeout=10, what="worker gone after SIGTERM")
    harness.wait_for(lambda: not psutil.Process(ZYGOTE_PIDS[zygote]).children(), timeout=10, what="worker reaped")

    killed = launch(zygote, *listen, "--sock-name", str(tmp_path / "b.sock"))
    worker = _worker_pid(zygote)
    killed.kill()
    killed.wait(10)
    harness.wait_for(lambda: not _alive(worker), timeout=10, what="worker gone with its launcher")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_no_zygote_means_a_cold_start(tmp_path: Path) -> None:
    p = launch(tmp_path / "absent.sock", "--help")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "usage: ts.model_service_worker" in out
    assert "warm start unavailable" in err and "starting the worker cold" in err
