"""TorchServe's per-model queue keys of model-config.yaml, end to end: clientTimeoutInMills
(a request that waited longer is answered 503 instead of being run) and useJobTicket (a
request that finds no free worker is answered 503 at once instead of being queued)."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path

import pytest
import requests

import harness

HANDLERS = Path(__file__).resolve().parent / "handlers"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("keys")
    harness.build_mar(store, "patient", HANDLERS / "echo_handler.py",
                      config_yaml="minWorkers: 1\nmaxWorkers: 1\nbatchSize: 1\nclientTimeoutInMills: 400\n")
    harness.build_mar(store, "ticketed", HANDLERS / "echo_handler.py",
                      config_yaml="minWorkers: 1\nmaxWorkers: 1\nbatchSize: 1\nuseJobTicket: true\n")
    with harness.Server(store) as s:
        for name in ("patient", "ticketed"):
            r = s.register(f"{name}.mar", initial_workers=1)
            assert r.status_code == 200, r.text
        yield s


def _concurrently(server: harness.Server, model: str, bodies: list[str]) -> list[requests.Response]:
    """Sends the bodies in this order, each 0.1 s after the previous one, all in flight together."""
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        futures = []
        for body in bodies:
            futures.append(pool.submit(server.predict, model, body, timeout=60))
            time.sleep(0.1)
        return [f.result() for f in futures]


def test_describe_shows_the_keys(server: harness.Server) -> None:
    patient = requests.get(f"{server.management_url}/models/patient", timeout=10).json()[0]
    ticketed = requests.get(f"{server.management_url}/models/ticketed", timeout=10).json()[0]
    assert patient["clientTimeoutInMills"] == 400 and patient["useJobTicket"] is False
    assert ticketed["useJobTicket"] is True and ticketed["clientTimeoutInMills"] == 0


def test_requests_that_waited_past_client_timeout_are_answered_503_not_run(server: harness.Server) -> None:
    first, late = _concurrently(server, "patient", ["sleep:1.5", "sleep:0"])
    assert first.status_code == 200, first.text
    assert late.status_code == 503, late.text
    msg = late.json()["message"]
    assert "clientTimeoutInMills (400 ms)" in msg and "patient" in msg
    # a request that does not wait is served as before
    r = server.predict("patient", "hello", timeout=30)
    assert r.status_code == 200 and r.json()["text"] == "hello"


def test_job_ticket_refuses_a_request_no_worker_is_free_for(server: harness.Server) -> None:
    busy, refused = _concurrently(server, "ticketed", ["sleep:1.5", "x"])
    assert busy.status_code == 200, busy.text
    assert refused.status_code == 503, refused.text
    assert "useJobTicket" in refused.json()["message"]
    assert refused.elapsed.total_seconds() < 1.0, "refused at once, not after waiting in the queue"
    r = server.predict("ticketed", "again", timeout=30)   # the worker is free again
    assert r.status_code == 200 and r.json()["text"] == "again"
