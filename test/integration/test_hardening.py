"""Hostile inputs against the real server (issue 16; figures in docs/reliability.md).

Archives whose headers declare huge sizes, archives that expand too much, hostile handlers
(100s of MB of stdout without a line break, headers with CR/LF), `Expect: 100-continue` with an
oversized body, deeply nested JSON, and unknown model names that must not create metrics or
forge metric log lines. Every probe ends with the server still answering.
"""

from __future__ import annotations

import gzip
import socket
import time
import uuid
from pathlib import Path

import pytest
import requests

import harness
from ts import model_server

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
# the launcher's JVM options with a small heap: memory taken from a client or handler shows as an exit
SMALL_HEAP = [*model_server.DEFAULT_VMARGS, "-Xmx192m"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hardening")
    harness.build_mar(root, "hostile", HANDLERS / "hostile_handler.py")
    harness.build_mar(root, "echo", HANDLERS / "echo_handler.py")
    return root


@pytest.fixture(scope="module")
def server(store: Path):
    config = {"metrics_mode": "prometheus", "load_models": "hostile.mar,echo.mar", "default_workers_per_model": 1}
    with harness.Server(store, config=config, vmargs=SMALL_HEAP) as s:
        yield s


def alive(s: harness.Server) -> None:
    assert s.proc is not None and s.proc.poll() is None, f"server exited:\n{s.output()[-3000:]}"
    assert s.predict("echo", b"still here", timeout=30).json()["text"] == "still here"


def tar_header(name: str, size_field: bytes, kind: bytes) -> bytes:
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[124:124 + len(size_field)] = size_field
    h[156:157] = kind
    h[257:263] = b"ustar\0"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def test_tar_header_sizes_are_bounded(server: harness.Server, store: Path) -> None:
    # a GNU long-name header declaring 2 GiB, 8 GiB and 200 MB, with no data after it: ~99 bytes each
    before = sorted((server.tmp_dir / "models").iterdir())
    for name, size in (("ln2g", b"17777777777\0"), ("ln8g", b"77777777777\0"), ("ln200m", b"01372741000\0")):
        (store / f"{name}.tar.gz").write_bytes(gzip.compress(tar_header("m/x", size, b"L")))
        r = server.register(f"{name}.tar.gz")
        assert r.status_code == 400, r.text
        assert "long-name or PAX header" in r.json()["message"]
        alive(server)
    assert sorted((server.tmp_dir / "models").iterdir()) == before  # no temporary folder left behind


def test_extraction_limits_name_the_key(server: harness.Server, store: Path, tmp_path: Path) -> None:
    zeros = tmp_path / "zeros.bin"
    zeros.write_bytes(bytes(40 << 20))  # 40 MiB that deflate to ~40 KB
    harness.build_mar(store, "bomb", HANDLERS / "echo_handler.py", extra_files=[zeros])
    r = server.register("bomb.mar")
    assert r.status_code == 400, r.text
    assert "max_archive_compression_ratio" in r.json()["message"]
    assert requests.get(server.management_url + "/models/bomb", timeout=10).status_code == 404


def test_unbounded_worker_output_is_cut(server: harness.Server) -> None:
    r = server.predict("hostile", b"flood:300", timeout=120)
    assert r.status_code == 200, r.text
    alive(server)
    log = harness.wait_for(lambda: (lambda t: t if "flood done" in t else None)(server.logs("model_log.log")), 30)
    assert "[line cut at 65536 bytes; the rest up to the next line break is dropped]" in log
    assert max(len(line) for line in log.splitlines()) < 70_000


@pytest.mark.parametrize("command, named", [
    ("header-crlf", '"x-bad"'), ("reason-crlf", "reason phrase"), ("header-name", '"bad name:"')])
def test_unsendable_handler_response_gets_500(server: harness.Server, command: str, named: str) -> None:
    r = server.predict("hostile", command.encode(), timeout=20)
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["code"] == 500 and named in body["message"]
    assert "Injected" not in "".join(r.headers.keys())
    alive(server)
    for line in (server.logs() + server.logs("model_log.log")).splitlines():
        assert not line.startswith("Injected"), line


def raw_request(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Sends bytes on a fresh connection; returns what came back until the answer is complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        got = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                part = sock.recv(65536)
            except TimeoutError:
                break
            if not part:
                break
            got += part
            head, _, body = got.partition(b"\r\n\r\n")
            if _ and b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
        return got


def test_expect_continue_oversized_body_gets_json_413(server: harness.Server) -> None:
    got = raw_request(server.inference_port, b"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Length: 1000000000\r\nExpect: 100-continue\r\n\r\n")
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), got[:300]
    assert b"max_request_size" in body, got[:500]
    got = raw_request(server.inference_port, b"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Length: 10\r\nExpect: something-else\r\n\r\n")
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 417") and b"Expect" in body, got[:500]


@pytest.mark.parametrize("body", [
    b'{"url": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"model_name": ' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}",
    b"[" * 100_000])
def test_deeply_nested_json_gets_400(server: harness.Server, body: bytes) -> None:
    r = requests.post(server.management_url + "/models", data=body, timeout=20,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert "nested deeper than" in r.json()["message"]
    alive(server)


def series_labels(server: harness.Server) -> str:
    return requests.get(server.metrics_url + "/metrics", timeout=10).text


def test_unknown_model_names_create_no_series(server: harness.Server) -> None:
    names = [f"nosuch{uuid.uuid4().hex}" for _ in range(20)] + ["x" * 4000]
    for name in names:
        assert server.predict(name, b"x", timeout=10).status_code == 404
        assert server.predict("echo", b"x", version=name[:200], timeout=10).status_code == 404
    text = series_labels(server)
    assert "nosuch" not in text and "x" * 100 not in text
    assert 'model_name="echo"' in text  # known models are still counted


def test_client_strings_cannot_forge_metric_log_lines(store: Path) -> None:
    config = {"metrics_mode": "log", "load_models": "echo.mar"}
    with harness.Server(store, config=config) as s:
        forged = "ts_inference_requests_total.Count:1.0|#model_name:forged,model_version:default|#hostname:h"
        name = "x%0A" + requests.utils.quote(forged, safe="")
        assert requests.post(f"{s.inference_url}/predictions/{name}", data=b"x", timeout=10).status_code == 404
        assert requests.post(f"{s.inference_url}/predictions/echo/1%0D%0A{requests.utils.quote(forged, safe='')}",
                             data=b"x", timeout=10).status_code == 404
        assert s.predict("echo", b"counted").status_code == 200
        metrics = harness.wait_for(lambda: (lambda t: t if "model_name:echo" in t else None)(s.logs("ts_metrics.log")), 30)
        time.sleep(1)  # one more flush of the metric log
        for log in ("ts_metrics.log", "ts_log.log", "access_log.log"):
            for line in s.logs(log).splitlines():
                assert "forged" not in line or log == "access_log.log", (log, line)
                assert not line.startswith("ts_inference_requests_total"), (log, line)
        assert "forged" not in metrics
