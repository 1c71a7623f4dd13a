"""Frames from the frontend for the worker's main thread, read on that thread.

Reading on the thread that handles the frame costs nothing extra; a reader thread handing every
frame over through a queue cost about as much CPU as the rest of the worker's path for a small
batch. The one thing a reader thread gave for free is a PING answered while a long batch runs
(describe reads the pipeline stages from the PONG). A watcher thread keeps that: once the main
thread has been busy with one batch for ``watch_after_s``, it takes over the socket, answers
PINGs itself and queues every other frame, in order, for the main thread; it hands the socket
back as soon as the batch ends.
"""

from __future__ import annotations

import collections
import os
import select
import socket
import threading
import time
from collections.abc import Callable

from ts.protocol import codec
from ts.protocol.codec import Frame, FrameType
from ts.utils.cadence import CadencedWait

WATCH_AFTER_S = 0.1


class FrameSource:
    def __init__(self, conn: socket.socket, answer_ping: Callable[[Frame], None],
                 watch_after_s: float = WATCH_AFTER_S) -> None:
        self._conn = conn
        self._reader = codec.FrameReader(conn)
        self._answer_ping = answer_ping
        self._watch_after_s = watch_after_s
        self._read_lock = threading.Lock()  # whoever holds it reads the socket
        self._pending: collections.deque[Frame | BaseException] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._busy_since: float | None = None
        self._busy = _Busy(self)
        self._also_wait = CadencedWait()  # ``also`` is a stepping engine's: it turns readable every step
        self._closed = False
        threading.Thread(target=self._watch, name="frame-watcher", daemon=True).start()

    def next(self) -> Frame:
        """The next frame, or what reading it raised (ConnectionClosed, ProtocolError, OSError)."""
        if not self._read_lock.acquire(blocking=False):
            os.write(self._wake_w, b"!")  # the watcher holds the socket: ask for it back
            self._read_lock.acquire()
        try:
            if self._pending:  # read by the watcher while the last batch ran
                item = self._pending.popleft()
                if isinstance(item, BaseException):
                    raise item
                return item
            return self._reader.read()
        finally:
            self._read_lock.release()

    def poll(self, also: int | None = None, timeout: float = 0.0) -> Frame | None:
        """The next frame if one has arrived, else None at once (continuous batching reads
        between two steps); raises what reading it raised, as next() does. With ``also`` (a
        file descriptor, e.g. an engine process's pipe) it waits up to ``timeout`` for either to
        be readable: None then says ``also`` is (or the time is up)."""
        if not self._read_lock.acquire(blocking=False):
            os.write(self._wake_w, b"!")  # the watcher holds the socket: ask for it back
            self._read_lock.acquire()
        try:
            if self._pending:
                item = self._pending.popleft()
                if isinstance(item, BaseException):
                    raise item
                return item
            if not self._reader.buffered():
                if also is None:
                    ready, _, _ = select.select([self._conn], [], [], 0)
                else:
                    ready = self._also_wait.select([self._conn, also], also, timeout)
                if self._conn not in ready:
                    return None
            return self._reader.read()
        finally:
            self._read_lock.release()

    def busy(self) -> _Busy:
        """Marks the main thread as handling a frame (the watcher steps in if it takes long):
        ``with source.busy(): ...``. One reusable object, not a generator per frame: this runs
        for every batch."""
        return self._busy

    def close(self) -> None:
        self._closed = True

    # ------------------------------------------------------------------ watcher thread
    def _watch(self) -> None:
        while not self._closed:
            time.sleep(self._watch_after_s)
            since = self._busy_since
            if since is None or time.monotonic() - since < self._watch_after_s:
                continue
            if not self._read_lock.acquire(blocking=False):
                continue
            try:
                self._drain_wakeups()
                self._read_while_busy()
            finally:
                self._read_lock.release()

    def _read_while_busy(self) -> None:
        while self._busy_since is not None and not self._closed:
            if not self._reader.buffered():
                watched: list[socket.socket | int] = [self._conn, self._wake_r]
                ready, _, _ = select.select(watched, [], [])
                if self._wake_r in ready:
                    self._drain_wakeups()
                    return
            try:
                frame = self._reader.read()
            except codec.UnknownFrameType as exc:
                self._pending.append(exc)  # the main thread answers it; the stream is still in sync
                continue
            except (codec.ProtocolError, EOFError, OSError) as exc:
                self._pending.append(exc)  # the connection is over: the main thread will see why
                return
            if frame.type is FrameType.PING:
                self._answer_ping(frame)
            else:
                self._pending.append(frame)

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 64):
                pass
        except BlockingIOError:
            pass


class _Busy:
    """``FrameSource.busy()``'s context: sets and clears the source's busy mark."""

    __slots__ = ("_source",)

    def __init__(self, source: FrameSource) -> None:
        self._source = source

    def __enter__(self) -> None:
        self._source._busy_since = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self._source._busy_since = None
