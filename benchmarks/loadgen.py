"""Closed-loop HTTP/1.1 load generator (keep-alive, 127.0.0.1 only): a blocking socket at
concurrency 1, asyncio protocols above.

Each of ``concurrency`` connections sends one request, waits for the whole response, and sends
the next: the offered load adapts to the server, so throughput and latency are both honest.
A run stops at ``duration_s`` or after ``max_requests``, whichever comes first; connections
are opened (and warmed) before the clock starts.
"""

from __future__ import annotations

import asyncio
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


class _ResponseBuffer:
    """Bytes received on one connection, cut into whole responses."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[int]:
        """The statuses of the responses ``data`` completed (usually none or one)."""
        return [status for status, _ in self.feed_responses(data)]

    def feed_responses(self, data: bytes) -> list[tuple[int, bytes]]:
        """(status, whole response) of the responses ``data`` completed."""
        self.buf += data
        out = []
        while (parsed := parse_response(self.buf)) is not None:
            out.append((parsed[0], bytes(self.buf[:parsed[1]])))
            del self.buf[:parsed[1]]
        return out


class _Run:
    """What the connections of one closed-loop run share: the budget and the results."""

    def __init__(self, req: bytes, duration_s: float, max_requests: int, connections: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.req = req
        self.deadline = time.perf_counter() + duration_s
        self.max_requests = max_requests
        self.issued = 0
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error = ""
        self.running = connections
        self.done = loop.create_future()

    def error(self, what: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or what

    def may_send(self, now: float) -> bool:
        if self.issued < self.max_requests and now < self.deadline:
            self.issued += 1
            return True
        return False

    def finished(self) -> None:
        self.running -= 1
        if self.running == 0 and not self.done.done():
            self.done.set_result(None)


class _ClosedLoop(asyncio.Protocol):
    """One keep-alive connection: send, read the whole response, send the next. asyncio's
    protocol callbacks, not streams: no coroutine or future per read, so one Python client
    keeps up with a fast server (as fast as wrk on echo b8 c=32)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.responses = _ResponseBuffer()
        self.run: _Run | None = None
        self.sent_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def start(self, run: _Run) -> None:
        self.run = run
        if run.may_send(time.perf_counter()):
            self._send()
        else:
            self._stop()

    def _send(self) -> None:
        assert self.transport is not None and self.run is not None
        self.sent_at = time.perf_counter()
        self.transport.write(self.run.req)

    def _stop(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.finished()

    def data_received(self, data: bytes) -> None:
        run = self.run
        if run is None:
            return
        try:
            statuses = self.responses.feed(data)
        except ValueError as exc:
            run.error(f"ValueError: {exc}")
            self._stop()
            if self.transport is not None:
                self.transport.close()  # this connection is unusable now
            return
        if not statuses:
            return
        now = time.perf_counter()
        for status in statuses:
            if 200 <= status < 300:
                run.latencies.append((now - self.sent_at) * 1000.0)
            else:
                run.error(f"HTTP {status}")
        if run.may_send(now):
            self._send()
        else:
            self._stop()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.run is not None:
            self.run.error(f"ConnectionError: {exc or 'server closed the connection'}")
            self._stop()

    def timed_out(self, now: float, timeout_s: float) -> bool:
        if self.run is not None and now - self.sent_at > timeout_s:
            self.run.error(f"TimeoutError: no response within {timeout_s:.0f} s")
            self._stop()
            return True
        return False


async def _drive(conns: list[_ClosedLoop], run: _Run, timeout_s: float) -> None:
    for c in conns:
        c.start(run)
    while not run.done.done():
        await asyncio.wait([run.done], timeout=1.0)
        now = time.perf_counter()
        for c in conns:
            c.timed_out(now, timeout_s)


async def run_load(
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
    """Drive ``POST path`` closed-loop on ``concurrency`` connections; a non-2xx status or a
    broken connection is an error."""
    if host not in LOOPBACK:
        raise LoadError(f"refusing to load-test {host}: only 127.0.0.1 is allowed")
    req = build_request(host, port, path, body, content_type)
    loop = asyncio.get_running_loop()
    conns: list[_ClosedLoop] = []
    try:
        for _ in range(concurrency):
            try:
                _, proto = await loop.create_connection(_ClosedLoop, host, port)
            except OSError as exc:
                raise LoadError(f"cannot connect to {host}:{port}: {exc}") from None
            conns.append(proto)
        # Warm every connection so connection setup and first-request costs are not timed.
        if warmup:
            warm = [_Run(req, timeout_s, warmup, 1, loop) for _ in conns]  # each connection its own
            await asyncio.gather(*(_drive([c], w, timeout_s) for c, w in zip(conns, warm, strict=True)))
            failed = next((w for w in warm if w.errors), None)
            if failed is not None:
                raise LoadError(f"warm-up request to {path} failed: {failed.first_error}")
        run = _Run(req, duration_s, max_requests, concurrency, loop)
        start = time.perf_counter()
        await _drive(conns, run, timeout_s)
        elapsed = time.perf_counter() - start
        return LoadResult(len(run.latencies), run.errors, elapsed, run.latencies, run.first_error)
    finally:
        for c in conns:
            if c.transport is not None:
                c.transport.close()


def run_load_sync(port: int, path: str, body: bytes = b"x",
                  content_type: str = "application/octet-stream", duration_s: float = 5.0,
                  max_requests: int = 1_000_000, warmup: int = 2, host: str = "127.0.0.1",
                  timeout_s: float = 30.0) -> LoadResult:
    """One connection, blocking socket: at c=1 an event loop would only add its own latency."""
    if host not in LOOPBACK:
        raise LoadError(f"refusing to load-test {host}: only 127.0.0.1 is allowed")
    req = build_request(host, port, path, body, content_type)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise LoadError(f"cannot connect to {host}:{port}: {exc}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    responses = _ResponseBuffer()

    def one() -> int:
        sock.sendall(req)
        statuses: list[int] = []
        while not statuses:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            statuses = responses.feed(data)
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
    """Run a closed loop: blocking client at concurrency 1, asyncio above."""
    if kwargs.get("concurrency", 1) == 1:
        kwargs.pop("concurrency", None)
        return run_load_sync(port, path, **kwargs)  # type: ignore[arg-type]
    return asyncio.run(run_load(port, path, **kwargs))  # type: ignore[arg-type]
