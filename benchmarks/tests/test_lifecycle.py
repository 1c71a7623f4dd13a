"""The lifecycle scenario's pure parts: PSS read from /proc, and the polling helper."""

from __future__ import annotations

import os

import pytest

from benchmarks import lifecycle
from benchmarks.servers import ServerError


def test_pss_of_this_process_is_positive_and_below_its_rss() -> None:
    pss = lifecycle.pss_mb(os.getpid())
    with open(f"/proc/{os.getpid()}/status") as f:
        rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    assert 0 < pss <= rss_kb / 1024 + 1


def test_pss_of_a_gone_process_is_zero() -> None:
    assert lifecycle.pss_mb(2**22 + 12345) == 0.0


def test_wait_returns_the_seconds_it_took_or_names_what_it_waited_for() -> None:
    calls = iter([False, False, True])
    assert lifecycle.wait(lambda: next(calls), 10, "three polls") >= 0.0
    with pytest.raises(ServerError, match="waiting for never"):
        lifecycle.wait(lambda: False, 0.05, "never")
