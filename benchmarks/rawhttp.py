"""Raw HTTP/1.1 over a socket: for tests and the hostile soak (``hostile_soak.py``), which send
framing a client library will not (pipelining, Content-Length beside Transfer-Encoding, broken
chunks) and read how the connection ends."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Exchange:
    responses: list[Response] = field(default_factory=list)
    closed: bool = False  # the server closed the connection (EOF) before the deadline
    reset: bool = False  # ... with a TCP reset (it closed with bytes of ours unread)
    rest: bytes = b""  # bytes after the last whole response


def parse(data: bytes) -> tuple[list[Response], bytes]:
    """Whole responses at the start of `data` (Content-Length or chunked bodies), and the rest."""
    out: list[Response] = []
    while True:
        head, sep, after = data.partition(b"\r\n\r\n")
        if not sep:
            return out, data
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line, sep, after = after.partition(b"\r\n")
                if not sep:
                    return out, data
                size = int(size_line.split(b";")[0], 16)
                if len(after) < size + 2:
                    return out, data
                body += after[:size]
                after = after[size + 2:]
                if size == 0:
                    break
        else:
            length = int(headers.get("content-length", "0"))
            if len(after) < length:
                return out, data
            body, after = after[:length], after[length:]
        out.append(Response(status, headers, body))
        data = after


def exchange(port: int, data: bytes, *, expect: int = 1, timeout: float = 10.0, linger: float = 1.0) -> Exchange:
    """Sends `data` on a new connection to 127.0.0.1 and reads the answers (``read``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read(sock, expect=expect, timeout=timeout, linger=linger)


def read(sock: socket.socket, *, expect: int = 1, timeout: float = 10.0, linger: float = 1.0) -> Exchange:
    """Reads until `expect` responses came and then either the connection closed or `linger`
    quiet seconds passed (an extra answer would show), or until `timeout`."""
    got = b""
    deadline = time.monotonic() + timeout
    closed = reset = False
    while time.monotonic() < deadline:
        responses, _ = parse(got)
        # once the expected answers are in, wait briefly for an EOF (or an unexpected extra answer)
        if len(responses) >= expect and linger <= 0:
            break
        sock.settimeout(linger if len(responses) >= expect else max(0.05, deadline - time.monotonic()))
        try:
            part = sock.recv(65536)
        except TimeoutError:
            if len(responses) >= expect:
                break
            continue
        except ConnectionResetError:
            closed = reset = True
            break
        if not part:
            closed = True
            break
        got += part
    responses, rest = parse(got)
    return Exchange(responses, closed, reset, rest)
