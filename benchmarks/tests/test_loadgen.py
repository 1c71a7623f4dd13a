"""The load generator against a tiny real HTTP/1.1 server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from benchmarks import loadgen


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            path = lines[0].split(" ")[1]
            length = next(int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length"))
            body = await reader.readexactly(length)
            if path == "/chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
            else:
                status = b"200 OK" if path == "/ok" else b"500 Internal Server Error"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


@pytest.fixture(scope="module")
def server_port() -> Iterator[int]:
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(_serve, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield port
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def test_counts_successes_and_latency(server_port: int) -> None:
    res = loadgen.load(server_port, "/ok", concurrency=4, duration_s=5, max_requests=200)
    assert res.errors == 0
    assert 200 <= res.requests <= 203  # bounded by count (in-flight ones finish)
    assert 0 < res.percentile(50) <= res.percentile(90) <= res.percentile(99)
    assert res.summary()["rps"] > 0


def test_non_2xx_is_an_error(server_port: int) -> None:
    with pytest.raises(loadgen.LoadError, match="HTTP 500"):
        loadgen.load(server_port, "/bad", concurrency=1, duration_s=1)
    res = loadgen.load(server_port, "/bad", concurrency=2, duration_s=1, max_requests=20, warmup=0)
    assert res.requests == 0 and res.errors >= 20 and res.first_error == "HTTP 500"


@pytest.mark.parametrize("concurrency", [1, 2])  # blocking client and asyncio client
def test_chunked_responses(server_port: int, concurrency: int) -> None:
    res = loadgen.load(server_port, "/chunked", concurrency=concurrency, duration_s=2,
                       max_requests=10)
    assert 10 <= res.requests <= 11 and res.errors == 0


def test_bounded_in_time(server_port: int) -> None:
    res = loadgen.load(server_port, "/ok", concurrency=1, duration_s=0.3)
    assert 0.3 <= res.duration_s < 2.0 and res.requests > 0


def test_only_loopback() -> None:
    with pytest.raises(loadgen.LoadError, match="only 127.0.0.1"):
        loadgen.load(80, "/", host="10.0.0.1")


def test_nothing_listening_is_a_clear_error() -> None:
    from benchmarks.servers import free_port

    with pytest.raises(loadgen.LoadError, match="cannot connect"):
        loadgen.load(free_port(), "/ok", duration_s=0.2)


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
])
def test_parse_response_waits_for_the_whole_response(raw: bytes) -> None:
    """Every strict prefix is incomplete; the whole is one response; a second one stays unread."""
    for n in range(len(raw)):
        assert loadgen.parse_response(raw[:n]) is None
    status, used = loadgen.parse_response(raw + raw[:7])
    assert used == len(raw) and status == int(raw.split(b" ")[1])


def test_parse_response_refuses_a_body_without_framing() -> None:
    with pytest.raises(ValueError, match="neither Content-Length nor chunked"):
        loadgen.parse_response(b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n")
