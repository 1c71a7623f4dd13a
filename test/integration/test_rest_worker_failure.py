"""A backend killed with SIGKILL under load: only its in-flight job fails ("Worker died."), the
queued ones are served, the worker comes back with a new process, and nothing hangs. Also the
server's own SIGTERM: in-flight work is answered, queued work gets 503, workers stop, exit status 0."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


def describe(s: harness.Server, name: str) -> dict:
    return requests.get(f"{s.management_url}/models/{name}", timeout=10).json()[0]


def test_sigkilled_worker_fails_only_its_jobs(tmp_path: Path) -> None:
    harness.build_mar(tmp_path, "victim", HANDLERS / "echo_handler.py")
    with harness.Server(tmp_path) as s:
        assert s.register("victim.mar", initial_workers=2).status_code == 200
        workers = describe(s, "victim")["workers"]
        assert [w["status"] for w in workers] == ["READY", "READY"]
        victim_pid = workers[0]["pid"]
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(s.predict, "victim", b"sleep:2", timeout=120) for _ in range(6)]
            harness.wait_for(lambda: describe(s, "victim")["jobQueueStatus"]["pendingRequests"] == 4, 30,
                             what="two jobs in flight and four queued")
            os.kill(victim_pid, signal.SIGKILL)
            results = [f.result() for f in futures]
        codes = sorted(r.status_code for r in results)
        assert codes == [200] * 5 + [500], codes
        died = next(r for r in results if r.status_code == 500).json()
        assert "Worker died." in died["message"]
        assert "137" in died["message"] or "-9" in died["message"] or "signal" in died["message"]
        assert s.predict("victim", b"next").status_code == 200
        harness.wait_for(lambda: [w["status"] for w in describe(s, "victim")["workers"]] == ["READY", "READY"], 120,
                         what="the killed worker to come back")
        pids = {w["pid"] for w in describe(s, "victim")["workers"]}
        assert victim_pid not in pids and len(pids) == 2
        assert "Retry worker" in s.logs()


def test_sigterm_answers_in_flight_work_and_exits_zero(tmp_path: Path) -> None:
    harness.build_mar(tmp_path, "echo", HANDLERS / "echo_handler.py")
    s = harness.Server(tmp_path).start()
    try:
        assert s.register("echo.mar", initial_workers=1).status_code == 200
        worker_pid = describe(s, "echo")["workers"][0]["pid"]
        with ThreadPoolExecutor(2) as pool:
            running = pool.submit(s.predict, "echo", b"sleep:2", timeout=60)
            harness.wait_for(lambda: "echo handling sleep:2" in s.logs("model_log.log"), 30,
                             what="first request in the handler")
            queued = pool.submit(s.predict, "echo", b"second", timeout=60)
            harness.wait_for(lambda: describe(s, "echo")["jobQueueStatus"]["pendingRequests"] == 1, 10,
                             what="one request in flight and one queued")
            s.proc.send_signal(signal.SIGTERM)
            first, second = running.result(), queued.result()
        assert first.status_code == 200, first.text
        assert second.status_code == 503, second.text
        assert "shutting down" in second.json()["message"]
        assert s.proc.wait(60) == 0
        harness.wait_for(lambda: not harness.alive(worker_pid), 10, what="worker to exit")
    finally:
        s.stop()
