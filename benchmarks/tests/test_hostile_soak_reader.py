"""hostile_soak.read_answers: several answers off one connection, and how it ended."""

import socket

from benchmarks.hostile_soak import read_answers

_open_peers: list[socket.socket] = []  # the far ends of connections a test leaves open


def _pair(data: bytes, close: bool) -> socket.socket:
    a, b = socket.socketpair()
    b.sendall(data)
    if close:
        b.close()
    else:
        _open_peers.append(b)
    return a


def test_two_answers_then_closed() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 400 Bad\r\ncontent-length: 3\r\n\r\nbad"
    assert read_answers(_pair(data, close=True), 2, 2.0) == ([(200, b"hi"), (400, b"bad")], "closed")


def test_a_cut_body_and_an_open_connection() -> None:
    assert read_answers(_pair(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi", close=True), 1, 2.0) == ([], "closed")
    assert read_answers(_pair(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", close=False), 2, 0.2) == (
        [(200, b"hi")], "open")
