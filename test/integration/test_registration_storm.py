"""A register/scale/unregister storm on one model name (issue 43): two registrars, two scalers and an
unregisterer, bounded in time. Whatever order the calls land in, no worker process may outlive the
model it was started for: once the storm is over and the model unregistered, the server has no
worker process left (a worker started for a version that an unregister had already retired used to
live until --stop). The interleaving itself is forced in WorkerScalerTest; this runs the real thing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
STORM_SECONDS = 20


def worker_processes(frontend_pid: int) -> list[int]:
    """Live processes carrying a worker tag of this server (TSERVE_WORKER_TAG=<frontend pid>-W-...)."""
    needle = f"\0TSERVE_WORKER_TAG={frontend_pid}-".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in b"\0" + (entry / "environ").read_bytes() and harness.alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_no_worker_outlives_its_model_after_a_storm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    with harness.Server(store) as server:
        url = server.management_url
        deadline = time.monotonic() + STORM_SECONDS
        statuses: dict[str, set[int]] = {}
        errors: list[str] = []

        def loop(kind: str, call: Callable[[], requests.Response]) -> None:
            while time.monotonic() < deadline:
                try:
                    r = call()
                    statuses.setdefault(kind, set()).add(r.status_code)
                except requests.RequestException as e:  # the server must answer every call
                    errors.append(f"{kind}: {e}")
                    return

        calls = {
            "register": lambda: requests.post(f"{url}/models", params={
                "url": "echo.mar", "model_name": "storm", "initial_workers": "1", "synchronous": "true"}, timeout=120),
            "register async": lambda: requests.post(f"{url}/models", params={
                "url": "echo.mar", "model_name": "storm", "initial_workers": "1", "synchronous": "false"}, timeout=120),
            "scale up": lambda: requests.put(f"{url}/models/storm", params={
                "min_worker": "2", "max_worker": "2", "synchronous": "false"}, timeout=120),
            "scale down": lambda: requests.put(f"{url}/models/storm", params={
                "min_worker": "1", "max_worker": "1", "synchronous": "false"}, timeout=120),
            "unregister": lambda: requests.delete(f"{url}/models/storm", timeout=120),
        }
        threads = [threading.Thread(target=loop, args=(k, c), daemon=True) for k, c in calls.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(STORM_SECONDS + 240)
        assert not errors, errors
        assert 200 in statuses.get("unregister", set()), statuses   # the storm did take the model out
        # the last registration may have won: take it out, then every worker must go
        harness.wait_for(lambda: requests.delete(f"{url}/models/storm", timeout=120).status_code == 404, 120,
                         interval=0.5, what="the model to be unregistered")
        assert requests.get(f"{url}/models", timeout=30).json()["models"] == []
        end = time.monotonic() + 60   # stopping workers get their graceful stop first
        while worker_processes(server.pid) and time.monotonic() < end:
            time.sleep(0.5)
        left = worker_processes(server.pid)
        assert left == [], f"worker processes that no model describes: {left}\n" + server.logs()[-4000:]
