"""Closed-loop HTTP/1.1 load generator on asyncio streams (keep-alive, 127.0.0.1 only).

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


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Read one HTTP/1.1 response (Content-Length or chunked); return (status, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"bad status line {lines[0]!r}")
    status = int(parts[1])
    length = -1
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return status, bytes(body)
            body += await reader.readexactly(size + 2)
            del body[-2:]
    if length < 0:
        raise ValueError("response has neither Content-Length nor chunked encoding")
    return status, await reader.readexactly(length) if length else b""


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> int:
    writer.write(req)
    status, _ = await read_response(reader)
    return status


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
    """Drive ``POST path`` closed-loop; a non-2xx status or a broken connection is an error."""
    if host not in LOOPBACK:
        raise LoadError(f"refusing to load-test {host}: only 127.0.0.1 is allowed")
    req = build_request(host, port, path, body, content_type)
    conns = []
    try:
        for _ in range(concurrency):
            try:
                conns.append(await asyncio.open_connection(host, port))
            except OSError as exc:
                raise LoadError(f"cannot connect to {host}:{port}: {exc}") from None
        # Warm every connection so connection setup and first-request costs are not timed.
        for reader, writer in conns:
            for _ in range(warmup):
                try:
                    status = await asyncio.wait_for(_one(reader, writer, req), timeout_s)
                except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError) as exc:
                    raise LoadError(f"warm-up request to {path} failed: {exc!r}") from None
                if not 200 <= status < 300:
                    raise LoadError(f"warm-up request to {path} answered HTTP {status}")

        latencies: list[float] = []
        errors = 0
        first_error = ""
        issued = 0
        start = time.perf_counter()
        deadline = start + duration_s

        async def loop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal errors, issued, first_error
            while issued < max_requests and time.perf_counter() < deadline:
                issued += 1
                t0 = time.perf_counter()
                try:
                    async with asyncio.timeout(timeout_s):  # a timer, not a task per request
                        status = await _one(reader, writer, req)
                except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError) as exc:
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                    return  # this connection is unusable now
                if 200 <= status < 300:
                    latencies.append((time.perf_counter() - t0) * 1000.0)
                else:
                    errors += 1
                    first_error = first_error or f"HTTP {status}"

        await asyncio.gather(*(loop(r, w) for r, w in conns))
        elapsed = time.perf_counter() - start
        return LoadResult(len(latencies), errors, elapsed, latencies, first_error)
    finally:
        for _, writer in conns:
            writer.close()


def _read_response_sync(f) -> int:  # noqa: ANN001 (a socket's buffered reader)
    """Blocking twin of :func:`read_response` (status only; the body is read and dropped)."""
    line = f.readline()
    if not line:
        raise ConnectionError("server closed the connection")
    parts = line.split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"bad status line {line!r}")
    length, chunked = -1, False
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        name, _, value = h.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int(f.readline().split(b";")[0].strip(), 16)
            f.read(size + 2)
            if size == 0:
                break
    elif length > 0:
        f.read(length)
    elif length < 0:
        raise ValueError("response has neither Content-Length nor chunked encoding")
    return int(parts[1])


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
    f = sock.makefile("rb")
    try:
        for _ in range(warmup):
            try:
                sock.sendall(req)
                status = _read_response_sync(f)
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
                sock.sendall(req)
                status = _read_response_sync(f)
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
        f.close()
        sock.close()


def load(port: int, path: str, **kwargs: object) -> LoadResult:
    """Run a closed loop: blocking client at concurrency 1, asyncio above."""
    if kwargs.get("concurrency", 1) == 1:
        kwargs.pop("concurrency", None)
        return run_load_sync(port, path, **kwargs)  # type: ignore[arg-type]
    return asyncio.run(run_load(port, path, **kwargs))  # type: ignore[arg-type]
