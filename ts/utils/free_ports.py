"""Free 127.0.0.1 ports for tests, benchmarks and local example runs.

Asking the kernel for port 0 and closing the socket is racy in two ways: the kernel may hand the
same number out again a moment later (two addresses of one server got the same port once), and
it is drawn from the ephemeral range, which every outgoing connection on the machine also draws
from. So ports are picked below the ephemeral range, each is checked by binding it, and a number
handed out recently is not handed out again (it may not be bound yet). Only the last
``_REMEMBERED`` are kept: a test suite starts hundreds of servers, and the ports of one that has
stopped are free again; those of one still running fail the bind check.
"""
from __future__ import annotations

import collections
import os
import socket
import threading

_LOWEST = 10000
_REMEMBERED = 2048  # far more than one server's ports (two blocks of 64 and five more)


class _Recent:
    """The last ``size`` ports handed out, oldest forgotten first."""

    def __init__(self, size: int) -> None:
        self._order: collections.deque[int] = collections.deque()
        self._members: set[int] = set()
        self._size = size

    def __contains__(self, port: object) -> bool:
        return port in self._members

    def isdisjoint(self, ports: range) -> bool:
        return self._members.isdisjoint(ports)

    def update(self, ports: range) -> None:
        for port in ports:
            if port not in self._members:
                self._order.append(port)
                self._members.add(port)
        while len(self._order) > self._size:
            self._members.discard(self._order.popleft())


_given = _Recent(_REMEMBERED)
_lock = threading.Lock()


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; other systems' ranges start higher


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(size: int = 1) -> int:
    """The first of ``size`` consecutive ports that are free now and were not handed out before."""
    top = _ephemeral_start()
    if top - _LOWEST < size * 64:  # an unusual ephemeral range: fall back to the kernel's pick
        return _kernel_pick() if size == 1 else _search(size, 20000, 60000)
    return _search(size, _LOWEST, top)


def free_port() -> int:
    return free_port_block(1)


def _search(size: int, low: int, high: int) -> int:
    span = high - low - size
    start = int.from_bytes(os.urandom(2), "big")
    with _lock:
        for attempt in range(400):
            base = low + (start + attempt * 97) % span
            ports = range(base, base + size)
            if _given.isdisjoint(ports) and all(_bindable(p) for p in ports):
                _given.update(ports)
                return base
    raise RuntimeError(f"no block of {size} free ports found between {low} and {high}")


def _kernel_pick() -> int:
    with _lock:
        for _ in range(100):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _given:
                _given.update(range(port, port + 1))
                return port
    raise RuntimeError("the kernel kept handing out ports already given")
