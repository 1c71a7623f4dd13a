"""Closed-loop HTTP/1.1 load generator (keep-alive, 127.0.0.1 only): a blocking socket at
concurrency 1, one epoll loop over non-blocking sockets above.

Each of ``concurrency`` connections sends one request, waits for the whole response, and sends
the next: the offered load adapts to the server, so throughput and latency are both honest.
A run stops at ``duration_s`` or after ``max_requests``, whichever comes first; connections
are opened (and warmed) before the clock starts.
"""

from __future__ import annotations

import selectors
import socket
import time
from dataclasses import dataclass, field

LOOPBACK = ("127.0.0.1", "localhost")


class LoadError(RuntimeError):
    """The target cannot be load-tested (bad address, nothing listening)."""


@dataclass
class LoadResult:
    """What one closed-loop run measured."""

    requests: int
    errors: int
    duration_s: float
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    first_error: str = ""

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile of successful latencies (ms); 0 when none."""
        if not self.latencies_ms:
            return 0.0
        data = sorted(self.latencies_ms)
        rank = max(0, min(len(data) - 1, int(round(q / 100.0 * len(data) + 0.5)) - 1))
        return data[rank]

    def summary(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "duration_s": round(self.duration_s, 3),
            "rps": round(self.rps, 1),
            "p50_ms": round(self.percentile(50), 3),
            "p90_ms": round(self.percentile(90), 3),
            "p99_ms": round(self.percentile(99), 3),
        }


def build_request(host: str, port: int, path: str, body: bytes, content_type: str) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode("ascii") + body


def parse_response(buf: bytes | bytearray) -> tuple[int, int] | None:
    """(status, bytes used) of the first complete HTTP/1.1 response in ``buf``, None if it is
    incomplete. Content-Length or chunked bodies; ValueError for anything else."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    lines = bytes(buf[:head_end]).split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"bad status line {lines[0]!r}")
    length, chunked = -1, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    pos = head_end + 4
    if chunked:
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(buf[pos:line_end]).split(b";")[0].strip(), 16)
            pos = line_end + 2 + size + 2  # chunk data and its CRLF (the last chunk: just CRLF)
            if pos > len(buf):
                return None
            if size == 0:
                return int(parts[1]), pos
    if length < 0:
        raise ValueError("response has neither Content-Length nor chunked encoding")
    end = pos + length
    return (int(parts[1]), end) if len(buf) >= end else None


class _Conn:
    """One keep-alive connection of the closed loop: its socket, unread bytes, request start."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.sent_at = 0.0

    def send(self, req: bytes) -> None:
        self.sent_at = time.perf_counter()
        n = self.sock.send(req)
        if n < len(req):  # the kernel took part of it: finish blocking (requests are small)
            self.sock.setblocking(True)
            try:
                self.sock.sendall(req[n:])
            finally:
                self.sock.setblocking(False)

    def responses(self) -> list[int]:
        """Read what arrived; the statuses of the responses it completed."""
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data
        out = []
        while (parsed := parse_response(self.buf)) is not None:
            out.append(parsed[0])
            del self.buf[:parsed[1]]
        return out


def run_load(
    port: int,
    path: str,
    body: bytes = b"x",
    content_type: str = "application/octet-stream",
    concurrency: int = 1,
    duration_s: float = 5.0,
    max_requests: int = 1_000_000,
    warmup: int = 2,
    host: str = "127.0.0.1",
    timeout_s: float = 30.0,
) -> LoadResult:
    """Drive ``POST path`` closed-loop on ``concurrency`` non-blocking connections with one
    epoll loop (a plain selector costs a fraction of asyncio streams per request, so the client
    stays ahead of a fast server); a non-2xx status or a broken connection is an error."""
    if host not in LOOPBACK:
        raise LoadError(f"refusing to load-test {host}: only 127.0.0.1 is allowed")
    req = build_request(host, port, path, body, content_type)
    conns: list[_Conn] = []  # the ones still running
    opened: list[_Conn] = []
    sel = selectors.DefaultSelector()
    try:
        for _ in range(concurrency):
            try:
                sock = socket.create_connection((host, port), timeout=timeout_s)
            except OSError as exc:
                raise LoadError(f"cannot connect to {host}:{port}: {exc}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            opened.append(_Conn(sock))
        conns = list(opened)
        # Warm every connection so connection setup and first-request costs are not timed.
        for c in conns:
            for _ in range(warmup):
                try:
                    c.sock.sendall(req)
                    statuses: list[int] = []
                    while not statuses:
                        statuses = c.responses()
                except (OSError, ValueError) as exc:
                    raise LoadError(f"warm-up request to {path} failed: {exc!r}") from None
                if not 200 <= statuses[0] < 300:
                    raise LoadError(f"warm-up request to {path} answered HTTP {statuses[0]}")
        latencies: list[float] = []
        errors, first_error = 0, ""
        start = time.perf_counter()
        deadline = start + duration_s
        for c in conns:
            c.sock.setblocking(False)
            sel.register(c.sock, selectors.EVENT_READ, c)
            c.send(req)
        issued = len(conns)
        while conns:
            events = sel.select(timeout=1.0)
            now = time.perf_counter()
            for key, _ in events:
                c = key.data
                try:
                    statuses = c.responses()
                except (OSError, ValueError) as exc:
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                    statuses = []
                    sel.unregister(c.sock)
                    conns.remove(c)  # this connection is unusable now
                    continue
                for status in statuses:
                    if 200 <= status < 300:
                        latencies.append((now - c.sent_at) * 1000.0)
                    else:
                        errors += 1
                        first_error = first_error or f"HTTP {status}"
                if statuses:
                    if issued < max_requests and now < deadline:
                        issued += 1
                        c.send(req)
                    else:
                        sel.unregister(c.sock)
                        conns.remove(c)
            for c in [c for c in conns if now - c.sent_at > timeout_s]:
                errors += 1
                first_error = first_error or f"TimeoutError: no response within {timeout_s:.0f} s"
                sel.unregister(c.sock)
                conns.remove(c)
        elapsed = time.perf_counter() - start
        return LoadResult(len(latencies), errors, elapsed, latencies, first_error)
    finally:
        sel.close()
        for c in opened:
            c.sock.close()


def run_load_sync(port: int, path: str, body: bytes = b"x",
                  content_type: str = "application/octet-stream", duration_s: float = 5.0,
                  max_requests: int = 1_000_000, warmup: int = 2, host: str = "127.0.0.1",
                  timeout_s: float = 30.0) -> LoadResult:
    """One connection, blocking socket: at c=1 a selector would only add its own latency."""
    if host not in LOOPBACK:
        raise LoadError(f"refusing to load-test {host}: only 127.0.0.1 is allowed")
    req = build_request(host, port, path, body, content_type)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise LoadError(f"cannot connect to {host}:{port}: {exc}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = _Conn(sock)

    def one() -> int:
        sock.sendall(req)
        statuses: list[int] = []
        while not statuses:
            statuses = conn.responses()
        return statuses[0]

    try:
        for _ in range(warmup):
            try:
                status = one()
            except (OSError, ValueError) as exc:
                raise LoadError(f"warm-up request to {path} failed: {exc!r}") from None
            if not 200 <= status < 300:
                raise LoadError(f"warm-up request to {path} answered HTTP {status}")
        latencies: list[float] = []
        errors, first_error, issued = 0, "", 0
        start = time.perf_counter()
        deadline = start + duration_s
        while issued < max_requests and time.perf_counter() < deadline:
            issued += 1
            t0 = time.perf_counter()
            try:
                status = one()
            except (OSError, ValueError) as exc:
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
                break
            if 200 <= status < 300:
                latencies.append((time.perf_counter() - t0) * 1000.0)
            else:
                errors += 1
                first_error = first_error or f"HTTP {status}"
        return LoadResult(len(latencies), errors, time.perf_counter() - start, latencies,
                          first_error)
    finally:
        sock.close()


def load(port: int, path: str, **kwargs: object) -> LoadResult:
    """Run a closed loop: blocking client at concurrency 1, one epoll loop above."""
    if kwargs.get("concurrency", 1) == 1:
        kwargs.pop("concurrency", None)
        return run_load_sync(port, path, **kwargs)  # type: ignore[arg-type]
    return run_load(port, path, **kwargs)  # type: ignore[arg-type]
