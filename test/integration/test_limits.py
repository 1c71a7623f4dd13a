"""Limits a production server has (issue 16, "Must add"; figures in docs/reliability.md).

Connection idle and request read timeouts that never cut a request being answered, a cap on
connections, readiness that reflects workers and startup loading, worker caps, and handler
exception detail that can be kept from clients. Servers bind 127.0.0.1 only, on free ports.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("limits")
    harness.build_mar(root, "hostile", HANDLERS / "hostile_handler.py")
    harness.build_mar(root, "echo", HANDLERS / "echo_handler.py")
    harness.build_mar(root, "slow", HANDLERS / "slow_init_handler.py")
    return root


@pytest.fixture(scope="module")
def server(store: Path):
    config = {
        "load_models": "hostile.mar", "default_workers_per_model": 1,
        "connection_idle_timeout": 2, "request_read_timeout": 2, "max_connections": 4,
        "max_workers_per_model": 2, "max_workers": 1, "send_error_detail": "false",
    }
    with harness.Server(store, config=config) as s:
        yield s


def connect(s: harness.Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", s.inference_port), timeout=15)


def read_all(sock: socket.socket) -> bytes:
    out = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return out
        out += data


def raw_predict(body: bytes) -> bytes:
    return (b"POST /predictions/hostile HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def test_idle_connection_is_closed(server: harness.Server) -> None:
    with connect(server) as sock:
        t0 = time.monotonic()
        assert read_all(sock) == b""  # closed by the server, without an answer
        assert 1.5 <= time.monotonic() - t0 < 10


def test_slowly_sent_request_gets_408(server: harness.Server) -> None:
    with connect(server) as sock:
        sock.sendall(b"POST /predictions/hostile HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 10:  # a header line every 0.3 s: never idle, never complete
                sock.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.3)
        except OSError:
            pass  # closed by the server
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"request_read_timeout" in answer
    assert time.monotonic() - t0 < 10


def test_a_408_lingers_while_the_client_still_sends(server: harness.Server) -> None:
    """After the 408 the server shuts its side and reads what the client still sends for a while
    (RFC 9112 9.6), rather than closing at once: a socket closed with bytes still arriving answers
    them with a TCP reset, which can destroy the 408 before the client reads it."""
    with connect(server) as sock:
        sock.sendall(b"POST /predictions/hostile HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = read_all(sock)  # nothing more sent: the 408 comes after request_read_timeout, then EOF
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        for _ in range(8):  # the client goes on sending, as a slow uploader would: no reset
            sock.sendall(b"X-Slow: 1\r\n")
            time.sleep(0.1)


def test_slow_inference_is_not_cut(server: harness.Server) -> None:
    # the answer takes 4 s, twice the idle and read timeouts
    with connect(server) as sock:
        sock.sendall(raw_predict(b"sleep:4"))
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert answer.endswith(b"sleep:4")


def test_connection_cap_answers_503_and_frees_slots(server: harness.Server) -> None:
    time.sleep(0.5)  # connections of the tests before are closed
    held = [connect(server) for _ in range(4)]
    time.sleep(0.3)  # all four counted (each is set up on its own event loop)
    try:
        with connect(server) as extra:
            answer = read_all(extra)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:300]
        assert b"max_connections (4)" in answer
    finally:
        for sock in held:
            sock.close()
    # slots are free again once the held connections close
    r = harness.wait_for(lambda: _ping(server), 10, interval=0.2, what="a connection after the held ones closed")
    assert r.status_code == 200


def _ping(s: harness.Server) -> requests.Response | None:
    try:
        r = requests.get(s.inference_url + "/ping", timeout=5)
    except requests.ConnectionError:
        return None
    return r if r.status_code == 200 else None


def test_handler_exception_detail_is_not_sent(server: harness.Server) -> None:
    r = server.predict("hostile", b"raise:secret-detail-7f3a", timeout=30)
    assert r.status_code == 500, r.text
    assert "secret-detail-7f3a" not in r.text
    assert "model log" in r.json()["message"]
    harness.wait_for(lambda: "secret-detail-7f3a" in server.logs("model_log.log"), 10, what="the detail in model_log.log")


def test_worker_caps_name_their_key(server: harness.Server) -> None:
    mgmt = server.management_url
    r = requests.put(f"{mgmt}/models/hostile?min_worker=3&synchronous=true", timeout=60)
    assert r.status_code == 400 and "max_workers_per_model" in r.json()["message"], r.text
    r = requests.put(f"{mgmt}/models/hostile?min_worker=2&synchronous=true", timeout=60)
    assert r.status_code == 400 and "max_workers (" in r.json()["message"], r.text
    r = server.register("echo.mar", initial_workers=1)
    assert r.status_code == 400 and "max_workers (" in r.json()["message"], r.text
    assert requests.get(f"{mgmt}/models/echo", timeout=10).status_code == 404
    workers = requests.get(f"{mgmt}/models/hostile", timeout=10).json()[0]["workers"]
    assert len(workers) == 1
    assert server.predict("hostile", b"still here", timeout=30).text == "still here"


def test_readiness_while_loading_and_while_the_only_worker_restarts(store: Path) -> None:
    s = harness.Server(store, config={"load_models": "slow.mar", "default_workers_per_model": 1},
                       env={"TSERVE_TEST_INIT_SECONDS": "4"})
    seen: list[tuple[int, str, int]] = []
    started = threading.Event()

    def poll() -> None:  # the server is started by this thread (a worker dies with the thread that forked it)
        while not started.is_set():
            try:
                r = requests.get(s.inference_url + "/ping", timeout=5)
                ready = requests.get(s.inference_url + "/v2/health/ready", timeout=5)
                seen.append((r.status_code, r.json()["status"], ready.status_code))
            except requests.ConnectionError:
                pass
            time.sleep(0.1)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        try:
            s.start()
        finally:
            started.set()
            poller.join()
        # Unhealthy until the model is loaded (the last samples may come after that)
        pings = [x[:2] for x in seen]
        readies = [x[2] for x in seen]
        assert pings.count((500, "Unhealthy")) >= 5, seen
        assert pings == sorted(pings, key=lambda x: x[0] == 200), seen  # not ready, then ready: never back
        assert set(pings) <= {(500, "Unhealthy"), (200, "Healthy")}, seen
        assert readies == sorted(readies, reverse=True) and set(readies) <= {503, 200}, seen
        r = requests.get(s.inference_url + "/ping", timeout=10)
        assert (r.status_code, r.json()) == (200, {"status": "Healthy"})
        assert requests.get(s.inference_url + "/v2/health/ready", timeout=10).status_code == 200

        pid = requests.get(s.management_url + "/models/slow", timeout=10).json()[0]["workers"][0]["pid"]
        os.kill(pid, signal.SIGKILL)
        # restart backoff, then a 4 s load: the only worker does not serve meanwhile
        body = harness.wait_for(lambda: _unhealthy(s), 10, interval=0.1, what="/ping Unhealthy after the kill")
        assert body == {"status": "Unhealthy"}
        harness.wait_for(lambda: _ping(s), 60, interval=0.2, what="/ping Healthy after the restart")
    finally:
        s.stop()


def _unhealthy(s: harness.Server) -> dict | None:
    r = requests.get(s.inference_url + "/ping", timeout=5)
    return r.json() if r.status_code == 500 else None
