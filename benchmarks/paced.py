"""Open-loop HTTP/1.1 load at a fixed rate (127.0.0.1 only), for the soak (benchmarks/soak.py).

Requests leave on a schedule (``rate`` per second) whatever the server does, over a pool of
keep-alive connections with one request in flight each; every request is accounted for: answered
(2xx, or an error sorted by its class) or unanswered (the connection broke under it, or no answer
within ``timeout_s``). A late server is not hidden: a request whose slot passed while every
connection was busy leaves as soon as one frees up, and ``late`` counts it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.loadgen import LOOPBACK, LoadError, _ResponseBuffer, build_request


@dataclass
class PacedResult:
    """What one paced run sent and got back."""

    sent: int = 0
    ok: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)  # class -> count
    unanswered: collections.Counter = field(default_factory=collections.Counter)  # why -> count
    late: int = 0
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    @property
    def answered(self) -> int:
        return self.ok + sum(self.errors.values())

    def summary(self, duration_s: float) -> dict[str, object]:
        lat = sorted(self.latencies_ms)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q / 100 * len(lat)))], 2) if lat else 0.0

        return {"sent": self.sent, "answered": self.answered, "ok": self.ok,
                "errors": dict(self.errors), "unanswered": dict(self.unanswered), "late": self.late,
                "rps": round(self.answered / duration_s, 1) if duration_s > 0 else 0.0,
                "p50_ms": pct(50), "p99_ms": pct(99), "max_ms": round(lat[-1], 2) if lat else 0.0}


class _Conn(asyncio.Protocol):
    """One keep-alive connection; ``done`` is called once per request it was given."""

    def __init__(self, on_done: Callable[[_Conn, int | None, bytes, str], None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.responses = _ResponseBuffer()
        self.sent_at = 0.0
        self.busy = False
        self.lost = False
        self._on_done = on_done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, req: bytes) -> None:
        assert self.transport is not None
        self.busy, self.sent_at = True, time.perf_counter()
        self.transport.write(req)

    def data_received(self, data: bytes) -> None:
        try:
            done = self.responses.feed_responses(data)
        except ValueError as exc:
            self._finish(None, b"", f"unparsable response: {exc}")
            return
        for status, raw in done:
            if self.busy:
                self._finish(status, raw, "")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.busy:
            self._finish(None, b"", "connection closed with the request in flight")

    def _finish(self, status: int | None, raw: bytes, why: str) -> None:
        self.busy = False
        if status is None and not self.lost:
            self.lost = True
            if self.transport is not None:
                self.transport.close()  # its byte stream is no longer in step with requests
        self._on_done(self, status, raw, why)


async def run_paced(port: int, path: str, body: bytes, rate: float, duration_s: float,
                    classify: Callable[[int, bytes], str], connections: int = 16,
                    timeout_s: float = 60.0, host: str = "127.0.0.1") -> PacedResult:
    """POST ``path`` at ``rate`` per second for ``duration_s``; then wait (at most ``timeout_s``)
    for the requests in flight. ``classify(status, response)`` names the class of a non-2xx answer."""
    if host not in LOOPBACK:
        raise LoadError(f"refusing to load-test {host}: only 127.0.0.1 is allowed")
    if rate <= 0:
        raise LoadError(f"rate must be positive, got {rate}")
    req = build_request(host, port, path, body, "application/octet-stream")
    loop = asyncio.get_running_loop()
    result = PacedResult()
    idle: asyncio.Queue[_Conn] = asyncio.Queue()

    def done(conn: _Conn, status: int | None, raw: bytes, why: str) -> None:
        if status is None:
            result.unanswered[why] += 1
        elif 200 <= status < 300:
            result.ok += 1
            result.latencies_ms.append((time.perf_counter() - conn.sent_at) * 1000.0)
        else:
            result.errors[classify(status, raw)] += 1
        if conn.lost:
            loop.create_task(replace(conn))  # keeps the pool its size
        else:
            idle.put_nowait(conn)

    async def connect() -> _Conn:
        try:
            _, conn = await loop.create_connection(lambda: _Conn(done), host, port)
        except OSError as exc:
            raise LoadError(f"cannot connect to {host}:{port}: {exc}") from None
        return conn

    async def replace(conn: _Conn) -> None:
        fresh = await connect()
        pool[pool.index(conn)] = fresh
        idle.put_nowait(fresh)

    pool = [await connect() for _ in range(connections)]
    for conn in pool:
        idle.put_nowait(conn)
    start = time.perf_counter()
    try:
        while (slot := start + result.sent / rate) < start + duration_s:
            wait = slot - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            if idle.empty():
                result.late += 1
            try:
                conn = await asyncio.wait_for(idle.get(), timeout_s)
            except TimeoutError:
                raise LoadError(f"no connection freed up within {timeout_s:.0f} s: the server stopped answering") from None
            if conn.lost:  # closed while idle (the server may close a keep-alive connection)
                fresh = await connect()
                pool[pool.index(conn)] = fresh
                conn = fresh
            conn.send(req)
            result.sent += 1
        await _drain(pool, timeout_s)
    finally:
        for conn in pool:
            if conn.busy:
                conn.busy = False
                result.unanswered[f"no answer within {timeout_s:.0f} s"] += 1
            if conn.transport is not None:
                conn.transport.close()
    return result


async def _drain(pool: list[_Conn], timeout_s: float) -> None:
    """Wait until no request is in flight, at most ``timeout_s``."""
    deadline = time.perf_counter() + timeout_s
    while any(c.busy for c in pool) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
