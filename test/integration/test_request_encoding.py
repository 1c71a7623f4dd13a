"""Compressed request bodies against the real server (docs/compatibility.md, "Request bodies").

`Content-Encoding: gzip` / `deflate` bodies reach the handler decompressed; max_request_size caps
the decompressed size (a gzip bomb is a 413, the server keeps answering on a small heap); a
corrupt stream is a 400, another encoding a 415; headers above the fixed cap are a 431.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from pathlib import Path

import pytest
import requests

import harness
from ts import model_server

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
# a small heap: a bomb decompressed into memory would show as an OutOfMemoryError / exit
SMALL_HEAP = [*model_server.DEFAULT_VMARGS, "-Xmx192m"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("encoding")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    with harness.Server(store, config={"load_models": "echo.mar", "default_workers_per_model": 1},
                        vmargs=SMALL_HEAP) as s:
        yield s


def predict(s: harness.Server, body: bytes, encoding: str, content_type: str = "application/json"):
    return requests.post(s.inference_url + "/predictions/echo", data=body, timeout=30,
                         headers={"Content-Encoding": encoding, "Content-Type": content_type})


def alive(s: harness.Server) -> None:
    assert s.proc is not None and s.proc.poll() is None, f"server exited:\n{s.output()[-3000:]}"
    assert s.predict("echo", b"still here", timeout=30).json()["text"] == "still here"


def raw_exchange(port: int, head: bytes, body: bytes, timeout: float = 30.0) -> bytes:
    """Sends head + body from a thread while reading the answer until the server closes.

    The server answers a rejected body before reading all of it and closes: sending may then
    fail (broken pipe / reset), which is expected; the answer is what counts.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        def send() -> None:
            try:
                sock.sendall(head + body)
            except OSError:
                pass
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        got = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                part = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not part:
                break
            got += part
        sender.join(timeout)
        return got


def post_head(encoding: str, length: int) -> bytes:
    return (f"POST /predictions/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Encoding: {encoding}\r\nContent-Length: {length}\r\n\r\n").encode()


def gzip_bomb(size: int) -> bytes:
    """`size` zero bytes, gzipped (1 GiB is ~1 MB) without holding them in memory."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
    block = bytes(1 << 20)
    return b"".join(z.compress(block) for _ in range(size >> 20)) + z.flush()


@pytest.mark.parametrize("encoding, compress", [
    ("gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b, wbits=-15))])  # raw deflate, as some clients send it
def test_compressed_body_reaches_the_handler_decompressed(server: harness.Server, encoding, compress) -> None:
    payload = {"text": "a compressed request " * 50, "n": 1}
    r = predict(server, compress(json.dumps(payload).encode()), encoding)
    assert r.status_code == 200, r.text
    assert json.loads(r.json()["text"]) == payload
    r = predict(server, compress(b"plain text body"), encoding, content_type="text/plain")
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "plain text body"


def test_gzip_bomb_is_413_and_the_server_keeps_answering(server: harness.Server) -> None:
    bomb = gzip_bomb(1 << 30)
    assert len(bomb) < 2 << 20  # ~1 MB on the wire, under max_request_size
    got = raw_exchange(server.inference_port, post_head("gzip", len(bomb)), bomb)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), got[:500]
    assert b"max_request_size" in body and b"decompressed" in body, body[:500]
    alive(server)


@pytest.mark.parametrize("body, named", [
    (b"this is not gzip", "GZIP format"),
    (gzip.compress(b"cut short " * 100, mtime=0)[:-12], "ends early"),
    (gzip.compress(b"x", mtime=0) + gzip.compress(b"y", mtime=0), "concatenated gzip members")])
def test_corrupt_gzip_is_400_naming_the_problem(server: harness.Server, body: bytes, named: str) -> None:
    got = raw_exchange(server.inference_port, post_head("gzip", len(body)), body)
    head, _, answer = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), got[:500]
    message = json.loads(answer)["message"]
    assert "Cannot decompress the request body" in message and named in message, message
    alive(server)


def test_unknown_encoding_is_415_naming_the_supported_ones(server: harness.Server) -> None:
    r = predict(server, b"\x28\xb5\x2f\xfd...", "zstd")
    assert r.status_code == 415, r.text
    assert "gzip, deflate" in r.json()["message"]
    alive(server)


def test_oversized_headers_are_431_naming_the_limit_and_close(server: harness.Server) -> None:
    head = (b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")
    got = raw_exchange(server.inference_port, head, b"")
    status, _, answer = got.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 431"), got[:500]
    assert b"connection: close" in status.lower()
    assert "65536 bytes" in json.loads(answer)["message"]
    alive(server)
