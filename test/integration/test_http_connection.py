"""The HTTP/1.1 connection contract against a real server (issue 27, items 2-6).

Raw sockets (benchmarks/rawhttp.py) send what client libraries will not: pipelined requests, a
Content-Length beside Transfer-Encoding, unknown transfer codings, broken chunks. Each answer must
come in request order, and an unparseable request must end its connection so that the bytes after
it are never served as a request. Forms are bounded (max_form_fields & co.), and the token failure
throttle never refuses the right key. Token authorization is on for the whole module.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

import harness
from benchmarks import rawhttp

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("connection")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    config = {"load_models": "echo.mar", "default_workers_per_model": 1, "batch_size": 1}
    with harness.Server(store, config=config, token_auth=True) as s:
        yield s


def bearer(s: harness.Server, which: str = "inference") -> str:
    return f"Bearer {s.keys()[which]['key']}"


def ping(s: harness.Server) -> bytes:
    return b"GET /ping HTTP/1.1\r\nHost: t\r\nAuthorization: " + bearer(s).encode() + b"\r\n\r\n"


def post(s: harness.Server, body: bytes, extra: bytes = b"") -> bytes:
    return (b"POST /predictions/echo HTTP/1.1\r\nHost: t\r\nAuthorization: " + bearer(s).encode()
            + b"\r\n" + extra + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_pipelined_answers_come_in_request_order(server: harness.Server) -> None:
    # before: the fast /ping answer came first, and a client took it for the prediction's
    got = rawhttp.exchange(server.inference_port, post(server, b"sleep:1.5") + ping(server) + post(server, b"third"), expect=3)
    assert [r.status for r in got.responses] == [200, 200, 200], got
    assert b'"text": "sleep:1.5"' in got.responses[0].body
    assert b"Healthy" in got.responses[1].body
    assert b'"text": "third"' in got.responses[2].body
    assert not got.closed  # pipelining keeps the connection


@pytest.mark.parametrize(("name", "framing", "status", "message"), [
    ("two Content-Length", b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, "Multiple Content-Length"),
    ("bad chunk size", b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400, "chunk size"),
    ("Content-Length and chunked", b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
     400, "Content-Length"),
    ("chunked not last", b"Transfer-Encoding: chunked, gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400, "chunked"),
    ("identity, chunked", b"Transfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 501, "identity"),
    ("gzip, chunked", b"Transfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 501, "gzip"),
    ("chunked twice", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
     400, "more than once"),
])
def test_bad_framing_is_answered_once_and_closes(server: harness.Server, name: str, framing: bytes, status: int,
                                                 message: str) -> None:
    head = b"POST /predictions/echo HTTP/1.1\r\nHost: t\r\nAuthorization: " + bearer(server).encode() + b"\r\n"
    # a request smuggled after the body must never be answered
    got = rawhttp.exchange(server.inference_port, head + framing + ping(server), expect=1)
    assert [r.status for r in got.responses] == [status], (name, got)
    r = got.responses[0]
    assert r.headers.get("connection") == "close", (name, r.headers)
    assert message in r.body.decode(), (name, r.body)
    assert "java." not in r.body.decode() and "Exception:" not in r.body.decode(), r.body
    assert got.closed and not got.rest, (name, got)


def test_bad_framing_behind_a_slow_request_keeps_the_order(server: harness.Server) -> None:
    bad = b"POST /predictions/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    got = rawhttp.exchange(server.inference_port, post(server, b"sleep:1") + bad + ping(server), expect=2)
    assert [r.status for r in got.responses] == [200, 400], got
    assert got.closed


def test_a_form_of_millions_of_fields_is_refused_and_the_server_lives(server: harness.Server) -> None:
    # issue 27: 6 MB of 3 M fields cost ~375 MB of heap and 9 s; four at once ended the JVM
    r = server.predict("echo", b"a&" * 3_000_000, timeout=60, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": bearer(server)})
    assert r.status_code == 413, r.text
    assert "max_form_fields (1000)" in r.json()["message"]
    r = server.predict("echo", "k" * 2000 + "=v", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": bearer(server)})
    assert r.status_code == 400 and "max_form_key_length (1024)" in r.json()["message"], r.text
    parts = b"".join(b'--XX\r\nContent-Disposition: form-data; name="f%d"\r\n\r\nv\r\n' % i for i in range(1001))
    r = server.predict("echo", parts + b"--XX--\r\n", headers={
        "Content-Type": "multipart/form-data; boundary=XX", "Authorization": bearer(server)})
    assert r.status_code == 400, r.text
    assert "max_form_fields (1000)" in r.json()["message"] and "Exception" not in r.json()["message"]
    ok = server.predict("echo", "a=1&b=2", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": bearer(server)})
    assert ok.status_code == 200 and ok.json()["keys"] == ["a", "b"], ok.text


def test_failure_throttle_never_refuses_the_right_key(server: harness.Server) -> None:
    # runs last: it leaves this address throttled (for failures) for a minute
    url = server.inference_url + "/predictions/echo"
    for i in range(30):
        headers = {"Authorization": f"Bearer wrong{i}"} if i % 2 else {}
        assert requests.post(url, data=b"x", headers=headers, timeout=10).status_code == 401
    # the 31st failure is throttled: 429 after a delay, and the connection is closed
    started = time.monotonic()
    r = requests.post(url, data=b"x", headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert r.status_code == 429, r.text
    assert time.monotonic() - started >= 0.9
    assert r.headers.get("connection") == "close"
    assert "right key still pass" in r.json()["message"]
    # before: the right key got 429 on every port for the rest of the minute
    r = requests.post(url, data=b"still here", headers={"Authorization": bearer(server)}, timeout=10)
    assert r.status_code == 200 and r.json()["text"] == "still here", r.text
    r = requests.get(server.management_url + "/models", headers={"Authorization": bearer(server, "management")},
                     timeout=10)
    assert r.status_code == 200, r.text
