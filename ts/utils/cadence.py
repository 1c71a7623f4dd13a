"""Waiting on a file descriptor that turns readable at a steady pace (an engine's step messages).

A process that sleeps in ``select`` until another process writes to its pipe is woken by that
writer: the writer's CPU pays for the wake-up (an inter-processor interrupt, and on a virtual
machine an exit to the hypervisor) inside its ``write``. Measured on this project's 2-core
benchmark guest, for the LLM engine process sending each step's message to a worker asleep on
the other core: about 30 µs of each send and 2-3 % of the next step's forward, 6-7 % of the engine's
decode rate at 8 running sequences in all. When the reader is awake and polling as the message
lands, the write wakes no one.

``CadencedWait`` keeps that cost off the writer for a periodic descriptor. It learns the
descriptor's pace, sleeps until ``margin_s`` before the next message is due and then polls
(``select`` with no timeout) until it is ``margin_s`` past due, then sleeps again as before. The
pace is the lower quartile of the last ``WINDOW`` gaps, not their mean: an engine's steps are
mostly decode steps of one length (at 8 sequences on the benchmark's machine half of them within
0.13 ms of the median) and now and then a longer one that also prefills a prompt, which a mean
would follow and miss the short ones by. The poll costs this process at most ``2 * margin_s`` of
CPU per message and at most a quarter of the pace (the margin shrinks to an eighth of a fast
pace: a small model's steps on a GPU), on its own core, and only while messages come at least
every ``MAX_GAP_S``: an engine with nothing to do sends nothing and its reader just sleeps.
"""

from __future__ import annotations

import collections
import select
import time
from typing import Any

MARGIN_S = 0.00025  # measured: step gaps at c8 of the benchmark vary by about +-0.1 ms
MAX_GAP_S = 0.05    # a longer gap is not a pace (an idle engine, a long prefill): do not poll for it
WINDOW = 16        # the gaps the pace is taken from


class CadencedWait:
    """``select(fds, periodic, timeout)``: the readable ones of ``fds`` (``periodic`` among them),
    as ``select.select`` gives them, waiting up to ``timeout`` seconds."""

    def __init__(self, margin_s: float = MARGIN_S) -> None:
        self.margin_s = margin_s
        self._gaps: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self._last: float | None = None     # when the last message was seen arriving
        self.polled = 0                     # messages caught by polling (tests and probes)

    @property
    def gap_s(self) -> float | None:
        """The pace: the lower quartile of the recent gaps between two messages (None until two)."""
        if len(self._gaps) < 2:
            return None
        return sorted(self._gaps)[len(self._gaps) // 4]

    def window(self) -> tuple[float, float] | None:
        """When to poll for the next message (``time.monotonic``: from, until), or None without
        a pace: the last arrival plus the pace, give or take the margin."""
        gap = self.gap_s
        if self._last is None or gap is None:
            return None
        due, margin = self._last + gap, min(self.margin_s, gap / 8)
        return due - margin, due + margin

    def select(self, fds: list[Any], periodic: Any, timeout: float) -> list[Any]:
        started = time.monotonic()
        ready, _, _ = select.select(fds, [], [], 0)
        if ready:  # readable on entry: it arrived some time before now, so no gap is learnt
            if periodic in ready:
                self._last = started
            return ready
        deadline = started + timeout
        window = self.window()
        if window is not None and window[1] > started:
            poll_from, poll_until = min(window[0], deadline), min(window[1], deadline)
            if poll_from > started:
                ready, _, _ = select.select(fds, [], [], poll_from - started)
                if ready:
                    return self._seen(ready, periodic)
            while time.monotonic() < poll_until:
                ready, _, _ = select.select(fds, [], [], 0)
                if ready:
                    if periodic in ready:
                        self.polled += 1
                    return self._seen(ready, periodic)
        ready, _, _ = select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
        return self._seen(ready, periodic)

    def _seen(self, ready: list[Any], periodic: Any) -> list[Any]:
        if periodic in ready:
            now = time.monotonic()
            if self._last is not None:
                gap = now - self._last
                if gap < MAX_GAP_S:
                    self._gaps.append(gap)
                else:
                    self._gaps.clear()  # the pace broke (the engine idled): learn it again
            self._last = now
        return ready
