"""The port picker used by tests and benchmarks: never the same number twice, never an ephemeral one."""
from __future__ import annotations

import socket

from ts.utils import free_ports


def test_ports_are_never_handed_out_twice_and_stay_below_the_ephemeral_range():
    ports = [free_ports.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert max(ports) < free_ports._ephemeral_start()


def test_a_block_does_not_overlap_ports_given_before_and_every_port_in_it_binds():
    single = {free_ports.free_port() for _ in range(50)}
    base = free_ports.free_port_block(64)
    block = set(range(base, base + 64))
    assert single.isdisjoint(block)
    for port in block:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_only_recent_ports_are_remembered_so_a_long_run_never_runs_out(monkeypatch):
    monkeypatch.setattr(free_ports, "_given", free_ports._Recent(128))
    first = free_ports.free_port_block(64)
    for _ in range(400):  # 400 servers' worth of blocks: far more than the range holds at once
        free_ports.free_port_block(64)
    assert first not in free_ports._given
    assert len(free_ports._given._members) <= 128


def test_a_port_in_use_is_skipped(monkeypatch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        # Two candidates, the taken port and the one above it, tried in a random order each time.
        for _ in range(10):
            monkeypatch.setattr(free_ports, "_given", free_ports._Recent(16))
            assert free_ports._search(1, taken, taken + 3) == taken + 1
