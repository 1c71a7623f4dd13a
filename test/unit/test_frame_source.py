"""FrameSource.poll (continuous batching reads between steps): never waits, also right after the
watcher thread took the socket over during a long step."""

from __future__ import annotations

import socket
import threading
import time

from ts.protocol import codec
from ts.protocol.codec import FrameType
from ts.protocol.frame_source import FrameSource


def test_poll_returns_at_once_after_a_long_busy_step_and_then_sees_new_frames() -> None:
    ours, theirs = socket.socketpair()
    pings = []
    src = FrameSource(ours, pings.append, watch_after_s=0.02)
    try:
        with src.busy():
            time.sleep(0.2)  # long enough for the watcher to hold the socket
        result: list = []
        t = threading.Thread(target=lambda: result.append(src.poll()), daemon=True)
        t.start()
        t.join(timeout=10)
        assert not t.is_alive(), "poll() waited for a frame"
        assert result == [None]
        theirs.sendall(codec.encode_frame(FrameType.CANCEL, 7, b"r1"))
        deadline = time.monotonic() + 10
        frame = None
        while frame is None and time.monotonic() < deadline:
            frame = src.poll()
        assert frame is not None and frame.type is FrameType.CANCEL and bytes(frame.body) == b"r1"
        theirs.sendall(codec.encode_frame(FrameType.PING, 3))
        with src.busy():  # a PING during a step is answered by the watcher, not queued
            deadline = time.monotonic() + 10
            while not pings and time.monotonic() < deadline:
                time.sleep(0.01)
        assert [f.batch_id for f in pings] == [3]
    finally:
        src.close()
        ours.close()
        theirs.close()


def test_poll_with_another_descriptor_wakes_for_either_and_says_which() -> None:
    ours, theirs = socket.socketpair()
    other_r, other_w = socket.socketpair()  # stands for an engine process's pipe
    src = FrameSource(ours, lambda frame: None)
    try:
        started = time.monotonic()
        assert src.poll(other_r.fileno(), timeout=0.2) is None  # neither: the time is up
        assert time.monotonic() - started >= 0.15
        other_w.sendall(b"x")
        started = time.monotonic()
        assert src.poll(other_r.fileno(), timeout=30) is None  # the other one is readable: at once
        assert time.monotonic() - started < 10
        theirs.sendall(codec.encode_frame(FrameType.CANCEL, 9, b"r2"))
        frame = src.poll(other_r.fileno(), timeout=30)  # both readable: the frame first
        assert frame is not None and frame.type is FrameType.CANCEL and frame.batch_id == 9
    finally:
        src.close()
        for s in (ours, theirs, other_r, other_w):
            s.close()
